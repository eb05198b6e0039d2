//! TLS: `echo --tls-cert --tls-key` on the kernel backend inside the namespace (on
//! 127.0.0.1), driven by `echo-load --tls-ca --tls-name` from kernel sockets in the same
//! namespace, ping-pong and streaming: every echoed byte verified; and SIGHUP rereading
//! the certificate files (the check `rusty_testnet::reload` shares with httpd and
//! ws-echo).

use super::*;
use rusty_testnet::reload::{live_copies, Reload, Speak};

/// The name the certificate is for; the client proves it instead of the address.
const NAME: &str = "rusty.test";

/// 9. echo-load over TLS against echo over TLS on the kernel backend completes with
///    every byte echoed, in both modes, and echo counts the handshakes.
#[test]
fn echo_load_over_tls_on_the_kernel_backend() {
    let Some(mut net) = setup("echo_load_over_tls_on_the_kernel_backend", &[]) else {
        return;
    };
    let pki = net.make_pki(&[NAME, "127.0.0.1"]);
    let d = |p: &std::path::Path| p.display().to_string();
    let mut cmd = net.ns_command(ECHO);
    cmd.args([PORT, "1", "kernel", "127.0.0.1", "2", "--oversubscribe"])
        .args([
            "--grace",
            "2",
            "--tls-cert",
            &d(&pki.chain),
            "--tls-key",
            &d(&pki.key),
        ]);
    let echo = net.spawn("echo (TLS)", cmd);
    net.wait_listening(7, echo);
    for mode in ["ping-pong", "stream"] {
        let args = [
            &format!("127.0.0.1:{PORT}"),
            "--mode",
            mode,
            "--duration",
            "2",
            "--connections",
            "20",
            "--size",
            "3000",
            "--tls-ca",
            &d(&pki.ca),
            "--tls-name",
            NAME,
        ]
        .map(String::from);
        let load = net.spawn_in_ns("echo-load (TLS)", ECHO_LOAD, &args);
        let status = net.wait_ok(load, Duration::from_secs(30));
        let log = net.log(load);
        if !status.success() || !log.contains("failed connections 0   byte mismatches 0") {
            net.fail(&format!("echo-load --mode {mode} exited with {status}"));
        }
    }
    stop(&mut net, echo, Duration::from_secs(5));
    let log = net.log(echo);
    let handshakes = log
        .lines()
        .find_map(|l| l.strip_prefix("tls total: handshakes="))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok());
    if handshakes != Some(40) {
        net.fail(&format!(
            "echo counted {handshakes:?} TLS handshakes, not 40"
        ));
    }
}

/// 10. SIGHUP rereads echo's certificate files (kernel backend in the namespace): a new
///     connection gets the new certificate while one opened before goes on echoing with
///     the old; a key that cannot be used is logged and the certificate kept.
#[test]
fn echo_reloads_certificates_on_sighup() {
    let Some(mut net) = setup("echo_reloads_certificates_on_sighup", &["python3"]) else {
        return;
    };
    let host = "127.0.0.1";
    let pki = net.make_pki(&[NAME, host]);
    let (cert, key) = live_copies(&net.dir, &pki.chain, &pki.key);
    let d = |p: &std::path::Path| p.display().to_string();
    let mut cmd = net.ns_command(ECHO);
    cmd.args([PORT, "1", "kernel", host, "2", "--oversubscribe"])
        .args([
            "--grace",
            "2",
            "--tls-cert",
            &d(&cert),
            "--tls-key",
            &d(&key),
        ]);
    let echo = net.spawn("echo (TLS)", cmd);
    net.wait_listening(7, echo);
    let python = net.tools.get("python3").to_path_buf();
    let (chain2, key2, fp2) = &pki.second;
    net.check_sighup_reload(
        echo,
        &Reload {
            python: &python,
            speak: Speak::Echo,
            host,
            port: PORT,
            ca: &pki.ca,
            name: NAME,
            live: (&cert, &key),
            old: &pki.fingerprint,
            new: (chain2, key2, fp2),
        },
    );
    stop(&mut net, echo, Duration::from_secs(5));
    if !net.log(echo).contains("tls total: handshakes=3 ") {
        net.fail("echo did not count 3 TLS handshakes");
    }
}
