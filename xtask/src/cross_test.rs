//! `cargo xtask cross-test TARGET`: the cross-built httpd, run under QEMU's user-mode
//! emulation on its kernel-socket default (no root), answers curl on a loopback port
//! with the bytes of the files it serves. Bounded: three requests with timeouts, and
//! the server is stopped by its PID.

use crate::common::{
    find_program, interrupt_flag, tail, target_dir, workspace_root, Proc, Result, TempDir,
};
use crate::cross::{self, BuildArgs};
use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Flags of `cargo xtask cross-test`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct TestArgs {
    /// A `*-linux-gnu*` target triple, e.g. aarch64-unknown-linux-gnu.
    pub target: String,
    /// Build and run the release profile.
    #[arg(long)]
    pub release: bool,
    /// Use the httpd already cross-built.
    #[arg(long)]
    pub no_build: bool,
    /// Loopback port for httpd (default: a free one).
    #[arg(long)]
    pub port: Option<u16>,
}

/// How long httpd may take to listen (QEMU start, then the preload of the site).
const START_LIMIT: Duration = Duration::from_secs(60);
/// Each curl request's limit.
const CURL_SECONDS: &str = "20";
/// The served test file's size: over a megabyte, and odd, so that no segment or
/// buffer boundary lines up with its end.
const BLOB_BYTES: usize = (1 << 20) + 4_099;

/// `cargo xtask cross-test`.
pub(crate) fn run(args: &TestArgs) -> Result<()> {
    let root = workspace_root();
    let target_dir = target_dir(&root)?;
    let target = args.target.as_str();
    let prefix = cross::gnu_prefix(target).ok_or_else(|| {
        format!("cross-test runs *-linux-gnu* targets under qemu-user; {target} is not one")
    })?;
    let native = target == cross::host_triple()?;
    let emulator = if native {
        None
    } else {
        Some(find_emulator(&prefix)?)
    };

    let build_args = BuildArgs {
        target: target.to_string(),
        release: args.release,
        package: None,
    };
    let build_seconds = if args.no_build {
        None
    } else {
        Some(cross::build(&root, &target_dir, &build_args)?.seconds)
    };
    let httpd = target_dir
        .join(target)
        .join(cross::profile_dir(args.release))
        .join("httpd");
    if !httpd.is_file() {
        return Err(format!(
            "{} is missing; cross-build it first",
            httpd.display()
        ));
    }

    let tmp = TempDir::new("rusty-cross-test")?;
    let site = tmp.path().join("site");
    let files = write_site(&site)?;
    let port = match args.port {
        Some(p) => p,
        None => free_port()?,
    };
    let mut cmd = match &emulator {
        Some((qemu, sysroot)) => {
            let mut c = Command::new(qemu);
            c.arg("-L").arg(sysroot).arg(&httpd);
            c
        }
        None => Command::new(&httpd),
    };
    cmd.arg(port.to_string())
        .arg(&site)
        .args(["--grace", "1", "--log-level", "info"]);
    let log = tmp.path().join("httpd.log");
    let interrupted = interrupt_flag()?;
    let started = Instant::now();
    // qemu-user runs the guest program in its own process: this PID is httpd's.
    let mut server = Proc::spawn("httpd", cmd, &log)?;
    let checked = wait_listening(&mut server, port, &interrupted)
        .and_then(|()| {
            let up = started.elapsed();
            let fetched = fetch_all(&files, port, tmp.path())?;
            Ok((up, fetched))
        })
        .map_err(|e| format!("{e}\n--- httpd log (tail) ---\n{}", tail(&log, 20)));
    server.stop(Duration::from_secs(5));
    let (up, fetched) = match checked {
        Ok(r) => r,
        Err(e) => return Err(tmp.keep_for(e)),
    };

    println!("cross-test: {target}: httpd {}", httpd.display());
    if let Some((qemu, sysroot)) = &emulator {
        println!(
            "cross-test: run as `{} -L {} httpd {port} SITE` (kernel sockets)",
            qemu.display(),
            sysroot.display()
        );
    }
    if let Some(s) = build_seconds {
        println!("cross-test: cross-build took {s:.1} s");
    }
    println!(
        "cross-test: listening {:.2} s after start",
        up.as_secs_f64()
    );
    for f in &fetched {
        println!("cross-test: {f}");
    }
    println!(
        "cross-test: PASS: {} requests answered byte for byte; httpd stopped by PID",
        fetched.len()
    );
    Ok(())
}

/// `qemu-<arch>` and the target's C library root (`-L`), or what to install.
fn find_emulator(prefix: &str) -> Result<(PathBuf, PathBuf)> {
    let name = format!("qemu-{}", cross::qemu_arch(prefix));
    let qemu = find_program(&name)
        .ok_or_else(|| format!("{name} is not on PATH. On Debian: `apt-get install qemu-user`"))?;
    let sysroot = PathBuf::from("/usr").join(prefix);
    if !sysroot.join("lib").is_dir() {
        return Err(format!(
            "{} (the target's C library for qemu -L) is missing. On Debian: `apt-get \
             install {}`",
            sysroot.display(),
            cross::install_hint(prefix)
        ));
    }
    Ok((qemu, sysroot))
}

/// A served file and what a GET of it must return.
struct Expect {
    path: &'static str,
    status: u16,
    body: Option<Vec<u8>>,
}

/// The test site: a pseudo-random blob, an index page; and a path that is not there.
fn write_site(dir: &Path) -> Result<Vec<Expect>> {
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let blob = pseudo_random(BLOB_BYTES);
    let index = b"<!doctype html><title>Rusty</title><p>cross-built\n".to_vec();
    for (name, bytes) in [("blob.bin", &blob), ("index.html", &index)] {
        let p = dir.join(name);
        fs::write(&p, bytes).map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    Ok(vec![
        Expect {
            path: "/blob.bin",
            status: 200,
            body: Some(blob),
        },
        Expect {
            path: "/",
            status: 200,
            body: Some(index),
        },
        Expect {
            path: "/missing",
            status: 404,
            body: None,
        },
    ])
}

/// `n` bytes from a fixed xorshift sequence: reproducible, and not compressible by
/// accident.
fn pseudo_random(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A port nothing listens on now (the kernel's pick; released before httpd binds it).
fn free_port() -> Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| format!("finding a free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// Waits until something accepts connections on the port, while the server lives.
fn wait_listening(server: &mut Proc, port: u16, interrupted: &AtomicBool) -> Result<()> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let deadline = Instant::now() + START_LIMIT;
    loop {
        if let Some(st) = server.try_status()? {
            return Err(format!("httpd exited before listening ({st})"));
        }
        if interrupted.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "httpd did not listen on {addr} within {} s",
                START_LIMIT.as_secs()
            ));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// GETs every expected file with curl and compares status and bytes; one line per
/// request with its size and time.
fn fetch_all(files: &[Expect], port: u16, dir: &Path) -> Result<Vec<String>> {
    let out = dir.join("body");
    files
        .iter()
        .map(|f| {
            let url = format!("http://127.0.0.1:{port}{}", f.path);
            let start = Instant::now();
            let o = Command::new("curl")
                .args(["-sS", "--connect-timeout", "5", "--max-time", CURL_SECONDS])
                .args(["-w", "%{http_code}", "-o"])
                .arg(&out)
                .arg(&url)
                .output()
                .map_err(|e| format!("running curl: {e} (On Debian: `apt-get install curl`)"))?;
            let took = start.elapsed().as_secs_f64();
            let code = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if !o.status.success() {
                return Err(format!(
                    "curl {url} failed ({}): {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
            }
            if code != f.status.to_string() {
                return Err(format!("GET {url}: status {code}, expected {}", f.status));
            }
            let got = fs::read(&out).map_err(|e| format!("reading {}: {e}", out.display()))?;
            if let Some(want) = &f.body {
                if &got != want {
                    return Err(format!(
                        "GET {url}: {} bytes that differ from the {} bytes served",
                        got.len(),
                        want.len()
                    ));
                }
            }
            Ok(format!(
                "GET {} -> {code}, {} bytes{}, {took:.3} s",
                f.path,
                got.len(),
                if f.body.is_some() { " identical" } else { "" }
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_is_reproducible_and_varied() {
        let a = pseudo_random(4096);
        assert_eq!(a, pseudo_random(4096));
        let distinct: std::collections::HashSet<u8> = a.iter().copied().collect();
        assert!(distinct.len() > 200);
    }
}
