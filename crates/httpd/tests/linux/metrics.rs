//! httpd's live metrics on Rusty's stack over a TAP: wrk loads it from the namespace
//! for two seconds, and the endpoint (on the host's loopback) and the file count every
//! request httpd answered.

use std::time::{Duration, Instant};

use super::{ns_output, setup, start_tap_httpd, stop, PORT};
use crate::common::{make_site, metrics_addr_in, requests, scrape, total_counter};

#[test]
fn metrics_count_wrk_load_on_tap() {
    let test = "metrics_count_wrk_load_on_tap";
    let Some(mut net) = setup(test, &["wrk"]) else {
        return;
    };
    let root = make_site(&net.dir, None);
    let file = net.dir.join("rusty.prom");
    let file_arg = file.display().to_string();
    let extra = ["--metrics", "127.0.0.1:0", "--metrics-file", &file_arg];
    let httpd = start_tap_httpd(&mut net, &root, &extra);
    net.wait_for_log(httpd, "metrics: serving http://", Duration::from_secs(15));
    let Some(metrics) = metrics_addr_in(&net.log(httpd)) else {
        net.fail("no metrics address in httpd's log");
    };
    let wrk = net.tools.get("wrk").to_path_buf();
    let url = format!("http://{}:{PORT}/hello.txt", net.stack_ip());
    let (ok, out, err) = ns_output(&net, &wrk, &["-t1", "-c4", "-d2s", "--timeout", "2s", &url]);
    let out = String::from_utf8_lossy(&out).into_owned();
    if !ok {
        net.fail(&format!("wrk failed:\n{out}\n{err}"));
    }
    let sent: u64 = out
        .lines()
        .find_map(|l| l.trim().split_once(" requests in ")?.0.parse().ok())
        .unwrap_or_else(|| net.fail(&format!("no request count from wrk:\n{out}")));
    assert!(sent > 100, "wrk made only {sent} requests:\n{out}");
    // Every response wrk counted was counted by httpd; httpd may have answered a few
    // more that wrk stopped waiting for.
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape(metrics);
        if requests(&text, "200") >= sent {
            break text;
        }
        if Instant::now() > deadline {
            net.fail(&format!("{sent} requests never showed:\n{text}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    for want in [
        "rusty_frames_received_total{worker=\"0\"}",
        "rusty_buffer_memory_peak_bytes{worker=\"1\"}",
        "rusty_drops_total{worker=\"0\",reason=\"no_listener\"}",
        "rusty_time_wait_connections{worker=\"1\"}",
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }
    let log = stop(&mut net, httpd);
    let answered = total_counter(&log, "200");
    let last = std::fs::read_to_string(&file).unwrap_or_default();
    assert_eq!(requests(&last, "200"), answered, "the file:\n{last}\n{log}");
    assert!(answered >= sent, "{answered} < {sent}\n{log}");
}
