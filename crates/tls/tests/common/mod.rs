//! What the TLS tests share: certificates made at test time, an echo server, a client
//! that sends a payload and checks the echo, and a raw client that speaks TLS by hand
//! (or not at all) to play a hostile or careless peer.

#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use rand_chacha::rand_core::SeedableRng;
use rcgen::{BasicConstraints, Certificate, CertificateParams, IsCa, KeyPair};
use rsa::pkcs8::{EncodePrivateKey, LineEnding};
use rusty_stack::{CloseReason, Conn, ConnId, ConnectError, Handler, Opener};
use rusty_tls::{CertKey, TlsInfo};

/// An RSA key, made once per test binary (ring cannot make RSA keys; rcgen signs with
/// it through ring).
fn rsa_key() -> KeyPair {
    static PEM: OnceLock<String> = OnceLock::new();
    let pem = PEM.get_or_init(|| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let key = rsa::RsaPrivateKey::new(&mut rng, 2048).unwrap();
        key.to_pkcs8_pem(LineEnding::LF).unwrap().to_string()
    });
    KeyPair::from_pkcs8_pem_and_sign_algo(pem, &rcgen::PKCS_RSA_SHA256).unwrap()
}

/// A certificate authority (ECDSA P-256) and the leaves it signs.
pub struct Pki {
    pub ca_pem: String,
    ca: Certificate,
    ca_key: KeyPair,
}

/// Which kind of key a leaf has.
#[derive(Clone, Copy)]
pub enum Key {
    Rsa,
    Ecdsa,
}

impl Pki {
    pub fn new() -> Pki {
        let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).unwrap();
        Pki {
            ca_pem: ca.pem(),
            ca,
            ca_key,
        }
    }

    /// A leaf for `names`, as PEM (chain, key).
    pub fn leaf_pem(&self, names: &[&str], key: Key) -> (String, String) {
        let key = match key {
            Key::Rsa => rsa_key(),
            Key::Ecdsa => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
        };
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.ca, &self.ca_key)
            .unwrap();
        (cert.pem() + &self.ca.pem(), key.serialize_pem())
    }

    /// A leaf for `names`.
    pub fn leaf(&self, names: &[&str], key: Key) -> CertKey {
        let (chain, key) = self.leaf_pem(names, key);
        CertKey::from_pem(chain.as_bytes(), key.as_bytes()).unwrap()
    }
}

/// Deterministic bytes.
pub fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// Echoes what it receives; closes once the peer closed and everything was echoed.
#[derive(Default)]
pub struct Echo {
    pub closed: Vec<CloseReason>,
    pub received: usize,
    pub peer_closed: usize,
    /// What each connection's layer told at `connected`.
    pub infos: Vec<Option<TlsInfo>>,
}

/// An echo connection's state.
#[derive(Default)]
pub struct EchoConn {
    behind: bool,
    eof: bool,
}

impl Handler for Echo {
    type Conn = EchoConn;
    fn accept(&mut self, _: SocketAddr, _: SocketAddr) -> Option<EchoConn> {
        Some(EchoConn::default())
    }
    fn connected(&mut self, conn: &mut Conn<'_, EchoConn>) {
        assert!(conn.layer_info::<u32>().is_none(), "no layer defines a u32");
        self.infos.push(conn.layer_info::<TlsInfo>().cloned());
    }
    fn data(&mut self, conn: &mut Conn<'_, EchoConn>, data: &[u8]) -> usize {
        let n = conn.send(data).unwrap_or(0);
        self.received += n;
        conn.state().behind = n < data.len();
        if !conn.state().behind && conn.state().eof {
            conn.close();
        }
        n
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, EchoConn>) {
        self.peer_closed += 1;
        conn.state().eof = true;
        if !conn.state().behind {
            conn.close();
        }
    }
    fn closed(&mut self, _: &mut Opener<'_, EchoConn>, _: EchoConn, reason: CloseReason) {
        self.closed.push(reason);
    }
}

/// Sends `payload`, half-closes, and collects the echo, taking at most `chunk` bytes
/// per offer; then opens `again` more connections one after the other.
pub struct Sender {
    pub payload: Arc<Vec<u8>>,
    pub chunk: usize,
    pub again: usize,
    pub server: SocketAddr,
    pub connected: usize,
    pub timers: usize,
    pub got: Vec<Vec<u8>>,
    pub closed: Vec<CloseReason>,
    /// Abort right after connecting instead.
    pub abort: bool,
    /// What each connection's layer told at `connected`.
    pub infos: Vec<Option<TlsInfo>>,
    pub failed: Vec<ConnectError>,
}

impl Sender {
    pub fn new(payload: Vec<u8>, server: SocketAddr) -> Sender {
        Sender {
            payload: Arc::new(payload),
            chunk: 1000,
            again: 0,
            server,
            connected: 0,
            timers: 0,
            got: Vec::new(),
            closed: Vec::new(),
            abort: false,
            infos: Vec::new(),
            failed: Vec::new(),
        }
    }

    fn pump(&mut self, conn: &mut Conn<'_, usize>) {
        let sent = *conn.state();
        if sent == self.payload.len() {
            return;
        }
        let n = conn.send(&self.payload[sent..]).unwrap_or(0);
        *conn.state() += n;
        self.finish(conn);
    }

    /// Half-close once everything was sent and the timer fired.
    fn finish(&mut self, conn: &mut Conn<'_, usize>) {
        if *conn.state() == self.payload.len() && self.timers == self.connected {
            conn.shutdown_write();
        }
    }
}

impl Handler for Sender {
    /// Bytes sent.
    type Conn = usize;
    fn accept(&mut self, _: SocketAddr, _: SocketAddr) -> Option<usize> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, usize>) {
        self.connected += 1;
        self.got.push(Vec::new());
        self.infos.push(conn.layer_info::<TlsInfo>().cloned());
        if self.abort {
            conn.abort();
            return;
        }
        conn.set_timer(Some(std::time::Duration::from_millis(1)));
        self.pump(conn);
    }
    fn writable(&mut self, conn: &mut Conn<'_, usize>) {
        self.pump(conn);
    }
    fn timer(&mut self, conn: &mut Conn<'_, usize>) {
        self.timers += 1;
        self.finish(conn);
    }
    fn data(&mut self, _: &mut Conn<'_, usize>, data: &[u8]) -> usize {
        let n = data.len().min(self.chunk);
        self.got.last_mut().unwrap().extend_from_slice(&data[..n]);
        n
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, usize>) {
        conn.close();
    }
    fn closed(&mut self, opener: &mut Opener<'_, usize>, _: usize, reason: CloseReason) {
        self.closed.push(reason);
        if self.again > 0 {
            self.again -= 1;
            opener.connect(self.server, 0);
        }
    }
    fn connect_failed(
        &mut self,
        _: &mut Opener<'_, usize>,
        _: SocketAddr,
        _: usize,
        e: ConnectError,
    ) {
        self.failed.push(e);
    }
}

/// What a [`Raw`] client does.
pub enum Script {
    /// Send these bytes instead of a ClientHello.
    Garbage(Vec<u8>),
    /// Send nothing at all.
    Silent,
    /// Handshake (with `config`), send "hello" and close TCP without close_notify.
    HelloThenFin(Arc<rustls::ClientConfig>),
    /// Handshake, then send these raw bytes.
    HandshakeThen(Arc<rustls::ClientConfig>, Vec<u8>),
}

/// A plain TCP client that plays a hostile or careless TLS peer.
pub struct Raw {
    pub script: Script,
    pub received: Vec<u8>,
    pub closed: Vec<CloseReason>,
    pub handshakes: usize,
}

impl Raw {
    pub fn new(script: Script) -> Raw {
        Raw {
            script,
            received: Vec::new(),
            closed: Vec::new(),
            handshakes: 0,
        }
    }
}

fn flush(tls: &mut rustls::ClientConnection, conn: &mut Conn<'_, RawConn>) {
    let mut out = Vec::new();
    while tls.wants_write() {
        tls.write_tls(&mut out).unwrap();
    }
    assert_eq!(conn.send(&out).unwrap(), out.len());
}

/// A raw connection's TLS client, if it speaks TLS.
pub type RawConn = Option<Box<rustls::ClientConnection>>;

impl Handler for Raw {
    type Conn = RawConn;
    fn accept(&mut self, _: SocketAddr, _: SocketAddr) -> Option<RawConn> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, RawConn>) {
        match &self.script {
            Script::Garbage(bytes) => {
                conn.send(bytes).unwrap();
            }
            Script::Silent => {}
            Script::HelloThenFin(config) | Script::HandshakeThen(config, _) => {
                let name = "server.test".try_into().unwrap();
                let mut tls = rustls::ClientConnection::new(config.clone(), name).unwrap();
                flush(&mut tls, conn);
                *conn.state() = Some(Box::new(tls));
            }
        }
    }
    fn data(&mut self, conn: &mut Conn<'_, RawConn>, data: &[u8]) -> usize {
        let Some(mut tls) = conn.state().take() else {
            self.received.extend_from_slice(data);
            return data.len();
        };
        let was_handshaking = tls.is_handshaking();
        tls.read_tls(&mut &data[..]).unwrap();
        if tls.process_new_packets().is_err() {
            flush(&mut tls, conn);
            conn.close();
            return data.len();
        }
        let mut plain = Vec::new();
        let _ = tls.reader().read_to_end(&mut plain);
        self.received.extend_from_slice(&plain);
        flush(&mut tls, conn);
        if was_handshaking && !tls.is_handshaking() {
            self.handshakes += 1;
            match &self.script {
                Script::HelloThenFin(_) => {
                    tls.writer().write_all(b"hello").unwrap();
                    flush(&mut tls, conn);
                    conn.close();
                }
                Script::HandshakeThen(_, bytes) => {
                    conn.send(bytes).unwrap();
                }
                _ => {}
            }
        }
        *conn.state() = Some(tls);
        data.len()
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, RawConn>) {
        conn.close();
    }
    fn closed(&mut self, _: &mut Opener<'_, RawConn>, _: RawConn, reason: CloseReason) {
        self.closed.push(reason);
    }
}

/// A rustls client configuration trusting `ca_pem`, for [`Raw`] clients.
pub fn raw_client_config(
    ca_pem: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// Takes received bytes only while its budget lasts (it pauses by taking none once it
/// is spent), so that a test can raise the budget and resume.
pub struct Pausing {
    pub budget: usize,
    pub got: Vec<u8>,
    pub id: Option<ConnId>,
    pub closed: Vec<CloseReason>,
}

impl Pausing {
    pub fn new(budget: usize) -> Pausing {
        Pausing {
            budget,
            got: Vec::new(),
            id: None,
            closed: Vec::new(),
        }
    }
}

impl Handler for Pausing {
    type Conn = ();
    fn accept(&mut self, _: SocketAddr, _: SocketAddr) -> Option<()> {
        Some(())
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        self.id = Some(conn.id());
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        let n = data.len().min(self.budget - self.got.len());
        self.got.extend_from_slice(&data[..n]);
        n
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), reason: CloseReason) {
        self.closed.push(reason);
    }
}

/// Sends its payload once connected, then does nothing more: no close, so that the
/// peer gets nothing after the payload.
pub struct SendOnce {
    pub payload: Vec<u8>,
    pub sent: usize,
}

impl Handler for SendOnce {
    type Conn = ();
    fn accept(&mut self, _: SocketAddr, _: SocketAddr) -> Option<()> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        self.writable(conn);
    }
    fn writable(&mut self, conn: &mut Conn<'_, ()>) {
        self.sent += conn.send(&self.payload[self.sent..]).unwrap_or(0);
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        data.len()
    }
}
