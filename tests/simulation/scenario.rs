//! The scenario a seed describes: the seed's own randomness, the faults of both
//! directions, the IP families and addresses, the connections with their payloads,
//! direction and close order, the SACK profile and memory budgets, and the TCP
//! configuration of both engines.

use super::*;

/// Bytes the client and server send per seed, both directions together, at most.
const MAX_BYTES_PER_SEED: usize = 8 << 20;
const MAX_PAYLOAD: usize = 1 << 20;

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
pub(crate) fn fill_payload(key: u64, offset: usize, out: &mut [u8]) {
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

/// Who sends its FIN first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClosePattern {
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
pub(crate) struct Flow {
    pub(crate) len: usize,
    pub(crate) key: u64,
    /// Queue the payload as one shared `Bytes` instead of copying it in chunks.
    pub(crate) shared: bool,
}

/// Which of the acceptor's addresses a connection is opened to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dest {
    V4,
    /// Its unique-local IPv6 address.
    V6,
    /// Its link-local IPv6 address.
    LinkLocal,
    /// The server engine's address outside the link's prefix, which the client engine
    /// reaches through its gateway (the server engine, by its link-local address).
    Routed,
}

#[derive(Debug, Clone)]
pub(crate) struct ConnSpec {
    /// The address the connection goes to, which says its family.
    pub(crate) dest: Dest,
    /// The server engine opens it, to the client engine's listener (the roles of the
    /// payloads and the close stay with the engines: the client engine still sends
    /// `to_server`).
    pub(crate) reverse: bool,
    pub(crate) to_server: Flow,
    pub(crate) to_client: Flow,
    pub(crate) close: ClosePattern,
    /// The side that closes second uses `close()` rather than `shutdown_write()`.
    pub(crate) second_uses_close: bool,
    /// Each side's `data` callback consumes at most this many bytes per call (a slow
    /// reader: the rest stays in the receive buffer and closes the window).
    pub(crate) client_read_limit: Option<usize>,
    pub(crate) server_read_limit: Option<usize>,
}

/// Per-engine settings a seed varies, so small windows, zero windows, missing options
/// and SYN cookies are exercised too.
#[derive(Debug, Clone)]
pub(crate) struct Knobs {
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
    pub(crate) fn tcp_config(&self) -> TcpConfig {
        {
            let mut c = tcp_config();
            c.send_buffer = self.send_buffer;
            c.recv_buffer = self.recv_buffer;
            c.max_ooo_ranges = self.max_ooo_ranges;
            c.window_scaling = self.window_scaling;
            c.timestamps = self.timestamps;
            c.sack = self.sack;
            c.delayed_ack = self.delayed_ack;
            c
        }
    }
}

/// The IP families of a seed's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Families {
    /// Both engines speak IPv4 only.
    V4,
    /// Both engines speak IPv6 only (no IPv4 address at all).
    V6,
    /// Both engines speak both; connections of either family run side by side.
    Both,
}

impl Families {
    /// Every third seed runs over IPv6 alone, every sixth over both families; the
    /// others, half of all seeds, over IPv4.
    pub(crate) fn of(seed: u64) -> Families {
        match seed % 6 {
            1 | 4 => Families::V6,
            5 => Families::Both,
            _ => Families::V4,
        }
    }
}

/// What an IPv6 seed varies beyond its connections.
#[derive(Debug, Clone)]
pub(crate) struct Ipv6Setup {
    /// Duplicate-address probes each engine sends per address before using it (client,
    /// server): until then a connect fails (`NoSourceAddress`) and the engine neither
    /// answers solicitations for the address nor takes TCP to it.
    pub(crate) dad_transmits: [u8; 2],
    /// A neighbour-cache lifetime short enough for mappings to expire during the run,
    /// so later connections resolve their peer again; also the base of the time a
    /// neighbour stays reachable, so that it is probed, and may be forgotten, while
    /// connections run.
    pub(crate) neighbor_lifetime: Option<Duration>,
    /// The server engine also has an address in another prefix ([`Dest::Routed`]), and
    /// the client engine a gateway.
    pub(crate) routed: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub(crate) families: Families,
    /// Set when the engines speak IPv6.
    pub(crate) ipv6: Option<Ipv6Setup>,
    pub(crate) client: Knobs,
    pub(crate) server: Knobs,
    /// Half-open connections the listener holds before answering with SYN cookies.
    pub(crate) backlog: usize,
    /// A narrow range of client ports, so ports are reused while the server may still
    /// hold the previous connection's TIME-WAIT entry (RFC 6191 reopening).
    pub(crate) client_ports: Option<std::ops::RangeInclusive<u16>>,
    pub(crate) to_server: FaultConfig,
    pub(crate) to_client: FaultConfig,
    /// At most this many connections are open at once; the next opens when one closes.
    pub(crate) concurrency: usize,
    pub(crate) conns: Vec<ConnSpec>,
    /// Faults chosen to exercise SACK-based recovery, if any.
    pub(crate) sack_profile: Option<SackProfile>,
    /// Memory budgets tight enough to keep an engine under memory pressure (pruned
    /// out-of-order data, clamped windows, short sends), for a quarter of the engines.
    pub(crate) client_memory: Option<MemoryBudget>,
    pub(crate) server_memory: Option<MemoryBudget>,
}

/// For a quarter of the seeds' engines, a budget tight enough that the engine spends
/// the run under memory pressure. Drawn from a stream of its own, so the rest of each
/// seed's scenario is what it was before budgets existed.
fn tight_budgets(seed: u64) -> [Option<MemoryBudget>; 2] {
    let mut rng = Rng::new(mix(seed ^ 0x6d65_6d6f_7279));
    [(); 2].map(|_| {
        rng.chance(0.25).then(|| {
            let pressure = rng.range(8 << 10, 256 << 10) as usize;
            MemoryBudget::new(pressure / 2, pressure, pressure + pressure / 2)
        })
    })
}

/// The families of `seed`, its IPv6 setup and each of its `count` connections'
/// destination and direction. Drawn from a stream of their own, so the rest of each
/// seed's scenario is what it was before IPv6 existed.
fn ipv6_plan(seed: u64, count: usize) -> (Families, Option<Ipv6Setup>, Vec<(Dest, bool)>) {
    let families = Families::of(seed);
    let mut rng = Rng::new(mix(seed ^ 0x6970_7636));
    // Most engines use their addresses at once; some probe once (the default), a few
    // twice.
    let dad = |rng: &mut Rng| match rng.below(20) {
        0..=11 => 0,
        12..=18 => 1,
        _ => 2,
    };
    let setup = (families != Families::V4).then(|| Ipv6Setup {
        dad_transmits: [dad(&mut rng), dad(&mut rng)],
        neighbor_lifetime: rng
            .chance(0.3)
            .then(|| Duration::from_millis(rng.range(500, 20_000))),
        routed: rng.chance(0.25),
    });
    let routed = setup.as_ref().is_some_and(|s| s.routed);
    let conns = (0..count)
        .map(|_| {
            let dest = match families {
                Families::V4 => return (Dest::V4, false),
                Families::Both if rng.chance(0.5) => Dest::V4,
                _ if routed && rng.chance(0.25) => return (Dest::Routed, false),
                _ if rng.chance(0.25) => Dest::LinkLocal,
                _ => Dest::V6,
            };
            // Some connections the other way, so each engine resolves the other.
            (dest, rng.chance(0.25))
        })
        .collect();
    (families, setup, conns)
}

fn faults(rng: &mut Rng) -> FaultConfig {
    // A quarter of the directions are clean, so both easy and hard paths are covered.
    if rng.chance(0.25) {
        return FaultConfig::none();
    }
    let delay = Duration::from_micros(rng.below(20_001));
    {
        let mut c = FaultConfig::none();
        c.loss = rng.unit() * 0.20;
        c.duplicate = rng.unit() * 0.10;
        c.reorder = rng.unit() * 0.20;
        c.corrupt = rng.unit() * 0.05;
        c.delay = delay;
        c.jitter = if rng.chance(0.5) {
            Duration::from_micros(rng.below(5_001))
        } else {
            Duration::ZERO
        };
        c.reorder_delay = Duration::from_micros(rng.range(500, 5_000));
        c
    }
}

/// The profiles that keep the sender's SACK scoreboard busy (several holes per window,
/// RACK's reordering window, lost ACKs), applied on top of a seed's faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SackProfile {
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
    pub(crate) fn new(seed: u64, slow_readers: bool) -> Scenario {
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
            to_server = FaultConfig::none()
                .with_duplicate(to_server.duplicate)
                .with_delay(to_server.delay);
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
        let (families, ipv6, routes) = ipv6_plan(seed, count);
        let conns = routes
            .into_iter()
            .map(|(dest, reverse)| ConnSpec {
                dest,
                reverse,
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
            families,
            ipv6,
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
    pub(crate) fn bulk(len: usize, to_server: FaultConfig, to_client: FaultConfig) -> Scenario {
        Scenario {
            families: Families::V4,
            ipv6: None,
            client: Knobs::plain(),
            server: Knobs::plain(),
            backlog: 128,
            client_ports: None,
            to_server,
            to_client,
            concurrency: 1,
            conns: vec![ConnSpec {
                dest: Dest::V4,
                reverse: false,
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

    /// `self` over IPv6 alone, to the server's unique-local address, each engine
    /// sending `dad_transmits` duplicate-address probes per address before using it.
    pub(crate) fn over_ipv6(mut self, dad_transmits: u8) -> Scenario {
        self.families = Families::V6;
        self.ipv6 = Some(Ipv6Setup {
            dad_transmits: [dad_transmits; 2],
            neighbor_lifetime: None,
            routed: false,
        });
        for c in &mut self.conns {
            c.dest = Dest::V6;
        }
        self
    }

    pub(crate) fn total_bytes(&self) -> usize {
        self.conns
            .iter()
            .map(|c| c.to_server.len + c.to_client.len)
            .sum()
    }
}

/// The limits both engines share (see the module docs for why).
pub(crate) fn tcp_config() -> TcpConfig {
    let mut c = TcpConfig::default();
    c.max_retries = 24;
    c.max_syn_retries = 24;
    c.max_synack_retries = 24;
    c.orphan_retries = 24;
    // Keeps 24 retries within about 90 s of virtual time...
    c.max_rto = Duration::from_secs(4);
    // ...which an orphan's time bound outlasts...
    c.orphan_timeout = Duration::from_secs(120);
    // ...so TIME-WAIT outlasts any retransmitted FIN of the peer.
    c.time_wait = Duration::from_secs(120);
    c
}
