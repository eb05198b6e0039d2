//! Echoes between two engines, clean and under loss, and the buffer storage they
//! borrow from and give back to each engine's pool.

use super::*;

fn echo_once(len: usize, faults: FaultConfig, seed: u64) {
    echo_with_pools(len, faults, seed, None);
}

/// Echo `len` bytes; with `pool`, both engines keep that many idle ring bytes per size
/// class. Returns the idle ring bytes each engine's pool holds afterwards
/// (client, server).
fn echo_with_pools(
    len: usize,
    faults: FaultConfig,
    seed: u64,
    pool: Option<usize>,
) -> (usize, usize) {
    let payload = pattern(len, seed as u8);
    let sender = Sender::new(payload.clone());
    let config = |ip| {
        let mut cfg = sim::engine_config(ip, seed);
        cfg.buffer_pool = pool.unwrap_or(cfg.buffer_pool);
        cfg
    };
    let mut net = SimPair::new(
        sender,
        config(sim::CLIENT_IP),
        Echo::default(),
        config(SERVER_IP),
        faults,
        faults,
        seed,
    );
    net.server.listen(7, 128);
    net.client
        .connect(SocketAddr::from((SERVER_IP, 7)), ())
        .map_err(|(e, _)| e)
        .expect("connect");
    let done = net.run_until(Duration::from_secs(600), |n| {
        !n.client.handler().closed.is_empty()
            && n.server.connection_count() == 0
            && n.client.connection_count() == 0
    });
    let c = net.client.handler();
    assert!(
        done,
        "seed {seed}: not finished; client {:?} server {:?}",
        net.client.stats(),
        net.server.stats()
    );
    assert_eq!(c.received.len(), payload.len(), "seed {seed}");
    assert!(c.received == payload, "seed {seed}: echo differs");
    assert_eq!(c.closed, vec![CloseReason::Normal]);
    assert!(c.peer_closed);
    assert_eq!(net.server.handler().closed, vec![CloseReason::Normal]);
    eprintln!(
        "seed {seed}: t={:?} client {} / server {} / faults {:?}",
        net.now(),
        net.client.stats(),
        net.server.stats(),
        net.client.device().stats()
    );
    (
        net.client.internals().idle_buffer_bytes(),
        net.server.internals().idle_buffer_bytes(),
    )
}

/// Buffer storage comes from the engine's own pool and goes back to it when the
/// connection is done; the configured size bounds what the pool keeps.
#[test]
fn buffer_storage_returns_to_the_engines_pool() {
    let (client, server) = echo_with_pools(100_000, FaultConfig::none(), 3, None);
    assert!(client > 0 && server > 0, "client {client}, server {server}");
    let kept = 64 * 1024;
    let (client, server) = echo_with_pools(100_000, FaultConfig::none(), 3, Some(kept));
    assert!(client <= 8 * kept && server <= 8 * kept);
    let (client, server) = echo_with_pools(100_000, FaultConfig::none(), 3, Some(0));
    assert_eq!((client, server), (0, 0), "a zero-sized pool keeps nothing");
}

#[test]
fn echo_small_clean() {
    echo_once(100, FaultConfig::none(), 1);
}

#[test]
fn echo_large_clean() {
    echo_once(1 << 20, FaultConfig::none(), 2);
}

#[test]
fn echo_with_loss() {
    let f = FaultConfig::none().with_loss(0.05);
    for seed in 0..5 {
        echo_once(200_000, f, seed);
    }
}
