//! What the `echo` process does besides echoing: the capture `--pcap` writes, and a
//! SIGTERM mid-transfer that loses nothing.

use super::*;

/// 7. `--pcap` writes files tcpdump reads, showing the handshake (SYN and SYN-ACK).
#[test]
fn pcap_shows_the_handshake() {
    let Some(mut net) = setup("pcap_shows_the_handshake", &["python3", "tcpdump"]) else {
        return;
    };
    let base = net.dir.join("cap.pcap");
    let echo = start_tap_echo(
        &mut net,
        2,
        &["--grace", "2", "--pcap", &base.display().to_string()],
    );
    let host = net.stack_ip();
    let (clients, s) = run_clients(
        &mut net,
        &host,
        &load(8, 100_000, 1, 10_000, 7),
        Duration::from_secs(30),
    );
    assert_all_echoed(&net, clients, &s, 8);
    // Files are complete once the process has exited.
    stop(&mut net, echo, Duration::from_secs(5));
    let tcpdump = net.tools.get("tcpdump").to_path_buf();
    let mut text = String::new();
    for w in 0..2 {
        let file = net.dir.join(format!("cap.w{w}.pcap"));
        let out = Command::new(&tcpdump)
            .args(["-r", &file.display().to_string(), "-nn"])
            .output()
            .expect("run tcpdump");
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            net.fail(&format!("tcpdump -r {}: {err}", file.display()));
        }
        text.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    let ip = net.stack_ip();
    let syn = format!("> {ip}.7: Flags [S]");
    let syn_ack = format!("{ip}.7 > ");
    if !text.contains(&syn)
        || !text
            .lines()
            .any(|l| l.contains(&syn_ack) && l.contains("Flags [S.]"))
    {
        let head: String = text.lines().take(40).collect::<Vec<_>>().join("\n");
        net.fail(&format!("no SYN / SYN-ACK in the capture:\n{head}"));
    }
}

/// 8. SIGTERM mid-transfer loses no acknowledged byte: every connection either gets its
///    whole echo (SHA-256 equal) or, had one ended early, a byte-exact prefix; with
///    transfers shorter than `--grace 5` all complete, and echo exits 0 in time.
#[test]
fn sigterm_mid_transfer_loses_nothing() {
    let Some(mut net) = setup("sigterm_mid_transfer_loses_nothing", &["python3"]) else {
        return;
    };
    let echo = start_tap_echo(&mut net, 2, &["--grace", "5"]);
    let host = net.stack_ip();
    // 20 connections x 2 MB in 64 KiB chunks, 40 ms apart: about 1.3 s of sending each.
    let clients = spawn_clients(
        &mut net,
        &host,
        &[
            "--conns",
            "20",
            "--max",
            "2000000",
            "--big",
            "20",
            "--chunk",
            "65536",
            "--chunk-delay",
            "0.04",
            "--ready-after",
            "4000000",
        ],
    );
    net.wait_for_log(clients, "READY", Duration::from_secs(30));
    if !net.running(clients) {
        net.fail("the transfers finished before SIGTERM could interrupt them");
    }
    let took = stop(&mut net, echo, Duration::from_secs(8));
    let still_sending = net.running(clients);
    net.wait_ok(clients, Duration::from_secs(30));
    let s = ClientSummary::parse(&net.log(clients))
        .unwrap_or_else(|| net.fail("the client printed no SUMMARY line"));
    if s.prefix_bad != 0 {
        net.fail(&format!(
            "echoed bytes are not a prefix of what was sent: {s:?}"
        ));
    }
    assert_all_echoed(&net, clients, &s, 20);
    eprintln!(
        "sigterm_mid_transfer_loses_nothing: echo stopped {took:?} after SIGTERM \
         (clients still running then: {still_sending}); {s:?}"
    );
}
