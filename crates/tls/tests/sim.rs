//! TLS between two of Rusty's engines over the in-memory link, on virtual time: echo,
//! back-pressure, a paused reader resumed, half-close, abort, truncation, versions,
//! ALPN, SNI, resumption, reload, and hostile peers (silence, floods, garbage, oversize records,
//! renegotiation).

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{payload, raw_client_config, Echo, Key, Pausing, Pki, Raw, Script, SendOnce, Sender};
use rusty_stack::io::fault::FaultConfig;
use rusty_stack::{CloseReason, ConnectError, Handler, VirtualClock};
use rusty_testkit::sim::{self, SimPair};
use rusty_tls::{
    Certificates, ClientSettings, ConfigError, ServerSettings, Tls, TlsAcceptor, TlsConn,
    TlsConnector, TlsInfo, TlsVersion, Versions,
};

const PORT: u16 = 443;

fn server_addr() -> SocketAddr {
    SocketAddr::from((sim::SERVER_IP, PORT))
}

type Server = Tls<Echo, VirtualClock>;
type Client = Tls<Sender, VirtualClock>;

fn acceptor(certs: Certificates, settings: ServerSettings) -> Arc<TlsAcceptor> {
    Arc::new(TlsAcceptor::new(certs, settings).unwrap())
}

fn server(acceptor: Arc<TlsAcceptor>) -> Server {
    Tls::with_clock(Echo::default(), Some(acceptor), None, VirtualClock::new())
}

fn connector(pki: &Pki, name: &str, settings: ClientSettings) -> Arc<TlsConnector> {
    Arc::new(TlsConnector::new(pki.ca_pem.as_bytes(), name, settings).unwrap())
}

fn client(connector: Arc<TlsConnector>, payload: Vec<u8>) -> Client {
    let sender = Sender::new(payload, server_addr());
    Tls::with_clock(sender, None, Some(connector), VirtualClock::new())
}

/// `client` and `server` on one link with `faults`; the server listens, and both
/// adapters read the simulation's clock.
fn pair<C: Handler>(
    client: C,
    server: Server,
    faults: FaultConfig,
    seed: u64,
) -> SimPair<C, Server> {
    let mut net = SimPair::with_delay(client, server, Duration::ZERO, seed);
    net.client.device_mut().set_config(faults);
    net.server.device_mut().set_config(faults);
    let clock = net.clock.clone();
    net.server.handler_mut().set_clock(clock);
    net.server.listen(PORT, 64);
    net
}

fn tls_pair(
    client: Client,
    server: Server,
    faults: FaultConfig,
    seed: u64,
) -> SimPair<Client, Server> {
    let mut net = pair(client, server, faults, seed);
    let clock = net.clock.clone();
    net.client.handler_mut().set_clock(clock);
    net
}

/// Run until the client saw `n` connections close and the server as many.
fn finish(net: &mut SimPair<Client, Server>, n: usize) {
    let done = net.run_until(Duration::from_secs(300), |net| {
        net.client.handler().inner().closed.len() == n
            && net.server.handler().inner().closed.len() == n
    });
    assert!(done, "connections did not finish");
}

fn simple_server(pki: &Pki, key: Key, settings: ServerSettings) -> Server {
    server(acceptor(
        Certificates::new(pki.leaf(&["server.test"], key)),
        settings,
    ))
}

/// Echo `len` bytes through TLS and check every byte and the close on both sides.
fn echo(server_settings: ServerSettings, key: Key, len: usize, faults: FaultConfig, seed: u64) {
    let pki = Pki::new();
    let data = payload(len);
    let client = client(
        connector(&pki, "server.test", ClientSettings::default()),
        data.clone(),
    );
    let mut net = tls_pair(
        client,
        simple_server(&pki, key, server_settings),
        faults,
        seed,
    );
    net.client.connect(server_addr(), TlsConn::new(0)).unwrap();
    finish(&mut net, 1);
    let (c, s) = (net.client.handler(), net.server.handler());
    assert!(c.inner().got[0] == data, "echo differs");
    assert_eq!(c.inner().closed, [CloseReason::Normal]);
    assert_eq!(s.inner().closed, [CloseReason::Normal]);
    assert_eq!(s.inner().peer_closed, 1, "half-close reached the server");
    assert_eq!(s.stats().handshakes_completed, 1);
    assert_eq!(c.stats().handshakes_completed, 1);
    assert_eq!(s.stats().close_notify_received, 1);
    assert_eq!(c.stats().close_notify_received, 1);
    assert_eq!(s.stats().truncations + c.stats().truncations, 0);
    assert!(
        c.inner().timers >= 1,
        "the application's timer fired through TLS"
    );
    assert_eq!(s.handshakes_in_progress(), 0);
    let faults = net.client.device().stats();
    if net.client.device().config().loss > 0.0 {
        assert!(faults.lost > 0 && faults.reordered > 0, "{faults:?}");
    }
}

#[test]
fn echoes_a_large_payload_over_tls13_with_ecdsa() {
    let mut settings = ServerSettings::default();
    settings.versions = Versions::Tls13;
    echo(settings, Key::Ecdsa, 3 << 20, FaultConfig::none(), 1);
}

#[test]
fn echoes_over_tls12_with_rsa() {
    let mut settings = ServerSettings::default();
    settings.versions = Versions::Tls12;
    echo(settings, Key::Rsa, 300_000, FaultConfig::none(), 2);
}

#[test]
fn echoes_over_a_lossy_reordering_link() {
    let faults = FaultConfig::none()
        .with_delay(Duration::from_millis(1))
        .with_loss(0.02)
        .with_reorder(0.02);
    echo(ServerSettings::default(), Key::Ecdsa, 1 << 20, faults, 3);
}

/// One connection from a client with `settings` asking for `name`; whether its
/// handshake completed, with the close reasons on both sides.
fn attempt(
    server: Server,
    pki: &Pki,
    name: &str,
    settings: ClientSettings,
) -> SimPair<Client, Server> {
    let client = client(connector(pki, name, settings), payload(1000));
    let mut net = tls_pair(client, server, FaultConfig::none(), 5);
    net.client.connect(server_addr(), TlsConn::new(0)).unwrap();
    finish(&mut net, 1);
    net
}

fn assert_failed(net: &SimPair<Client, Server>) {
    assert_eq!(net.client.handler().inner().connected, 0);
    assert_eq!(
        net.client.handler().inner().closed,
        [CloseReason::ProtocolError]
    );
    assert_eq!(
        net.server.handler().inner().closed,
        [CloseReason::ProtocolError]
    );
    assert_eq!(net.server.handler().stats().handshakes_failed, 1);
    assert_eq!(net.server.handler().handshakes_in_progress(), 0);
}

fn assert_succeeded(net: &SimPair<Client, Server>) {
    assert_eq!(net.client.handler().inner().connected, 1);
    assert_eq!(net.client.handler().inner().closed, [CloseReason::Normal]);
    assert_eq!(net.client.handler().inner().got[0], payload(1000));
}

#[test]
fn versions_the_peer_lacks_fail_the_handshake() {
    let pki = Pki::new();
    let mut server_settings = ServerSettings::default();
    server_settings.versions = Versions::Tls12;
    let mut client_settings = ClientSettings::default();
    client_settings.versions = Versions::Tls13;
    let server = simple_server(&pki, Key::Ecdsa, server_settings);
    assert_failed(&attempt(server, &pki, "server.test", client_settings));
}

#[test]
fn alpn_must_match() {
    let pki = Pki::new();
    let mut settings = ClientSettings::default();
    settings.alpn = vec![b"h2".to_vec()];
    let server = simple_server(&pki, Key::Ecdsa, ServerSettings::default());
    assert_failed(&attempt(server, &pki, "server.test", settings.clone()));

    settings.alpn = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let server = simple_server(&pki, Key::Ecdsa, ServerSettings::default());
    assert_succeeded(&attempt(server, &pki, "server.test", settings));
}

#[test]
fn sni_chooses_the_certificate() {
    let pki = Pki::new();
    let certs = Certificates::new(pki.leaf(&["default.test"], Key::Ecdsa))
        .add("other.test", pki.leaf(&["other.test"], Key::Rsa))
        .add("*.wild.test", pki.leaf(&["*.wild.test"], Key::Ecdsa));
    let acceptor = acceptor(certs, ServerSettings::default());
    for name in ["default.test", "other.test", "OTHER.test", "a.wild.test"] {
        let net = attempt(
            server(acceptor.clone()),
            &pki,
            name,
            ClientSettings::default(),
        );
        assert_succeeded(&net);
    }
    // The default certificate does not prove a name we hold nothing for.
    let net = attempt(
        server(acceptor),
        &pki,
        "third.test",
        ClientSettings::default(),
    );
    assert_failed(&net);
}

#[test]
fn a_second_connection_resumes_with_a_ticket() {
    for versions in [Versions::Tls13, Versions::Tls12] {
        let pki = Pki::new();
        let mut settings = ServerSettings::default();
        settings.versions = versions;
        let mut client = client(
            connector(&pki, "server.test", ClientSettings::default()),
            payload(5000),
        );
        client.inner_mut().again = 1;
        let server = simple_server(&pki, Key::Ecdsa, settings);
        let mut net = tls_pair(client, server, FaultConfig::none(), 6);
        net.client.connect(server_addr(), TlsConn::new(0)).unwrap();
        finish(&mut net, 2);
        let (c, s) = (net.client.handler(), net.server.handler());
        assert_eq!(c.inner().got, [payload(5000), payload(5000)]);
        assert_eq!(s.stats().handshakes_completed, 2, "{versions:?}");
        assert_eq!(s.stats().handshakes_resumed, 1, "{versions:?}");
        assert_eq!(c.stats().handshakes_resumed, 1, "{versions:?}");
        let resumed = |infos: &[Option<TlsInfo>]| {
            infos
                .iter()
                .map(|i| i.as_ref().unwrap().resumed())
                .collect::<Vec<_>>()
        };
        assert_eq!(resumed(&c.inner().infos), [false, true], "{versions:?}");
        assert_eq!(resumed(&s.inner().infos), [false, true], "{versions:?}");
    }
}

#[test]
fn abort_resets_the_peer() {
    let pki = Pki::new();
    let mut client = client(
        connector(&pki, "server.test", ClientSettings::default()),
        payload(10),
    );
    client.inner_mut().abort = true;
    let server = simple_server(&pki, Key::Ecdsa, ServerSettings::default());
    let mut net = tls_pair(client, server, FaultConfig::none(), 7);
    net.client.connect(server_addr(), TlsConn::new(0)).unwrap();
    finish(&mut net, 1);
    assert_eq!(net.client.handler().inner().closed, [CloseReason::Aborted]);
    assert_eq!(net.server.handler().inner().closed, [CloseReason::Reset]);
}

#[test]
fn reload_serves_new_certificates_to_new_connections() {
    let pki = Pki::new();
    let acceptor = acceptor(
        Certificates::new(pki.leaf(&["a.test"], Key::Ecdsa)),
        ServerSettings::default(),
    );
    let client = client(
        connector(&pki, "b.test", ClientSettings::default()),
        payload(1000),
    );
    let mut net = tls_pair(client, server(acceptor.clone()), FaultConfig::none(), 8);
    net.client.connect(server_addr(), TlsConn::new(0)).unwrap();
    finish(&mut net, 1);
    assert_eq!(
        net.client.handler().inner().closed,
        [CloseReason::ProtocolError]
    );

    acceptor
        .reload(Certificates::new(pki.leaf(&["b.test"], Key::Rsa)))
        .unwrap();
    net.client.connect(server_addr(), TlsConn::new(0)).unwrap();
    finish(&mut net, 2);
    assert_eq!(net.client.handler().inner().closed[1], CloseReason::Normal);
    assert_eq!(net.client.handler().inner().got[0], payload(1000));
}

/// A raw client running `script` against an echo server with `settings`.
fn raw(script: Script, settings: ServerSettings, connections: usize) -> SimPair<Raw, Server> {
    let pki = Pki::new();
    let script = match script {
        Script::HelloThenFin(_) => {
            Script::HelloThenFin(raw_client_config(&pki.ca_pem, rustls::DEFAULT_VERSIONS))
        }
        Script::HandshakeThen(_, bytes) => Script::HandshakeThen(
            raw_client_config(&pki.ca_pem, &[&rustls::version::TLS12]),
            bytes,
        ),
        other => other,
    };
    let mut net = pair(
        Raw::new(script),
        simple_server(&pki, Key::Ecdsa, settings),
        FaultConfig::none(),
        9,
    );
    for _ in 0..connections {
        net.client.connect(server_addr(), None).unwrap();
    }
    net
}

fn placeholder() -> Arc<rustls::ClientConfig> {
    raw_client_config(&Pki::new().ca_pem, rustls::DEFAULT_VERSIONS)
}

fn run_until_closed(net: &mut SimPair<Raw, Server>, n: usize) {
    run_until(net, n, n);
}

fn run_until(net: &mut SimPair<Raw, Server>, server: usize, client: usize) {
    let done = net.run_until(Duration::from_secs(120), |net| {
        net.server.handler().inner().closed.len() == server
            && net.client.handler().closed.len() == client
    });
    assert!(done, "connections did not finish");
}

#[test]
fn a_fin_without_close_notify_is_a_truncation() {
    let mut net = raw(
        Script::HelloThenFin(placeholder()),
        ServerSettings::default(),
        1,
    );
    run_until_closed(&mut net, 1);
    let s = net.server.handler();
    assert_eq!(
        s.inner().received,
        5,
        "what arrived before the FIN is delivered"
    );
    assert_eq!(s.inner().peer_closed, 0);
    assert_eq!(s.inner().closed, [CloseReason::Truncated]);
    assert_eq!(s.stats().truncations, 1);
}

#[test]
fn garbage_instead_of_a_client_hello_gets_an_alert() {
    let garbage = b"GET / HTTP/1.1\r\nHost: server.test\r\n\r\n".to_vec();
    let mut net = raw(Script::Garbage(garbage), ServerSettings::default(), 1);
    run_until_closed(&mut net, 1);
    let s = net.server.handler();
    assert_eq!(s.inner().closed, [CloseReason::ProtocolError]);
    assert_eq!(s.stats().handshakes_failed, 1);
    assert_eq!(s.stats().alerts_sent, 1);
    assert_eq!(s.handshakes_in_progress(), 0);
    // An alert record (content type 21) came back before the FIN.
    assert_eq!(net.client.handler().received.first(), Some(&21));
}

#[test]
fn an_oversize_record_is_rejected() {
    let mut record = vec![22, 3, 3, 0xff, 0xff];
    record.resize(2000, 0);
    let mut net = raw(Script::Garbage(record), ServerSettings::default(), 1);
    run_until_closed(&mut net, 1);
    let s = net.server.handler();
    assert_eq!(s.stats().records_rejected, 1);
    assert_eq!(s.inner().closed, [CloseReason::ProtocolError]);
}

#[test]
fn renegotiation_closes_the_connection() {
    // A handshake record after a TLS 1.2 handshake: a ClientHello to renegotiate.
    let record = vec![22, 3, 3, 0, 4, 1, 0, 0, 0];
    let mut net = raw(
        Script::HandshakeThen(placeholder(), record),
        ServerSettings::default(),
        1,
    );
    run_until_closed(&mut net, 1);
    let s = net.server.handler();
    assert_eq!(net.client.handler().handshakes, 1);
    assert_eq!(s.stats().renegotiation_attempts, 1);
    assert_eq!(s.inner().closed, [CloseReason::ProtocolError]);
}

#[test]
fn a_silent_peer_times_out_in_the_handshake() {
    let mut net = raw(Script::Silent, ServerSettings::default(), 1);
    run_until_closed(&mut net, 1);
    let s = net.server.handler();
    assert_eq!(s.stats().handshake_timeouts, 1);
    assert_eq!(s.stats().handshakes_failed, 1);
    assert_eq!(s.inner().closed, [CloseReason::TimedOut]);
    assert_eq!(net.client.handler().closed, [CloseReason::Reset]);
}

#[test]
fn handshakes_in_progress_are_bounded() {
    let mut settings = ServerSettings::default();
    settings.max_handshakes = 2;
    let mut net = raw(Script::Silent, settings, 5);
    assert_eq!(net.server.handler().inner().closed.len(), 0);
    let refused = net.run_until(Duration::from_secs(5), |net| {
        net.server.handler().stats().handshakes_refused == 3
    });
    assert!(refused);
    assert_eq!(net.server.handler().handshakes_in_progress(), 2);
    // The two admitted time out; the refused were reset at once.
    run_until(&mut net, 2, 5);
    let s = net.server.handler();
    assert_eq!(s.stats().handshake_timeouts, 2);
    assert_eq!(s.handshakes_in_progress(), 0);
}

#[test]
fn resuming_a_paused_reader_delivers_the_plaintext_the_layer_holds() {
    let pki = Pki::new();
    let data = payload(5000);
    let certs = Certificates::new(pki.leaf(&["server.test"], Key::Ecdsa));
    let acceptor = acceptor(certs, ServerSettings::default());
    let server = Tls::with_clock(Pausing::new(100), Some(acceptor), None, VirtualClock::new());
    let sender = SendOnce {
        payload: data.clone(),
        sent: 0,
    };
    let connector = connector(&pki, "server.test", ClientSettings::default());
    let client = Tls::with_clock(sender, None, Some(connector), VirtualClock::new());
    let mut net = SimPair::with_delay(client, server, Duration::ZERO, 10);
    let clock = net.clock.clone();
    net.client.handler_mut().set_clock(clock.clone());
    net.server.handler_mut().set_clock(clock);
    net.server.listen(PORT, 4);
    net.client.connect(server_addr(), TlsConn::new(())).unwrap();
    let paused = net.run_until(Duration::from_secs(10), |net| {
        net.server.handler().inner().got.len() == 100
            && net.client.handler().inner().sent == data.len()
    });
    assert!(paused, "the payload was sent and the reader paused");
    // All the ciphertext arrived and was decrypted: TCP holds none of it, the layer
    // holds the plaintext the application left.
    net.run_until(Duration::from_secs(5), |_| false);
    assert_eq!(net.server.handler().inner().got.len(), 100);

    net.server.handler_mut().inner_mut().budget = data.len();
    let id = net.server.handler().inner().id.unwrap();
    assert!(net.server.resume_receive(id));
    assert!(
        net.server.handler().inner().got == data,
        "resuming delivered the rest at once, with nothing more from the peer"
    );
    assert!(net.server.handler().inner().closed.is_empty());
}

/// The application's handler sees what the handshake settled, on both sides: ALPN's
/// choice, the server name, the version and the cipher suite.
#[test]
fn the_application_sees_what_the_handshake_settled() {
    let cases = [
        (Versions::Tls13, vec![b"x-other".to_vec(), b"h2".to_vec()]),
        (Versions::Tls12, vec![b"h2".to_vec()]),
        (Versions::Both, vec![]),
    ];
    for (versions, client_alpn) in cases {
        let pki = Pki::new();
        let certs = Certificates::new(pki.leaf(&["default.test"], Key::Ecdsa))
            .add("other.test", pki.leaf(&["other.test"], Key::Ecdsa));
        let mut server_settings = ServerSettings::default();
        server_settings.alpn = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        server_settings.versions = versions;
        let mut client_settings = ClientSettings::default();
        client_settings.alpn = client_alpn.clone();
        let server = server(acceptor(certs, server_settings));
        let net = attempt(server, &pki, "other.test", client_settings);
        assert_succeeded(&net);
        let (c, s) = (net.client.handler().inner(), net.server.handler().inner());
        let (ci, si) = (c.infos[0].as_ref().unwrap(), s.infos[0].as_ref().unwrap());
        let alpn = (!client_alpn.is_empty()).then_some(&b"h2"[..]);
        let version = match versions {
            Versions::Tls12 => TlsVersion::Tls12,
            _ => TlsVersion::Tls13,
        };
        for info in [ci, si] {
            assert_eq!(info.alpn(), alpn, "{versions:?}");
            assert_eq!(info.server_name(), Some("other.test"), "{versions:?}");
            assert_eq!(info.version(), version);
            assert!(!info.resumed());
        }
        let prefix = match version {
            TlsVersion::Tls12 => "TLS_ECDHE_ECDSA_WITH_",
            _ => "TLS13_",
        };
        assert!(
            si.cipher_suite().starts_with(prefix),
            "{}",
            si.cipher_suite()
        );
        assert_eq!(ci.cipher_suite(), si.cipher_suite());
    }
}

/// A connection names the server it expects instead of the connector's name: opened
/// from outside with `TlsConn::with_server_name`, or by the application's handler with
/// the name `Tls::with_server_name_of` takes from its state.
#[test]
fn a_connection_names_its_own_server() {
    let pki = Pki::new();
    let certs = || Certificates::new(pki.leaf(&["b.test"], Key::Ecdsa));
    let named = TlsConn::with_server_name(0, "b.test").unwrap();

    let mut named_client = client(
        connector(&pki, "a.test", ClientSettings::default()),
        payload(1000),
    )
    .with_server_name_of(|_| Some("b.test"));
    named_client.inner_mut().again = 1;
    let b_server = server(acceptor(certs(), ServerSettings::default()));
    let mut net = tls_pair(named_client, b_server, FaultConfig::none(), 11);
    net.client.connect(server_addr(), named).unwrap();
    finish(&mut net, 2);
    let (c, s) = (net.client.handler().inner(), net.server.handler().inner());
    assert_eq!(c.closed, [CloseReason::Normal, CloseReason::Normal]);
    assert_eq!(c.got, [payload(1000), payload(1000)]);
    for info in c.infos.iter().chain(&s.infos) {
        assert_eq!(info.as_ref().unwrap().server_name(), Some("b.test"));
    }

    // The connector's name is the default, and the server cannot prove it.
    let plain_client = client(
        connector(&pki, "a.test", ClientSettings::default()),
        payload(1000),
    );
    let b_server = server(acceptor(certs(), ServerSettings::default()));
    let mut net = tls_pair(plain_client, b_server, FaultConfig::none(), 12);
    net.client.connect(server_addr(), TlsConn::new(0)).unwrap();
    finish(&mut net, 1);
    assert_failed(&net);
}

#[test]
fn a_malformed_server_name_is_refused() {
    assert!(matches!(
        TlsConn::with_server_name(0, "not a name"),
        Err(ConfigError::BadName(name)) if name == "not a name"
    ));
    // From the application's state: the open fails as for an address that names no
    // peer, and nothing reaches the network.
    let pki = Pki::new();
    let mut bad_client = client(
        connector(&pki, "server.test", ClientSettings::default()),
        payload(1000),
    )
    .with_server_name_of(|_| Some("bad name!"));
    bad_client.inner_mut().again = 1;
    let server = simple_server(&pki, Key::Ecdsa, ServerSettings::default());
    let mut net = tls_pair(bad_client, server, FaultConfig::none(), 13);
    net.client.connect(server_addr(), TlsConn::new(0)).unwrap();
    finish(&mut net, 1);
    let c = net.client.handler().inner();
    assert_eq!(c.closed, [CloseReason::Normal]);
    assert_eq!(c.failed, [ConnectError::InvalidAddress]);
    assert_eq!(net.client.connection_count(), 0);
}
