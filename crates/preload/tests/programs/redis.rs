//! redis-server through rusty-run under redis-benchmark and redis-cli, with a BGSAVE.

use super::*;

/// The requests per second redis-benchmark reported for each of `tests` (`SET`, ...);
/// fails on any error it printed.
fn check_benchmark(scene: &Scene, what: &str, out: &str, tests: &[&str]) -> Vec<String> {
    let lines: Vec<&str> = out
        .split(['\r', '\n'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let fail = |why: String| -> ! {
        scene.fail(&format!(
            "{what}: {why}\n----- redis-benchmark -----\n{out}"
        ))
    };
    if let Some(bad) = lines
        .iter()
        .find(|l| l.to_ascii_lowercase().contains("error") || l.starts_with("ERR"))
    {
        fail(format!("it reported {bad:?}"));
    }
    tests
        .iter()
        .map(|t| {
            lines
                .iter()
                .find(|l| l.starts_with(&format!("{t}: ")) && l.contains("requests per second"))
                .map(|l| l.to_string())
                .unwrap_or_else(|| fail(format!("no result for {t}")))
        })
        .collect()
}

/// 7. redis: redis-benchmark (plain and pipelined), a 100 KB value through redis-cli,
///    and BGSAVE (which forks) with a client connected; then SIGTERM.
#[test]
fn redis() {
    let test = "redis";
    let Some(mut scene) = Scene::new(test, &["redis-server", "redis-cli", "redis-benchmark"])
    else {
        return;
    };
    let ip = scene.own_ip();
    let port = "6379";
    let dir = scene.net.dir.display().to_string();
    let argv = strings(&[
        &scene.tool("redis-server"),
        "--port",
        port,
        "--bind",
        "0.0.0.0",
        "--protected-mode",
        "no",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        &dir,
        "--dbfilename",
        "dump.rdb",
        "--daemonize",
        "no",
        "--logfile",
        "",
    ]);
    let server = scene.under_test("redis-server", None, &argv);
    scene.wait_for_log(server, "Ready to accept connections");
    let cli_prefix = strings(&[&scene.tool("redis-cli"), "-h", &ip, "-p", port]);
    let cli = |args: &[&str]| -> Vec<String> {
        let mut argv = cli_prefix.clone();
        argv.extend(strings(args));
        argv
    };
    let benchmark = scene.tool("redis-benchmark");
    let bench = |extra: &[&str]| -> Vec<String> {
        let mut argv = strings(&[
            &benchmark,
            "-h",
            &ip,
            "-p",
            port,
            "-t",
            "set,get,lpush",
            "-n",
            "20000",
            "-q",
        ]);
        argv.extend(strings(extra));
        argv
    };
    let tests = ["SET", "GET", "LPUSH"];
    let limit = Duration::from_secs(120);
    let out = scene.run("redis-benchmark", &bench(&[]), limit);
    let plain_rates = check_benchmark(&scene, "redis-benchmark", &out, &tests);
    let out = scene.run("redis-benchmark-P16", &bench(&["-P", "16"]), limit);
    let pipelined_rates = check_benchmark(&scene, "redis-benchmark -P 16", &out, &tests);

    // A 100 KB value in and out: the same bytes (redis-cli --raw adds a newline).
    let value = text(100 << 10, 8);
    let value_path = scene.path("value.txt");
    write_file(&value_path, &value);
    let got_path = scene.path("got.txt");
    let mut args = vec![value_path.display().to_string()];
    args.extend(cli(&[]));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let script = r#"value=$1; shift; exec "$@" -x SET big <"$value""#;
    let set = scene.sh("redis-cli-set", script, &args, Duration::from_secs(20));
    if set.trim() != "OK" {
        scene.fail(&format!("redis-cli SET of the 100 KB value: {set:?}"));
    }
    let get_value = |scene: &mut Scene, label: &str| {
        let _ = fs::remove_file(&got_path);
        let mut args = vec![got_path.display().to_string()];
        args.extend(cli(&["--raw", "GET", "big"]));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let script = r#"out=$1; shift; exec "$@" >"$out""#;
        scene.sh(label, script, &args, Duration::from_secs(20));
        let mut want = value.clone();
        want.push(b'\n');
        let have = fs::read(&got_path).unwrap_or_default();
        if have != want {
            scene.fail(&format!(
                "{label}: the 100 KB value came back different: {}",
                describe_difference(&want, &have)
            ));
        }
    };
    get_value(&mut scene, "redis-cli-get");

    // BGSAVE with a client connected (one PING every 100 ms for 10 s).
    let lastsave = |scene: &mut Scene| -> u64 {
        let out = scene.run(
            "redis-cli-lastsave",
            &cli(&["LASTSAVE"]),
            Duration::from_secs(20),
        );
        out.trim()
            .trim_start_matches("(integer) ")
            .parse()
            .unwrap_or_else(|_| scene.fail(&format!("LASTSAVE: {out:?}")))
    };
    let before = lastsave(&mut scene);
    // LASTSAVE counts seconds: let one pass since the last save, so that a new save
    // changes it.
    let wait_until = std::time::UNIX_EPOCH + Duration::from_secs(before + 1);
    while std::time::SystemTime::now() < wait_until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let pings = 100;
    let pinger = scene.spawn(
        "redis-cli-ping",
        &cli(&["-r", &pings.to_string(), "-i", "0.1", "PING"]),
    );
    std::thread::sleep(Duration::from_millis(500));
    let reply = scene.run(
        "redis-cli-bgsave",
        &cli(&["BGSAVE"]),
        Duration::from_secs(20),
    );
    if !reply.contains("Background saving started") {
        scene.fail(&format!("BGSAVE: {reply:?}"));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        scene.expect_running(server, "during BGSAVE");
        let now = lastsave(&mut scene);
        if now != before {
            break now;
        }
        if Instant::now() > deadline {
            scene.fail(&format!("LASTSAVE still {before} 20 s after BGSAVE"));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let info = scene.run(
        "redis-cli-info",
        &cli(&["INFO", "persistence"]),
        Duration::from_secs(20),
    );
    if !info.contains("rdb_last_bgsave_status:ok") {
        scene.fail(&format!("BGSAVE did not succeed:\n{info}"));
    }
    let rdb = fs::metadata(scene.path("dump.rdb")).map_or(0, |m| m.len());
    if rdb < value.len() as u64 {
        scene.fail(&format!(
            "dump.rdb has {rdb} bytes, less than the 100 KB value"
        ));
    }
    scene.expect_exit_0(pinger, Duration::from_secs(30));
    let pongs = scene.net.log(pinger).matches("PONG").count();
    if pongs != pings {
        scene.fail(&format!(
            "the connected client got {pongs} PONGs of {pings} across BGSAVE"
        ));
    }
    get_value(&mut scene, "redis-cli-get-after-bgsave");
    let stopped = scene.stop(server, "TERM");
    let mut rates = String::new();
    for r in plain_rates.iter().chain(&pipelined_rates) {
        let _ = write!(rates, "; {}", r.split(", p50").next().unwrap_or(r));
    }
    eprintln!(
        "{test}: 2 x 3 x 20000 benchmark requests{rates}; 100 KB value set and read twice; \
         BGSAVE {}→{after} ({rdb} bytes) with {pongs} PINGs; SIGTERM stop in {:.2} s; {:.1} s",
        before,
        stopped.as_secs_f64(),
        scene.seconds()
    );
}
