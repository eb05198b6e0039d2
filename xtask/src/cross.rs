//! `cargo xtask cross-build TARGET [--release] [-p NAME]`: the workspace's binaries (or
//! one package's library) for another target. It checks that rustc knows the target,
//! adds its standard library through rustup when missing, finds the C cross linker
//! (`<arch>-linux-<env>-gcc` for `*-linux-gnu*` targets, or the one named by
//! `CARGO_TARGET_<TRIPLE>_LINKER` / `CC_<triple>`), then runs cargo with that linker.
//! Whatever blocks a step is named with what would unblock it, and the command fails;
//! `tilegx` goes to [`crate::tilegx`], which does what a toolchain allows and says
//! what blocks the rest.

use crate::common::{find_program, target_dir, workspace_root, Result};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Flags of `cargo xtask cross-build`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BuildArgs {
    /// A target triple rustc knows (see `rustc --print target-list`), or `tilegx`.
    pub target: String,
    /// Build with the release profile.
    #[arg(long)]
    pub release: bool,
    /// Build this package's library only, instead of every binary of the workspace.
    #[arg(short = 'p', long = "package", value_name = "NAME")]
    pub package: Option<String>,
}

/// What a cross build produced.
pub(crate) struct Built {
    /// `target/<triple>/<profile>` under the target directory in effect.
    pub dir: PathBuf,
    /// Wall-clock seconds cargo took.
    pub seconds: f64,
}

/// `cargo xtask cross-build`.
pub(crate) fn run(args: &BuildArgs) -> Result<()> {
    let root = workspace_root();
    let target_dir = target_dir(&root)?;
    if crate::tilegx::is_tilegx(&args.target) {
        return crate::tilegx::run(&root, &target_dir);
    }
    let built = build(&root, &target_dir, args)?;
    report(&built, args.package.as_deref())
}

/// Every step of a cross build up to cargo's own: the target is known, its standard
/// library is there, a linker is found; then the build.
pub(crate) fn build(root: &Path, target_dir: &Path, args: &BuildArgs) -> Result<Built> {
    let target = args.target.as_str();
    let host = host_triple()?;
    check_known(target)?;
    // The linker first: a missing one is found without downloading anything.
    let linker = find_linker(target, &host, &|k| std::env::var(k).ok())?;
    ensure_std(target)?;

    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root)
        .env("CARGO_TARGET_DIR", target_dir)
        .args(cargo_args(args));
    match &linker {
        Linker::Cross(gcc) => {
            eprintln!("cross-build: C cross linker {}", gcc.display());
            cmd.env(linker_var(target), gcc).env(cc_var(target), gcc);
        }
        Linker::Host => eprintln!("cross-build: {target} is the host; the default linker"),
        Linker::RustcDefault => eprintln!(
            "cross-build: no C cross linker is known for {target}; rustc's default linker \
             for it is used (set {} to choose one)",
            linker_var(target)
        ),
    }
    eprintln!(
        "cross-build: cargo {}",
        cargo_args(args).collect::<Vec<_>>().join(" ")
    );
    let start = Instant::now();
    let status = cmd.status().map_err(|e| format!("running cargo: {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!(
            "`cargo {}` for {target} failed ({status})",
            cargo_args(args).collect::<Vec<_>>().join(" ")
        ));
    }
    Ok(Built {
        dir: target_dir.join(target).join(profile_dir(args.release)),
        seconds,
    })
}

/// Says how long the build took and where its output is.
fn report(built: &Built, package: Option<&str>) -> Result<()> {
    println!("cross-build: built in {:.1} s", built.seconds);
    match package {
        Some(p) => {
            let crate_name = p.replace('-', "_");
            let rlibs = files_in(&built.dir.join("deps"), |name, _| {
                name.starts_with(&format!("lib{crate_name}-")) && name.ends_with(".rlib")
            })?;
            println!(
                "cross-build: {p}'s library in {}:",
                built.dir.join("deps").display()
            );
            for r in rlibs {
                println!("  {r}");
            }
        }
        None => {
            let bins = files_in(&built.dir, |name, mode| {
                mode & 0o111 != 0 && !name.contains('.')
            })?;
            println!("cross-build: binaries in {}:", built.dir.display());
            for b in bins {
                println!("  {b}");
            }
        }
    }
    Ok(())
}

/// The names of the regular files in `dir` that `keep` accepts (given name and mode),
/// sorted.
fn files_in(dir: &Path, keep: impl Fn(&str, u32) -> bool) -> Result<Vec<String>> {
    let entries = fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            let name = e.file_name().into_string().ok()?;
            (meta.is_file() && keep(&name, meta.permissions().mode())).then_some(name)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// The cargo arguments: every binary of the workspace but xtask (host tooling), or one
/// package's library.
fn cargo_args(args: &BuildArgs) -> impl Iterator<Item = String> {
    let mut v = vec!["build".to_string(), "--target".into(), args.target.clone()];
    if args.release {
        v.push("--release".into());
    }
    match &args.package {
        Some(p) => v.extend(["--package".into(), p.clone(), "--lib".into()]),
        None => v.extend([
            "--workspace".into(),
            "--exclude".into(),
            "xtask".into(),
            "--bins".into(),
        ]),
    }
    v.into_iter()
}

pub(crate) fn profile_dir(release: bool) -> &'static str {
    if release {
        "release"
    } else {
        "debug"
    }
}

/// Runs `program args` and returns its stdout, or says what failed.
fn output(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("running `{program}`: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        // rustup appends a backtrace to its errors when RUST_BACKTRACE is set.
        let err = err.split("Stack backtrace:").next().unwrap_or_default();
        Err(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            err.trim()
        ))
    }
}

/// The host's triple, from `rustc -vV`.
pub(crate) fn host_triple() -> Result<String> {
    let v = output("rustc", &["-vV"])?;
    version_field(&v, "host")
        .map(str::to_string)
        .ok_or_else(|| format!("no `host:` line in `rustc -vV`:\n{v}"))
}

/// rustc's release and its LLVM's version, from `rustc -vV` (`?` for what it lacks).
pub(crate) fn rustc_and_llvm() -> Result<(String, String)> {
    let v = output("rustc", &["-vV"])?;
    let get = |k| version_field(&v, k).unwrap_or("?").to_string();
    Ok((get("release"), get("LLVM version")))
}

/// The value of `key: value` in `rustc -vV`'s output.
fn version_field<'a>(verbose_version: &'a str, key: &str) -> Option<&'a str> {
    verbose_version
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
        .map(str::trim)
}

/// Fails unless `target` is in `rustc --print target-list`.
fn check_known(target: &str) -> Result<()> {
    let list = output("rustc", &["--print", "target-list"])?;
    if list.lines().any(|l| l.trim() == target) {
        Ok(())
    } else {
        Err(format!(
            "rustc does not know the target `{target}` (see `rustc --print target-list`)"
        ))
    }
}

/// Makes sure the standard library for `target` is installed: through rustup when it
/// is missing from the sysroot.
fn ensure_std(target: &str) -> Result<()> {
    let sysroot = output("rustc", &["--print", "sysroot"])?;
    let lib = Path::new(sysroot.trim())
        .join("lib/rustlib")
        .join(target)
        .join("lib");
    if lib.is_dir() {
        return Ok(());
    }
    if find_program("rustup").is_none() {
        return Err(format!(
            "the standard library for {target} is not installed ({} is missing) and rustup \
             is not on PATH to add it; install it the way this Rust toolchain was installed",
            lib.display()
        ));
    }
    eprintln!("cross-build: rustup target add {target}");
    output("rustup", &["target", "add", target]).map_err(|e| {
        format!(
            "could not add the standard library for {target} with rustup (offline, or no \
             prebuilt one for this target on this toolchain; a tier-3 target needs nightly \
             and -Z build-std): {e}"
        )
    })?;
    Ok(())
}

/// The linker a cross build uses.
#[derive(Debug, PartialEq)]
enum Linker {
    /// A C compiler driver for the target: from the environment or found on PATH.
    Cross(PathBuf),
    /// The target is the host: cargo's default.
    Host,
    /// No cross linker is known for the target family: rustc's default for the target
    /// (rust-lld for bare-metal and wasm targets).
    RustcDefault,
}

/// The linker for `target`: one the environment names, none for the host, the GNU
/// cross compiler for `*-linux-gnu*` targets, else rustc's default. Fails, naming what
/// to install, when a GNU cross compiler or its C library is missing. `env` reads the
/// environment (a parameter so that tests can give their own).
fn find_linker(target: &str, host: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Linker> {
    let named = [linker_var(target), cc_var(target), format!("CC_{target}")]
        .into_iter()
        .find_map(|k| env(&k).filter(|v| !v.is_empty()).map(|v| (k, v)));
    if let Some((var, value)) = named {
        let path = if value.contains('/') {
            Some(PathBuf::from(&value)).filter(|p| p.is_file())
        } else {
            find_program(&value)
        };
        return path
            .map(Linker::Cross)
            .ok_or_else(|| format!("{var}={value}, but there is no such program"));
    }
    if target == host {
        return Ok(Linker::Host);
    }
    let Some(prefix) = gnu_prefix(target) else {
        return Ok(Linker::RustcDefault);
    };
    let gcc = format!("{prefix}-gcc");
    let Some(path) = find_program(&gcc) else {
        return Err(format!(
            "no C cross linker for {target}: `{gcc}` is not on PATH. On Debian: \
             `apt-get install {}`; elsewhere, install a GNU cross toolchain for {prefix}, \
             or name one with {}=PATH",
            install_hint(&prefix),
            linker_var(target)
        ));
    };
    check_libc(&path, &prefix)?;
    Ok(Linker::Cross(path))
}

/// Fails when `gcc` cannot find the target's C library (Debian installs the cross gcc
/// without it under --no-install-recommends).
fn check_libc(gcc: &Path, prefix: &str) -> Result<()> {
    let out = Command::new(gcc)
        .arg("-print-file-name=libc.so")
        .output()
        .map_err(|e| format!("running {}: {e}", gcc.display()))?;
    let found = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && found.contains('/') {
        Ok(())
    } else {
        Err(format!(
            "{} has no C library for {prefix} to link against. On Debian: `apt-get install \
             {}`",
            gcc.display(),
            install_hint(prefix)
        ))
    }
}

/// The GNU toolchain prefix for a `<arch>-<vendor>-linux-gnu*` triple, as Debian and
/// most distributions name their cross compilers: `aarch64-unknown-linux-gnu` →
/// `aarch64-linux-gnu`, `armv7-unknown-linux-gnueabihf` → `arm-linux-gnueabihf`.
pub(crate) fn gnu_prefix(triple: &str) -> Option<String> {
    let parts: Vec<&str> = triple.split('-').collect();
    match parts.as_slice() {
        [arch, _vendor, "linux", env] if env.starts_with("gnu") => {
            Some(format!("{}-linux-{env}", gcc_arch(arch)))
        }
        _ => None,
    }
}

/// GCC's name for a Rust target's architecture.
fn gcc_arch(arch: &str) -> &str {
    match arch {
        a if a.starts_with("armeb") => "armeb",
        a if a.starts_with("arm") || a.starts_with("thumb") => "arm",
        a if a.starts_with("riscv64") => "riscv64",
        a if a.starts_with("riscv32") => "riscv32",
        "i586" | "i686" => "i686",
        a => a,
    }
}

/// QEMU's user-mode emulator name for a GNU prefix's architecture (`qemu-<this>`).
pub(crate) fn qemu_arch(prefix: &str) -> &str {
    let arch = prefix.split('-').next().unwrap_or(prefix);
    match arch {
        "i686" => "i386",
        "powerpc64le" => "ppc64le",
        "powerpc64" => "ppc64",
        "powerpc" => "ppc",
        a => a,
    }
}

/// Debian's architecture name for a GNU prefix, where its cross C library packages
/// (`libc6-dev-<arch>-cross`) use one.
fn debian_arch(prefix: &str) -> Option<&'static str> {
    Some(match prefix {
        "aarch64-linux-gnu" => "arm64",
        "arm-linux-gnueabihf" => "armhf",
        "arm-linux-gnueabi" => "armel",
        "x86_64-linux-gnu" => "amd64",
        "x86_64-linux-gnux32" => "x32",
        "i686-linux-gnu" => "i386",
        "riscv64-linux-gnu" => "riscv64",
        "powerpc64le-linux-gnu" => "ppc64el",
        "powerpc64-linux-gnu" => "ppc64",
        "powerpc-linux-gnu" => "powerpc",
        "s390x-linux-gnu" => "s390x",
        "mips64el-linux-gnuabi64" => "mips64el",
        "mipsel-linux-gnu" => "mipsel",
        "sparc64-linux-gnu" => "sparc64",
        "loongarch64-linux-gnu" => "loong64",
        _ => return None,
    })
}

/// The Debian packages of the cross compiler and C library for a GNU prefix (package
/// names use `-` where the prefix has `_`).
pub(crate) fn install_hint(prefix: &str) -> String {
    let gcc = format!("gcc-{}", prefix.replace('_', "-"));
    match debian_arch(prefix) {
        Some(arch) => format!("{gcc} libc6-dev-{arch}-cross"),
        None => gcc,
    }
}

/// Cargo's linker variable for a target: `CARGO_TARGET_<TRIPLE>_LINKER`, the triple
/// upper-cased with `-` and `.` as `_`.
pub(crate) fn linker_var(triple: &str) -> String {
    format!(
        "CARGO_TARGET_{}_LINKER",
        triple.to_uppercase().replace(['-', '.'], "_")
    )
}

/// The cc crate's per-target C compiler variable, in its shell-friendly spelling
/// (`CC_aarch64_unknown_linux_gnu`; it also reads `CC_aarch64-unknown-linux-gnu`).
pub(crate) fn cc_var(triple: &str) -> String {
    format!("CC_{}", triple.replace(['-', '.'], "_"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cli, Command as Cmd};
    use clap::Parser;

    #[test]
    fn gnu_prefixes() {
        for (triple, prefix) in [
            ("aarch64-unknown-linux-gnu", Some("aarch64-linux-gnu")),
            ("armv7-unknown-linux-gnueabihf", Some("arm-linux-gnueabihf")),
            ("arm-unknown-linux-gnueabi", Some("arm-linux-gnueabi")),
            ("riscv64gc-unknown-linux-gnu", Some("riscv64-linux-gnu")),
            ("i686-unknown-linux-gnu", Some("i686-linux-gnu")),
            (
                "powerpc64le-unknown-linux-gnu",
                Some("powerpc64le-linux-gnu"),
            ),
            (
                "mips64el-unknown-linux-gnuabi64",
                Some("mips64el-linux-gnuabi64"),
            ),
            ("x86_64-unknown-linux-gnu", Some("x86_64-linux-gnu")),
            ("aarch64-unknown-linux-musl", None),
            ("thumbv7em-none-eabihf", None),
            ("wasm32-unknown-unknown", None),
            ("aarch64-linux-android", None),
        ] {
            assert_eq!(gnu_prefix(triple).as_deref(), prefix, "{triple}");
        }
    }

    #[test]
    fn linker_names_and_packages() {
        let p = gnu_prefix("aarch64-unknown-linux-gnu").unwrap();
        assert_eq!(format!("{p}-gcc"), "aarch64-linux-gnu-gcc");
        assert_eq!(
            install_hint(&p),
            "gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
        );
        assert_eq!(
            install_hint("x86_64-linux-gnu"),
            "gcc-x86-64-linux-gnu libc6-dev-amd64-cross"
        );
        assert_eq!(install_hint("m68k-linux-gnu"), "gcc-m68k-linux-gnu");
        assert_eq!(qemu_arch(&p), "aarch64");
        assert_eq!(qemu_arch("i686-linux-gnu"), "i386");
        assert_eq!(qemu_arch("powerpc64le-linux-gnu"), "ppc64le");
    }

    #[test]
    fn env_var_names() {
        assert_eq!(
            linker_var("aarch64-unknown-linux-gnu"),
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER"
        );
        assert_eq!(
            linker_var("thumbv8m.main-none-eabi"),
            "CARGO_TARGET_THUMBV8M_MAIN_NONE_EABI_LINKER"
        );
        assert_eq!(
            cc_var("aarch64-unknown-linux-gnu"),
            "CC_aarch64_unknown_linux_gnu"
        );
    }

    #[test]
    fn linker_choice() {
        let none = |_: &str| None;
        let host = "x86_64-unknown-linux-gnu";
        assert_eq!(find_linker(host, host, &none), Ok(Linker::Host));
        assert_eq!(
            find_linker("wasm32-unknown-unknown", host, &none),
            Ok(Linker::RustcDefault)
        );
        // A name the environment gives wins, and must exist.
        let sh =
            |k: &str| (k == "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER").then(|| "sh".into());
        assert!(matches!(
            find_linker("aarch64-unknown-linux-gnu", host, &sh),
            Ok(Linker::Cross(p)) if p.ends_with("sh")
        ));
        let cc = |k: &str| (k == "CC_aarch64-unknown-linux-gnu").then(|| "/no/such/gcc".into());
        let err = find_linker("aarch64-unknown-linux-gnu", host, &cc).unwrap_err();
        assert!(
            err.contains("CC_aarch64-unknown-linux-gnu=/no/such/gcc"),
            "{err}"
        );
        // A GNU target with no cross compiler names what to install.
        if find_program("sparc64-linux-gnu-gcc").is_none() {
            let err = find_linker("sparc64-unknown-linux-gnu", host, &none).unwrap_err();
            assert!(
                err.contains("apt-get install gcc-sparc64-linux-gnu libc6-dev-sparc64-cross"),
                "{err}"
            );
        }
    }

    #[test]
    fn host_from_rustc_verbose_version() {
        let v = "rustc 1.95.0\nbinary: rustc\nhost: x86_64-unknown-linux-gnu\nrelease: 1.95.0\n\
                 LLVM version: 22.1.2\n";
        assert_eq!(version_field(v, "host"), Some("x86_64-unknown-linux-gnu"));
        assert_eq!(version_field(v, "LLVM version"), Some("22.1.2"));
        assert_eq!(version_field("rustc 1.95.0\n", "host"), None);
    }

    fn parse(args: &[&str]) -> BuildArgs {
        let cli = Cli::try_parse_from([&["cargo xtask"], args].concat()).unwrap();
        match cli.command {
            Cmd::CrossBuild(a) => a,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn arguments() {
        let a = parse(&["cross-build", "aarch64-unknown-linux-gnu"]);
        assert_eq!(a.target, "aarch64-unknown-linux-gnu");
        assert!(!a.release && a.package.is_none());
        assert_eq!(
            cargo_args(&a).collect::<Vec<_>>(),
            [
                "build",
                "--target",
                "aarch64-unknown-linux-gnu",
                "--workspace",
                "--exclude",
                "xtask",
                "--bins"
            ]
        );
        for flags in [
            ["--release", "-p", "rusty-stack"],
            ["--package", "rusty-stack", "--release"],
        ] {
            let a = parse(&[&["cross-build", "aarch64-unknown-linux-gnu"], &flags[..]].concat());
            assert!(a.release);
            assert_eq!(a.package.as_deref(), Some("rusty-stack"));
            assert_eq!(
                cargo_args(&a).collect::<Vec<_>>(),
                [
                    "build",
                    "--target",
                    "aarch64-unknown-linux-gnu",
                    "--release",
                    "--package",
                    "rusty-stack",
                    "--lib"
                ]
            );
        }
        assert!(Cli::try_parse_from(["cargo xtask", "cross-build"]).is_err());
    }
}
