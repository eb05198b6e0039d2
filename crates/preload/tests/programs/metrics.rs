//! nginx, a master and two workers, under `rusty-run --metrics --metrics-file`: what
//! the endpoint and the file export parses with Python's prometheus_client, has a
//! series for each nginx process (labelled with its pid) whose counts match the
//! connections made, follows nginx's processes across a reload (SIGHUP, which
//! rusty-run passes on), and rusty-run ends with nginx, with its status, on SIGTERM.

use super::nginx::{nginx_setup, wait_gone, Listen, SENDFILE_ON};
use super::*;

/// Where rusty-run serves the metrics: the namespace's loopback, which only this test
/// uses.
const METRICS: &str = "127.0.0.1:9464";
/// Connections made, one request each.
const REQUESTS: u64 = 200;

/// Parses the file given with prometheus_client and checks that every family has a
/// help text and every sample a `worker` and a `pid` label; prints the number of
/// families, the pids, and the sums over them of passive opens and segments received.
const CHECK: &str = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
families = list(text_string_to_metric_families(open(sys.argv[1]).read()))
pids = set()
passive = segments = 0
for f in families:
    assert f.documentation, f"{f.name}: no help"
    for s in f.samples:
        assert "worker" in s.labels and "pid" in s.labels, f"{s.name}: {s.labels}"
        pids.add(int(s.labels["pid"]))
        if s.name == "rusty_connections_opened_total" and s.labels.get("side") == "passive":
            passive += s.value
        if s.name == "rusty_segments_received_total":
            segments += s.value
print(len(families), ",".join(str(p) for p in sorted(pids)), int(passive), int(segments))
"#;

/// What [`CHECK`] found in one exposition.
#[derive(Debug)]
struct Checked {
    families: usize,
    pids: Vec<u32>,
    passive: u64,
    segments: u64,
}

fn check(scene: &Scene, python: &Path, text: &str, name: &str) -> Checked {
    let path = scene.path(name);
    write_file(&path, text.as_bytes());
    let (ok, out) = rusty_testnet::quick(python, &["-c", CHECK, &path.display().to_string()]);
    let fields: Vec<&str> = out.split_whitespace().collect();
    let parsed = match (ok, &fields[..]) {
        (true, [families, pids, passive, segments]) => (|| {
            Some(Checked {
                families: families.parse().ok()?,
                pids: pids
                    .split(',')
                    .map(|p| p.parse().ok())
                    .collect::<Option<_>>()?,
                passive: passive.parse().ok()?,
                segments: segments.parse().ok()?,
            })
        })(),
        _ => None,
    };
    parsed.unwrap_or_else(|| {
        scene.fail(&format!(
            "{name}: prometheus_client refused it or the check failed:\n{out}\n----\n{text}"
        ))
    })
}

/// The endpoint's document, scraped from inside the namespace.
fn scrape(scene: &Scene) -> String {
    let curl = scene.net.tools.get("curl").to_path_buf();
    let url = format!("http://{METRICS}/metrics");
    let (ok, out) = scene.net.ns_quick(&curl, &["-sS", "--max-time", "3", &url]);
    if !ok {
        scene.fail(&format!("scraping {url}: {out}"));
    }
    out
}

/// The sum of the samples of `name` whose labels include `label`.
fn total(text: &str, name: &str, label: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The pids the document's samples carry.
fn pids_in(text: &str) -> Vec<u32> {
    let mut pids: Vec<u32> = text
        .lines()
        .filter_map(|l| l.split("pid=\"").nth(1)?.split('"').next()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Scrape until `done` holds for the document (bounded), and return it.
fn scrape_until(scene: &Scene, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = scrape(scene);
        if done(&text) {
            return text;
        }
        if Instant::now() > deadline {
            scene.fail(&format!("{what}: not in the metrics after 15 s:\n{text}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The nginx master (rusty-run's child) and its workers, once there are two workers
/// not in `old` (bounded).
fn nginx_processes(scene: &mut Scene, run: Proc, old: &[u32]) -> (u32, Vec<u32>) {
    let deadline = Instant::now() + STARTUP;
    let rusty_run = scene.net.pid(run);
    loop {
        scene.expect_running(run, "while nginx starts");
        scene.descendants(run);
        let table = proc_table();
        let children = |parent: u32| -> Vec<u32> {
            table
                .iter()
                .filter(|&&(_, ppid, _)| ppid == parent)
                .map(|&(pid, _, _)| pid)
                .collect()
        };
        if let [master] = children(rusty_run)[..] {
            let workers: Vec<u32> = children(master)
                .into_iter()
                .filter(|w| !old.contains(w))
                .collect();
            if workers.len() == 2 {
                return (master, workers);
            }
        }
        if Instant::now() > deadline {
            scene.fail(&format!(
                "rusty-run {rusty_run} has no nginx master with two new workers after \
                 {STARTUP:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn nginx_metrics_under_rusty_run() {
    let test = "nginx_metrics_under_rusty_run";
    let Some(mut scene) = Scene::new(test, &["nginx", "curl"]) else {
        return;
    };
    if scene.stack == Stack::Kernel {
        eprintln!("SKIPPED {test}: rusty-run's metrics have no kernel counterpart");
        return;
    }
    let Some(python) =
        rusty_testnet::python_importing(test, "prometheus_client", "python3-prometheus-client")
    else {
        return;
    };
    let (_, argv) = nginx_setup(&scene, true, Listen::Ipv4);
    let file = scene.path("rusty.prom");
    let flags = strings(&[
        "--metrics",
        METRICS,
        "--metrics-file",
        &file.display().to_string(),
    ]);
    let run = scene.under_test_with("nginx", Some(3), &flags, &argv);
    scene.wait_for_log(run, "start worker process");
    let url = format!("http://{}:{SENDFILE_ON}/small.txt", scene.own_ip());
    scene.wait_http(&url, run);
    let (master, workers) = nginx_processes(&mut scene, run, &[]);
    let mut nginx = vec![master];
    nginx.extend(&workers);
    nginx.sort_unstable();

    // One connection per request (`Connection: close`), all over the TAP.
    let glob = format!("{url}?n=[1-{REQUESTS}]");
    let curl = strings(&[
        &scene.tool("curl"),
        "-sS",
        "--max-time",
        "120",
        "-H",
        "Connection: close",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}\\n",
        &glob,
    ]);
    let out = scene.run("curl-requests", &curl, Duration::from_secs(150));
    let ok = out.lines().filter(|l| l.trim() == "200").count() as u64;
    if ok != REQUESTS {
        scene.fail(&format!("{ok} of {REQUESTS} requests answered 200:\n{out}"));
    }
    let passive = r#"side="passive""#;
    let text = scrape_until(&scene, "every connection", |t| {
        total(t, "rusty_connections_opened_total", passive) >= REQUESTS && pids_in(t) == nginx
    });
    let got = check(&scene, &python, &text, "scrape.prom");
    if got.pids != nginx || got.passive < REQUESTS || got.segments < 3 * REQUESTS {
        scene.fail(&format!(
            "the metrics say {got:?}; want the pids {nginx:?}, at least {REQUESTS} passive \
             opens and {} segments received:\n{text}",
            3 * REQUESTS
        ));
    }
    if got.families < 50 {
        scene.fail(&format!("only {} families:\n{text}", got.families));
    }
    for worker in &workers {
        let series = format!(",pid=\"{worker}\"}}");
        if !text
            .lines()
            .any(|l| l.starts_with("rusty_connections{") && l.contains(&series))
        {
            scene.fail(&format!(
                "no connections gauge for worker {worker}:\n{text}"
            ));
        }
    }
    // The file, written every second, says the same.
    let deadline = Instant::now() + Duration::from_secs(10);
    let in_file = loop {
        let text = fs::read_to_string(&file).unwrap_or_default();
        if total(&text, "rusty_connections_opened_total", passive) >= REQUESTS {
            break text;
        }
        if Instant::now() > deadline {
            scene.fail(&format!(
                "{}: the connections never showed:\n{text}",
                file.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let from_file = check(&scene, &python, &in_file, "file.prom");
    if from_file.pids != nginx {
        scene.fail(&format!(
            "the file has the pids {:?}, want {nginx:?}",
            from_file.pids
        ));
    }

    // SIGHUP to rusty-run reaches nginx's master (which names the sender), which
    // reloads: new workers, and the old ones' series go once they exit.
    scene.signal(run, "HUP");
    let rusty_run = scene.net.pid(run);
    scene.wait_for_log(run, &format!("received from {rusty_run}, reconfiguring"));
    let (again, new_workers) = nginx_processes(&mut scene, run, &workers);
    if again != master {
        scene.fail(&format!("the master changed from {master} to {again}"));
    }
    wait_gone(&mut scene, &workers, "the old workers after the reload");
    let mut reloaded = vec![master];
    reloaded.extend(&new_workers);
    reloaded.sort_unstable();
    scrape_until(&scene, "only the processes that run", |t| {
        pids_in(t) == reloaded
    });

    // SIGTERM to rusty-run: nginx stops, and rusty-run exits with its status (0).
    let stopped = scene.stop(run, "TERM");
    wait_gone(&mut scene, &reloaded, "nginx after SIGTERM to rusty-run");
    let last = fs::read_to_string(&file).unwrap_or_default();
    if !last.contains("# TYPE rusty_frames_received_total counter") || !pids_in(&last).is_empty() {
        scene.fail(&format!("the last file should list no process:\n{last}"));
    }
    eprintln!(
        "{test}: {REQUESTS} connections, {} families, {} passive opens and {} segments \
         received over pids {:?}; reloaded to {new_workers:?}; SIGTERM stop in {:.2} s, {:.1} s",
        got.families,
        got.passive,
        got.segments,
        got.pids,
        stopped.as_secs_f64(),
        scene.seconds()
    );
}
