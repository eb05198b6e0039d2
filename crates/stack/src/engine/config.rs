//! What one engine is configured with: its address, routing, limits and TCP tunables.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;

use crate::app::Handler;
use crate::arp::ArpConfig;
use crate::tcp::config::TcpConfig;
use crate::tcp::pool::MemoryBudget;

/// What one engine (one worker on one queue of one link) is configured with.
/// [`EngineConfig::new`] gives the defaults, which follow Linux where the RFCs leave a
/// choice.
///
/// # Scale
///
/// The limits on how many connections one engine holds are all configuration here:
/// `max_connections` (live connections), `max_time_wait` (TIME-WAIT entries),
/// `max_orphans` (closed but unfinished), `reserved_connections` (room made at start),
/// each listener's backlog ([`Engine::listen`](crate::Engine::listen)), the ARP
/// cache's `max_entries` ([`ArpConfig`]; passive opens learn their peer's MAC from the
/// SYN and never need it) and `memory` (buffer memory, which idle connections do not
/// hold). For a million connections on one engine:
///
/// ```
/// # use rusty_stack::EngineConfig;
/// let mut cfg = EngineConfig::new("10.0.0.1".parse().unwrap());
/// cfg.max_connections = 1_000_000;
/// cfg.reserved_connections = 1_000_000;
/// cfg.max_time_wait = 1_000_000;
/// ```
///
/// A server reaches a million from many clients, or from few clients across several
/// listening ports: one client address has at most one connection per (client port,
/// server port) pair, so one client address needs ⌈1,000,000 / 64,512⌉ = 16 server
/// ports with `ephemeral_ports` at `1024..=65535` (36 at the default 28,232). The client
/// engine is configured the same way, with `ephemeral_ports` widened; it spreads its
/// connects over the server ports. `examples/million.rs` does exactly this over the
/// in-memory link. A client that needs more than 64,512 connections to a single server
/// address and port runs more engines, on more addresses.
///
/// # Addresses
///
/// An engine has at most one IPv4 address (`ip`; [`Ipv4Addr::UNSPECIFIED`] for none)
/// and any number of IPv6 ones (`ipv6`). With at least one IPv6 address the engine
/// speaks IPv6 and takes a link-local address as well (`fe80::/64`, its interface
/// identifier drawn per RFC 7217 from the MAC and `stable_secret`, so every worker on a
/// link and every restart takes the same one). Each IPv6 address goes through duplicate
/// address detection before it is used (`dad_transmits`). Router advertisements are
/// not acted on: routes come from this configuration only.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EngineConfig {
    /// This link's IPv4 address; [`Ipv4Addr::UNSPECIFIED`]: the link has none, and
    /// the engine neither answers ARP nor accepts IPv4.
    pub ip: Ipv4Addr,
    /// Prefix length of the link's subnet: addresses inside it are reached directly, and
    /// its directed broadcast (below a /31) is dropped as a source (RFC 1122 §3.2.1.3).
    pub prefix_len: u8,
    /// Where everything outside the subnet goes. Without one, every address is treated
    /// as on-link.
    pub gateway: Option<Ipv4Addr>,
    /// This link's IPv6 addresses, global or unique-local, each with its prefix length
    /// (addresses inside a prefix are reached directly). Empty: IPv4 only.
    pub ipv6: Vec<(Ipv6Addr, u8)>,
    /// Where IPv6 traffic outside the link's prefixes goes (a router, usually by its
    /// link-local address). Without one, every IPv6 address is treated as on-link.
    pub ipv6_gateway: Option<Ipv6Addr>,
    /// Neighbor solicitations sent to detect a duplicate of each IPv6 address before it
    /// is used, one second apart (RFC 4862's DupAddrDetectTransmits); 0 uses the
    /// addresses at once.
    pub dad_transmits: u8,
    /// The secret the link-local address's interface identifier is drawn with (RFC
    /// 7217's secret key). Keep it the same across restarts for a stable address; the
    /// runtime derives it from the machine's identity.
    pub stable_secret: [u8; 16],
    /// TCP tunables every connection of this engine copies.
    pub tcp: TcpConfig,
    /// Neighbour cache tuning.
    pub arp: ArpConfig,
    /// Most live connection blocks per engine (TIME-WAIT entries are not counted). A
    /// policy, not a wall: nothing else in the engine is sized by it or by 16 bits, so
    /// a million (or more) is a matter of setting it and having the memory (see
    /// [Scale](#scale)).
    pub max_connections: usize,
    /// Connections the engine makes room for when it starts (at most
    /// `max_connections`): up to this many, the connection and flow tables never move.
    /// Past it they grow by doubling, and each doubling copies every connection block
    /// (hundreds of bytes each) inside one loop turn, a pause that grows with the table.
    /// The room is address space until connections use it: the allocator maps large
    /// tables lazily. Raise it to the connection count you expect on engines meant to
    /// hold hundreds of thousands.
    pub reserved_connections: usize,
    /// Bytes of drained connection-buffer storage the engine keeps for reuse, per size
    /// class (8 classes of rings, 2 KiB … 256 KiB), so that busy connections do not go
    /// to the allocator for every request. Rings beyond it go back to the allocator, and
    /// so do rings that sat unused for a second. The pool starts empty; this bounds what
    /// it holds (at most 8 × this), which the engine reports as
    /// [`Stats::buffer_pool_idle`](crate::Stats).
    pub buffer_pool: usize,
    /// The budget for the buffer memory this engine's connections hold, like Linux's
    /// `tcp_mem`: what happens under pressure and at the limit is described at
    /// [`MemoryBudget`].
    pub memory: MemoryBudget,
    /// Most orphans (connections the application has closed whose FIN or data is not
    /// yet acknowledged: FIN-WAIT-1/2, CLOSING, LAST-ACK). When one more is made, the
    /// oldest is reset (RST to the peer, `closed` with
    /// [`CloseReason::Aborted`](crate::CloseReason), counted in
    /// [`Stats::orphans_reset`](crate::Stats)), as Linux's tcp_max_orphans resets
    /// orphans past its limit. Linux scales the limit with memory (about 64 Ki per GiB);
    /// the default here, 16 Ki per worker, bounds what clients that stop reading can
    /// pin (up to a send buffer each: 4 GiB at 256 KiB) while leaving a busy server's
    /// ordinary closes (a few seconds each) far below it. Each orphan is also bounded in
    /// time ([`TcpConfig::orphan_timeout`](crate::TcpConfig)).
    pub max_orphans: usize,
    /// Most TIME-WAIT entries (about 110 bytes each with their flow-table bucket and
    /// timer, 130 for IPv6); past this, connections skip
    /// TIME-WAIT (Linux tcp_max_tw_buckets behaves the same way). An engine that closes
    /// its connections actively at a rate R holds about R × 2·MSL of them
    /// ([`TcpConfig::time_wait`](crate::TcpConfig)): raise it with the rate.
    pub max_time_wait: usize,
    /// Answer SYNs with SYN cookies when a listener's backlog is full.
    pub syn_cookies: bool,
    /// Other engines, which this one knows nothing of, share the link's address (the
    /// processes of one program under `rusty-run`, each on its own queue): a segment
    /// for a connection or port this engine does not have may be theirs, steered here
    /// by the link, so it is dropped (counted as `NoConnection` or `NoListener`)
    /// rather than answered with a reset that would end their connection. A SYN for a
    /// port that none of them listens on is still refused
    /// ([`Engine::set_link_listeners`](crate::Engine::set_link_listeners)).
    pub shared_link: bool,
    /// Most frames taken from the driver per loop turn.
    pub rx_burst: usize,
    /// Local ports for active opens. On a link whose steering the stack cannot predict
    /// they also mark which flows are active opens, owned by their port; every other
    /// flow is owned by a hash of its remote end. Keep listening ports outside, or all of
    /// a port's connections share one worker there (and the port search can no longer
    /// tell from its counts alone that a destination is out of ports).
    ///
    /// A port is taken per destination (remote address and port), not globally: the
    /// default 28,232 ports allow 28,232 connections (live or in TIME-WAIT) to *each*
    /// server address and port; with `1024..=65535`, 64,512. On a multi-queue link each
    /// worker gets about 1/queues of them. A connect to a destination whose ports are all
    /// taken fails at once with
    /// [`ConnectError::NoPortAvailable`](crate::ConnectError), without a scan.
    pub ephemeral_ports: RangeInclusive<u16>,
    /// Send bulk data as TSO super-frames when the device segments (and checksums) for
    /// us. Fewer, larger writes help the sender; on TAP they cost the receiving kernel
    /// more per byte (see the README's benchmarks), so it can be turned off.
    pub tso: bool,
    /// Keys for ISNs and SYN cookies. `None` draws them from the OS; tests and the
    /// simulator fix them so runs replay exactly.
    pub secret: Option<[u8; 32]>,
}

impl EngineConfig {
    /// The defaults for an engine at `ip`: a /24 with every address on-link, 65,536
    /// connections, SYN cookies on, TSO where the device offers it, fresh keys from the OS.
    pub fn new(ip: Ipv4Addr) -> EngineConfig {
        EngineConfig {
            ip,
            prefix_len: 24,
            gateway: None,
            ipv6: Vec::new(),
            ipv6_gateway: None,
            dad_transmits: 1,
            stable_secret: [0; 16],
            tcp: TcpConfig::default(),
            arp: ArpConfig::default(),
            max_connections: 65536,
            reserved_connections: 65536,
            buffer_pool: crate::tcp::pool::DEFAULT_BYTES_PER_CLASS,
            memory: MemoryBudget::default(),
            max_time_wait: 65536,
            max_orphans: 16384,
            syn_cookies: true,
            shared_link: false,
            rx_burst: 32,
            ephemeral_ports: 32768..=60999,
            secret: None,
            tso: true,
        }
    }

    /// The address to resolve (with ARP or Neighbor Discovery) for traffic to `dst`.
    pub fn next_hop(&self, dst: IpAddr) -> IpAddr {
        match dst {
            IpAddr::V4(v4) => match self.gateway {
                Some(gw) if !self.on_link(v4) => IpAddr::V4(gw),
                _ => dst,
            },
            IpAddr::V6(v6) => match self.ipv6_gateway {
                Some(gw) if !self.on_link_v6(v6) => IpAddr::V6(gw),
                _ => dst,
            },
        }
    }

    /// Whether `dst` is inside this link's subnet (`prefix_len` 0: every address is).
    pub fn on_link(&self, dst: Ipv4Addr) -> bool {
        let mask = crate::ipv4::netmask(self.prefix_len);
        u32::from(dst) & mask == u32::from(self.ip) & mask
    }

    /// The link-local address an engine with this configuration takes on a device with
    /// `mac`, when it speaks IPv6 (see [Addresses](#addresses)): for drivers that
    /// filter by destination address (AF_XDP), and to tell the operator. Every worker
    /// of a link takes the same one; should another node hold it, the engine draws
    /// another (RFC 7217 §6), which this does not follow.
    pub fn link_local(&self, mac: crate::io::MacAddr) -> Option<Ipv6Addr> {
        (!self.ipv6.is_empty()).then(|| super::addresses::link_local(mac, &self.stable_secret, 0))
    }

    /// Whether `dst` is link-local (`fe80::/10`) or inside one of the link's IPv6
    /// prefixes.
    pub fn on_link_v6(&self, dst: Ipv6Addr) -> bool {
        let within = |(addr, len): &(Ipv6Addr, u8)| {
            let len = u32::from((*len).min(128));
            let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
            u128::from(dst) & mask == u128::from(*addr) & mask
        };
        dst.is_unicast_link_local() || self.ipv6.iter().any(within)
    }
}

/// A 64-bit value drawn from the engine secret for `purpose`, for what the engine shows
/// in clear but should not be guessed (the first ephemeral port, the first IPv4
/// Identification) and for the seed of its generator: SipHash-2-4 under the secret's
/// first half. SipHash is a pseudo-random function, so these values teach an observer
/// nothing about the secret, whose halves key the ISNs and the SYN cookies.
pub(crate) fn derive(secret: &[u8; 32], purpose: &str) -> u64 {
    use std::hash::Hasher;
    let key: [u8; 16] = secret[..16].try_into().expect("16 bytes");
    let mut h = siphasher::sip::SipHasher24::new_with_key(&key);
    h.write(purpose.as_bytes());
    h.finish()
}

/// 32 bytes of key material from the OS.
pub(crate) fn random_secret() -> [u8; 32] {
    let mut out = [0u8; 32];
    out[..16].copy_from_slice(&crate::tcp::isn::random_secret());
    out[16..].copy_from_slice(&crate::tcp::isn::random_secret());
    out
}

/// Bytes of memory an engine whose application is `H` sets aside when it starts with
/// `cfg`: its connection table and flow table, with room for
/// [`EngineConfig::reserved_connections`]. Address space, not resident memory: a page
/// of it becomes resident when a connection first uses it. Everything else an engine
/// holds grows with its connections and is bounded by its configuration.
pub fn reserved_bytes<H: Handler>(cfg: &EngineConfig) -> usize {
    let room = cfg.reserved_connections.min(cfg.max_connections);
    room * crate::app::slot_bytes::<super::Block, H::Conn>()
        + super::Flows::reserved_bytes(room, !cfg.ipv6.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_hop_uses_gateway_off_link() {
        let mut c = EngineConfig::new(Ipv4Addr::new(10, 0, 2, 2));
        let v4 = |a, b, c, d| IpAddr::V4(Ipv4Addr::new(a, b, c, d));
        assert_eq!(c.next_hop(v4(8, 8, 8, 8)), v4(8, 8, 8, 8));
        c.gateway = Some(Ipv4Addr::new(10, 0, 2, 1));
        assert_eq!(c.next_hop(v4(8, 8, 8, 8)), v4(10, 0, 2, 1));
        assert_eq!(c.next_hop(v4(10, 0, 2, 9)), v4(10, 0, 2, 9));
        c.prefix_len = 0;
        assert!(c.on_link(Ipv4Addr::new(1, 2, 3, 4)));
    }

    #[test]
    fn ipv6_next_hop_is_the_gateway_outside_the_prefixes_and_link_local() {
        let mut c = EngineConfig::new(Ipv4Addr::UNSPECIFIED);
        let v6 = |s: &str| IpAddr::V6(s.parse().unwrap());
        c.ipv6 = vec![("fd00::2".parse().unwrap(), 64)];
        assert_eq!(c.next_hop(v6("2001:db8::1")), v6("2001:db8::1"));
        c.ipv6_gateway = Some("fe80::1".parse().unwrap());
        assert_eq!(c.next_hop(v6("2001:db8::1")), v6("fe80::1"));
        assert_eq!(c.next_hop(v6("fd00::9")), v6("fd00::9"));
        assert_eq!(c.next_hop(v6("fd00:0:0:1::9")), v6("fe80::1"));
        assert_eq!(c.next_hop(v6("fe80::77")), v6("fe80::77"));
        c.ipv6 = vec![("fd00::2".parse().unwrap(), 0)];
        assert!(c.on_link_v6("2001:db8::1".parse().unwrap()));
    }

    /// What the engine shows in clear is drawn from the secret, not cut out of it: no
    /// derived value carries two bytes of the secret in a row, and each purpose gets
    /// its own value.
    #[test]
    fn clear_values_are_derived_not_cut_from_the_secret() {
        let secret: [u8; 32] = std::array::from_fn(|i| i as u8 * 7 + 1);
        let purposes = ["rng seed", "first ephemeral port", "first ipv4 ident"];
        let values: Vec<u64> = purposes.iter().map(|p| derive(&secret, p)).collect();
        for v in &values {
            let bytes = v.to_le_bytes();
            for pair in bytes.windows(2) {
                assert!(!secret.windows(2).any(|w| w == pair), "{v:#x}");
            }
        }
        assert!(values[0] != values[1] && values[1] != values[2] && values[0] != values[2]);
        let mut other = secret;
        other[0] ^= 1;
        assert_ne!(derive(&other, purposes[0]), values[0]);
    }
}
