//! HTTPS: httpd with `--tls-cert` and `--tls-key` on Rusty's stack over a TAP (TLS on
//! `--tls-port` beside plain HTTP) and on the kernel backend inside the test's namespace
//! (TLS on the port given), against curl, `openssl s_client` and Python's `ssl`. The
//! test's authority and certificates are made with the `openssl` command at test time.

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{ns_output, setup, start_tap_httpd, stop, PORT};
use crate::common::{counter, make_site, HTTPD};
use rusty_testnet::reload::{live_copies, Reload, Speak};
use rusty_testnet::{Proc, TestNet};

const TLS_PORT: &str = "443";
/// The name the default certificate is for (besides the addresses).
const NAME: &str = "rusty.test";
/// The name of the certificate chosen by SNI.
const OTHER: &str = "other.test";
const TOOLS: &[&str] = &["curl", "python3", "openssl", "sh"];

/// Everything `openssl` makes for one test, in its scratch directory.
struct Pki {
    ca: PathBuf,
    /// Chain and key for [`NAME`] and the addresses, CN `rusty-one` (ECDSA P-256).
    one: (PathBuf, PathBuf),
    /// The same names, CN `rusty-two` (RSA): what a reload swaps in.
    two: (PathBuf, PathBuf),
    /// For [`OTHER`], CN `rusty-other`.
    other: (PathBuf, PathBuf),
}

const OPENSSL_CNF: &str = "[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[leaf]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid,issuer
";

/// Run `openssl args` (no network), failing the test if it fails.
fn openssl(net: &TestNet, args: &[&str]) -> String {
    let (ok, out) = rusty_testnet::quick(net.tools.get("openssl"), args);
    if !ok {
        net.fail(&format!("openssl {}: {out}", args.join(" ")));
    }
    out
}

/// A test authority and three certificates it signs; the default ones name [`NAME`]
/// and `ips`.
fn make_pki(net: &TestNet, ips: &[&str]) -> Pki {
    let dir = net.dir.join("pki");
    fs::create_dir_all(&dir).expect("pki directory");
    let p = |name: &str| dir.join(name).display().to_string();
    let sans: Vec<String> = ips.iter().map(|ip| format!("IP:{ip}")).collect();
    let cnf = format!(
        "{OPENSSL_CNF}subjectAltName = DNS:{NAME},{}\n[other]\nbasicConstraints = CA:FALSE\n\
         subjectAltName = DNS:{OTHER}\nauthorityKeyIdentifier = keyid,issuer\n",
        sans.join(",")
    );
    fs::write(dir.join("openssl.cnf"), cnf).expect("openssl.cnf");
    let cnf = p("openssl.cnf");
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let (ca, ca_key) = (p("ca.pem"), p("ca.key"));
    let mut args = vec!["req", "-x509", "-config", &cnf, "-extensions", "ca"];
    args.extend_from_slice(&ec);
    args.extend(["-keyout", &ca_key, "-out", &ca, "-days", "2"]);
    args.extend(["-subj", "/CN=Rusty test authority"]);
    openssl(net, &args);
    let leaf = |name: &str, cn: &str, ext: &str, rsa: bool| {
        let (cert, key, csr) = (
            p(&format!("{name}.pem")),
            p(&format!("{name}.key")),
            p("csr"),
        );
        let subj = format!("/CN={cn}");
        let mut args = vec!["req", "-new", "-config", &cnf, "-subj", &subj];
        if rsa {
            args.extend(["-newkey", "rsa:2048", "-nodes"]);
        } else {
            args.extend_from_slice(&ec);
        }
        args.extend(["-keyout", &key, "-out", &csr]);
        openssl(net, &args);
        openssl(
            net,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &ca,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &cnf,
                "-extensions",
                ext,
                "-out",
                &cert,
            ],
        );
        (PathBuf::from(cert), PathBuf::from(key))
    };
    Pki {
        one: leaf("one", "rusty-one", "leaf", false),
        two: leaf("two", "rusty-two", "leaf", true),
        other: leaf("other", "rusty-other", "other", false),
        ca: PathBuf::from(ca),
    }
}

/// SHA-256 of a certificate's DER, hex: what the Python client prints for the one it got.
fn fingerprint(net: &TestNet, cert: &Path) -> String {
    let der = net.dir.join("pki/fingerprint.der");
    let (c, d) = (cert.display().to_string(), der.display().to_string());
    openssl(net, &["x509", "-in", &c, "-outform", "DER", "-out", &d]);
    let bytes = fs::read(&der).expect("DER certificate");
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// httpd's TLS flags for the default certificate in `cert`, `key`, and [`OTHER`]'s.
fn tls_flags(pki: &Pki, cert: &Path, key: &Path) -> Vec<String> {
    let d = |p: &Path| p.display().to_string();
    let sni = format!("{OTHER}={},{}", d(&pki.other.0), d(&pki.other.1));
    [
        "--tls-cert",
        &d(cert),
        "--tls-key",
        &d(key),
        "--tls-sni",
        &sni,
    ]
    .map(String::from)
    .to_vec()
}

/// The Python client. `get HOST PORT CA NAME`: one GET of /hello.txt on a fresh
/// connection; prints `GET ok=True version=TLSv1.3 alpn=http/1.1 fp=<sha256 of the
/// server's certificate>`. `garbage HOST PORT CA NAME`: 20 connections send bytes that
/// are not TLS while 20 good GETs run; prints `GARBAGE good=20 of 20`. (The reload
/// test's client is `rusty_testnet::reload`'s.)
const CLIENT_PY: &str = r#"
import hashlib, os, socket, ssl, sys, threading

mode, host, port, ca, name = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["http/1.1"])

def connect():
    raw = socket.create_connection((host, port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname=name)

def get(s):
    s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: " + name.encode() + b"\r\n\r\n")
    got = b""
    while not got.endswith(b"Hello from Rusty.\n"):
        b = s.recv(4096)
        if not b:
            break
        got += b
    return got.startswith(b"HTTP/1.1 200 OK\r\n") and got.endswith(b"\r\n\r\nHello from Rusty.\n")

def describe(s, ok):
    fp = hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()
    return f"ok={ok} version={s.version()} alpn={s.selected_alpn_protocol()} fp={fp}"

if mode == "get":
    s = connect()
    print("GET", describe(s, get(s)), flush=True)
elif mode == "garbage":
    junk = [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x16\x03\x01\xff\xff" + b"\x01" * 600,
            b"\x17\x03\x03\x00\x20" + b"\x00" * 32, os.urandom(3000), b"\x16\x03\x01\x00"]
    good = []
    def bad(i):
        try:
            c = socket.create_connection((host, port), timeout=3)
            c.sendall(junk[i % len(junk)])
            c.recv(4096)
            c.close()
        except OSError:
            pass
    def ok():
        try:
            s = connect()
            good.append(get(s))
            s.close()
        except OSError as e:
            print("good client:", repr(e), flush=True)
    threads = [threading.Thread(target=bad, args=(i,)) for i in range(20)]
    threads += [threading.Thread(target=ok) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    print(f"GARBAGE good={sum(good)} of 20", flush=True)
"#;

/// The Python client in the namespace (bounded by 20 s); its output.
fn python(net: &TestNet, host: &str, ca: &Path, args: &[&str]) -> String {
    let script = net.dir.join("client.py");
    if !script.exists() {
        net.write("client.py", CLIENT_PY);
    }
    let (s, c) = (script.display().to_string(), ca.display().to_string());
    let mut all = vec![s.as_str(), args[0], host, TLS_PORT, c.as_str(), NAME];
    all.extend_from_slice(&args[1..]);
    let (ok, out) = net.ns_quick(net.tools.get("python3"), &all);
    if !ok {
        net.fail(&format!("client.py {args:?}: {out}"));
    }
    out
}

/// `openssl s_client` in the namespace asking for /hello.txt with `extra` flags
/// (bounded by 20 s); its output.
fn s_client(net: &TestNet, host: &str, ca: &Path, extra: &[&str]) -> String {
    let script =
        "printf 'GET /hello.txt HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n' \
                  | exec \"$0\" s_client -ign_eof \"$@\"";
    let connect = format!("{host}:{TLS_PORT}");
    let openssl = net.tools.get("openssl").display().to_string();
    let ca = ca.display().to_string();
    let mut args = vec!["-c", script, &openssl, "-connect", &connect, "-CAfile", &ca];
    args.extend_from_slice(extra);
    let (_, out) = net.ns_quick(net.tools.get("sh"), &args);
    if !out.contains("Verify return code: 0 (ok)") || !out.contains("Hello from Rusty.") {
        net.fail(&format!("s_client {extra:?}:\n{out}"));
    }
    out
}

/// Fail unless `text` contains every one of `want`.
fn expect(net: &TestNet, what: &str, text: &str, want: &[&str]) {
    if let Some(w) = want.iter().find(|w| !text.contains(**w)) {
        net.fail(&format!("{what}: no {w:?} in:\n{text}"));
    }
}

/// curl in the namespace trusting the test's authority; (success, body, stderr).
fn curl(net: &TestNet, ca: &Path, args: &[&str]) -> (bool, Vec<u8>, String) {
    let ca = ca.display().to_string();
    let mut all = vec!["--max-time", "60", "-sS", "-g", "--cacert", &ca];
    all.extend_from_slice(args);
    ns_output(net, net.tools.get("curl"), &all)
}

/// Everything a client should see of httpd's HTTPS at `host`: curl over TLS 1.2 and 1.3,
/// keep-alive, a range and 20 MB byte-exact; `s_client`'s versions, ALPN, SNI and
/// resumption; Python's GET; garbage beside good requests. Then httpd's counters.
fn https_checks(net: &mut TestNet, httpd: Proc, host: &str, root: &Path, pki: &Pki) {
    let url = |path: &str| format!("https://{NAME}:{TLS_PORT}{path}");
    let resolve = format!("{NAME}:{TLS_PORT}:{host}");
    let fetch = |args: &[&str]| {
        let mut all = vec!["--resolve", resolve.as_str()];
        all.extend_from_slice(args);
        curl(net, &pki.ca, &all)
    };
    let hello = url("/hello.txt");
    for (flags, version) in [
        (&["--tlsv1.2", "--tls-max", "1.2"][..], "TLSv1.2"),
        (&["--tlsv1.3"][..], "TLSv1.3"),
    ] {
        let (ok, body, err) = fetch(&[flags, &["-v", &hello]].concat());
        if !ok || body != b"Hello from Rusty.\n" {
            net.fail(&format!(
                "curl {flags:?}: {}\n{err}",
                String::from_utf8_lossy(&body)
            ));
        }
        let using = format!("SSL connection using {version}");
        expect(
            net,
            "curl",
            &err,
            &[&using, "ALPN: server accepted http/1.1"],
        );
    }
    let (ok, body, err) = fetch(&["-v", &hello, &url("/style.css")]);
    let both = [&b"Hello from Rusty.\n"[..], b"body { color: #b7410e }\n"].concat();
    if !ok || body != both {
        net.fail(&format!(
            "curl, two URLs: {}\n{err}",
            String::from_utf8_lossy(&body)
        ));
    }
    expect(
        net,
        "curl keep-alive",
        &err,
        &["Re-using existing connection"],
    );
    let data = fs::read(root.join("data.bin")).expect("data.bin");
    let (ok, body, err) = fetch(&["-r", "1000-60999", &url("/data.bin")]);
    if !ok || body != data[1000..61000] {
        net.fail(&format!(
            "range: {} bytes, not the 60000 asked for\n{err}",
            body.len()
        ));
    }
    let big = fs::read(root.join("big.bin")).expect("big.bin");
    let (ok, body, err) = fetch(&[&url("/big.bin")]);
    if !ok || body != big {
        net.fail(&format!(
            "big.bin: {} of {} bytes, or not the same\n{err}",
            body.len(),
            big.len()
        ));
    }

    let out = s_client(
        net,
        host,
        &pki.ca,
        &["-alpn", "http/1.1", "-servername", NAME],
    );
    expect(
        net,
        "s_client ALPN",
        &out,
        &["ALPN protocol: http/1.1", "subject=CN = rusty-one"],
    );
    let out = s_client(net, host, &pki.ca, &["-servername", OTHER]);
    expect(net, "s_client SNI", &out, &["subject=CN = rusty-other"]);
    let session = net.dir.join("session.pem").display().to_string();
    for (flag, version) in [("-tls1_2", "TLSv1.2"), ("-tls1_3", "TLSv1.3")] {
        let _ = fs::remove_file(&session);
        let common = [flag, "-servername", NAME];
        let out = s_client(
            net,
            host,
            &pki.ca,
            &[&common[..], &["-sess_out", &session]].concat(),
        );
        expect(net, "s_client", &out, &[&format!("New, {version}")]);
        let out = s_client(
            net,
            host,
            &pki.ca,
            &[&common[..], &["-sess_in", &session]].concat(),
        );
        expect(
            net,
            "s_client resumption",
            &out,
            &[&format!("Reused, {version}")],
        );
    }

    let out = python(net, host, &pki.ca, &["get"]);
    expect(
        net,
        "Python",
        &out,
        &["GET ok=True version=TLSv1.3 alpn=http/1.1"],
    );
    let out = python(net, host, &pki.ca, &["garbage"]);
    expect(
        net,
        "garbage beside good requests",
        &out,
        &["GARBAGE good=20 of 20"],
    );

    let log = stop(net, httpd);
    let tls = |name: &str| counter(&log, "tls", name);
    if tls("handshakes") < 30 || tls("resumed") < 2 || tls("records_rejected") == 0 {
        net.fail("TLS counters: too few handshakes, resumptions or rejected records");
    }
    if counter(&log, "httpd", "206") == 0 {
        net.fail("no 206 counted");
    }
}

/// 1. HTTPS on Rusty's stack over a TAP, on `--tls-port` beside plain HTTP on the port
///    given: every client check of [`https_checks`], and plain HTTP still served.
#[test]
fn https_on_tap() {
    let Some(mut net) = setup("https_on_tap", TOOLS) else {
        return;
    };
    let root = make_site(&net.dir, Some(20 << 20));
    let host = net.stack_ip();
    let pki = make_pki(&net, &[&host]);
    let mut extra = tls_flags(&pki, &pki.one.0, &pki.one.1);
    extra.extend(["--tls-port".into(), TLS_PORT.into()]);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let httpd = start_tap_httpd(&mut net, &root, &extra);
    let (ok, body, err) = curl(&net, &pki.ca, &[&format!("http://{host}:{PORT}/hello.txt")]);
    if !ok || body != b"Hello from Rusty.\n" {
        net.fail(&format!("plain HTTP beside HTTPS: {err}"));
    }
    https_checks(&mut net, httpd, &host, &root, &pki);
}

/// 2. The same on the kernel backend, inside the test's namespace on 127.0.0.1, with TLS
///    on the port given.
#[test]
fn https_on_the_kernel_backend() {
    let Some(mut net) = setup("https_on_the_kernel_backend", TOOLS) else {
        return;
    };
    let root = make_site(&net.dir, Some(20 << 20));
    let host = "127.0.0.1";
    let pki = make_pki(&net, &[host]);
    let mut cmd = net.ns_command(HTTPD);
    cmd.arg(TLS_PORT).arg(&root);
    cmd.args(["1", "kernel", host, "2", "--oversubscribe", "--grace", "1"]);
    cmd.args(tls_flags(&pki, &pki.one.0, &pki.one.1));
    let httpd = net.spawn("httpd", cmd);
    net.wait_listening(443, httpd);
    https_checks(&mut net, httpd, host, &root, &pki);
}

/// 3. SIGHUP rereads the certificate files: a new connection gets the new certificate
///    while a keep-alive connection opened before it goes on with the old one; files
///    that cannot be used are logged and the certificate in use is kept.
#[test]
fn https_reloads_certificates_on_sighup() {
    let Some(mut net) = setup("https_reloads_certificates_on_sighup", TOOLS) else {
        return;
    };
    let root = make_site(&net.dir, None);
    let host = net.stack_ip();
    let pki = make_pki(&net, &[&host]);
    let (cert, key) = live_copies(&net.dir, &pki.one.0, &pki.one.1);
    let mut extra = tls_flags(&pki, &cert, &key);
    extra.extend(["--tls-port".into(), TLS_PORT.into()]);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let httpd = start_tap_httpd(&mut net, &root, &extra);
    let (one, two) = (fingerprint(&net, &pki.one.0), fingerprint(&net, &pki.two.0));
    let python3 = net.tools.get("python3").to_path_buf();
    net.check_sighup_reload(
        httpd,
        &Reload {
            python: &python3,
            speak: Speak::Http,
            host: &host,
            port: TLS_PORT,
            ca: &pki.ca,
            name: NAME,
            live: (&cert, &key),
            old: &one,
            new: (&pki.two.0, &pki.two.1, &two),
        },
    );
    let log = stop(&mut net, httpd);
    if counter(&log, "tls", "handshakes") < 3 {
        net.fail("fewer than 3 TLS handshakes counted");
    }
}
