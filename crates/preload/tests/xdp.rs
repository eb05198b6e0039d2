//! A program with several processes on an AF_XDP link: nginx, a master and two
//! workers, through `rusty-run --link 'xdp:rx0 10.78.N.2/24 2'` on a veth with two
//! queues, the Linux client one bridge hop away in a namespace of its own
//! (`TestNet::xdp_peer`).
//!
//! The library opens both queues in the master and hands one to each worker as it
//! forks (the second is the master's own, since the master has no connection): a
//! queue left with the master would swallow the connections the veth steers to it.
//! Forty connections, each new, must all be answered, byte for byte; a port no process
//! listens on must be refused at once; SIGQUIT must stop nginx, and the XDP program
//! must be gone once it has.
//!
//! Needs root, nginx, curl and ethtool; skips with a printed reason otherwise, unless
//! `RUSTY_REQUIRE_PRIVILEGED=1`. Stops only the processes it started, by pid.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use common::{preload_library, PRELOAD_VARS, RUSTY_RUN};
use rusty_testnet::TestNet;

/// The workers nginx forks, and the veth's queues: one each.
const WORKERS: usize = 2;
/// Separate connections, each a new flow the veth steers to one of the queues.
const CONNECTIONS: usize = 40;

/// The pids of `pid`'s children.
fn children(pid: u32) -> Vec<u32> {
    fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Kills nginx's workers on the way out, should the test fail with them running (the
/// harness stops the master, by pid, itself).
struct Workers(Vec<u32>);

impl Drop for Workers {
    fn drop(&mut self) {
        for &pid in &self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

#[test]
fn nginx_workers_share_an_af_xdp_link() {
    let test = "nginx_workers_share_an_af_xdp_link";
    let Some(tools) = rusty_testnet::privileged(test, &["nginx", "curl", "ethtool", "kill"]) else {
        return;
    };
    let mut net = TestNet::new(test, tools);
    let ifname = net.xdp_peer(WORKERS);
    let _ = fs::set_permissions(&net.dir, fs::Permissions::from_mode(0o755));
    let www = net.dir.join("www");
    fs::create_dir_all(&www).expect("www");
    let page: Vec<u8> = (0..3000u32).map(|i| b'a' + (i * 7 % 26) as u8).collect();
    fs::write(www.join("page.txt"), &page).expect("page");
    let groups = fs::read_to_string("/etc/group").unwrap_or_default();
    let group = if groups.lines().any(|l| l.starts_with("nogroup:")) {
        "nogroup"
    } else {
        "nobody"
    };
    let p = net.dir.display().to_string();
    let conf = format!(
        "daemon off;\nmaster_process on;\nworker_processes {WORKERS};\n\
         user nobody {group};\npid {p}/nginx.pid;\nerror_log stderr notice;\n\
         events {{\n    worker_connections 1024;\n}}\n\
         http {{\n    access_log off;\n    types {{ text/plain txt; }}\n    \
         client_body_temp_path {p}/client_body;\n    proxy_temp_path {p}/proxy;\n    \
         fastcgi_temp_path {p}/fastcgi;\n    uwsgi_temp_path {p}/uwsgi;\n    \
         scgi_temp_path {p}/scgi;\n    \
         server {{\n        listen 8080;\n        root {www};\n    }}\n}}\n",
        www = www.display()
    );
    let conf_path = net.dir.join("nginx.conf");
    fs::write(&conf_path, conf).expect("nginx.conf");

    let mut cmd = net.rusty_ns_command(RUSTY_RUN);
    for var in PRELOAD_VARS {
        cmd.env_remove(var);
    }
    let link = format!("xdp:{ifname} {}/24 {WORKERS}", net.stack_ip());
    cmd.args(["--link", &link]);
    if let Some(library) = preload_library() {
        cmd.arg("--library").arg(library);
    }
    cmd.arg("--")
        .arg(net.tools.get("nginx"))
        .args(["-p", &p, "-c"])
        .arg(&conf_path);
    let master = net.spawn("nginx", cmd);
    let master_pid = net.pid(master);

    let curl = net.tools.get("curl").to_path_buf();
    let stack_ip = net.stack_ip();
    let url = |port: u16, path: &str| format!("http://{stack_ip}:{port}/{path}");
    let page_url = url(8080, "page.txt");
    let curl_in_peer = |net: &mut TestNet, label: &str, args: &[String]| -> (bool, String) {
        let p = net.spawn_in_peer(label, &curl, args);
        let ok = matches!(net.wait(p, Duration::from_secs(30)), Some(s) if s.success());
        (ok, net.log(p))
    };

    // Up when a request is answered (bounded: 20 s).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let args = ["-s", "-o", "/dev/null", "--max-time", "1", &page_url].map(String::from);
        if curl_in_peer(&mut net, "curl-up", &args).0 {
            break;
        }
        if !net.running(master) || Instant::now() > deadline {
            net.fail("nginx did not answer on the AF_XDP link within 20 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let workers = Workers(children(master_pid));
    if workers.0.len() != WORKERS {
        net.fail(&format!("nginx has workers {:?}", workers.0));
    }

    // Each request on a connection of its own: new flows, steered to both queues.
    let out = net.dir.join("got");
    let mut args: Vec<String> = ["-s", "--max-time", "5", "-H", "Connection: close"]
        .map(String::from)
        .to_vec();
    for i in 0..CONNECTIONS {
        args.push("-o".into());
        args.push(format!("{}.{i}", out.display()));
        args.push(page_url.clone());
    }
    let started = Instant::now();
    let (ok, log) = curl_in_peer(&mut net, "curl-each", &args);
    if !ok {
        net.fail(&format!("curl of {CONNECTIONS} connections failed: {log}"));
    }
    for i in 0..CONNECTIONS {
        let got = fs::read(format!("{}.{i}", out.display())).unwrap_or_default();
        if got != page {
            net.fail(&format!(
                "connection {i} got {} bytes, not the {}-byte page",
                got.len(),
                page.len()
            ));
        }
    }
    let took = started.elapsed();

    // A port no process listens on is refused, not left to time out.
    let refused_at = Instant::now();
    let args = ["-s", "--max-time", "5", &url(8081, "")].map(String::from);
    let (ok, _) = curl_in_peer(&mut net, "curl-closed", &args);
    let refused_in = refused_at.elapsed();
    if ok || refused_in > Duration::from_secs(2) {
        net.fail(&format!(
            "a port no process listens on: answered {ok}, after {refused_in:?} (want a quick refusal)"
        ));
    }

    // SIGQUIT: nginx's graceful stop; then the XDP program goes with the last queue.
    let kill = net.tools.get("kill").to_path_buf();
    let (sent, out) = rusty_testnet::quick(&kill, &["-QUIT", &master_pid.to_string()]);
    if !sent {
        net.fail(&format!("kill -QUIT: {out}"));
    }
    match net.wait(master, Duration::from_secs(15)) {
        Some(s) if s.success() => {}
        other => net.fail(&format!("nginx after SIGQUIT: {other:?}")),
    }
    let ip = net.tools.get("ip").to_path_buf();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, shown) = net.rusty_ns_quick(&ip, &["link", "show", "dev", &ifname]);
        if !shown.contains("prog/xdp") {
            break;
        }
        if Instant::now() > deadline {
            net.fail("the XDP program is still attached 10 s after nginx stopped");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The workers ended with their master: nothing of theirs to stop.
    let mut workers = workers;
    workers.0.clear();
    eprintln!(
        "{test}: {CONNECTIONS} connections over {WORKERS} AF_XDP queues in {:.2} s; \
         closed port refused in {:.0} ms",
        took.as_secs_f64(),
        refused_in.as_secs_f64() * 1000.0
    );
}
