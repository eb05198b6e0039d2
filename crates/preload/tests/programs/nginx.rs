//! nginx, one process and a master with two workers, under wrk and curl.

use super::*;

/// What one wrk run reported.
struct Wrk {
    requests: u64,
    read: String,
}

/// The wrk script that checks every response body against a file (its path is the
/// script's argument) and prints how many matched.
const WRK_CHECK: &str = r#"local threads = {}
function setup(thread)
  table.insert(threads, thread)
end
function init(args)
  local f = assert(io.open(args[1], "rb"))
  expected = f:read("*a")
  f:close()
  good = 0
  bad = 0
end
function response(status, headers, body)
  if status == 200 and body == expected then
    good = good + 1
  else
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local g, b = 0, 0
  for _, t in ipairs(threads) do
    g = g + t:get("good")
    b = b + t:get("bad")
  end
  io.write(string.format("checked: %d good %d bad\n", g, b))
end
"#;

/// What a wrk run must show: no socket errors (but at most `read_errors` on reading),
/// no status but 2xx, every body as `expected`, at least [`WRK_MIN_REQUESTS`].
fn check_wrk(scene: &Scene, what: &str, out: &str, read_errors: u64) -> Wrk {
    let fail = |why: &str| -> ! { scene.fail(&format!("{what}: {why}\n----- wrk -----\n{out}")) };
    let requests_line = out
        .lines()
        .find(|l| l.contains(" requests in "))
        .unwrap_or_else(|| fail("no request count"));
    let mut words = requests_line.split_whitespace();
    let requests: u64 = words
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| fail("unreadable request count"));
    let read = requests_line
        .rsplit(", ")
        .next()
        .unwrap_or("")
        .trim()
        .trim_end_matches(" read")
        .to_string();
    if let Some(errors) = out.lines().find(|l| l.contains("Socket errors:")) {
        // `Socket errors: connect 0, read 8, write 0, timeout 0`
        let counts: Vec<(&str, u64)> = errors
            .split([':', ','])
            .skip(1)
            .filter_map(|part| {
                let mut w = part.split_whitespace();
                Some((w.next()?, w.next()?.parse().ok()?))
            })
            .collect();
        let tolerated = counts.len() == 4
            && counts
                .iter()
                .all(|&(kind, n)| n == 0 || (kind == "read" && n <= read_errors));
        if !tolerated {
            fail(&format!("wrk saw {}", errors.trim()));
        }
    }
    if let Some(non2xx) = out.lines().find(|l| l.contains("Non-2xx")) {
        fail(&format!("wrk saw {}", non2xx.trim()));
    }
    let checked = out
        .lines()
        .find_map(|l| l.strip_prefix("checked: "))
        .unwrap_or_else(|| fail("the check script reported nothing"));
    let counts: Vec<u64> = checked
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    match counts[..] {
        [_, 0] => {}
        [_, bad] => fail(&format!("{bad} response bodies differ from the file")),
        _ => fail("unreadable check counts"),
    }
    if requests < WRK_MIN_REQUESTS {
        fail(&format!(
            "{requests} requests in {WRK_SECONDS} s, fewer than {WRK_MIN_REQUESTS}"
        ));
    }
    Wrk { requests, read }
}

/// wrk's arguments: 2 threads, [`WRK_CONNECTIONS`] connections, `seconds`, every body checked against
/// `expected`, optionally with `Connection: close` (a new connection per request).
fn wrk_args(scene: &Scene, url: &str, expected: &Path, seconds: u64, close: bool) -> Vec<String> {
    let script = scene.path("check.lua");
    if !script.exists() {
        write_file(&script, WRK_CHECK.as_bytes());
    }
    let mut argv = strings(&[
        &scene.tool("wrk"),
        "-t2",
        &format!("-c{WRK_CONNECTIONS}"),
        &format!("-d{seconds}s"),
        "--timeout",
        "5s",
        "-s",
        &script.display().to_string(),
    ]);
    if close {
        argv.extend(strings(&["-H", "Connection: close"]));
    }
    argv.extend(strings(&[url, "--", &expected.display().to_string()]));
    argv
}

/// The nginx under test: its prefix, configuration and files.
pub(crate) struct Nginx {
    www: PathBuf,
    small: PathBuf,
    big: PathBuf,
}

/// Port of the server block with `sendfile on`, and of the one with `sendfile off`.
pub(crate) const SENDFILE_ON: u16 = 8080;
pub(crate) const SENDFILE_OFF: u16 = 8081;

/// How the nginx under test listens on its two ports.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listen {
    /// `listen PORT;`: AF_INET sockets.
    Ipv4,
    /// Both families, as nginx does it: [`SENDFILE_ON`] on one dual-stack AF_INET6
    /// socket (`listen [::]:PORT ipv6only=off;`), [`SENDFILE_OFF`] on an AF_INET socket
    /// beside an IPv6-only one (`listen PORT; listen [::]:PORT;`).
    Both,
}

/// nginx's prefix, configuration and files in the scratch directory; returns its
/// command line. Everything nginx reads or writes is under the prefix (the pid file,
/// logs, temporary directories), so the Debian package's own configuration and any
/// nginx the package started play no part; the log goes to stderr, which the harness
/// keeps.
pub(crate) fn nginx_setup(scene: &Scene, master: bool, listen: Listen) -> (Nginx, Vec<String>) {
    let prefix = scene.path("nginx");
    let www = prefix.join("www");
    let small = www.join("small.txt");
    let big = www.join("big.bin");
    write_file(&small, &text(3000, 1));
    write_file(&big, &pattern(BIG, 2));
    let p = prefix.display();
    let processes = if master {
        // Debian's nginx runs its workers as nobody when started as root.
        let groups = fs::read_to_string("/etc/group").unwrap_or_default();
        let group = if groups.lines().any(|l| l.starts_with("nogroup:")) {
            "nogroup"
        } else {
            "nobody"
        };
        format!("master_process on;\nworker_processes 2;\nuser nobody {group};\n")
    } else {
        "master_process off;\nworker_processes 1;\n".to_string()
    };
    let server = |port: u16, sendfile: &str| {
        let listens = match (listen, port) {
            (Listen::Ipv4, _) => format!("listen {port};"),
            (Listen::Both, SENDFILE_ON) => format!("listen [::]:{port} ipv6only=off;"),
            (Listen::Both, _) => format!("listen {port};\n        listen [::]:{port};"),
        };
        format!(
            "    server {{\n        {listens}\n        root {www};\n        \
             sendfile {sendfile};\n    }}\n",
            www = www.display()
        )
    };
    let conf = format!(
        "daemon off;\n{processes}pid {p}/nginx.pid;\nerror_log stderr notice;\n\
         events {{\n    worker_connections 1024;\n}}\n\
         http {{\n    access_log off;\n    keepalive_timeout 65s;\n    \
         keepalive_requests 100000;\n    \
         types {{ text/plain txt; application/octet-stream bin; }}\n    \
         client_body_temp_path {p}/client_body;\n    proxy_temp_path {p}/proxy;\n    \
         fastcgi_temp_path {p}/fastcgi;\n    uwsgi_temp_path {p}/uwsgi;\n    \
         scgi_temp_path {p}/scgi;\n{}{}}}\n",
        server(SENDFILE_ON, "on"),
        server(SENDFILE_OFF, "off"),
    );
    let conf_path = prefix.join("nginx.conf");
    write_file(&conf_path, conf.as_bytes());
    let argv = strings(&[
        &scene.tool("nginx"),
        "-p",
        &p.to_string(),
        "-c",
        &conf_path.display().to_string(),
        "-e",
        "stderr",
    ]);
    (Nginx { www, small, big }, argv)
}

/// What the curl and wrk rounds against nginx moved.
#[derive(Default)]
pub(crate) struct Tally {
    curl_transfers: u64,
    curl_bytes: u64,
    wrk_runs: u64,
    wrk_requests: u64,
    wrk_read: Vec<String>,
}

impl Tally {
    fn add_wrk(&mut self, w: Wrk) {
        self.wrk_runs += 1;
        self.wrk_requests += w.requests;
        self.wrk_read.push(w.read);
    }
}

/// The checks the nginx tests make against both server blocks, at `ip` (an IPv6 one in
/// brackets): curl downloads over one kept-alive connection and with `Connection:
/// close` (checked by sha256), and wrk with keep-alive and with `Connection: close`
/// (every body checked).
pub(crate) fn nginx_rounds(
    scene: &mut Scene,
    nginx: &Nginx,
    round: &str,
    ip: &str,
    tally: &mut Tally,
) {
    for (port, sendfile) in [(SENDFILE_ON, "on"), (SENDFILE_OFF, "off")] {
        let what = format!("{round}, sendfile {sendfile}");
        let url = |file: &Path| {
            format!(
                "http://{ip}:{port}/{}",
                file.strip_prefix(&nginx.www).unwrap().display()
            )
        };
        let dir = scene.net.dir.clone();
        let dl = |name: &str| dir.join(format!("dl-{round}-{port}-{name}"));
        let expected = [&nginx.small, &nginx.big, &nginx.small, &nginx.big];
        let kept: Vec<(String, PathBuf)> = expected
            .iter()
            .enumerate()
            .map(|(i, f)| (url(f), dl(&format!("keepalive-{i}"))))
            .collect();
        let got = curl_many(scene, &format!("curl-{port}"), &kept, false, None);
        let connects: Vec<u64> = got.iter().map(|g| g.1).collect();
        if connects != [1, 0, 0, 0] {
            scene.fail(&format!(
                "{what}: curl's four transfers made {connects:?} connections \
                 (want [1, 0, 0, 0]: the connection kept alive)"
            ));
        }
        let headers = scene.path(&format!("headers-{round}-{port}"));
        let closed: Vec<(String, PathBuf)> = expected[..2]
            .iter()
            .enumerate()
            .map(|(i, f)| (url(f), dl(&format!("close-{i}"))))
            .collect();
        let got_closed = curl_many(
            scene,
            &format!("curl-close-{port}"),
            &closed,
            true,
            Some(&headers),
        );
        let connects: Vec<u64> = got_closed.iter().map(|g| g.1).collect();
        let header_text = fs::read_to_string(&headers).unwrap_or_default();
        let closes = header_text
            .lines()
            .filter(|l| l.trim().eq_ignore_ascii_case("connection: close"))
            .count();
        if connects != [1, 1] || closes != 2 {
            scene.fail(&format!(
                "{what}: with Connection: close, curl made {connects:?} connections \
                 (want [1, 1]) and saw {closes} `Connection: close` (want 2):\n{header_text}"
            ));
        }
        for ((_, out), file) in kept
            .iter()
            .chain(&closed)
            .zip(expected.iter().chain(&expected[..2]))
        {
            scene.same_file(file, out, &what);
            let _ = fs::remove_file(out);
        }
        tally.curl_transfers += (got.len() + got_closed.len()) as u64;
        tally.curl_bytes += got.iter().chain(&got_closed).map(|g| g.2).sum::<u64>();
        for close in [false, true] {
            let argv = wrk_args(scene, &url(&nginx.small), &nginx.small, WRK_SECONDS, close);
            let limit = Duration::from_secs(WRK_SECONDS + 30);
            let out = scene.run(&format!("wrk-{port}"), &argv, limit);
            let mode = if close {
                "Connection: close"
            } else {
                "keep-alive"
            };
            tally.add_wrk(check_wrk(scene, &format!("{what}, wrk {mode}"), &out, 0));
        }
    }
}

pub(crate) fn nginx_summary(scene: &Scene, test: &str, tally: &Tally, extra: &str) {
    eprintln!(
        "{test}: {} wrk runs, {} requests ({} read), {} curl transfers, {} bytes checked by \
         sha256{extra}, {:.1} s",
        tally.wrk_runs,
        tally.wrk_requests,
        tally.wrk_read.join(" + "),
        tally.curl_transfers,
        tally.curl_bytes,
        scene.seconds()
    );
}

/// 1. nginx in one process (`master_process off`): a small file and a 50 MiB one, with
///    sendfile on and off, keep-alive and `Connection: close`, curl and wrk; then a
///    graceful stop with SIGQUIT.
#[test]
fn nginx_single_process() {
    let test = "nginx_single_process";
    let Some(mut scene) = Scene::new(test, &["nginx", "curl", "wrk"]) else {
        return;
    };
    let (nginx, argv) = nginx_setup(&scene, false, Listen::Ipv4);
    let server = scene.under_test("nginx", None, &argv);
    let ip = scene.own_ip();
    for port in [SENDFILE_ON, SENDFILE_OFF] {
        scene.wait_http(&format!("http://{ip}:{port}/small.txt"), server);
    }
    let mut tally = Tally::default();
    nginx_rounds(&mut scene, &nginx, "first", &ip, &mut tally);
    let stopped = scene.stop(server, "QUIT");
    nginx_summary(
        &scene,
        test,
        &tally,
        &format!(", SIGQUIT stop in {:.2} s", stopped.as_secs_f64()),
    );
}

/// 2. nginx with a master and two workers (which the master forks after it listens):
///    the same rounds, then a reload (SIGHUP) while wrk runs, the rounds again on the
///    new workers, and a graceful stop with SIGQUIT that ends every worker.
#[test]
fn nginx_master_and_two_workers() {
    let test = "nginx_master_and_two_workers";
    let Some(mut scene) = Scene::new(test, &["nginx", "curl", "wrk"]) else {
        return;
    };
    let (nginx, argv) = nginx_setup(&scene, true, Listen::Ipv4);
    let master = scene.under_test("nginx", Some(3), &argv);
    scene.wait_for_log(master, "start worker process");
    let ip = scene.own_ip();
    for port in [SENDFILE_ON, SENDFILE_OFF] {
        scene.wait_http(&format!("http://{ip}:{port}/small.txt"), master);
    }
    let workers = wait_workers(&mut scene, master, &[]);
    probe_workers(
        &mut scene,
        &format!("http://{ip}:{SENDFILE_ON}/small.txt"),
        "",
    );
    let mut tally = Tally::default();
    nginx_rounds(&mut scene, &nginx, "first", &ip, &mut tally);
    scene.expect_running(master, "after the first rounds");

    // The reload: wrk keeps requesting (keep-alive) while the master forks new workers
    // and the old ones finish their requests and close.
    let url = format!("http://{ip}:{SENDFILE_ON}/small.txt");
    let load_seconds = 8;
    let argv = wrk_args(&scene, &url, &nginx.small, load_seconds, false);
    let load = scene.spawn("wrk-reload", &argv);
    std::thread::sleep(Duration::from_secs(2));
    scene.signal(master, "HUP");
    let new_workers = wait_workers(&mut scene, master, &workers);
    scene.expect_exit_0(load, Duration::from_secs(load_seconds + 30));
    let out = scene.net.log(load);
    // The old workers close their kept-alive connections when they are idle; a
    // request wrk sends on one just then reads EOF (on the kernel too). That is one
    // read error per connection at most, each connection being closed once.
    tally.add_wrk(check_wrk(
        &scene,
        "wrk during the reload",
        &out,
        WRK_CONNECTIONS,
    ));
    wait_gone(&mut scene, &workers, "the old workers after the reload");
    probe_workers(
        &mut scene,
        &format!("http://{ip}:{SENDFILE_ON}/small.txt"),
        " after the reload",
    );
    nginx_rounds(&mut scene, &nginx, "reloaded", &ip, &mut tally);

    let stopped = scene.stop(master, "QUIT");
    wait_gone(&mut scene, &new_workers, "the workers after SIGQUIT");
    nginx_summary(
        &scene,
        test,
        &tally,
        &format!(
            ", workers {workers:?} reloaded to {new_workers:?}, SIGQUIT stop in {:.2} s",
            stopped.as_secs_f64()
        ),
    );
}

/// A few requests, each on a new connection, so that a failure to serve from the
/// workers is reported as such (with what curl saw) rather than as the first check's.
pub(crate) fn probe_workers(scene: &mut Scene, url: &str, when: &str) {
    let curl = scene.net.tools.get("curl").to_path_buf();
    let probes = 8;
    let mut failed = Vec::new();
    for i in 0..probes {
        let args = [
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}\\n",
            "--max-time",
            "3",
            url,
        ];
        let (ok, out) = scene.net.ns_quick(&curl, &args);
        if !ok || out.trim() != "200" {
            failed.push(format!("request {i}: {}", out.trim()));
        }
    }
    if !failed.is_empty() {
        scene.fail(&format!(
            "nginx's workers (forked by the master after it listened) do not serve{when}: \
             {} of {probes} requests to {url} failed:\n{}",
            failed.len(),
            failed.join("\n")
        ));
    }
}

/// Wait until the nginx master has two workers that are not in `old` (bounded), and
/// return their pids.
pub(crate) fn wait_workers(scene: &mut Scene, master: Proc, old: &[u32]) -> Vec<u32> {
    let deadline = Instant::now() + STARTUP;
    loop {
        scene.expect_running(master, "while its workers start");
        let fresh: Vec<u32> = scene
            .descendants(master)
            .into_iter()
            .filter(|pid| !old.contains(pid))
            .collect();
        if fresh.len() == 2 {
            return fresh;
        }
        if Instant::now() > deadline {
            scene.fail(&format!(
                "the master has new children {fresh:?} after {STARTUP:?}, want two workers \
                 (old ones {old:?})"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait until none of `pids` runs any more (bounded by [`STOP`]).
pub(crate) fn wait_gone(scene: &mut Scene, pids: &[u32], what: &str) {
    let deadline = Instant::now() + STOP;
    loop {
        let alive: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|pid| {
                fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim().starts_with('Z'))
            })
            .collect();
        if alive.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            scene.fail(&format!("{what}: {alive:?} still run after {STOP:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
