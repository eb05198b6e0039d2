//! The per-core engine: one packet-IO queue, one connection table, one timer wheel, one
//! ARP cache and one application [`Handler`], driven by [`Engine::poll`] in a
//! run-to-completion loop.
//!
//! One loop turn reads the clock once, takes a burst of frames and pushes each through
//! Ethernet → ARP/IPv4 → ICMP/TCP → the handler's callbacks, fires due timers, lets every
//! connection that has something to say build its segments straight into driver
//! buffers, and hands the burst to the driver in one call.
//!
//! The rooms: this file holds the engine's state, its public API and the loop turn;
//! `input` demultiplexes received frames; `listen` answers SYNs (with
//! SYN cookies past the backlog); `connect` starts active opens and picks their ports;
//! `owner` says which sibling owns a flow on links whose steering the stack cannot
//! predict; `dispatch` hands TCP events to the application core and fires timers;
//! `output` builds frames; `arp` glues the neighbour cache to the device, and
//! `neighbours` its entries to the connections that go through them.

mod addresses;
mod arp;
pub mod config;
mod connect;
mod dispatch;
// `pub` items for the `internals` feature, unreachable without it.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod flow_key;
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod flows;
pub(crate) use flow_key::FlowKey;
mod input;
#[cfg(feature = "internals")]
pub(crate) mod inspect;
mod listen;
mod neighbours;
mod orphans;
mod output;
// `pub` items for the `internals` feature, unreachable without it.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod owner;
mod ports;
mod timewait;
mod v6;

use crate::rng::Rng;
use std::marker::PhantomData;
use std::net::{Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

/// How many size classes of buffer rings an engine keeps drained rings of (each up to
/// [`EngineConfig::buffer_pool`] bytes).
pub use crate::tcp::pool::CLASSES as BUFFER_SIZE_CLASSES;
pub use config::{reserved_bytes, EngineConfig};

use crate::app::{AppCore, Conn, ConnId, Handler, OpenResult};
use crate::arp::{NeighbourId, Solicit};
use crate::io::{ChecksumOffload, MacAddr, PacketIo, RxFrame, ETHERNET_HEADER_LEN};
use crate::ipv4::{self, IdentCounter};
use crate::stats::Stats;
use crate::tcp::cookie::SynCookies;
use crate::tcp::isn::{IsnGenerator, TupleHash};
use crate::tcp::pool::RingPool;
use crate::tcp::segment::{self, TxSegment};
use crate::tcp::seq::SeqNum;
use crate::tcp::tcb::{Open, Opening, State, Tcb, TcbLimits};
use crate::time::{Clock, Instant};
use crate::timer_wheel::TimerWheel;
use addresses::Addresses;
use flows::{Flow, Flows};
use listen::Listeners;
use ports::PortSearch;
use timewait::TimeWait;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimerItem {
    Conn { id: ConnId, at: Instant },
}

/// A connection block: the state machine and what the engine needs to send for it.
/// The application's state sits next to it in the [`AppCore`].
struct Block {
    tcb: Tcb,
    key: FlowKey,
    /// The next hop's MAC while its neighbour entry sends directly (REACHABLE, DELAY,
    /// PROBE); otherwise `None`, and frames go through the cache (see `neighbours`).
    /// The next hop itself is not kept: the configuration gives it from the peer's
    /// address ([`EngineConfig::next_hop`]).
    mac: Option<MacAddr>,
    /// The next hop's entry in the neighbour cache, which the connection holds until
    /// it leaves the table.
    neigh: NeighbourId,
    dirty: bool,
    /// A half-open connection counted against the backlog of the listener on its local
    /// port.
    half_open: bool,
    /// Counted among the engine's orphans (see `orphans.rs`).
    orphan: bool,
    /// Listed in [`Engine::ring_keepers`]: the send buffer keeps an empty ring.
    ring_listed: bool,
    /// The deadline of this connection's one far timer-wheel entry still to fire
    /// ([`Instant::FAR_FUTURE`]: none). See `output::schedule_wake`.
    far_wake: Instant,
}

/// One worker's protocol engine. See the [module docs](self). Its
/// `connection_count` counts live connection blocks: every state but TIME-WAIT, whose
/// compact entries [`Engine::time_wait_count`] counts.
///
/// An engine belongs to the worker thread that built it and never crosses to another:
/// it is `!Send`, even over a device and handler that are `Send`, and the runtime
/// builds each one on its own worker's thread (`rusty_runtime::engine_worker`). Used
/// where it was built, it works:
///
/// ```
/// # use std::net::SocketAddr;
/// # use rusty_stack::io::{Capabilities, OwnedFrame, PacketIo};
/// # use rusty_stack::{Conn, Engine, Handler, SystemClock};
/// # use rusty_testkit::sim;
/// # struct App;
/// # impl Handler for App {
/// #     type Conn = ();
/// #     fn accept(&mut self, _: SocketAddr, _: SocketAddr) -> Option<()> { None }
/// #     fn data(&mut self, _: &mut Conn<'_, ()>, d: &[u8]) -> usize { d.len() }
/// # }
/// # /// A device that may cross threads: it receives nothing and drops what it sends.
/// # struct Null(Capabilities);
/// # impl PacketIo for Null {
/// #     type Rx = OwnedFrame;
/// #     type Tx = OwnedFrame;
/// #     fn capabilities(&self) -> &Capabilities { &self.0 }
/// #     fn receive(&mut self, _: &mut Vec<OwnedFrame>, _: usize) -> usize { 0 }
/// #     fn alloc_tx(&mut self, len: usize) -> Option<OwnedFrame> {
/// #         Some(OwnedFrame { data: vec![0; len], ..Default::default() })
/// #     }
/// #     fn transmit(&mut self, frames: &mut Vec<OwnedFrame>) { frames.clear() }
/// # }
/// # fn must_be_send<T: Send>(_: &T) {}
/// # let (device, handler) = (Null(Capabilities::new(sim::SERVER_MAC, 1500)), App);
/// # must_be_send(&device);
/// # must_be_send(&handler);
/// let cfg = sim::engine_config(sim::SERVER_IP, 1);
/// let mut engine = Engine::new(device, handler, SystemClock::new(), cfg);
/// engine.poll();
/// ```
///
/// Moved to another thread, it does not compile:
///
/// ```compile_fail
/// # use std::net::SocketAddr;
/// # use rusty_stack::io::{Capabilities, OwnedFrame, PacketIo};
/// # use rusty_stack::{Conn, Engine, Handler, SystemClock};
/// # use rusty_testkit::sim;
/// # struct App;
/// # impl Handler for App {
/// #     type Conn = ();
/// #     fn accept(&mut self, _: SocketAddr, _: SocketAddr) -> Option<()> { None }
/// #     fn data(&mut self, _: &mut Conn<'_, ()>, d: &[u8]) -> usize { d.len() }
/// # }
/// # /// A device that may cross threads: it receives nothing and drops what it sends.
/// # struct Null(Capabilities);
/// # impl PacketIo for Null {
/// #     type Rx = OwnedFrame;
/// #     type Tx = OwnedFrame;
/// #     fn capabilities(&self) -> &Capabilities { &self.0 }
/// #     fn receive(&mut self, _: &mut Vec<OwnedFrame>, _: usize) -> usize { 0 }
/// #     fn alloc_tx(&mut self, len: usize) -> Option<OwnedFrame> {
/// #         Some(OwnedFrame { data: vec![0; len], ..Default::default() })
/// #     }
/// #     fn transmit(&mut self, frames: &mut Vec<OwnedFrame>) { frames.clear() }
/// # }
/// # fn must_be_send<T: Send>(_: &T) {}
/// # let (device, handler) = (Null(Capabilities::new(sim::SERVER_MAC, 1500)), App);
/// # must_be_send(&device);
/// # must_be_send(&handler);
/// let cfg = sim::engine_config(sim::SERVER_IP, 1);
/// let mut engine = Engine::new(device, handler, SystemClock::new(), cfg);
/// std::thread::spawn(move || engine.poll());
/// ```
pub struct Engine<D: PacketIo, H: Handler, C: Clock> {
    dev: D,
    clock: C,
    now: Instant,
    cfg: EngineConfig,
    /// Our addresses, each with what every connection on it consults of `cfg.tcp`.
    addrs: Addresses,
    /// Our IPv4 address and subnet as the receive path checks them.
    local: ipv4::Local,
    mac: MacAddr,
    tx_csum: ChecksumOffload,
    /// The longest frame sent as is (not a TSO super-frame): the IP MTU plus the
    /// Ethernet header.
    max_frame: usize,
    /// Payload bytes per TSO super-frame the device takes (0: no TSO).
    tso_payload: usize,
    /// The handler and the connection blocks, with the rules for calling it.
    app: AppCore<H, Block>,
    /// Ring storage the connections' buffers take and give back.
    pool: RingPool,
    flows: Flows,
    listeners: Listeners,
    time_wait: TimeWait,
    /// Connections the application closed, bounded in number.
    orphans: orphans::Orphans,
    timers: TimerWheel<TimerItem>,
    arp: crate::arp::ArpCache,
    isn: IsnGenerator,
    cookies: SynCookies,
    ident: IdentCounter,
    stats: Stats,
    announce_pending: bool,
    /// With [`EngineConfig::shared_link`]: the ports some engine on the link listens
    /// on, in order, once known (see [`Engine::set_link_listeners`]).
    link_listeners: Option<Vec<u16>>,
    /// Where active opens look for a free port, and what that has cost.
    ports: PortSearch,
    /// Connections whose send buffer keeps an empty ring for its next response, looked
    /// at every [`IDLE_RING_RELEASE`] (see `sweep_idle_rings`).
    ring_keepers: Vec<ConnId>,
    ring_sweep_at: Instant,
    challenge_window: Instant,
    challenge_count: u32,
    /// This second's challenge-ACK budget (see `allow_challenge`).
    challenge_budget: u32,
    /// Randomness without secrecy needs (the challenge budget), seeded from the secret.
    rng: Rng,
    // Scratch space reused every turn, so the loop does not allocate.
    rx: Vec<D::Rx>,
    tx: Vec<D::Tx>,
    segs: Vec<TxSegment>,
    dirty: Vec<usize>,
    expired: Vec<TimerItem>,
    arp_requests: Vec<Solicit>,
    /// Which connections go through which neighbour entry.
    neighbour_users: neighbours::Users,
    /// Neighbour entries whose connections' MAC is to change (scratch).
    neighbour_changes: Vec<NeighbourId>,
    /// IPv6 addresses whose duplicate detection has a probe due (scratch).
    dad_probes: Vec<Ipv6Addr>,
    /// When IPv6's own timers (duplicate detection) next have work.
    v6_due: Instant,
    /// Our groups changed: report them (MLD) at the next turn.
    mld_pending: bool,
    /// What is left of the budget for ICMPv6 errors.
    error_budget: v6::ErrorBudget,
    arp_ready: Vec<Vec<u8>>,
    misdirected: Vec<(u16, Vec<u8>)>,
    /// Active opens waiting for the IPv6 address they would use to pass duplicate
    /// detection (see `start_requested_connects`).
    held_connects: Vec<(SocketAddr, H::Conn)>,
    /// Keeps the engine on its worker's thread.
    _not_send: PhantomData<*const ()>,
}

/// How long a connection's send buffer keeps an empty ring after its last send: a
/// keep-alive connection reuses it for the next response instead of giving it back to
/// the pool and taking it again for every request, and a connection quiet for between
/// one and two of these holds no buffer memory. Memory pressure makes drained rings go
/// back at once.
pub(crate) const IDLE_RING_RELEASE: Duration = Duration::from_secs(1);

/// Slots of the timer wheel, one per millisecond: 8.2 s a revolution, which covers the
/// common timers (retransmission, delayed ACK); timers further out (keepalive, user
/// timeouts) wait in the wheel's second level (see `timer`). The slots' bitmap is 128
/// words. TIME-WAIT's 2·MSL timers are not in the wheel: the TIME-WAIT table keeps them
/// in a queue of its own (see `timewait`).
const TIMER_SLOTS: usize = 8192;

/// How far ahead a wake-up is "far": one revolution of the wheel. A connection keeps at
/// most one wheel entry this far out (see `output::schedule_wake`).
const FAR_WAKE: Duration = Duration::from_millis(TIMER_SLOTS as u64);

/// Largest transmit burst handed to the driver at once.
const TX_BURST: usize = 64;

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    /// An engine over `dev` for `handler`, reading time from `clock`.
    pub fn new(dev: D, handler: H, clock: C, cfg: EngineConfig) -> Engine<D, H, C> {
        let caps = dev.capabilities().clone();
        let now = clock.now();
        let secret = cfg.secret.unwrap_or_else(config::random_secret);
        let mut rng = Rng::new(config::derive(&secret, "rng seed"));
        let mut isn_key = [0u8; 16];
        let mut cookie_key = [0u8; 16];
        isn_key.copy_from_slice(&secret[..16]);
        cookie_key.copy_from_slice(&secret[16..]);
        // RFC 9293 §3.7.1: our MSS on each address is the MTU less the IP and TCP
        // headers without options.
        let addrs = Addresses::new(&cfg, &TcbLimits::new(&cfg.tcp), caps.mtu, caps.mac, now);
        let has_v6 = addrs.has_v6();
        let ports = cfg.ephemeral_ports.clone();
        let span = (*ports.end() as u32 - *ports.start() as u32 + 1).max(1);
        let next_port = *ports.start()
            + (config::derive(&secret, "first ephemeral port") % u64::from(span)) as u16;
        let challenge_budget = challenge_budget(&mut rng, cfg.tcp.challenge_ack_limit);
        let arp = crate::arp::ArpCache::new(cfg.arp.clone(), rng.next_u64());
        Engine {
            dev,
            clock,
            now,
            local: ipv4::Local::new(cfg.ip, cfg.prefix_len),
            mac: caps.mac,
            addrs,
            tx_csum: caps.tx_checksum,
            max_frame: ETHERNET_HEADER_LEN + caps.mtu,
            // TSO needs the device to checksum each segment it cuts; leave room for the
            // IP header (IPv6's, the longer) and the largest TCP header.
            tso_payload: match caps.tso_max {
                Some(max) if caps.tx_checksum.tcp && cfg.tso => {
                    max.saturating_sub(crate::ipv6::HEADER_LEN + segment::MAX_HEADER_LEN)
                }
                _ => 0,
            },
            app: AppCore::new(handler, cfg.max_connections, cfg.reserved_connections),
            pool: RingPool::with_budget(cfg.buffer_pool, cfg.memory),
            flows: Flows::new(
                cfg.reserved_connections.min(cfg.max_connections),
                if has_v6 {
                    cfg.reserved_connections.min(cfg.max_connections)
                } else {
                    0
                },
                ports.clone(),
            ),
            listeners: Listeners::default(),
            time_wait: TimeWait::new(cfg.max_time_wait),
            orphans: Default::default(),
            timers: TimerWheel::new(now, std::time::Duration::from_millis(1), TIMER_SLOTS),
            arp,
            isn: IsnGenerator::new(isn_key),
            cookies: SynCookies::new(cookie_key),
            ident: IdentCounter::new(config::derive(&secret, "first ipv4 ident") as u16),
            stats: Stats::default(),
            announce_pending: true,
            link_listeners: None,
            ports: PortSearch::new(next_port),
            ring_keepers: Vec::new(),
            ring_sweep_at: now + IDLE_RING_RELEASE,
            challenge_window: now,
            challenge_count: 0,
            challenge_budget,
            rng,
            rx: Vec::with_capacity(cfg.rx_burst),
            tx: Vec::with_capacity(TX_BURST),
            segs: Vec::with_capacity(16),
            dirty: Vec::with_capacity(64),
            expired: Vec::with_capacity(64),
            arp_requests: Vec::new(),
            neighbour_users: neighbours::Users::default(),
            neighbour_changes: Vec::new(),
            dad_probes: Vec::new(),
            v6_due: if has_v6 { now } else { Instant::FAR_FUTURE },
            mld_pending: has_v6,
            error_budget: v6::ErrorBudget::new(now),
            arp_ready: Vec::new(),
            misdirected: Vec::new(),
            held_connects: Vec::new(),
            _not_send: PhantomData,
            cfg,
        }
    }

    // ----- Public API -----

    /// Accept connections on `port` with at most `backlog` half-open connections; past
    /// that, SYN cookies answer (when enabled) or SYNs are dropped.
    pub fn listen(&mut self, port: u16, backlog: usize) {
        let backlog = backlog.max(1);
        self.ports.listening(port, &self.cfg.ephemeral_ports);
        self.listeners.listen(port, backlog);
    }

    /// Take connections on listening `port` only from peers of the families allowed
    /// (a listener takes both until told otherwise): a SYN from another family is
    /// answered as one for a port nobody listens on, with a reset (on a shared link,
    /// not at all: another engine may take that family there). A socket layer needs
    /// it for an AF_INET listener with no AF_INET6 one beside it, or an
    /// `IPV6_V6ONLY` one. Whether `port` is listening.
    pub fn listen_families(&mut self, port: u16, ipv4: bool, ipv6: bool) -> bool {
        let Some(listener) = self.listeners.get_mut(&port) else {
            return false;
        };
        listener.ipv4 = ipv4;
        listener.ipv6 = ipv6;
        true
    }

    /// Whether duplicate address detection still runs for one of the engine's IPv6
    /// addresses (see [`EngineConfig::dad_transmits`]). Until it ends, an active open
    /// that finds no usable source address ([`ConnectError::NoSourceAddress`]) may
    /// find one later; once it has ended, it will not.
    ///
    /// [`ConnectError::NoSourceAddress`]: crate::ConnectError::NoSourceAddress
    pub fn detecting_duplicates(&self) -> bool {
        self.addrs.next_dad_deadline().is_some()
    }

    /// Whether other engines share the link's address from now on
    /// ([`EngineConfig::shared_link`]): a process that forks learns it then.
    pub fn set_shared_link(&mut self, shared: bool) {
        self.cfg.shared_link = shared;
    }

    /// The ports that some engine sharing the link listens on (this one's included or
    /// not), as the engines' owners learn them from each other. On a shared link a
    /// SYN for a port this engine does not listen on is dropped when the port is
    /// among them (another engine takes its connections) and refused with a reset
    /// when it is not, as on a link of its own. Until this is called, every such SYN
    /// is dropped.
    pub fn set_link_listeners(&mut self, mut ports: Vec<u16>) {
        ports.sort_unstable();
        ports.dedup();
        self.link_listeners = Some(ports);
    }

    /// Stop listening on `port` (a socket layer's `close` of a listening socket): SYNs
    /// to it are answered with a reset from now on; connections already established
    /// carry on, and half-open ones that complete are offered to the handler's `accept`
    /// as before. Whether the port was listening.
    pub fn unlisten(&mut self, port: u16) -> bool {
        self.listeners.remove(port)
    }

    /// Stop accepting new connections (graceful shutdown); open ones carry on.
    pub fn stop_accepting(&mut self) {
        self.app.stop_accepting();
        self.listeners.clear();
    }

    /// Start an active open to `remote`. The handler's `connected` or `closed` follows.
    pub fn connect(&mut self, remote: SocketAddr, state: H::Conn) -> OpenResult<H::Conn> {
        self.now = self.clock.now();
        self.start_connect(remote, state)
    }

    /// Act on connection `id` from outside a callback, as a socket layer's `write`,
    /// `shutdown` or `close` does: `f` gets the handler and the connection's [`Conn`],
    /// and whatever it does takes effect as if done in a callback (segments go out in
    /// this call). `None`, without calling `f`, when the connection is gone or has
    /// already ended for the application.
    pub fn with_conn<R>(
        &mut self,
        id: ConnId,
        f: impl FnOnce(&mut H, &mut Conn<'_, H::Conn>) -> R,
    ) -> Option<R> {
        let out = self.with_conn_deferred(id, f)?;
        self.end_turn();
        Some(out)
    }

    /// [`with_conn`](Self::with_conn), except that what `f` queues is not sent in this
    /// call: it leaves with the next [`flush`](Self::flush) or [`poll`](Self::poll),
    /// together with whatever else was queued by then. A socket layer uses it to let
    /// several small writes of a program leave as one segment, as `MSG_MORE` would;
    /// it must flush before the program can wait for an answer.
    pub fn with_conn_deferred<R>(
        &mut self,
        id: ConnId,
        f: impl FnOnce(&mut H, &mut Conn<'_, H::Conn>) -> R,
    ) -> Option<R> {
        self.now = self.clock.now();
        let index = self.app.index_of(id)?;
        let out = self.app.with_conn(&mut self.pool, index, f);
        self.dispatch(index, Default::default(), &[]);
        out
    }

    /// Send what [`with_conn_deferred`](Self::with_conn_deferred) left queued (a
    /// turn without receiving or running timers).
    pub fn flush(&mut self) {
        self.now = self.clock.now();
        self.end_turn();
    }

    /// Offer a connection's unread bytes to the handler again (after its `data` callback
    /// paused by consuming nothing), after its `receive_resumed` callback (through which
    /// a layer such as TLS offers the bytes it holds itself); neither runs before the
    /// connection is established. Returns false if the connection no longer exists.
    pub fn resume_receive(&mut self, id: ConnId) -> bool {
        self.now = self.clock.now();
        let Some(index) = self.app.index_of(id) else {
            return false;
        };
        if self.app[index].tcb.state().is_synchronized() {
            self.app.resume(&mut self.pool, index);
        }
        // Then `dispatch` settles whatever the callbacks did (an abort or close inside
        // `data` gets its close reason, statistics and `closed` like anywhere else).
        self.dispatch(index, Default::default(), &[]);
        self.end_turn();
        true
    }

    crate::app_accessors!(H);

    /// The packet-IO queue.
    pub fn device(&self) -> &D {
        &self.dev
    }
    /// The packet-IO queue.
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }
    /// What the engine was built with.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    /// Compact TIME-WAIT entries.
    pub fn time_wait_count(&self) -> usize {
        self.time_wait.len()
    }
    /// Connections the application has closed that are still finishing (orphans,
    /// bounded by [`EngineConfig::max_orphans`]).
    pub fn orphan_count(&self) -> usize {
        self.orphans.len()
    }
    /// The state of every live connection (for tests and diagnostics).
    pub fn connection_states(&self) -> impl Iterator<Item = (SocketAddr, State)> + '_ {
        self.app.iter().map(|(_, b)| {
            let remote = SocketAddr::new(b.key.remote_ip(), b.key.remote_port);
            (remote, b.tcb.state())
        })
    }

    /// The earliest time the engine has timer work, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        // The idle-ring sweep counts only while some connection keeps a ring.
        let sweep = (!self.ring_keepers.is_empty()).then_some(self.ring_sweep_at);
        [
            self.timers.next_deadline(),
            self.time_wait.next_deadline(),
            self.arp.next_deadline(),
            self.v6_deadline(),
            sweep,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Frames of flows sibling workers own, on a link whose steering the stack cannot
    /// predict ([`Capabilities::unpredictable_steering`](crate::io::Capabilities)):
    /// (owner queue, frame). The runtime passes them to the owner, which calls
    /// [`Engine::inject_frames`]. Which queue owns a flow: active opens by their local
    /// port modulo the queue count, every other flow by a hash of the remote address and
    /// port.
    pub fn take_misdirected(&mut self, out: &mut Vec<(u16, Vec<u8>)>) {
        out.append(&mut self.misdirected);
    }

    /// Process frames siblings received for flows this worker owns (from their
    /// [`Engine::take_misdirected`]), then send what they call for on this worker's
    /// queue in one burst, as a loop turn does for the frames it receives: a batch of
    /// segments is answered as a whole (one ACK for many, no retransmission that a later
    /// ACK of the batch makes needless).
    ///
    /// The siblings parsed the frames before handing them over, so their checksums have
    /// been checked already (by the sibling, or by its device) and are not checked
    /// again: a frame whose TCP checksum the device left partial (TAP's `NEEDS_CSUM`
    /// frames from the local kernel) would fail a second check. Pass only frames a
    /// sibling engine handed over.
    pub fn inject_frames<I>(&mut self, frames: I)
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        self.now = self.clock.now();
        for frame in frames {
            self.on_frame(frame.as_ref(), true);
        }
        self.end_turn();
    }

    /// Run one loop turn; returns the number of frames received.
    pub fn poll(&mut self) -> usize {
        self.now = self.clock.now();
        if self.announce_pending {
            self.announce_pending = false;
            self.send_gratuitous_arp();
        }

        // The burst vector is the engine's, kept between turns for its capacity; it is
        // taken out while its frames are handled, as handling needs the whole engine.
        let mut rx = std::mem::take(&mut self.rx);
        let n = self.dev.receive(&mut rx, self.cfg.rx_burst);
        // Each buffer goes back to the device once its frame is handled, before anything
        // of this turn is sent.
        for frame in rx.drain(..) {
            self.on_frame(&frame, frame.meta().checksum_verified);
        }
        self.rx = rx;

        self.run_timers();
        self.poll_arp();
        self.poll_v6();

        self.app.poll();
        self.end_turn();
        n
    }

    /// Start the active opens callbacks asked for, let every connection with something
    /// to say build its segments, and hand the burst to the device.
    // Always inlined: once per loop turn, where the compiler otherwise decides by the
    // size the transmit path happens to have, and a call costs the turn its registers.
    #[inline(always)]
    fn end_turn(&mut self) {
        self.start_requested_connects();
        self.flush_dirty();
        if self.now >= self.ring_sweep_at {
            self.sweep_idle_rings();
        }
        self.submit();
        self.dev.flush();
        if self.pool.take_changed() {
            self.stats.buffer_memory = self.pool.in_use() as u64;
            self.stats.buffer_memory_peak = self.pool.peak() as u64;
            self.stats.buffer_pool_idle = self.pool.idle_bytes() as u64;
            self.stats.memory = self.pool.counters();
        }
    }

    /// The keyed hash of the flow `key` (RFC 6528 §3, RFC 7323 §7.1): a new
    /// connection's ISN and timestamp offset, from one hash (see [`IsnGenerator`]).
    fn tuple_hash(&self, key: &FlowKey) -> TupleHash {
        let (local, remote) = self.endpoints(key);
        self.isn.hash_tuple(local, remote)
    }

    /// (our end, the peer's end) of the flow `key`.
    fn endpoints(&self, key: &FlowKey) -> (SocketAddr, SocketAddr) {
        (
            SocketAddr::new(self.addrs.get(key.local).ip, key.local_port),
            SocketAddr::new(key.remote_ip(), key.remote_port),
        )
    }

    /// Add a connection on `key` that opens `how`, with our ISS `iss` and the
    /// timestamp offset `ts_offset` (both from [`Engine::tuple_hash`]), and the
    /// application's state for active opens. A passive open counts against its
    /// listener's backlog (`half_open`) until it completes or dies.
    ///
    /// The block is built in its table slot, fresh from [`Tcb::new`], by a closure the
    /// table calls once the slot is found ([`AppCore::insert_with`]), and opened there
    /// ([`Tcb::open`]): it is hundreds of bytes, and every move by value is a copy.
    /// Built by `Tcb::accept_syn` and handed down by value it was copied five times per
    /// passive open; built beside the table and moved in, twice; then once; now not at
    /// all: the table calls `make` from one place and [`Tcb::new`] is inlined into it, so
    /// its fields are stored straight into the slot (`scripts/callgrind-conn.sh`).
    fn insert_conn(
        &mut self,
        key: FlowKey,
        iss: SeqNum,
        ts_offset: u32,
        how: Open<'_>,
        app: Option<H::Conn>,
        mac: Option<MacAddr>,
    ) -> ConnId {
        let local = self.addrs.get(key.local);
        let opening = Opening {
            iss,
            ts_offset,
            our_mss: local.mss,
            now: self.now,
            cfg: &self.cfg.tcp,
            limits: Rc::clone(&local.limits),
        };
        let half_open = matches!(how, Open::Passive(_));
        // A passive open's SYN came from the next hop's MAC: the entry starts there if
        // there is none.
        let neigh = self
            .arp
            .attach(self.cfg.next_hop(key.remote_ip()), mac, self.now);
        let mac = self.arp.sendable(neigh);
        let make = || Block {
            tcb: Tcb::new(&opening),
            key,
            mac,
            neigh,
            // Dirty from the start, with its SYN or SYN-ACK to send (`mark_dirty` without
            // its look-up).
            dirty: true,
            half_open,
            orphan: false,
            ring_listed: false,
            far_wake: Instant::FAR_FUTURE,
        };
        let (id, block) = self.app.insert_with(make, app);
        block.tcb.open(&opening, how);
        block.tcb.set_tso(self.tso_payload);
        self.dirty.push(id.index() as usize);
        let users = self.arp.users(neigh);
        self.neighbour_users
            .add(neigh, id.index() as usize, users, &self.app);
        if let Some(Flow::TimeWait(slot)) = self.flows.insert(key, Flow::Conn(id.index())) {
            // A cookie ACK on a pair whose TIME-WAIT entry a RST closed: the entry goes
            // (a SYN reopening a pair removed it already).
            self.time_wait.replaced(slot);
        }
        id
    }

    fn mark_dirty(&mut self, index: usize) {
        if let Some(block) = self.app.get_mut(index) {
            if !block.dirty {
                block.dirty = true;
                self.dirty.push(index);
            }
        }
    }
}

/// One second's challenge-ACK budget: uniform in [limit/2, limit/2 + limit).
fn challenge_budget(rng: &mut Rng, limit: u32) -> u32 {
    let limit = u64::from(limit);
    (limit / 2 + rng.below(limit.max(1))).min(u64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests;
