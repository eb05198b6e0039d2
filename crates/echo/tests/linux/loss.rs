//! Loss in both directions: the kernel peer behind a bridge that drops TCP packets each
//! way, against `echo` and `echo --discard` on TAP.

use super::*;

/// 9. Loss in both directions, one segment at a time: the kernel peer sits behind a
///    bridge that drops 3% of the TCP packets towards it and, independently, 3% of
///    those from it, with no super-packets on either side (Rusty `--no-tso`, the peer
///    `gso_max_segs 1`); 8 connections each echo 2 MB byte-exact (SHA-256) in time.
#[test]
fn echo_on_tap_with_loss_both_ways() {
    let Some(mut net) = setup("echo_on_tap_with_loss_both_ways", &["python3", "nft"]) else {
        return;
    };
    let (echo, tap) = start_tap_echo_on(&mut net, 2, &["--grace", "2", "--no-tso"]);
    net.bridge_peer(&tap);
    net.drop_bridged_percent(3);
    let args = [
        "--conns",
        "8",
        "--max",
        "2000000",
        "--big",
        "8",
        "--seed",
        "9",
        "--deadline",
        "120",
    ];
    let host = net.stack_ip();
    echo_through_lossy_bridge(&mut net, echo, &host, 8, &args, Duration::from_secs(130));
}

/// 10. `echo --discard` on TAP with the kernel peer behind the same lossy bridge (3%
///     each way): 6 connections send 1 MB each and half-close; each gets EOF with
///     nothing before it, and on SIGTERM the server reports exactly the bytes sent,
///     with no failed connection.
#[test]
fn discard_on_tap_with_loss_both_ways() {
    let Some(mut net) = setup("discard_on_tap_with_loss_both_ways", &["python3", "nft"]) else {
        return;
    };
    let (server, tap) = start_tap_echo_on(&mut net, 2, &["--grace", "2", "--discard"]);
    net.bridge_peer(&tap);
    net.drop_bridged_percent(3);
    let script = net.write("discard.py", DISCARD_PY);
    let python = net.tools.get("python3").to_path_buf();
    let (conns, size) = (6u64, 1_000_000u64);
    let args = [
        script.display().to_string(),
        net.stack_ip(),
        PORT.to_string(),
        conns.to_string(),
        size.to_string(),
        "90".to_string(),
    ];
    let clients = net.spawn_in_peer("discard.py", python, &args);
    let status = net.wait_ok(clients, Duration::from_secs(120));
    if !status.success() {
        net.fail(&format!("discard.py exited with {status}"));
    }
    let (to_peer, from_peer) = net.dropped_bridged();
    stop(&mut net, server, Duration::from_secs(5));
    let log = net.log(server);
    let total = log
        .lines()
        .find_map(|l| l.strip_prefix("discard total: "))
        .unwrap_or_else(|| net.fail("echo --discard printed no total"));
    let want = format!("{} bytes discarded on ", conns * size);
    if !total.starts_with(&want) || !total.ends_with("(0 failed)") {
        net.fail(&format!(
            "discard total `{total}`; wanted `{want}… (0 failed)`"
        ));
    }
    eprintln!(
        "discard_on_tap_with_loss_both_ways: the bridge dropped {to_peer} packets from \
         Rusty and {from_peer} to it; {total}"
    );
}
