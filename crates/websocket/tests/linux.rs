//! Privileged tests: `ws-echo --tls-cert --tls-key` (wss://) on Rusty's stack over a TAP
//! and on the kernel backend, inside a network namespace the test creates, against
//! Python's `websockets` client (Debian: python3-websockets) trusting the test's
//! authority: text and binary messages of many sizes come back byte-exact. The
//! certificates are made at test time (`TestNet::make_pki`). And SIGHUP rereading the
//! certificate files (the check `rusty_testnet::reload` shares with httpd and echo).
//! Skips with a printed reason when not root (or a tool is missing), and fails instead
//! under `RUSTY_REQUIRE_PRIVILEGED=1`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rusty_testnet::reload::{live_copies, Reload, Speak};
use rusty_testnet::{Proc, TestNet};

const WS_ECHO: &str = env!("CARGO_BIN_EXE_ws-echo");
const PORT: &str = "9443";
/// The name the server's certificate is for, besides its address.
const NAME: &str = "rusty.test";

/// The client: `HOST PORT CA NAME`. Opens wss://HOST:PORT/ (verifying the certificate
/// for NAME), sends text and binary messages of many sizes (empty, frame length
/// boundaries, 1 MiB, non-ASCII text) and checks each echo's type and bytes; prints
/// `WSS ok texts=T binaries=B version=TLSv1.x` or fails.
const CLIENT_PY: &str = r#"
import asyncio, os, ssl, sys
import websockets

host, port, ca, name = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)

async def echo(ws, msg):
    await asyncio.wait_for(ws.send(msg), 15)
    got = await asyncio.wait_for(ws.recv(), 15)
    if type(got) is not type(msg) or got != msg:
        raise SystemExit(f"echo of a {type(msg).__name__} of {len(msg)} differs: {len(got)}")

async def main():
    uri = f"wss://{host}:{port}/"
    async with websockets.connect(uri, ssl=ctx, server_hostname=name, max_size=None,
                                  compression=None, open_timeout=10) as ws:
        texts = ["", "hello", "h\u00e9llo w\u00f6rld \u2713 \U0001F980", "x" * 125,
                 "y" * 126, "z" * 65536, "\u00e9" * 40000]
        binaries = [b"", b"\x00", bytes(range(256)) * 3, os.urandom(65535),
                    os.urandom(65536), os.urandom(1 << 20)]
        for t in texts:
            await echo(ws, t)
        for b in binaries:
            await echo(ws, b)
        version = ws.transport.get_extra_info("ssl_object").version()
        print(f"WSS ok texts={len(texts)} binaries={len(binaries)} version={version}",
              flush=True)

asyncio.run(main())
"#;

/// The namespace, and a Python that imports `websockets`.
fn setup(test: &str) -> Option<(TestNet, PathBuf)> {
    let tools = rusty_testnet::privileged(test, &[])?;
    let python = rusty_testnet::python_importing(test, "websockets", "python3-websockets")?;
    Some((TestNet::new(test, tools), python))
}

/// ws-echo's TLS flags.
fn tls_flags(chain: &Path, key: &Path) -> [String; 4] {
    let d = |p: &Path| p.display().to_string();
    ["--tls-cert".into(), d(chain), "--tls-key".into(), d(key)]
}

/// Run the client against `host` (verifying the certificate for `name`), stop
/// ws-echo, and check both.
fn check(net: &mut TestNet, python: &Path, ws_echo: Proc, host: &str, ca: &Path, name: &str) {
    let script = net.write("client.py", CLIENT_PY).display().to_string();
    let ca = ca.display().to_string();
    let (ok, out) = net.ns_quick(python, &[&script, host, PORT, &ca, name]);
    if !ok || !out.contains("WSS ok texts=7 binaries=6 version=TLSv1.3") {
        net.fail(&format!("the wss:// client failed:\n{out}"));
    }
    net.sigterm(ws_echo);
    let status = net.wait_ok(ws_echo, Duration::from_secs(15));
    let log = net.log(ws_echo);
    if !status.success() || !log.contains("tls total: handshakes=1 ") {
        net.fail(&format!("ws-echo exited with {status}; its log:\n{log}"));
    }
}

/// 1. wss:// on Rusty's stack over a TAP, the client verifying the certificate for the
///    server's address.
#[test]
fn wss_echo_on_tap() {
    let Some((mut net, python)) = setup("wss_echo_on_tap") else {
        return;
    };
    let host = net.stack_ip();
    let pki = net.make_pki(&[NAME, &host]);
    let ws_echo = spawn_on_tap(&mut net, &pki.chain, &pki.key);
    check(&mut net, &python, ws_echo, &host, &pki.ca, &host);
}

/// ws-echo serving wss:// with `cert` and `key` on Rusty's stack over a new TAP, one
/// worker; its process once the TAP is attached and moved into the namespace.
fn spawn_on_tap(net: &mut TestNet, cert: &Path, key: &Path) -> Proc {
    let tap = net.create_tap();
    let mut cmd = Command::new(WS_ECHO);
    cmd.args([
        PORT,
        "1",
        &format!("tap:{tap}"),
        &net.stack_addresses(),
        "1",
    ])
    .args(["--oversubscribe", "--grace", "1"])
    .args(tls_flags(cert, key));
    let ws_echo = net.spawn("ws-echo", cmd);
    net.move_tap_when_attached(&tap, 1, ws_echo);
    ws_echo
}

/// 2. The same on the kernel backend inside the namespace, on 127.0.0.1, the client
///    verifying the certificate for [`NAME`] (sent as SNI).
#[test]
fn wss_echo_on_the_kernel_backend() {
    let Some((mut net, python)) = setup("wss_echo_on_the_kernel_backend") else {
        return;
    };
    let host = "127.0.0.1";
    let pki = net.make_pki(&[NAME, host]);
    let mut cmd = net.ns_command(WS_ECHO);
    cmd.args([
        PORT,
        "1",
        "kernel",
        host,
        "2",
        "--oversubscribe",
        "--grace",
        "1",
    ])
    .args(tls_flags(&pki.chain, &pki.key));
    let ws_echo = net.spawn("ws-echo", cmd);
    net.wait_listening(PORT.parse().expect("port"), ws_echo);
    check(&mut net, &python, ws_echo, host, &pki.ca, NAME);
}

/// 3. SIGHUP rereads the certificate files (ws-echo on Rusty's stack over a TAP): a new
///    wss:// connection gets the new certificate while one opened before goes on echoing
///    with the old; a key that cannot be used is logged and the certificate kept.
#[test]
fn wss_reloads_certificates_on_sighup() {
    let test = "wss_reloads_certificates_on_sighup";
    let Some(tools) = rusty_testnet::privileged(test, &["python3"]) else {
        return;
    };
    let mut net = TestNet::new(test, tools);
    let host = net.stack_ip();
    let pki = net.make_pki(&[NAME, &host]);
    let (cert, key) = live_copies(&net.dir, &pki.chain, &pki.key);
    let ws_echo = spawn_on_tap(&mut net, &cert, &key);
    let python = net.tools.get("python3").to_path_buf();
    let (chain2, key2, fp2) = &pki.second;
    net.check_sighup_reload(
        ws_echo,
        &Reload {
            python: &python,
            speak: Speak::WebSocket,
            host: &host,
            port: PORT,
            ca: &pki.ca,
            name: NAME,
            live: (&cert, &key),
            old: &pki.fingerprint,
            new: (chain2, key2, fp2),
        },
    );
    net.sigterm(ws_echo);
    let status = net.wait_ok(ws_echo, Duration::from_secs(15));
    let log = net.log(ws_echo);
    if !status.success() || !log.contains("tls total: handshakes=3 ") {
        net.fail(&format!(
            "ws-echo exited with {status}, or not 3 TLS handshakes"
        ));
    }
}
