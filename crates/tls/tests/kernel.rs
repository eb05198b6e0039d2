//! The same TLS adapter on the kernel-socket backend: a TLS echo server and a TLS
//! client, each on its own kernel engine, over loopback, with what the handshake
//! settled seen by both applications; and a paused reader resumed.

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{payload, Echo, Key, Pausing, Pki, SendOnce, Sender};
use rusty_kernel::{KernelConfig, KernelEngine};
use rusty_stack::CloseReason;
use rusty_tls::{
    Certificates, ClientSettings, ServerSettings, Tls, TlsAcceptor, TlsConn, TlsConnector,
    TlsVersion,
};

#[test]
fn echoes_over_loopback_on_the_kernel_backend() {
    let pki = Pki::new();
    let certs = Certificates::new(pki.leaf(&["server.test"], Key::Rsa));
    let acceptor = Arc::new(TlsAcceptor::new(certs, ServerSettings::default()).unwrap());
    let connector = Arc::new(
        TlsConnector::new(
            pki.ca_pem.as_bytes(),
            "server.test",
            ClientSettings::default(),
        )
        .unwrap(),
    );

    let mut server = KernelEngine::new(
        Tls::server(Echo::default(), acceptor),
        KernelConfig::default(),
    )
    .unwrap();
    let addr = server
        .listen(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 16)
        .unwrap();
    let data = payload(2 << 20);
    let sender = Sender::new(data.clone(), addr);
    let mut client =
        KernelEngine::new(Tls::client(sender, connector), KernelConfig::default()).unwrap();
    client.connect(addr, TlsConn::new(0)).unwrap();

    // A guard against a hang, not a measurement.
    let give_up = Instant::now() + Duration::from_secs(60);
    while client.handler().inner().closed.is_empty() || server.handler().inner().closed.is_empty() {
        assert!(Instant::now() < give_up, "the echo did not finish");
        server.poll(Duration::from_millis(1));
        client.poll(Duration::from_millis(1));
    }
    let (c, s) = (client.handler(), server.handler());
    assert!(c.inner().got[0] == data, "echo differs");
    assert_eq!(c.inner().closed, [CloseReason::Normal]);
    assert_eq!(s.inner().closed, [CloseReason::Normal]);
    assert_eq!(s.stats().handshakes_completed, 1);
    assert_eq!(s.stats().close_notify_received, 1);
    // What the handshake settled reached both applications.
    for info in [&c.inner().infos[0], &s.inner().infos[0]] {
        let info = info.as_ref().unwrap();
        assert_eq!(info.alpn(), Some(&b"http/1.1"[..]));
        assert_eq!(info.server_name(), Some("server.test"));
        assert_eq!(info.version(), TlsVersion::Tls13);
    }
}

#[test]
fn resuming_a_paused_reader_delivers_the_plaintext_the_layer_holds() {
    let pki = Pki::new();
    let certs = Certificates::new(pki.leaf(&["server.test"], Key::Ecdsa));
    let acceptor = Arc::new(TlsAcceptor::new(certs, ServerSettings::default()).unwrap());
    let ca = pki.ca_pem.as_bytes();
    let connector =
        Arc::new(TlsConnector::new(ca, "server.test", ClientSettings::default()).unwrap());
    let mut server = KernelEngine::new(
        Tls::server(Pausing::new(100), acceptor),
        KernelConfig::default(),
    )
    .unwrap();
    let addr = server
        .listen(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 4)
        .unwrap();
    let data = payload(5000);
    let sender = SendOnce {
        payload: data.clone(),
        sent: 0,
    };
    let mut client =
        KernelEngine::new(Tls::client(sender, connector), KernelConfig::default()).unwrap();
    client.connect(addr, TlsConn::new(())).unwrap();

    // Bounds against a hang, not measurements.
    let give_up = Instant::now() + Duration::from_secs(30);
    while server.handler().inner().got.len() < 100 || client.handler().inner().sent < data.len() {
        assert!(Instant::now() < give_up, "the reader did not pause");
        server.poll(Duration::from_millis(1));
        client.poll(Duration::from_millis(1));
    }
    // Let every byte arrive and be decrypted: the layer holds the plaintext the
    // application left, the socket nothing.
    let settle = Instant::now() + Duration::from_millis(200);
    while Instant::now() < settle {
        server.poll(Duration::from_millis(1));
        client.poll(Duration::from_millis(1));
    }
    assert_eq!(server.handler().inner().got.len(), 100);

    server.handler_mut().inner_mut().budget = data.len();
    let id = server.handler().inner().id.unwrap();
    assert!(server.resume_receive(id));
    assert!(
        server.handler().inner().got == data,
        "resuming delivered the rest at once, with nothing more from the peer"
    );
    assert!(server.handler().inner().closed.is_empty());
}
