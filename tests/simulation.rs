//! Deterministic simulation of whole TCP conversations: a client engine and a server
//! engine over the in-memory link, each direction behind a seeded fault injector (loss,
//! duplication, reordering, corruption, delay and jitter), on one virtual clock.
//!
//! Every seed derives, with its own small PRNG, the faults of both directions, how many
//! connections to run and how many at once, and per connection: the payload each way
//! (random bytes, mostly small, some up to 1 MiB), whether it is queued by copy or as
//! shared bytes, and who closes first. The checks:
//!
//! - every byte arrives exactly once and in order (compared byte for byte, nothing extra);
//! - every connection sees its peer's FIN and ends with exactly one `closed` callback,
//!   reason [`CloseReason::Normal`], on both sides;
//! - once virtual time passes TIME-WAIT, neither engine holds a connection block, a
//!   TIME-WAIT entry or a byte of buffer memory (no leaks).
//!
//! A quarter of the engines run on a memory budget small enough to keep them under
//! memory pressure, so pruning, clamped windows and short sends must not lose or stall
//! anything either.
//!
//! Under faults a reset or a timeout is a failure, not an accepted outcome. That is sound
//! only if the stack's give-up limits cannot legitimately be reached, so the simulation
//! configures them (see [`tcp_config`]): with at most 20 % loss plus 5 % corruption each
//! way, one round trip fails with probability ≤ 1 − (0.8·0.95)² ≈ 0.42, and 25 attempts
//! in a row fail with probability ≈ 4·10⁻¹⁰; with Linux's defaults (6 SYN retries) a
//! SYN would give up about once in 400 connections, which is the protocol working, not a
//! bug. The same goes for the bounds on orphans (connections the application has
//! closed): Linux's 8 retries without progress give up about once in 1,000 orphans
//! here, so they get the same 24 retries and a time bound beyond that schedule.
//! TIME-WAIT outlasts the peer's whole FIN retry schedule, so a late retransmitted
//! FIN is always answered by the TIME-WAIT entry and never by a RST.
//!
//! A failing seed is printed with the command that replays it exactly:
//! `RUSTY_SIM_SEED=<seed> cargo test --test simulation replay -- --nocapture`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use rusty_stack::io::fault::FaultConfig;
use rusty_stack::sim::{self, SimPair, SERVER_IP};
use rusty_stack::stats::Stats;
use rusty_stack::tcp::config::TcpConfig;
use rusty_stack::CloseReason;
use rusty_stack::MemoryBudget;
use rusty_stack::{Conn, ConnectError, Handler, Opener};

const SERVER_PORT: u16 = 5001;
/// Bytes the client and server send per seed, both directions together, at most.
const MAX_BYTES_PER_SEED: usize = 8 << 20;
const MAX_PAYLOAD: usize = 1 << 20;
/// Virtual time a seed may take before it counts as stuck.
const VIRTUAL_TIME_LIMIT: Duration = Duration::from_secs(3600);
/// Simulation steps a seed may take before it counts as live-locked.
const STEP_LIMIT: u64 = 20_000_000;

// ----- Seeded randomness -----

/// SplitMix64: tiny, and the same sequence everywhere.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Byte `offset..offset + out.len()` of the payload stream named by `key`: random access,
/// so neither side has to keep whole payloads in memory.
fn fill_payload(key: u64, offset: usize, out: &mut [u8]) {
    let mut pos = offset;
    let mut i = 0;
    while i < out.len() {
        let word = mix(key ^ ((pos / 8) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes();
        let skip = pos % 8;
        let n = (8 - skip).min(out.len() - i);
        out[i..i + n].copy_from_slice(&word[skip..skip + n]);
        i += n;
        pos += n;
    }
}

// ----- The scenario a seed describes -----

/// Who sends its FIN first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClosePattern {
    /// The client half-closes when done sending; the server closes once it has sent
    /// everything and seen the client's FIN.
    ClientFirst,
    /// The mirror image.
    ServerFirst,
    /// Each side half-closes as soon as it is done sending (FINs may cross).
    Simultaneous,
}

/// One direction of one connection.
#[derive(Debug, Clone, Copy)]
struct Flow {
    len: usize,
    key: u64,
    /// Queue the payload as one shared `Bytes` instead of copying it in chunks.
    shared: bool,
}

#[derive(Debug, Clone)]
struct ConnSpec {
    to_server: Flow,
    to_client: Flow,
    close: ClosePattern,
    /// The side that closes second uses `close()` rather than `shutdown_write()`.
    second_uses_close: bool,
    /// Each side's `data` callback consumes at most this many bytes per call (a slow
    /// reader: the rest stays in the receive buffer and closes the window).
    client_read_limit: Option<usize>,
    server_read_limit: Option<usize>,
}

/// Per-engine settings a seed varies, so small windows, zero windows, missing options
/// and SYN cookies are exercised too.
#[derive(Debug, Clone)]
struct Knobs {
    send_buffer: usize,
    recv_buffer: usize,
    max_ooo_ranges: usize,
    window_scaling: bool,
    timestamps: bool,
    sack: bool,
    delayed_ack: Duration,
}

impl Knobs {
    fn new(rng: &mut Rng) -> Knobs {
        let defaults = TcpConfig::default();
        let buffer = |rng: &mut Rng, default: usize| match rng.below(4) {
            0 => rng.range(2_048, 32 * 1024) as usize,
            1 => rng.range(32 * 1024, 128 * 1024) as usize,
            _ => default,
        };
        Knobs {
            send_buffer: buffer(rng, defaults.send_buffer),
            recv_buffer: buffer(rng, defaults.recv_buffer),
            max_ooo_ranges: if rng.chance(0.3) {
                rng.range(1, 3) as usize
            } else {
                defaults.max_ooo_ranges
            },
            window_scaling: rng.chance(0.8),
            timestamps: rng.chance(0.8),
            sack: rng.chance(0.8),
            delayed_ack: Duration::from_millis(rng.range(1, 200)),
        }
    }

    /// Linux's defaults: every option on, full buffers, 40 ms delayed ACKs.
    fn plain() -> Knobs {
        let d = TcpConfig::default();
        Knobs {
            send_buffer: d.send_buffer,
            recv_buffer: d.recv_buffer,
            max_ooo_ranges: d.max_ooo_ranges,
            window_scaling: true,
            timestamps: true,
            sack: true,
            delayed_ack: d.delayed_ack,
        }
    }

    /// The TCP configuration of an engine (see the module docs for the limits).
    fn tcp_config(&self) -> TcpConfig {
        TcpConfig {
            send_buffer: self.send_buffer,
            recv_buffer: self.recv_buffer,
            max_ooo_ranges: self.max_ooo_ranges,
            window_scaling: self.window_scaling,
            timestamps: self.timestamps,
            sack: self.sack,
            delayed_ack: self.delayed_ack,
            ..tcp_config()
        }
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    client: Knobs,
    server: Knobs,
    /// Half-open connections the listener holds before answering with SYN cookies.
    backlog: usize,
    /// A narrow range of client ports, so ports are reused while the server may still
    /// hold the previous connection's TIME-WAIT entry (RFC 6191 reopening).
    client_ports: Option<std::ops::RangeInclusive<u16>>,
    to_server: FaultConfig,
    to_client: FaultConfig,
    /// At most this many connections are open at once; the next opens when one closes.
    concurrency: usize,
    conns: Vec<ConnSpec>,
    /// Faults chosen to exercise SACK-based recovery, if any.
    sack_profile: Option<SackProfile>,
    /// Memory budgets tight enough to keep an engine under memory pressure (pruned
    /// out-of-order data, clamped windows, short sends), for a quarter of the engines.
    client_memory: Option<MemoryBudget>,
    server_memory: Option<MemoryBudget>,
}

/// For a quarter of the seeds' engines, a budget tight enough that the engine spends
/// the run under memory pressure. Drawn from a stream of its own, so the rest of each
/// seed's scenario is what it was before budgets existed.
fn tight_budgets(seed: u64) -> [Option<MemoryBudget>; 2] {
    let mut rng = Rng::new(mix(seed ^ 0x6d65_6d6f_7279));
    [(); 2].map(|_| {
        rng.chance(0.25).then(|| {
            let pressure = rng.range(8 << 10, 256 << 10) as usize;
            MemoryBudget {
                low: pressure / 2,
                pressure,
                limit: pressure + pressure / 2,
            }
        })
    })
}

fn faults(rng: &mut Rng) -> FaultConfig {
    // A quarter of the directions are clean, so both easy and hard paths are covered.
    if rng.chance(0.25) {
        return FaultConfig::none();
    }
    let delay = Duration::from_micros(rng.below(20_001));
    FaultConfig {
        loss: rng.unit() * 0.20,
        duplicate: rng.unit() * 0.10,
        reorder: rng.unit() * 0.20,
        corrupt: rng.unit() * 0.05,
        delay,
        jitter: if rng.chance(0.5) {
            Duration::from_micros(rng.below(5_001))
        } else {
            Duration::ZERO
        },
        reorder_delay: Duration::from_micros(rng.range(500, 5_000)),
        ..FaultConfig::none()
    }
}

/// The profiles that keep the sender's SACK scoreboard busy (several holes per window,
/// RACK's reordering window, lost ACKs), applied on top of a seed's faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SackProfile {
    /// Losses in bursts (mean burst 1.4–3 frames), both directions.
    BurstyLoss,
    /// Heavy reordering within a few milliseconds, both directions.
    Reordering,
    /// Toward the client many frames lost (for data from the server, mostly its ACKs).
    AckLoss,
}

impl SackProfile {
    fn apply(self, rng: &mut Rng, f: &mut FaultConfig) {
        if f.delay.is_zero() {
            // Loss recovery needs a round trip to exist: give the path one.
            f.delay = Duration::from_micros(rng.range(1_000, 20_000));
        }
        match self {
            SackProfile::BurstyLoss => {
                // Stationary loss = loss / (1 - burst + loss): at most about 14 %.
                f.loss = 0.005 + rng.unit() * 0.045;
                f.burst = 0.3 + rng.unit() * 0.4;
            }
            SackProfile::Reordering => {
                f.reorder = 0.05 + rng.unit() * 0.25;
                f.reorder_delay = Duration::from_micros(rng.range(200, 8_000));
                f.loss = rng.unit() * 0.03;
            }
            SackProfile::AckLoss => f.loss = 0.05 + rng.unit() * 0.15,
        }
    }
}

/// Mostly small payloads, some large: the sizes interesting for segmentation (empty, one
/// byte, around an MSS) come up often, large transfers sometimes.
fn payload_len(rng: &mut Rng) -> usize {
    let r = rng.below(100);
    (match r {
        0..=14 => 0,
        15..=19 => rng.range(1, 3),
        20..=49 => rng.range(1, 4_000),
        50..=84 => rng.range(4_000, 64 * 1024),
        85..=95 => rng.range(64 * 1024, 256 * 1024),
        _ => rng.range(256 * 1024, MAX_PAYLOAD as u64),
    }) as usize
}

fn read_limit(rng: &mut Rng, slow_readers: bool) -> Option<usize> {
    (slow_readers && rng.chance(0.5)).then(|| rng.range(1, 3_000) as usize)
}

impl Scenario {
    /// `slow_readers` turns on partial consumption (see the `slow_readers` test).
    fn new(seed: u64, slow_readers: bool) -> Scenario {
        let mut rng = Rng::new(seed);
        let mut to_server = faults(&mut rng);
        let to_client = faults(&mut rng);
        let client = Knobs::new(&mut rng);
        let server = Knobs::new(&mut rng);
        let backlog = if rng.chance(0.2) {
            // SYN cookies: the server keeps no state for the connection until the ACK
            // that completes the handshake, and recognises that ACK only by SEG.SEQ =
            // client ISN + 1 (the ISN is inside the cookie's hash). If that segment is
            // lost or overtaken, the client's next segment fails the check and is
            // answered with a RST, as in Linux: a limitation of cookies, not a bug. So
            // the cookie scenarios lose, corrupt and reorder nothing towards the server
            // (duplicates and delay are harmless); the other direction keeps its faults.
            to_server = FaultConfig {
                duplicate: to_server.duplicate,
                delay: to_server.delay,
                ..FaultConfig::none()
            };
            rng.range(1, 4) as usize
        } else {
            128
        };
        let count = match rng.below(4) {
            0 => 1,
            1 => rng.range(2, 8),
            _ => rng.range(1, 64),
        } as usize;
        let concurrency = if rng.chance(0.7) {
            count
        } else {
            rng.range(1, count as u64) as usize
        };
        // Ports stay busy on the client for a TIME-WAIT after it closes first, so each
        // port serves at most a few connections within the virtual time limit.
        let client_ports = rng.chance(0.15).then(|| {
            let span = rng.range((count as u64 / 8).max(1), (count as u64 / 2).max(1)) as u16;
            40_000..=40_000 + span - 1
        });
        let mut budget = MAX_BYTES_PER_SEED;
        let mut flow = |rng: &mut Rng| {
            let len = payload_len(rng).min(budget);
            budget -= len;
            Flow {
                len,
                key: rng.next_u64(),
                shared: rng.chance(0.25),
            }
        };
        let conns = (0..count)
            .map(|_| ConnSpec {
                to_server: flow(&mut rng),
                to_client: flow(&mut rng),
                close: match rng.below(3) {
                    0 => ClosePattern::ClientFirst,
                    1 => ClosePattern::ServerFirst,
                    _ => ClosePattern::Simultaneous,
                },
                second_uses_close: rng.chance(0.5),
                client_read_limit: read_limit(&mut rng, slow_readers),
                server_read_limit: read_limit(&mut rng, slow_readers),
            })
            .collect();
        // Drawn last, so the draws above (and what older seeds meant) stay as they were.
        let mut to_client = to_client;
        let sack_profile = rng.chance(0.3).then(|| match rng.below(3) {
            0 => SackProfile::BurstyLoss,
            1 => SackProfile::Reordering,
            _ => SackProfile::AckLoss,
        });
        if let Some(profile) = sack_profile {
            profile.apply(&mut rng, &mut to_client);
            // Cookie scenarios keep the path toward the server clean (see above).
            if backlog == 128 && profile != SackProfile::AckLoss {
                profile.apply(&mut rng, &mut to_server);
            }
        }
        let [client_memory, server_memory] = tight_budgets(seed);
        Scenario {
            client,
            server,
            backlog,
            client_ports,
            to_server,
            to_client,
            concurrency,
            conns,
            sack_profile,
            client_memory,
            server_memory,
        }
    }

    /// One connection, `len` bytes from the client to the server, Linux's default
    /// options on both ends, these faults on the two directions.
    fn bulk(len: usize, to_server: FaultConfig, to_client: FaultConfig) -> Scenario {
        Scenario {
            client: Knobs::plain(),
            server: Knobs::plain(),
            backlog: 128,
            client_ports: None,
            to_server,
            to_client,
            concurrency: 1,
            conns: vec![ConnSpec {
                to_server: Flow {
                    len,
                    key: 7,
                    shared: false,
                },
                to_client: Flow {
                    len: 0,
                    key: 8,
                    shared: false,
                },
                close: ClosePattern::ClientFirst,
                second_uses_close: true,
                client_read_limit: None,
                server_read_limit: None,
            }],
            sack_profile: None,
            client_memory: None,
            server_memory: None,
        }
    }

    fn total_bytes(&self) -> usize {
        self.conns
            .iter()
            .map(|c| c.to_server.len + c.to_client.len)
            .sum()
    }
}

/// The limits both engines share (see the module docs for why).
fn tcp_config() -> TcpConfig {
    TcpConfig {
        max_retries: 24,
        max_syn_retries: 24,
        max_synack_retries: 24,
        orphan_retries: 24,
        // Keeps 24 retries within about 90 s of virtual time...
        max_rto: Duration::from_secs(4),
        // ...which an orphan's time bound outlasts...
        orphan_timeout: Duration::from_secs(120),
        // ...so TIME-WAIT outlasts any retransmitted FIN of the peer.
        time_wait: Duration::from_secs(120),
        ..TcpConfig::default()
    }
}

// ----- The applications -----

/// One side of one connection.
#[derive(Debug)]
struct Side {
    index: usize,
    send: Flow,
    recv: Flow,
    /// This side closes only after the peer's FIN.
    waits_for_peer: bool,
    use_close: bool,
    read_limit: Option<usize>,
    sent: usize,
    received: usize,
    peer_closed: bool,
    fin_sent: bool,
}

impl Side {
    fn new(spec: &ConnSpec, index: usize, client: bool) -> Side {
        let (send, recv) = if client {
            (spec.to_server, spec.to_client)
        } else {
            (spec.to_client, spec.to_server)
        };
        let second = match spec.close {
            ClosePattern::ClientFirst => !client,
            ClosePattern::ServerFirst => client,
            ClosePattern::Simultaneous => false,
        };
        Side {
            index,
            send,
            recv,
            waits_for_peer: second,
            use_close: second && spec.second_uses_close,
            read_limit: if client {
                spec.client_read_limit
            } else {
                spec.server_read_limit
            },
            sent: 0,
            received: 0,
            peer_closed: false,
            fin_sent: false,
        }
    }
}

/// What both handlers share: the per-connection outcomes and the first error seen.
#[derive(Debug, Default)]
struct Log {
    /// Per connection index: the close reasons seen (client, server).
    client_closed: Vec<Vec<CloseReason>>,
    server_closed: Vec<Vec<CloseReason>>,
    errors: Vec<String>,
}

impl Log {
    fn error(&mut self, msg: String) {
        if self.errors.len() < 20 {
            self.errors.push(msg);
        }
    }
}

/// The behaviour common to both handlers.
struct Peer {
    name: &'static str,
    scenario: Rc<Scenario>,
    /// Client port → connection index, written by the client when a connection is
    /// established (always before the server accepts it).
    ports: Rc<RefCell<HashMap<u16, usize>>>,
    log: Rc<RefCell<Log>>,
    scratch: Vec<u8>,
}

impl Peer {
    /// Queue as much as the send buffer takes; half-close when done (and allowed).
    fn pump(&mut self, conn: &mut Conn<'_, Side>) {
        let side = conn.state();
        let Flow { len, key, shared } = side.send;
        let (index, mut sent) = (side.index, side.sent);
        if shared && sent < len {
            let mut all = vec![0u8; len];
            fill_payload(key, 0, &mut all);
            match conn.send_shared(Bytes::from(all)) {
                Ok(()) => sent = len,
                Err(e) => {
                    return self
                        .log
                        .borrow_mut()
                        .error(format!("{} conn {index}: send_shared: {e:?}", self.name))
                }
            }
        }
        while sent < len {
            let n = (len - sent).min(64 * 1024);
            self.scratch.resize(n, 0);
            fill_payload(key, sent, &mut self.scratch[..n]);
            match conn.send(&self.scratch[..n]) {
                Ok(k) => {
                    sent += k;
                    if k < n {
                        break;
                    }
                }
                Err(e) => {
                    self.log
                        .borrow_mut()
                        .error(format!("{} conn {index}: send at {sent}: {e:?}", self.name));
                    break;
                }
            }
        }
        conn.state().sent = sent;
        let side = conn.state();
        let peer_done = side.peer_closed && side.received == side.recv.len;
        if sent == len && !side.fin_sent && (!side.waits_for_peer || peer_done) {
            side.fin_sent = true;
            if side.use_close {
                conn.close();
            } else {
                conn.shutdown_write();
            }
        }
    }

    fn data(&mut self, conn: &mut Conn<'_, Side>, data: &[u8]) -> usize {
        let side = conn.state();
        let data = &data[..data.len().min(side.read_limit.unwrap_or(usize::MAX))];
        let index = side.index;
        let start = side.received;
        if side.peer_closed && side.read_limit.is_none() {
            // (A slow reader is offered what it left behind after the FIN, by design.)
            self.log.borrow_mut().error(format!(
                "{} conn {index}: {} bytes after FIN",
                self.name,
                data.len()
            ));
        }
        if start + data.len() > side.recv.len {
            self.log.borrow_mut().error(format!(
                "{} conn {index}: {} bytes at {start}, but only {} expected",
                self.name,
                data.len(),
                side.recv.len
            ));
        } else {
            self.scratch.resize(data.len(), 0);
            fill_payload(side.recv.key, start, &mut self.scratch);
            if self.scratch != data {
                let at = data
                    .iter()
                    .zip(&self.scratch)
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                self.log.borrow_mut().error(format!(
                    "{} conn {index}: wrong byte at offset {} (segment of {} at {start})",
                    self.name,
                    start + at,
                    data.len()
                ));
            }
        }
        side.received += data.len();
        if side.peer_closed && side.received == side.recv.len {
            // A slow reader closes second only once it has read everything.
            self.pump(conn);
        }
        data.len()
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, Side>) {
        let side = conn.state();
        if side.peer_closed {
            let msg = format!("{} conn {}: peer_closed twice", self.name, side.index);
            self.log.borrow_mut().error(msg);
        }
        side.peer_closed = true;
        self.pump(conn);
    }

    fn closed(&mut self, side: Side, reason: CloseReason) {
        let mut log = self.log.borrow_mut();
        let list = if self.name == "client" {
            &mut log.client_closed
        } else {
            &mut log.server_closed
        };
        list[side.index].push(reason);
        let i = side.index;
        let problems = [
            (
                reason != CloseReason::Normal,
                format!("closed with {reason:?}"),
            ),
            (
                side.received != side.recv.len,
                format!("received {} of {} bytes", side.received, side.recv.len),
            ),
            (
                side.sent != side.send.len,
                format!("queued {} of {} bytes", side.sent, side.send.len),
            ),
            (
                !side.peer_closed,
                "closed without the peer's FIN".to_string(),
            ),
            (!side.fin_sent, "closed before sending FIN".to_string()),
        ];
        for (bad, what) in problems {
            if bad {
                log.error(format!("{} conn {i}: {what}", self.name));
            }
        }
    }
}

struct Client {
    peer: Peer,
    next: usize,
    /// Connections to open at the next `poll` (a slot freed, or no port was free).
    to_open: usize,
    retry: Vec<(SocketAddrV4, Side)>,
}

impl Client {
    /// The next connection to open, if any is left.
    fn next_conn(&mut self) -> Option<(SocketAddrV4, Side)> {
        let spec = self.peer.scenario.conns.get(self.next)?;
        let side = Side::new(spec, self.next, true);
        self.next += 1;
        Some((SocketAddrV4::new(SERVER_IP, SERVER_PORT), side))
    }

    fn open_pending(&mut self, opener: &mut Opener<'_, Side>) {
        while self.to_open > 0 {
            let Some((remote, side)) = self.retry.pop().or_else(|| self.next_conn()) else {
                break;
            };
            self.to_open -= 1;
            opener.connect(remote, side);
        }
    }
}

impl Handler for Client {
    type Conn = Side;

    fn accept(&mut self, _: SocketAddrV4, remote: SocketAddrV4) -> Option<Side> {
        let msg = format!("client: unexpected connection from {remote}");
        self.peer.log.borrow_mut().error(msg);
        None
    }

    fn connected(&mut self, conn: &mut Conn<'_, Side>) {
        let port = conn.local_addr().port();
        let index = conn.state().index;
        // A port may be reused once its previous connection is over.
        self.peer.ports.borrow_mut().insert(port, index);
        self.peer.pump(conn);
    }

    fn data(&mut self, conn: &mut Conn<'_, Side>, data: &[u8]) -> usize {
        self.peer.data(conn, data)
    }

    fn writable(&mut self, conn: &mut Conn<'_, Side>) {
        self.peer.pump(conn);
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, Side>) {
        self.peer.peer_closed(conn);
    }

    fn closed(&mut self, opener: &mut Opener<'_, Side>, side: Side, reason: CloseReason) {
        self.peer.closed(side, reason);
        self.to_open += 1;
        self.open_pending(opener);
    }

    fn connect_failed(
        &mut self,
        _: &mut Opener<'_, Side>,
        remote: SocketAddrV4,
        side: Side,
        error: ConnectError,
    ) {
        if error == ConnectError::NoPortAvailable && self.peer.scenario.client_ports.is_some() {
            // Every port of the narrow range is busy (TIME-WAIT): try again later.
            self.retry.push((remote, side));
            self.to_open += 1;
        } else {
            let msg = format!("client conn {}: connect failed: {error}", side.index);
            self.peer.log.borrow_mut().error(msg);
        }
    }

    fn poll(&mut self, opener: &mut Opener<'_, Side>) {
        self.open_pending(opener);
    }
}

struct Server {
    peer: Peer,
}

impl Handler for Server {
    type Conn = Side;

    fn accept(&mut self, local: SocketAddrV4, remote: SocketAddrV4) -> Option<Side> {
        let index = self.peer.ports.borrow().get(&remote.port()).copied();
        match index {
            Some(i) if local.port() == SERVER_PORT => {
                let seen = self.peer.log.borrow().server_closed[i].len();
                if seen > 0 {
                    let msg = format!("server: conn {i} accepted again from {remote}");
                    self.peer.log.borrow_mut().error(msg);
                }
                Some(Side::new(&self.peer.scenario.conns[i], i, false))
            }
            _ => {
                let msg = format!("server: accept of unknown {remote} on {local}");
                self.peer.log.borrow_mut().error(msg);
                None
            }
        }
    }

    fn connected(&mut self, conn: &mut Conn<'_, Side>) {
        self.peer.pump(conn);
    }

    fn data(&mut self, conn: &mut Conn<'_, Side>, data: &[u8]) -> usize {
        self.peer.data(conn, data)
    }

    fn writable(&mut self, conn: &mut Conn<'_, Side>) {
        self.peer.pump(conn);
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, Side>) {
        self.peer.peer_closed(conn);
    }

    fn closed(&mut self, _: &mut Opener<'_, Side>, side: Side, reason: CloseReason) {
        self.peer.closed(side, reason);
    }
}

// ----- Running a seed -----

/// What a passing seed reports (and what determinism compares).
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    client: Stats,
    server: Stats,
    virtual_time: Duration,
    steps: u64,
    bytes: usize,
}

fn replay_hint(seed: u64) -> String {
    format!("replay: RUSTY_SIM_SEED={seed} cargo test --test simulation replay -- --nocapture")
}

/// Run one seed; `Err` describes what went wrong.
fn run_seed(seed: u64, slow_readers: bool) -> Result<Outcome, String> {
    run_scenario(seed, Scenario::new(seed, slow_readers))
}

/// Run `scenario` with the engines seeded by `seed`.
fn run_scenario(seed: u64, scenario: Scenario) -> Result<Outcome, String> {
    let scenario = Rc::new(scenario);
    let n = scenario.conns.len();
    let log = Rc::new(RefCell::new(Log {
        client_closed: vec![Vec::new(); n],
        server_closed: vec![Vec::new(); n],
        errors: Vec::new(),
    }));
    let ports = Rc::new(RefCell::new(HashMap::new()));
    let peer = |name| Peer {
        name,
        scenario: scenario.clone(),
        ports: ports.clone(),
        log: log.clone(),
        scratch: Vec::new(),
    };
    let mut client_cfg = sim::engine_config(sim::CLIENT_IP, seed);
    if let Some(ports) = &scenario.client_ports {
        client_cfg.ephemeral_ports = ports.clone();
    }
    let mut server_cfg = sim::engine_config(SERVER_IP, seed);
    client_cfg.tcp = scenario.client.tcp_config();
    server_cfg.tcp = scenario.server.tcp_config();
    if let Some(m) = scenario.client_memory {
        client_cfg.memory = m;
    }
    if let Some(m) = scenario.server_memory {
        server_cfg.memory = m;
    }
    let mut net = SimPair::new(
        Client {
            peer: peer("client"),
            next: 0,
            to_open: scenario.concurrency - 1,
            retry: Vec::new(),
        },
        client_cfg,
        Server {
            peer: peer("server"),
        },
        server_cfg,
        scenario.to_server,
        scenario.to_client,
        seed,
    );
    net.server.listen(SERVER_PORT, scenario.backlog);
    // The first connection opens through the engine's API, the others through the
    // handler's opener (in `poll`, and from `closed` as slots free up).
    if let Some((remote, side)) = net.client.handler_mut().next_conn() {
        if let Err((e, side)) = net.client.connect(remote, side) {
            return Err(format!("connect of conn {} failed: {e}", side.index));
        }
    }

    let all_closed = |log: &Log| {
        log.client_closed.iter().all(|c| !c.is_empty())
            && log.server_closed.iter().all(|c| !c.is_empty())
    };
    let start = net.now();
    let mut steps = 0u64;
    let describe = |net: &SimPair<Client, Server>, what: &str| {
        let log = log.borrow();
        let open: Vec<usize> = (0..n)
            .filter(|&i| log.client_closed[i].is_empty() || log.server_closed[i].is_empty())
            .collect();
        format!(
            "{what} at t={:?}: conns not closed on both sides {open:?}\n  client states {:?}\n  server states {:?}\n  client {:?}\n  server {:?}\n  faults to server {:?}\n  faults to client {:?}",
            net.now(),
            net.client.connection_states().collect::<Vec<_>>(),
            net.server.connection_states().collect::<Vec<_>>(),
            net.client.stats(),
            net.server.stats(),
            net.client.device().stats(),
            net.server.device().stats(),
        )
    };
    loop {
        if all_closed(&log.borrow()) || !log.borrow().errors.is_empty() {
            break;
        }
        if net.now() - start > VIRTUAL_TIME_LIMIT {
            return Err(describe(&net, "virtual time limit"));
        }
        if steps >= STEP_LIMIT {
            return Err(describe(&net, "step limit (live-lock?)"));
        }
        steps += 1;
        if !net.step(Duration::from_secs(1)) {
            return Err(describe(&net, "nothing left to happen"));
        }
    }
    let finished = net.now();
    {
        let log = log.borrow();
        if !log.errors.is_empty() {
            return Err(format!(
                "{}\n{}",
                log.errors.join("\n"),
                describe(&net, "error")
            ));
        }
        for i in 0..n {
            if log.client_closed[i].len() != 1 || log.server_closed[i].len() != 1 {
                return Err(format!(
                    "conn {i}: closed client {:?} server {:?}",
                    log.client_closed[i], log.server_closed[i]
                ));
            }
        }
    }

    // Past TIME-WAIT (and every retransmission that could still be pending), nothing
    // may be left behind.
    let tw = tcp_config().time_wait;
    let until = finished + tw + Duration::from_secs(10);
    while net.now() < until {
        steps += 1;
        if steps >= STEP_LIMIT {
            return Err(describe(&net, "step limit after close"));
        }
        if !net.step(Duration::from_secs(1)) {
            break;
        }
    }
    if !log.borrow().errors.is_empty() {
        let errors = log.borrow().errors.join("\n");
        return Err(format!("{errors}\n{}", describe(&net, "error after close")));
    }
    let leaks = [
        net.client.connection_count(),
        net.client.time_wait_count(),
        net.server.connection_count(),
        net.server.time_wait_count(),
        net.client.stats().buffer_memory as usize,
        net.server.stats().buffer_memory as usize,
    ];
    if leaks != [0; 6] {
        return Err(describe(
            &net,
            &format!(
                "leak (client conns, client TW, server conns, server TW, client buffer \
                 bytes, server buffer bytes) = {leaks:?}"
            ),
        ));
    }
    let (c, s) = (net.client.stats(), net.server.stats());
    let expected = n as u64;
    if c.conns_closed != expected || s.conns_closed != expected {
        return Err(describe(&net, "conns_closed counters disagree"));
    }
    if c.unread_bytes_discarded + s.unread_bytes_discarded > 0 {
        return Err(describe(&net, "received bytes were discarded unread"));
    }
    Ok(Outcome {
        client: c.clone(),
        server: s.clone(),
        virtual_time: finished - start,
        steps,
        bytes: scenario.total_bytes(),
    })
}

/// Run a seed, turning panics into errors too, so the seed is always reported.
fn check_seed(seed: u64) -> Result<Outcome, String> {
    check_seed_with(seed, false)
}

fn check_seed_with(seed: u64, slow_readers: bool) -> Result<Outcome, String> {
    match catch_unwind(AssertUnwindSafe(|| run_seed(seed, slow_readers))) {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

fn run_seeds(seeds: impl Iterator<Item = u64>, slow_readers: bool) {
    let started = std::time::Instant::now();
    let mut failures = Vec::new();
    let (mut count, mut bytes, mut retransmissions, mut cookies, mut reused) = (0, 0, 0, 0, 0);
    for seed in seeds {
        count += 1;
        match check_seed_with(seed, slow_readers) {
            Ok(o) => {
                bytes += o.bytes;
                retransmissions += o.client.retransmissions + o.server.retransmissions;
                cookies += o.server.syn_cookies_accepted;
                reused += o.client.time_wait_reused + o.server.time_wait_reused;
            }
            Err(e) => {
                eprintln!("seed {seed} FAILED: {e}\n  {}", replay_hint(seed));
                failures.push(seed);
            }
        }
    }
    eprintln!(
        "{count} seeds, {} MB of payload, {retransmissions} retransmissions, {cookies} \
         connections through SYN cookies, {reused} TIME-WAIT reuses, in {:?}",
        bytes >> 20,
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {count} seeds failed: {failures:?}\n{}",
        failures.len(),
        failures
            .iter()
            .take(10)
            .map(|&s| replay_hint(s))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

// ----- Tests -----

/// 500 seeds (a few seconds with the test profile).
#[test]
fn many_seeds() {
    run_seeds(0..500, false);
}

/// The long run: `cargo test --release --test simulation -- --ignored`, seeds 500..5500,
/// or the range in `RUSTY_SIM_SEEDS` (`START..END`, e.g. `0..100000` for an offline run
/// over 100k seeds).
#[test]
#[ignore]
fn thousands_of_seeds() {
    let range = std::env::var("RUSTY_SIM_SEEDS")
        .ok()
        .map(|s| parse_seed_range(&s).unwrap_or_else(|e| panic!("RUSTY_SIM_SEEDS: {e}")))
        .unwrap_or(500..5500);
    run_seeds(range, false);
}

/// `START..END` (END exclusive).
fn parse_seed_range(s: &str) -> Result<std::ops::Range<u64>, String> {
    let (a, b) = s
        .trim()
        .split_once("..")
        .ok_or_else(|| format!("{s:?} is not START..END"))?;
    let a: u64 = a.trim().parse().map_err(|e| format!("{a:?}: {e}"))?;
    let b: u64 = b.trim().parse().map_err(|e| format!("{b:?}: {e}"))?;
    if a >= b {
        return Err(format!("{s:?} is empty"));
    }
    Ok(a..b)
}

#[test]
fn seed_ranges_parse() {
    assert_eq!(parse_seed_range("0..100000"), Ok(0..100_000));
    assert_eq!(parse_seed_range(" 5 .. 7 "), Ok(5..7));
    assert!(parse_seed_range("7..5").is_err());
    assert!(parse_seed_range("5").is_err());
    assert!(parse_seed_range("a..b").is_err());
}

/// The seeds of the CI range that run a SACK profile: each must pass (they are in
/// `many_seeds` too) and, together, make the senders recover from loss with SACK.
#[test]
fn sack_heavy_seeds_recover_with_sack() {
    let seeds: Vec<u64> = (0..500)
        .filter(|&s| Scenario::new(s, false).sack_profile.is_some())
        .take(40)
        .collect();
    assert!(seeds.len() >= 20, "the CI range holds SACK-heavy seeds");
    let (mut fast, mut rack) = (0, 0);
    for &seed in &seeds {
        let o =
            check_seed(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", replay_hint(seed)));
        fast += o.client.fast_retransmits + o.server.fast_retransmits;
        rack += o.client.rack_losses + o.server.rack_losses;
    }
    assert!(
        fast > 0 && rack > 0,
        "fast recoveries {fast}, RACK losses {rack}"
    );
}

/// One data segment lost in the middle of a long transfer is repaired by SACK recovery
/// (or a tail loss probe), never by a retransmission timeout.
#[test]
fn a_single_loss_in_a_long_transfer_needs_no_timeout() {
    for (frame, delay_ms) in [(400u64, 5u64), (1_000, 20), (1_777, 1)] {
        let path = FaultConfig {
            delay: Duration::from_millis(delay_ms),
            ..FaultConfig::none()
        };
        let to_server = FaultConfig {
            drop_frame: Some(frame),
            ..path
        };
        let scenario = Scenario::bulk(4 << 20, to_server, path);
        let o = run_scenario(1, scenario).unwrap_or_else(|e| panic!("frame {frame}: {e}"));
        let c = &o.client;
        assert_eq!(c.rtos, 0, "frame {frame}: {c:?}");
        assert_eq!(
            c.retransmissions, 1,
            "frame {frame}: exactly the lost segment"
        );
        assert!(c.fast_retransmits + c.tlps >= 1, "frame {frame}");
    }
}

/// Readers that consume only part of what each `data` call offers. The rest stays in
/// the receive buffer and must be offered again while the reader makes progress, and
/// offered a last time before the connection ends: every byte still arrives exactly once.
///
/// `RUSTY_SIM_SLOW_READERS=1` makes `replay` use this mode.
#[test]
fn slow_readers() {
    run_seeds(0..200, true);
}

/// Replays the seed in `RUSTY_SIM_SEED` (or a fixed one when unset) with details; with
/// `RUSTY_SIM_TRACE=1` also every segment received, with its virtual time.
#[test]
fn replay() {
    let seed = std::env::var("RUSTY_SIM_SEED")
        .ok()
        .map(|s| {
            s.trim()
                .parse::<u64>()
                .expect("RUSTY_SIM_SEED must be a u64")
        })
        .unwrap_or(12345);
    let slow = std::env::var_os("RUSTY_SIM_SLOW_READERS").is_some();
    let scenario = Scenario::new(seed, slow);
    eprintln!(
        "seed {seed}: {} conns ({} at once), {} bytes, backlog {}\n  client {:?}\n  server {:?}\n  to server {:?}\n  to client {:?}",
        scenario.conns.len(),
        scenario.concurrency,
        scenario.total_bytes(),
        scenario.backlog,
        scenario.client,
        scenario.server,
        scenario.to_server,
        scenario.to_client
    );
    if std::env::var_os("RUSTY_SIM_TRACE").is_some() {
        trace_segments();
    }
    match check_seed_with(seed, slow) {
        Ok(o) => eprintln!("seed {seed} passed: {o:?}"),
        Err(e) => panic!("seed {seed} failed: {e}\n{}", replay_hint(seed)),
    }
}

/// The simulator logs every segment it delivers at `trace` level (`rusty_stack::sim`):
/// show those lines, and only those, through the test harness's output.
fn trace_segments() {
    use std::io::Write;
    let _ = env_logger::Builder::new()
        .filter_module("rusty_stack::sim", log::LevelFilter::Trace)
        .format(|out, record| writeln!(out, "{}", record.args()))
        .is_test(true)
        .try_init();
}

#[test]
fn same_seed_same_run() {
    for seed in [7, 1_000_003] {
        let a = check_seed(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let b = check_seed(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(a, b, "seed {seed} did not replay identically");
        assert!(a.client.segments_out > 0 && a.server.segments_out > 0);
    }
}

/// The payload generator the byte-exact checks rely on.
#[test]
fn payload_check_detects_a_wrong_byte() {
    // Random access agrees with one sequential fill, at unaligned offsets too.
    let mut whole = vec![0u8; 110];
    fill_payload(42, 0, &mut whole);
    let mut part = vec![0u8; 97];
    fill_payload(42, 13, &mut part);
    assert_eq!(&whole[13..], &part[..]);
    // Another key gives other bytes.
    fill_payload(43, 13, &mut part);
    assert_ne!(&whole[13..], &part[..]);
}

/// Random loss of 1 % of the frames each way (data and ACKs), one long transfer: loss
/// recovery (SACK, RACK, PRR) and the probes repair everything without a single
/// retransmission timeout.
#[test]
fn one_percent_loss_each_way_needs_no_timeout() {
    for seed in 0..8u64 {
        let path = FaultConfig {
            delay: Duration::from_micros(300),
            loss: 0.01,
            ..FaultConfig::none()
        };
        let scenario = Scenario::bulk(4 << 20, path, path);
        let o = run_scenario(seed, scenario).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let c = &o.client;
        assert_eq!(c.rtos, 0, "seed {seed}: {c}");
        assert!(
            c.fast_retransmits > 0 && c.rack_losses > 0,
            "seed {seed}: {c}"
        );
    }
}
