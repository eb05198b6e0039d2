//! The TLS layer's record path: bytes a peer sends, in any chunking, into a
//! [`Tls`] server's connection, driven callback by callback over a fake TCP connection.
//!
//! The first byte chooses the mode. Garbage: the rest is raw bytes from the peer,
//! chunked as the input says. Handshake first: a real rustls client completes the
//! handshake, then the input is a list of operations: the client sends plaintext
//! (encrypted by it, fed in chunks), raw bytes are injected, one of the client's records
//! is fed with a bit flipped, cut short, replayed or dropped, the client sends
//! `close_notify`, TCP's FIN arrives, the timer fires, the application pauses or
//! resumes reading (resumed by `writable` or by the backend's `resume_receive`), or
//! replies.
//!
//! Checked: nothing panics; the layer consumes no more than it is offered and writes
//! no more than TCP's space; the application is never offered more than the layer's
//! bound of plaintext at once; what it receives is always a prefix of what the client
//! encrypted (never garbage, never a record twice), and without a handshake it receives
//! nothing; what the client decrypts is a prefix of what the application sent; and a
//! connection the layer closes on bad input ends for the application with
//! `ProtocolError` (or `Truncated`/`TimedOut` when that is what happened).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::{ClientConfig, RootCertStore};
use rusty_stack::backend::Connection;
use rusty_stack::time::VirtualClock;
use rusty_stack::{CloseReason, Conn, ConnId, Handler, Keepalive, Opener, SendError};
use rusty_tls::{CertKey, Certificates, ServerSettings, Tls, TlsAcceptor, TlsConn};

use crate::input::Input;

/// Most plaintext the layer offers the application at once (its bound on unconsumed
/// plaintext).
const MAX_OFFER: usize = 64 * 1024;
/// TCP's receive buffer: ciphertext the layer leaves unconsumed stays here; past it,
/// the peer's bytes wait (the window is shut).
const RECV_BUFFER: usize = 256 * 1024;
/// TCP's send buffer.
const SEND_BUFFER: usize = 64 * 1024;
const NAME: &str = "rusty.test";

/// The server's and the client's configurations, made once.
fn configs() -> &'static (Arc<TlsAcceptor>, Arc<ClientConfig>) {
    static CONFIGS: OnceLock<(Arc<TlsAcceptor>, Arc<ClientConfig>)> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).expect("authority");
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let leaf = CertificateParams::new(vec![NAME.to_string()])
            .expect("params")
            .signed_by(&key, &ca, &ca_key)
            .expect("leaf");
        let cert = CertKey::from_pem(leaf.pem().as_bytes(), key.serialize_pem().as_bytes())
            .expect("certificate");
        let mut settings = ServerSettings::default();
        settings.tickets = false;
        let acceptor = TlsAcceptor::new(Certificates::new(cert), settings).expect("server");
        let mut roots = RootCertStore::empty();
        roots.add(ca.der().clone()).expect("authority");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        (Arc::new(acceptor), Arc::new(client))
    })
}

/// TCP as the layer sees it: a send buffer that takes what fits, and what the layer
/// asked for.
#[derive(Default)]
struct FakeTcp {
    /// Ciphertext the layer sent, not yet read by the client.
    sent: Vec<u8>,
    closed: bool,
    aborted: bool,
    shut: bool,
}

impl Connection for FakeTcp {
    fn local_addr(&self) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], 443))
    }
    fn peer_addr(&self) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 2], 40000))
    }
    fn send_space(&self) -> usize {
        match self.closed || self.shut || self.aborted {
            true => 0,
            false => SEND_BUFFER.saturating_sub(self.sent.len()),
        }
    }
    fn send(&mut self, data: &[u8]) -> Result<usize, SendError> {
        if self.closed || self.shut || self.aborted {
            return Err(SendError::Closed);
        }
        let n = self.send_space().min(data.len());
        self.sent.extend_from_slice(&data[..n]);
        Ok(n)
    }
    fn send_shared(&mut self, data: Bytes) -> Result<(), SendError> {
        // The layer encrypts into `send`; it never hands TCP shared bytes.
        panic!("the TLS layer queued {} shared bytes with TCP", data.len());
    }
    fn notify_writable(&mut self) {}
    fn set_timer(&mut self, _: Option<Duration>) {}
    fn set_user_timeout(&mut self, _: Option<Duration>) {}
    fn set_keepalive(&mut self, _: Option<Keepalive>) {}
    fn unacked_len(&self) -> usize {
        self.sent.len()
    }
    fn close(&mut self) {
        self.closed = true;
    }
    fn shutdown_write(&mut self) {
        self.shut = true;
    }
    fn abort(&mut self) {
        self.aborted = true;
    }
}

/// The application behind the layer: keeps what it is offered (all of it, or nothing
/// while paused), and sends what it is told to.
#[derive(Default)]
struct App {
    connected: bool,
    received: Vec<u8>,
    paused: bool,
    peer_closed: bool,
    closed: Option<CloseReason>,
    /// Plaintext it sent, as the layer accepted it.
    sent: Vec<u8>,
    reply: Vec<u8>,
}

impl Handler for App {
    type Conn = ();
    fn accept(&mut self, _: SocketAddr, _: SocketAddr) -> Option<()> {
        Some(())
    }
    fn connected(&mut self, _: &mut Conn<'_, ()>) {
        assert!(!self.connected, "connected twice");
        self.connected = true;
    }
    fn data(&mut self, conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        assert!(self.connected, "plaintext before the handshake finished");
        assert!(!data.is_empty(), "an empty offer");
        assert!(
            data.len() <= MAX_OFFER,
            "{} bytes offered at once",
            data.len()
        );
        if self.paused {
            return 0;
        }
        self.received.extend_from_slice(data);
        if !self.reply.is_empty() {
            let reply = std::mem::take(&mut self.reply);
            let n = conn.send(&reply).unwrap_or(0);
            assert!(n <= reply.len());
            self.sent.extend_from_slice(&reply[..n]);
        }
        data.len()
    }
    fn peer_closed(&mut self, _: &mut Conn<'_, ()>) {
        self.peer_closed = true;
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), reason: CloseReason) {
        self.closed = Some(reason);
    }
}

/// One server connection under test, with the peer's bytes TCP holds for it.
struct Server {
    tls: Tls<App, VirtualClock>,
    clock: VirtualClock,
    state: TlsConn<()>,
    tcp: FakeTcp,
    /// Received bytes the layer has not consumed yet, as TCP keeps them.
    pending: Vec<u8>,
    /// The peer sent FIN.
    fin: bool,
}

impl Server {
    fn new() -> Server {
        let clock = VirtualClock::new();
        let mut tls = Tls::with_clock(
            App::default(),
            Some(configs().0.clone()),
            None,
            clock.clone(),
        );
        let tcp = FakeTcp::default();
        let state = tls
            .accept(tcp.local_addr(), tcp.peer_addr())
            .expect("the layer accepts");
        let mut s = Server {
            tls,
            clock,
            state,
            tcp,
            pending: Vec::new(),
            fin: false,
        };
        s.call(|h, c| h.connected(c));
        s
    }

    fn ended(&self) -> bool {
        self.tcp.closed || self.tcp.aborted
    }

    fn call<R>(
        &mut self,
        f: impl FnOnce(&mut Tls<App, VirtualClock>, &mut Conn<'_, TlsConn<()>>) -> R,
    ) -> R {
        let mut opens = Vec::new();
        let id = ConnId::from_bits(1 << 32);
        let r = f(
            &mut self.tls,
            &mut Conn::new(id, &mut self.tcp, &mut self.state, &mut opens),
        );
        assert!(opens.is_empty(), "the layer opened a connection");
        r
    }

    /// The peer's bytes arrive, in chunks of `chunk` at most (at least 1).
    fn receive(&mut self, bytes: &[u8], chunk: usize) {
        for piece in bytes.chunks(chunk.max(1)) {
            let room = RECV_BUFFER.saturating_sub(self.pending.len());
            self.pending
                .extend_from_slice(&piece[..room.min(piece.len())]);
            self.offer();
        }
    }

    /// Offer TCP's unconsumed bytes to the layer, as the backend does.
    fn offer(&mut self) {
        if self.pending.is_empty() || self.ended() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let used = self.call(|h, c| h.data(c, &pending));
        assert!(
            used <= pending.len(),
            "consumed {used} of {}",
            pending.len()
        );
        self.pending = pending;
        self.pending.drain(..used);
        assert!(self.tcp.sent.len() <= SEND_BUFFER);
    }

    fn writable(&mut self) {
        if !self.ended() {
            self.call(|h, c| h.writable(c));
            self.offer();
        }
    }

    /// The application resumes reading, as the backend's `resume_receive` has it:
    /// `receive_resumed`, then TCP's unconsumed bytes.
    fn resume(&mut self) {
        if !self.ended() {
            self.call(|h, c| h.receive_resumed(c));
            self.offer();
        }
    }

    fn fin(&mut self) {
        if !self.ended() && !self.fin {
            self.fin = true;
            self.call(|h, c| h.peer_closed(c));
        }
    }

    fn timer(&mut self, seconds: u8) {
        self.clock
            .advance(Duration::from_secs(u64::from(seconds % 16)));
        if !self.ended() {
            self.call(|h, c| h.timer(c));
        }
    }

    /// The connection ends (TCP closed or reset under it); the reason the application
    /// got.
    fn finish(mut self) -> (App, bool) {
        let closed_by_layer = self.ended();
        let state = std::mem::replace(&mut self.state, TlsConn::new(()));
        let mut opens = Vec::new();
        self.tls
            .closed(&mut Opener::new(&mut opens), state, CloseReason::Normal);
        let app = std::mem::take(self.tls.inner_mut());
        (app, closed_by_layer)
    }
}

/// Chunk sizes from one input byte: often tiny (header splits), sometimes whole.
fn chunk(b: u8) -> usize {
    match b {
        0 => usize::MAX,
        1..=32 => usize::from(b),
        _ => usize::from(b) * 64,
    }
}

/// The fuzz target.
pub fn tls_record(data: &[u8]) {
    let mut input = Input::new(data);
    match input.u8() % 4 {
        0 => garbage(&mut input),
        _ => after_handshake(&mut input),
    }
}

/// Raw bytes from the start: no handshake can finish, so nothing reaches the
/// application, and what the layer refuses ends the connection with `ProtocolError`.
fn garbage(input: &mut Input<'_>) {
    let mut server = Server::new();
    let mut fed = Vec::new();
    while !input.is_empty() {
        let c = chunk(input.u8());
        let n = usize::from(input.u16() % 4096);
        let bytes = input.bytes(n);
        fed.extend_from_slice(bytes);
        server.receive(bytes, c);
    }
    // A whole first record that is not a handshake or alert record: refused.
    let first = fed
        .get(3..5)
        .map(|l| 5 + usize::from(u16::from_be_bytes([l[0], l[1]])));
    let refused = first.is_some_and(|end| fed.len() >= end) && !matches!(fed[0], 21 | 22);
    let (app, closed_by_layer) = server.finish();
    assert!(
        !app.connected && app.received.is_empty(),
        "plaintext from garbage"
    );
    assert!(
        !refused || closed_by_layer,
        "garbage {:02x?} was not refused",
        &fed[..5]
    );
    if closed_by_layer {
        assert_eq!(app.closed, Some(CloseReason::ProtocolError));
    }
}

/// Move the client's pending output to `server` in chunks of `c`, and the server's to
/// the client.
fn exchange(client: &mut rustls::ClientConnection, server: &mut Server, c: usize) {
    for _ in 0..8 {
        let mut out = Vec::new();
        while client.wants_write() {
            if client.write_tls(&mut out).unwrap_or(0) == 0 {
                break;
            }
        }
        server.receive(&out, c);
        let back = std::mem::take(&mut server.tcp.sent);
        if !back.is_empty() {
            let mut rd = &back[..];
            while !rd.is_empty() && client.read_tls(&mut rd).unwrap_or(0) > 0 {
                if client.process_new_packets().is_err() {
                    return;
                }
            }
        }
        server.writable();
        if out.is_empty() && back.is_empty() && server.tcp.sent.is_empty() {
            return;
        }
    }
}

/// A real client completes the handshake; then the operations of the input.
fn after_handshake(input: &mut Input<'_>) {
    let mut server = Server::new();
    let mut client =
        rustls::ClientConnection::new(configs().1.clone(), NAME.try_into().expect("name"))
            .expect("client");
    exchange(&mut client, &mut server, chunk(input.u8()));
    assert!(!client.is_handshaking(), "the handshake did not finish");
    assert!(server.tls.inner().connected, "the application was not told");
    // Plaintext the client encrypted, in order.
    let mut encrypted = Vec::new();
    let mut from_server = Vec::new();
    let mut corrupted = false;
    for _ in 0..64 {
        if input.is_empty() || server.ended() {
            break;
        }
        let op = input.u8();
        let c = chunk(input.u8());
        match op % 10 {
            0..=2 => {
                let n = usize::from(input.u16() % 20_000);
                let plain: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(op | 1)).collect();
                let _ = client.writer().write_all(&plain);
                encrypted.extend_from_slice(&plain);
                exchange(&mut client, &mut server, c);
            }
            3 => {
                let n = usize::from(input.u8());
                let raw = input.bytes(n);
                corrupted |= !raw.is_empty();
                server.receive(raw, c);
            }
            4 => {
                // One record of the client's, spoiled before it arrives.
                let n = 1 + usize::from(input.u8());
                let plain = vec![0x5a; n];
                let _ = client.writer().write_all(&plain);
                let mut record = Vec::new();
                while client.wants_write() && client.write_tls(&mut record).unwrap_or(0) > 0 {}
                let at = usize::from(input.u16()) % record.len().max(1);
                match input.u8() % 4 {
                    // In the body: the header's legacy version is not authenticated.
                    0 if record.len() > 5 => {
                        let at = 5 + at % (record.len() - 5);
                        record[at] ^= 1 << (input.u8() % 8);
                    }
                    1 => record.truncate(at),
                    2 => {
                        // Replayed: the first copy is the client's own.
                        record.extend_from_within(..);
                        encrypted.extend_from_slice(&plain);
                    }
                    _ => record.clear(),
                }
                corrupted = true;
                server.receive(&record, c);
            }
            5 => {
                client.send_close_notify();
                exchange(&mut client, &mut server, c);
            }
            6 => server.fin(),
            7 => server.timer(input.u8()),
            8 => {
                let app = server.tls.inner_mut();
                app.paused = !app.paused;
                match c % 2 {
                    0 => server.resume(),
                    _ => server.writable(),
                }
            }
            _ => {
                let n = usize::from(input.u16() % 40_000);
                server.tls.inner_mut().reply = (0..n).map(|i| (i % 251) as u8).collect();
                exchange(&mut client, &mut server, c);
            }
        }
        let _ = client.reader().read_to_end(&mut from_server);
    }
    let (app, closed_by_layer) = server.finish();
    assert!(
        encrypted.starts_with(&app.received),
        "the application got {} bytes that the client did not send",
        app.received.len()
    );
    assert!(
        app.sent.starts_with(&from_server),
        "the client got bytes the server did not send"
    );
    if closed_by_layer && corrupted {
        assert!(
            matches!(
                app.closed,
                Some(CloseReason::ProtocolError | CloseReason::Truncated | CloseReason::TimedOut)
            ),
            "closed on bad input with {:?}",
            app.closed
        );
    }
}
