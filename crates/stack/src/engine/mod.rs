//! The per-core engine: one packet-IO queue, one connection table, one timer wheel, one
//! ARP cache and one application [`Handler`], driven by [`Engine::poll`] in a
//! run-to-completion loop.
//!
//! One loop turn reads the clock once, takes a burst of frames and pushes each through
//! Ethernet → ARP/IPv4 → ICMP/TCP → the handler's callbacks, fires due timers, lets every
//! connection that has something to say build its segments straight into driver
//! buffers, and hands the burst to the driver in one call.

pub mod config;
pub mod handler;
mod timewait;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};

use ahash::RandomState;
use slab::Slab;

pub use config::EngineConfig;
pub use handler::{Conn, ConnId, ConnectError, Connection, Handler, Opener};

use crate::arp::{self, ArpCache, EnqueueResult};
use crate::checksum;
use crate::ethernet::{self, DropReason, EthernetProtocol};
use crate::icmp;
use crate::io::{
    ChecksumOffload, ChecksumRequest, MacAddr, PacketIo, RxFrame, TxFrame, TxMeta,
    ETHERNET_HEADER_LEN,
};
use crate::ipv4::{self, IdentCounter, IpProtocol, Ipv4Header};
use crate::stats::Stats;
use crate::tcp::cookie::{self, SynCookies};
use crate::tcp::isn::IsnGenerator;
use crate::tcp::segment::{ParseError, Segment, TxSegment};
use crate::tcp::send_buffer::SendBuffer;
use crate::tcp::seq::SeqNum;
use crate::tcp::tcb::{CloseReason, RxOutcome, State, SynOptions, Tcb};
use crate::time::{Clock, Instant};
use crate::timer::TimerWheel;
use timewait::TimeWait;

/// A connection's key within one engine (the local address is the engine's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FlowKey {
    pub remote_ip: Ipv4Addr,
    pub remote_port: u16,
    pub local_port: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimerItem {
    Conn {
        index: u32,
        generation: u32,
        at: Instant,
    },
    TimeWait {
        key: FlowKey,
        at: Instant,
    },
}

/// A connection block: the state machine, the application's state next to it, and
/// what the engine needs to send for it.
struct Slot<S> {
    tcb: Tcb,
    app: Option<S>,
    generation: u32,
    key: FlowKey,
    /// Next hop's MAC, learned from the SYN for passive opens, from ARP otherwise.
    mac: Option<MacAddr>,
    next_hop: Ipv4Addr,
    /// The deadline the timer wheel holds for this connection.
    timer_at: Option<Instant>,
    dirty: bool,
    /// The listener this half-open connection counts against.
    listener: Option<u16>,
}

struct Listener {
    backlog: usize,
    half_open: usize,
}

const IPV4_TCP_HEADERS: usize = ETHERNET_HEADER_LEN + ipv4::HEADER_LEN;

/// One worker's protocol engine. See the [module docs](self).
pub struct Engine<D: PacketIo, H: Handler, C: Clock> {
    dev: D,
    handler: H,
    clock: C,
    now: Instant,
    cfg: EngineConfig,
    mac: MacAddr,
    our_mss: u16,
    tx_csum: ChecksumOffload,
    /// Payload bytes per TSO super-frame the device takes (0: no TSO).
    tso_payload: usize,
    conns: Slab<Slot<H::Conn>>,
    next_generation: u32,
    flows: HashMap<FlowKey, usize, RandomState>,
    listeners: HashMap<u16, Listener, RandomState>,
    time_wait: TimeWait,
    timers: TimerWheel<TimerItem>,
    arp: ArpCache,
    isn: IsnGenerator,
    cookies: SynCookies,
    ident: IdentCounter,
    stats: Stats,
    accepting: bool,
    announce_pending: bool,
    next_port: u16,
    challenge_window: Instant,
    challenge_count: u32,
    // Scratch space reused every turn, so the loop does not allocate.
    rx: Vec<D::Rx>,
    tx: Vec<D::Tx>,
    segs: Vec<TxSegment>,
    dirty: Vec<usize>,
    expired: Vec<TimerItem>,
    connect_requests: Vec<(SocketAddrV4, H::Conn)>,
    arp_requests: Vec<Ipv4Addr>,
    arp_ready: Vec<Vec<u8>>,
    misdirected: Vec<(u16, Vec<u8>)>,
}

/// Most frames held for sibling workers between two loop turns.
const MAX_MISDIRECTED: usize = 1024;

/// Largest transmit burst handed to the driver at once.
const TX_BURST: usize = 64;

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    pub fn new(dev: D, handler: H, clock: C, cfg: EngineConfig) -> Engine<D, H, C> {
        let caps = dev.capabilities().clone();
        let now = clock.now();
        let secret = cfg.secret.unwrap_or_else(config::random_secret);
        let mut isn_key = [0u8; 16];
        let mut cookie_key = [0u8; 16];
        isn_key.copy_from_slice(&secret[..16]);
        cookie_key.copy_from_slice(&secret[16..]);
        let our_mss = (caps.mtu.saturating_sub(40)).clamp(64, 65495) as u16;
        let ports = cfg.ephemeral_ports.clone();
        let span = (*ports.end() as u32 - *ports.start() as u32 + 1).max(1);
        let next_port = *ports.start()
            + (u32::from_le_bytes([secret[0], secret[1], secret[2], secret[3]]) % span) as u16;
        Engine {
            dev,
            handler,
            clock,
            now,
            mac: caps.mac,
            our_mss,
            tx_csum: caps.tx_checksum,
            // TSO needs the device to checksum each segment it cuts; leave room for the
            // IPv4 header and the largest TCP header.
            tso_payload: match caps.tso_max {
                Some(max) if caps.tx_checksum.tcp && cfg.tso => {
                    max.saturating_sub(ipv4::HEADER_LEN + 60)
                }
                _ => 0,
            },
            conns: Slab::with_capacity(cfg.max_connections.min(65536)),
            next_generation: 1,
            flows: HashMap::with_hasher(RandomState::new()),
            listeners: HashMap::with_hasher(RandomState::new()),
            time_wait: TimeWait::new(cfg.max_time_wait),
            timers: TimerWheel::new(now, std::time::Duration::from_millis(1), 1024),
            arp: ArpCache::new(cfg.arp.clone()),
            isn: IsnGenerator::new(isn_key),
            cookies: SynCookies::new(cookie_key),
            ident: IdentCounter::new(u16::from_le_bytes([secret[4], secret[5]])),
            stats: Stats::default(),
            accepting: true,
            announce_pending: true,
            next_port,
            challenge_window: now,
            challenge_count: 0,
            rx: Vec::with_capacity(cfg.rx_burst),
            tx: Vec::with_capacity(TX_BURST),
            segs: Vec::with_capacity(16),
            dirty: Vec::with_capacity(64),
            expired: Vec::with_capacity(64),
            connect_requests: Vec::new(),
            arp_requests: Vec::new(),
            arp_ready: Vec::new(),
            misdirected: Vec::new(),
            cfg,
        }
    }

    // ----- Public API -----

    /// Accept connections on `port` with at most `backlog` half-open connections; past
    /// that, SYN cookies answer (when enabled) or SYNs are dropped.
    pub fn listen(&mut self, port: u16, backlog: usize) {
        let backlog = backlog.max(1);
        // Listening again on a port only changes the backlog: the half-open connections
        // already counted still release their count when they complete or die.
        self.listeners
            .entry(port)
            .and_modify(|l| l.backlog = backlog)
            .or_insert(Listener {
                backlog,
                half_open: 0,
            });
    }

    /// Stop accepting new connections (graceful shutdown); open ones carry on.
    pub fn stop_accepting(&mut self) {
        self.accepting = false;
        self.listeners.clear();
    }

    /// Start an active open to `remote`. The handler's `connected` or `closed` follows.
    pub fn connect(
        &mut self,
        remote: SocketAddrV4,
        state: H::Conn,
    ) -> Result<ConnId, (ConnectError, H::Conn)> {
        self.now = self.clock.now();
        self.start_connect(remote, state)
    }

    /// Offer a connection's unread bytes to the handler again (after its `data` callback
    /// paused by consuming nothing). Returns false if the connection no longer exists.
    pub fn resume_receive(&mut self, id: ConnId) -> bool {
        self.now = self.clock.now();
        let index = id.index as usize;
        if self
            .conns
            .get(index)
            .is_none_or(|slot| slot.generation != id.generation)
        {
            return false;
        }
        // Through `dispatch`, which offers the buffered bytes and then handles whatever
        // the callbacks did (an abort or close inside `data` gets its close reason,
        // statistics and `closed` callback like anywhere else).
        self.dispatch(index, RxOutcome::default(), &[]);
        self.mark_dirty(index);
        self.start_requested_connects();
        self.flush_dirty();
        self.submit();
        self.dev.flush();
        true
    }

    pub fn handler(&self) -> &H {
        &self.handler
    }
    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    pub fn device(&self) -> &D {
        &self.dev
    }
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    /// Live connection blocks (every state but TIME-WAIT).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }
    /// Compact TIME-WAIT entries.
    pub fn time_wait_count(&self) -> usize {
        self.time_wait.len()
    }
    /// The state of every live connection (for tests and diagnostics).
    pub fn connection_states(&self) -> impl Iterator<Item = (SocketAddrV4, State)> + '_ {
        self.conns
            .iter()
            .map(|(_, s)| (s.tcb.remote(), s.tcb.state()))
    }

    /// The earliest time the engine has timer work, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        match (self.timers.next_deadline(), self.arp.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Frames for active opens of sibling workers (see [`EngineConfig`]): (owner queue,
    /// frame). The runtime passes them to the owner, which calls [`Engine::inject_frame`].
    pub fn take_misdirected(&mut self, out: &mut Vec<(u16, Vec<u8>)>) {
        out.append(&mut self.misdirected);
    }

    /// Process a frame a sibling received for one of our connections.
    pub fn inject_frame(&mut self, frame: &[u8]) {
        self.now = self.clock.now();
        self.on_frame(frame, false);
        self.flush_dirty();
        self.submit();
        self.dev.flush();
    }

    /// ARP mappings learned since the last call, to publish to sibling workers.
    pub fn drain_learned_arp(&mut self, out: &mut Vec<(Ipv4Addr, MacAddr)>) {
        self.arp.drain_learned(out);
    }

    /// A mapping a sibling worker learned.
    pub fn import_arp(&mut self, ip: Ipv4Addr, mac: MacAddr) {
        self.now = self.clock.now();
        let before = self.arp.lookup(ip, self.now);
        let ready = self.arp.import(ip, mac, self.now);
        self.on_arp_changed(ip, before);
        if ready > 0 {
            self.send_arp_ready();
            self.submit();
        }
    }

    /// Run one loop turn; returns the number of frames received.
    pub fn poll(&mut self) -> usize {
        self.now = self.clock.now();
        if self.announce_pending {
            self.announce_pending = false;
            self.send_gratuitous_arp();
        }

        let mut rx = std::mem::take(&mut self.rx);
        let n = self.dev.receive(&mut rx, self.cfg.rx_burst);
        for frame in rx.drain(..) {
            let meta = frame.meta();
            self.on_frame(&frame, meta.checksum_verified);
        }
        self.rx = rx;

        self.run_timers();
        self.poll_arp();

        self.handler.poll(&mut Opener {
            requests: &mut self.connect_requests,
        });
        self.start_requested_connects();

        self.flush_dirty();
        self.submit();
        self.dev.flush();
        n
    }

    // ----- Receive path -----

    fn on_frame(&mut self, frame: &[u8], checksum_verified: bool) {
        self.stats.frames_in += 1;
        self.stats.bytes_in += frame.len() as u64;
        let (eth, payload) = match ethernet::parse(frame) {
            Ok(x) => x,
            Err(r) => return self.stats.drop(r),
        };
        if !ethernet::accepts(self.mac, eth.dst) {
            return self.stats.drop(DropReason::NotForUs);
        }
        match eth.ethertype {
            EthernetProtocol::Arp => self.on_arp(payload),
            EthernetProtocol::Ipv4 => self.on_ipv4(frame, eth.src, payload, checksum_verified),
            _ => self.stats.drop(DropReason::UnknownEtherType),
        }
    }

    fn on_arp(&mut self, payload: &[u8]) {
        let input = match arp::process(payload, self.cfg.ip) {
            Ok(i) => i,
            Err(r) => return self.stats.drop(r),
        };
        let learnable = input.learnable();
        let before = learnable.and_then(|(ip, _)| self.arp.lookup(ip, self.now));
        let ready = self.arp.learn(&input, self.now);
        if let Some((ip, _)) = learnable {
            self.on_arp_changed(ip, before);
        }
        if input.reply_owed {
            if let Some(mut buf) = self.dev.alloc_tx(arp::FRAME_LEN) {
                let n = arp::build_reply(
                    &mut buf,
                    self.mac,
                    self.cfg.ip,
                    input.sender_mac,
                    input.sender_ip,
                );
                buf.truncate(n);
                self.stats.arp_replies_sent += 1;
                self.push_tx(buf);
            } else {
                self.stats.drop(DropReason::NoTxBuffer);
            }
        }
        if ready > 0 {
            self.send_arp_ready();
        }
    }

    /// `ip`'s mapping was `before` and may just have changed: connections that cached
    /// the old MAC for that next hop move to the new one (a neighbour replaced its NIC,
    /// or a failover moved its address). Only a change of a known mapping costs the
    /// scan over connections, which is rare; a first mapping leaves cached MACs (taken
    /// from the peer's own SYN) alone.
    fn on_arp_changed(&mut self, ip: Ipv4Addr, before: Option<MacAddr>) {
        let Some(old) = before else { return };
        let Some(new) = self.arp.lookup(ip, self.now) else {
            return;
        };
        if new == old {
            return;
        }
        for (_, slot) in self.conns.iter_mut() {
            if slot.next_hop == ip && slot.mac.is_some_and(|m| m != new) {
                slot.mac = Some(new);
            }
        }
    }

    fn on_ipv4(&mut self, frame: &[u8], src_mac: MacAddr, packet: &[u8], checksum_verified: bool) {
        let (ip, l4) = match ipv4::parse(packet, self.cfg.ip, checksum_verified) {
            Ok(x) => x,
            Err(r) => return self.stats.drop(r),
        };
        match ip.protocol {
            IpProtocol::Tcp => self.on_tcp(frame, src_mac, &ip, l4, checksum_verified),
            IpProtocol::Icmp => self.on_icmp(src_mac, &ip, l4),
            _ => self.stats.drop(DropReason::UnknownProtocol),
        }
    }

    fn on_icmp(&mut self, src_mac: MacAddr, ip: &Ipv4Header, l4: &[u8]) {
        let Some(mut buf) = self.dev.alloc_tx(IPV4_TCP_HEADERS + l4.len()) else {
            return self.stats.drop(DropReason::NoTxBuffer);
        };
        let ident = self.ident.next();
        match icmp::echo_reply_frame(&mut buf, self.mac, self.cfg.ip, src_mac, ip, l4, ident) {
            Ok(Some(n)) => {
                buf.truncate(n);
                self.stats.icmp_echo_replies += 1;
                self.push_tx(buf);
            }
            Ok(None) => {}
            Err(r) => self.stats.drop(r),
        }
    }

    fn on_tcp(
        &mut self,
        frame: &[u8],
        src_mac: MacAddr,
        ip: &Ipv4Header,
        l4: &[u8],
        checksum_verified: bool,
    ) {
        if ip.is_broadcast() {
            return self.stats.drop(DropReason::NotOurAddress);
        }
        let (seg, payload) = match Segment::parse(l4, ip.src, ip.dst, checksum_verified) {
            Ok(x) => x,
            Err(ParseError::Checksum) => return self.stats.drop(DropReason::BadTcpChecksum),
            Err(ParseError::Malformed) => return self.stats.drop(DropReason::BadTcpHeader),
        };
        self.stats.segments_in += 1;
        let key = FlowKey {
            remote_ip: ip.src,
            remote_port: seg.src_port,
            local_port: seg.dst_port,
        };
        if let Some(&index) = self.flows.get(&key) {
            return self.conn_input(index, &seg, payload);
        }
        let mut iss_floor = None;
        let verdict = self
            .time_wait
            .on_segment(&key, &seg, self.now, self.cfg.tcp.time_wait);
        match verdict {
            None => {}
            Some(timewait::Verdict::Reply(tx)) => {
                // A restarted 2·MSL wait needs no new timer here: the entry's one timer
                // reschedules itself when it fires (see `run_timers`).
                return self.send_raw(src_mac, ip.src, seg.dst_port, seg.src_port, &tx);
            }
            Some(timewait::Verdict::Drop) => return,
            Some(timewait::Verdict::Reopen { iss_floor: floor }) => {
                self.stats.time_wait_reused += 1;
                iss_floor = Some(floor);
            }
        }
        if self.listeners.contains_key(&seg.dst_port) {
            return self.listen_input(src_mac, ip, key, &seg, payload, iss_floor);
        }
        if let Some(owner) = self.port_owner(seg.dst_port) {
            // An active open of a sibling worker, steered here by the link: hand it over.
            if self.misdirected.len() < MAX_MISDIRECTED {
                self.stats.misdirected_forwarded += 1;
                self.misdirected.push((owner, frame.to_vec()));
            } else {
                self.stats.drop(DropReason::NoConnection);
            }
            return;
        }
        self.stats.drop(if seg.flags.syn {
            DropReason::NoListener
        } else {
            DropReason::NoConnection
        });
        if !seg.flags.rst {
            self.send_rst_reply(src_mac, ip.src, &seg);
        }
    }

    /// RFC 9293 §3.10.7.1: a segment for no connection gets a RST that the sender will
    /// accept.
    fn send_rst_reply(&mut self, mac: MacAddr, remote: Ipv4Addr, seg: &Segment) {
        let tx = if seg.flags.ack {
            TxSegment {
                seq: seg.ack,
                rst: true,
                ..Default::default()
            }
        } else {
            TxSegment {
                seq: SeqNum(0),
                ack: Some(seg.seq + seg.seg_len()),
                rst: true,
                ..Default::default()
            }
        };
        self.stats.rsts_sent += 1;
        self.send_raw(mac, remote, seg.dst_port, seg.src_port, &tx);
    }

    fn local_addr(&self, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(self.cfg.ip, port)
    }

    /// RFC 7323 §7.1 TSval offset: a hash domain-separated from the ISN's, so that
    /// ISN - TSval does not reveal the engine clock (see [`IsnGenerator::ts_offset`]).
    fn ts_offset(&self, key: &FlowKey) -> u32 {
        self.isn.ts_offset(
            self.local_addr(key.local_port),
            SocketAddrV4::new(key.remote_ip, key.remote_port),
        )
    }

    fn listen_input(
        &mut self,
        mac: MacAddr,
        ip: &Ipv4Header,
        key: FlowKey,
        seg: &Segment,
        payload: &[u8],
        iss_floor: Option<SeqNum>,
    ) {
        if seg.flags.rst {
            return;
        }
        let local = self.local_addr(key.local_port);
        let remote = SocketAddrV4::new(key.remote_ip, key.remote_port);
        if seg.flags.ack {
            if !seg.flags.syn && self.cfg.syn_cookies && self.accepting {
                if let Some(index) = self.cookie_ack(mac, key, local, remote, seg) {
                    return self.conn_input(index, seg, payload);
                }
            }
            self.stats.drop(DropReason::NoConnection);
            return self.send_rst_reply(mac, ip.src, seg);
        }
        if !seg.flags.syn {
            return self.stats.drop(DropReason::NoConnection);
        }
        if self.conns.len() >= self.cfg.max_connections {
            self.stats.syns_dropped_overload += 1;
            return;
        }
        let Some(listener) = self.listeners.get_mut(&key.local_port) else {
            return;
        };
        if listener.half_open >= listener.backlog {
            if self.cfg.syn_cookies {
                self.send_cookie_syn_ack(mac, key, local, remote, seg);
            } else {
                self.stats.syns_dropped_overload += 1;
            }
            return;
        }
        listener.half_open += 1;
        let mut iss = self.isn.isn(local, remote, self.now);
        if let Some(floor) = iss_floor {
            // Reopened from TIME-WAIT: start beyond the old incarnation's sequence space
            // (RFC 1122 §4.2.2.13), whatever the clock-driven ISN says; old duplicates
            // then cannot land in the new window, with or without timestamps.
            iss = iss.max(floor);
        }
        let ts_offset = self.ts_offset(&key);
        let tcb = Tcb::accept_syn(
            local,
            remote,
            seg,
            iss,
            ts_offset,
            self.our_mss,
            self.now,
            &self.cfg.tcp,
        );
        let index = self.insert_conn(tcb, None, key, Some(mac), Some(key.local_port));
        self.mark_dirty(index);
    }

    /// Answer a SYN statelessly with a cookie (the backlog is full).
    fn send_cookie_syn_ack(
        &mut self,
        mac: MacAddr,
        key: FlowKey,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        seg: &Segment,
    ) {
        let mss = seg.mss.unwrap_or(536).min(self.our_mss);
        let cookie = self.cookies.encode(local, remote, seg.seq, mss, self.now);
        let tcp = &self.cfg.tcp;
        let mut tx = TxSegment {
            seq: cookie,
            ack: Some(seg.seq + 1),
            syn: true,
            mss: Some(self.our_mss),
            window: tcp.recv_buffer.min(65535) as u16,
            ..Default::default()
        };
        // Window scale and SACK survive only inside our TSval (see tcp::cookie).
        if let (true, Some((tsval, _))) = (tcp.timestamps, seg.timestamp) {
            let peer_ws = if tcp.window_scaling { seg.wscale } else { None };
            let sack = tcp.sack && seg.sack_permitted;
            if peer_ws.is_some() {
                tx.wscale = Some(tcp.rcv_wscale());
            }
            tx.sack_permitted = sack;
            let clock = (self.now.as_millis() as u32).wrapping_add(self.ts_offset(&key));
            let ours = cookie::tsval_with_options(clock, peer_ws, sack);
            tx.timestamp = Some((ours, tsval));
        }
        self.stats.syn_cookies_sent += 1;
        self.send_raw(mac, key.remote_ip, key.local_port, key.remote_port, &tx);
    }

    /// An ACK for no connection on a listening port: a returning SYN cookie?
    fn cookie_ack(
        &mut self,
        mac: MacAddr,
        key: FlowKey,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        seg: &Segment,
    ) -> Option<usize> {
        if self.conns.len() >= self.cfg.max_connections {
            return None;
        }
        let client_isn = seg.seq - 1;
        let cookie = seg.ack - 1;
        let Some(mss) = self
            .cookies
            .decode(local, remote, client_isn, cookie, self.now)
        else {
            self.stats.syn_cookies_rejected += 1;
            return None;
        };
        let mut opts = SynOptions {
            mss: Some(mss),
            ..Default::default()
        };
        if let (true, Some((tsval, tsecr))) = (self.cfg.tcp.timestamps, seg.timestamp) {
            let (ws, sack) = cookie::decode_ts_options(tsecr);
            opts.wscale = ws;
            opts.sack_permitted = sack;
            opts.timestamp = Some((tsval, tsecr));
        }
        let ts_offset = self.ts_offset(&key);
        let tcb = Tcb::from_cookie(
            local,
            remote,
            seg,
            cookie,
            opts,
            ts_offset,
            self.our_mss,
            self.now,
            &self.cfg.tcp,
        );
        self.stats.syn_cookies_accepted += 1;
        Some(self.insert_conn(tcb, None, key, Some(mac), None))
    }

    fn insert_conn(
        &mut self,
        tcb: Tcb,
        app: Option<H::Conn>,
        key: FlowKey,
        mac: Option<MacAddr>,
        listener: Option<u16>,
    ) -> usize {
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1).max(1);
        let next_hop = self.cfg.next_hop(key.remote_ip);
        let mut tcb = tcb;
        tcb.set_tso(self.tso_payload);
        let index = self.conns.insert(Slot {
            tcb,
            app,
            generation,
            key,
            mac,
            next_hop,
            timer_at: None,
            dirty: false,
            listener,
        });
        self.flows.insert(key, index);
        index
    }

    fn mark_dirty(&mut self, index: usize) {
        if let Some(slot) = self.conns.get_mut(index) {
            if !slot.dirty {
                slot.dirty = true;
                self.dirty.push(index);
            }
        }
    }

    /// RFC 5961 §7: a global budget of challenge ACKs per second.
    fn allow_challenge(&mut self) -> bool {
        if self.now - self.challenge_window >= std::time::Duration::from_secs(1) {
            self.challenge_window = self.now;
            self.challenge_count = 0;
        }
        if self.challenge_count < self.cfg.tcp.challenge_ack_limit {
            self.challenge_count += 1;
            self.stats.challenge_acks += 1;
            true
        } else {
            self.stats.challenge_acks_suppressed += 1;
            false
        }
    }

    fn conn_input(&mut self, index: usize, seg: &Segment, payload: &[u8]) {
        let outcome = self.conns[index].tcb.on_segment(self.now, seg, payload);
        if outcome.challenge_ack && self.allow_challenge() {
            self.conns[index].tcb.send_challenge_ack();
        }
        self.dispatch(index, outcome, payload);
        self.mark_dirty(index);
    }

    /// Hand the results of input or a timer to the application.
    fn dispatch(&mut self, index: usize, outcome: RxOutcome, payload: &[u8]) {
        let Engine {
            conns,
            handler,
            connect_requests,
            stats,
            listeners,
            ..
        } = self;
        let slot = &mut conns[index];
        let id = ConnId {
            index: index as u32,
            generation: slot.generation,
        };
        let ev = slot.tcb.take_events();

        if ev.connected {
            if let Some(port) = slot.listener.take() {
                if let Some(l) = listeners.get_mut(&port) {
                    l.half_open = l.half_open.saturating_sub(1);
                }
            }
            if slot.app.is_none() {
                match handler.accept(slot.tcb.local(), slot.tcb.remote()) {
                    Some(state) => {
                        stats.conns_opened_passive += 1;
                        slot.app = Some(state);
                    }
                    None => {
                        stats.conns_refused += 1;
                        slot.tcb.abort();
                    }
                }
            }
        }

        // Set once a callback has aborted the connection (or closed it outright): the
        // application gets no further callbacks for it but `closed`.
        let mut app_ended = false;
        if let Some(state) = slot.app.as_mut() {
            let tcb = &mut slot.tcb;
            let was_closed = tcb.is_closed();
            let ended = |tcb: &Tcb| !was_closed && tcb.is_closed();
            if ev.connected {
                handler.connected(&mut Conn::new(id, tcb, state, connect_requests));
            }
            let mut progress = !ended(tcb);
            if let (Some((a, b)), true) = (outcome.deliver, progress) {
                let data = &payload[a..b];
                let mut conn = Conn::new(id, tcb, state, connect_requests);
                let n = handler.data(&mut conn, data).min(data.len());
                progress = n > 0;
                tcb.keep_unconsumed(&data[n..]);
            }
            if progress && !ended(tcb) {
                deliver_buffered(handler, tcb, id, state, connect_requests);
            }
            if ev.writable && !ended(tcb) {
                handler.writable(&mut Conn::new(id, tcb, state, connect_requests));
                deliver_buffered(handler, tcb, id, state, connect_requests);
            }
            if ev.peer_closed && !ended(tcb) {
                handler.peer_closed(&mut Conn::new(id, tcb, state, connect_requests));
            }
            if ev.app_timer && !ended(tcb) {
                handler.timer(&mut Conn::new(id, tcb, state, connect_requests));
            }
            app_ended = ended(tcb);
        }

        // Callbacks may have closed or aborted the connection.
        let closed = ev.closed.or(slot.tcb.take_events().closed);
        if let Some(reason) = closed {
            if !app_ended {
                final_delivery(handler, slot, id, connect_requests, stats);
            } else {
                stats.unread_bytes_discarded += slot.tcb.readable_len() as u64;
            }
            match reason {
                CloseReason::Normal => stats.conns_closed += 1,
                CloseReason::Reset | CloseReason::Refused => stats.conns_reset += 1,
                CloseReason::TimedOut => stats.conns_timed_out += 1,
                CloseReason::Aborted => stats.conns_aborted += 1,
            }
            if let Some(port) = slot.listener.take() {
                if let Some(l) = listeners.get_mut(&port) {
                    l.half_open = l.half_open.saturating_sub(1);
                }
            }
            if let Some(state) = slot.app.take() {
                handler.closed(
                    &mut Opener {
                        requests: connect_requests,
                    },
                    state,
                    reason,
                );
            }
        }
    }

    // ----- Timers -----

    fn run_timers(&mut self) {
        let mut expired = std::mem::take(&mut self.expired);
        self.timers.expire(self.now, &mut expired);
        for item in expired.drain(..) {
            match item {
                TimerItem::Conn {
                    index,
                    generation,
                    at,
                } => {
                    let index = index as usize;
                    let Some(slot) = self.conns.get_mut(index) else {
                        continue;
                    };
                    if slot.generation != generation || slot.timer_at != Some(at) {
                        continue;
                    }
                    slot.timer_at = None;
                    slot.tcb.on_timer(self.now);
                    self.dispatch(index, RxOutcome::default(), &[]);
                    self.mark_dirty(index);
                }
                TimerItem::TimeWait { key, at } => {
                    if let Some(at) = self.time_wait.expire(&key, at) {
                        self.timers.schedule(at, TimerItem::TimeWait { key, at });
                    }
                }
            }
        }
        self.expired = expired;
    }

    // ----- Active opens -----

    fn start_requested_connects(&mut self) {
        // Requests made by `connect_failed` itself wait for the next turn, so a handler
        // that retries at once cannot spin here.
        let mut batch = std::mem::take(&mut self.connect_requests);
        for (remote, state) in batch.drain(..) {
            if let Err((e, state)) = self.start_connect(remote, state) {
                let mut opener = Opener {
                    requests: &mut self.connect_requests,
                };
                self.handler.connect_failed(&mut opener, remote, state, e);
            }
        }
        if self.connect_requests.is_empty() {
            self.connect_requests = batch;
        }
    }

    fn start_connect(
        &mut self,
        remote: SocketAddrV4,
        state: H::Conn,
    ) -> Result<ConnId, (ConnectError, H::Conn)> {
        if !self.accepting {
            return Err((ConnectError::ShuttingDown, state));
        }
        if self.conns.len() >= self.cfg.max_connections {
            return Err((ConnectError::TooManyConnections, state));
        }
        let Some(port) = self.pick_port(remote) else {
            return Err((ConnectError::NoPortAvailable, state));
        };
        let key = FlowKey {
            remote_ip: *remote.ip(),
            remote_port: remote.port(),
            local_port: port,
        };
        let local = self.local_addr(port);
        let iss = self.isn.isn(local, remote, self.now);
        let ts_offset = self.ts_offset(&key);
        let tcb = Tcb::connect(
            local,
            remote,
            iss,
            ts_offset,
            self.our_mss,
            self.now,
            &self.cfg.tcp,
        );
        self.stats.conns_opened_active += 1;
        let index = self.insert_conn(tcb, Some(state), key, None, None);
        self.mark_dirty(index);
        Ok(ConnId {
            index: index as u32,
            generation: self.conns[index].generation,
        })
    }

    /// On a multi-queue link that does not steer by Toeplitz (TAP), active opens own
    /// their local port by `port % queues`: the queue that should handle a segment for
    /// ephemeral `port`, when that is not ours.
    fn port_owner(&self, port: u16) -> Option<u16> {
        let caps = self.dev.capabilities();
        if caps.rss.is_some() || caps.queue_count <= 1 || !self.cfg.ephemeral_ports.contains(&port)
        {
            return None;
        }
        let owner = port % caps.queue_count;
        (owner != caps.queue).then_some(owner)
    }

    /// A free ephemeral port; on a multi-queue link one whose return flow the NIC's RSS
    /// steers to this worker's queue (as Fastsocket, mTCP and Seastar do), or, on a link
    /// without Toeplitz RSS, one this worker owns by `port % queues`.
    fn pick_port(&mut self, remote: SocketAddrV4) -> Option<u16> {
        let range = self.cfg.ephemeral_ports.clone();
        let caps = self.dev.capabilities();
        let flows = &self.flows;
        let time_wait = &self.time_wait;
        let is_free = |p: u16| {
            let key = FlowKey {
                remote_ip: *remote.ip(),
                remote_port: remote.port(),
                local_port: p,
            };
            !flows.contains_key(&key) && !time_wait.contains(&key)
        };
        let (queue, queues) = (caps.queue, caps.queue_count.max(1));
        let start = self.next_port;
        let port = match (&caps.rss, caps.queue_count > 1) {
            (Some(rss), true) => rss.pick_local_port(
                self.cfg.ip,
                *remote.ip(),
                remote.port(),
                caps.queue,
                range.clone(),
                start,
                is_free,
            ),
            _ => {
                // Without Toeplitz RSS the port itself says which queue owns the flow.
                let owned = |p: u16| p % queues == queue;
                let span = (*range.end() as u32 - *range.start() as u32 + 1) as usize;
                let mut p = start;
                let mut found = None;
                for _ in 0..span {
                    if owned(p) && is_free(p) {
                        found = Some(p);
                        break;
                    }
                    p = if p >= *range.end() {
                        *range.start()
                    } else {
                        p + 1
                    };
                }
                found
            }
        };
        if let Some(p) = port {
            self.next_port = if p >= *range.end() {
                *range.start()
            } else {
                p + 1
            };
        }
        port
    }

    // ----- Transmit path -----

    fn flush_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for index in dirty.drain(..) {
            self.flush_conn(index);
        }
        self.dirty = dirty;
    }

    /// Let one connection send what it wants, then settle its timer and its fate.
    fn flush_conn(&mut self, index: usize) {
        let Some(slot) = self.conns.get_mut(index) else {
            return;
        };
        if !slot.dirty {
            return;
        }
        slot.dirty = false;
        let mut segs = std::mem::take(&mut self.segs);
        slot.tcb.poll_transmit(self.now, &mut segs);
        self.stats.retransmissions += slot.tcb.take_retransmissions();
        for seg in segs.drain(..) {
            self.send_conn_segment(index, &seg);
        }
        self.segs = segs;

        let slot = &mut self.conns[index];
        match slot.tcb.state() {
            State::Closed => return self.remove_conn(index),
            State::TimeWait => return self.enter_time_wait(index),
            _ => {}
        }
        if let Some(at) = slot.tcb.next_deadline() {
            if slot.timer_at.is_none_or(|t| at < t) {
                slot.timer_at = Some(at);
                self.timers.schedule(
                    at,
                    TimerItem::Conn {
                        index: index as u32,
                        generation: slot.generation,
                        at,
                    },
                );
            }
        }
    }

    fn remove_conn(&mut self, index: usize) {
        let slot = self.conns.remove(index);
        self.flows.remove(&slot.key);
        if let Some(state) = slot.app {
            // Closed without an event (should not happen): still tell the application.
            self.notify_closed(state, CloseReason::Normal);
        }
    }

    fn notify_closed(&mut self, state: H::Conn, reason: CloseReason) {
        let mut opener = Opener {
            requests: &mut self.connect_requests,
        };
        self.handler.closed(&mut opener, state, reason);
    }

    /// Replace a connection block in TIME-WAIT by a compact entry (RFC 9293 §3.10.7.4
    /// TIME-WAIT only needs to re-ACK a retransmitted FIN).
    fn enter_time_wait(&mut self, index: usize) {
        let slot = self.conns.remove(index);
        self.flows.remove(&slot.key);
        self.stats.conns_closed += 1;
        let at = slot
            .tcb
            .linger_deadline()
            .unwrap_or(self.now + self.cfg.tcp.time_wait);
        if self.time_wait.insert(slot.key, &slot.tcb, at) {
            self.stats.time_wait_entered += 1;
            self.timers
                .schedule(at, TimerItem::TimeWait { key: slot.key, at });
        }
        let mut slot = slot;
        let id = ConnId {
            index: index as u32,
            generation: slot.generation,
        };
        final_delivery(
            &mut self.handler,
            &mut slot,
            id,
            &mut self.connect_requests,
            &mut self.stats,
        );
        if let Some(state) = slot.app {
            self.notify_closed(state, CloseReason::Normal);
        }
    }

    fn send_conn_segment(&mut self, index: usize, seg: &TxSegment) {
        let slot = &mut self.conns[index];
        if slot.mac.is_none() {
            slot.mac = self.arp.lookup(slot.next_hop, self.now);
        }
        let key = slot.key;
        let len = IPV4_TCP_HEADERS + seg.header_len() + seg.payload_len;
        if let Some(mac) = slot.mac {
            let Some(mut buf) = self.dev.alloc_tx(len) else {
                return self.stats.drop(DropReason::NoTxBuffer);
            };
            let meta = write_tcp_frame(
                &mut buf,
                self.mac,
                mac,
                self.cfg.ip,
                key,
                seg,
                Some(slot.tcb.send_buffer()),
                self.ident.next(),
                self.tx_csum,
            );
            if meta != TxMeta::default() {
                buf.set_meta(meta);
            }
            self.stats.segments_out += 1;
            self.push_tx(buf);
        } else {
            // Next hop unresolved: park the frame with ARP (copied; rare path).
            let mut frame = vec![0u8; len];
            write_tcp_frame(
                &mut frame,
                self.mac,
                MacAddr::BROADCAST,
                self.cfg.ip,
                key,
                seg,
                Some(slot.tcb.send_buffer()),
                self.ident.next(),
                ChecksumOffload::NONE,
            );
            let hop = slot.next_hop;
            self.stats.segments_out += 1;
            match self.arp.enqueue(hop, frame, self.now) {
                EnqueueResult::SendRequest => self.send_arp_request(hop),
                EnqueueResult::Queued => {}
                EnqueueResult::Dropped => self.stats.drop(DropReason::ArpQueueFull),
            }
            if self.arp.lookup(hop, self.now).is_some() {
                self.send_arp_ready();
            }
        }
    }

    /// A segment outside any connection (RST replies, cookie SYN-ACKs, TIME-WAIT ACKs).
    fn send_raw(
        &mut self,
        mac: MacAddr,
        remote: Ipv4Addr,
        local_port: u16,
        remote_port: u16,
        seg: &TxSegment,
    ) {
        let len = IPV4_TCP_HEADERS + seg.header_len();
        let Some(mut buf) = self.dev.alloc_tx(len) else {
            return self.stats.drop(DropReason::NoTxBuffer);
        };
        let key = FlowKey {
            remote_ip: remote,
            remote_port,
            local_port,
        };
        let meta = write_tcp_frame(
            &mut buf,
            self.mac,
            mac,
            self.cfg.ip,
            key,
            seg,
            None,
            self.ident.next(),
            self.tx_csum,
        );
        if meta != TxMeta::default() {
            buf.set_meta(meta);
        }
        self.stats.segments_out += 1;
        self.push_tx(buf);
    }

    fn push_tx(&mut self, buf: D::Tx) {
        self.stats.frames_out += 1;
        self.stats.bytes_out += buf.len() as u64;
        self.tx.push(buf);
        if self.tx.len() >= TX_BURST {
            self.submit();
        }
    }

    fn submit(&mut self) {
        if !self.tx.is_empty() {
            self.dev.transmit(&mut self.tx);
        }
    }

    // ----- ARP -----

    fn poll_arp(&mut self) {
        let mut requests = std::mem::take(&mut self.arp_requests);
        let mut failed = 0;
        self.arp.poll(self.now, &mut requests, &mut failed);
        for _ in 0..failed {
            self.stats.drop(DropReason::ArpUnresolved);
        }
        for ip in requests.drain(..) {
            self.send_arp_request(ip);
        }
        self.arp_requests = requests;
    }

    fn send_arp_request(&mut self, target: Ipv4Addr) {
        let Some(mut buf) = self.dev.alloc_tx(arp::FRAME_LEN) else {
            return self.stats.drop(DropReason::NoTxBuffer);
        };
        let n = arp::build_request(&mut buf, self.mac, self.cfg.ip, target);
        buf.truncate(n);
        self.stats.arp_requests_sent += 1;
        self.push_tx(buf);
    }

    fn send_gratuitous_arp(&mut self) {
        let Some(mut buf) = self.dev.alloc_tx(arp::FRAME_LEN) else {
            return self.stats.drop(DropReason::NoTxBuffer);
        };
        let n = arp::build_gratuitous(&mut buf, self.mac, self.cfg.ip);
        buf.truncate(n);
        self.push_tx(buf);
    }

    /// Send frames that were waiting for an ARP resolution.
    fn send_arp_ready(&mut self) {
        let mut ready = std::mem::take(&mut self.arp_ready);
        self.arp.drain_ready(&mut ready);
        for frame in ready.drain(..) {
            if frame.is_empty() {
                continue;
            }
            let Some(mut buf) = self.dev.alloc_tx(frame.len()) else {
                self.stats.drop(DropReason::NoTxBuffer);
                continue;
            };
            buf.copy_from_slice(&frame);
            self.push_tx(buf);
        }
        self.arp_ready = ready;
    }
}

/// Offer the application what the receive buffer holds, until it stops consuming.
/// Offer the application what the receive buffer holds for as long as it makes
/// progress: an application that takes one request at a time is offered the next one
/// straight away; one that takes nothing has paused.
fn deliver_buffered<H: Handler>(
    handler: &mut H,
    tcb: &mut Tcb,
    id: ConnId,
    state: &mut H::Conn,
    requests: &mut Vec<(SocketAddrV4, H::Conn)>,
) {
    let was_closed = tcb.is_closed();
    while tcb.readable_len() > 0 {
        // The buffer leaves the block while the application reads it, so the
        // application can use its connection handle at the same time.
        let mut buf = tcb.take_recv_buffer();
        let data = buf.readable();
        let len = data.len();
        let n = handler
            .data(&mut Conn::new(id, tcb, state, requests), data)
            .min(len);
        let wrapped = len < buf.readable_len();
        buf.consume(n);
        let aborted = !was_closed && tcb.is_closed();
        if n == 0 && wrapped && !aborted {
            // The application may need the whole message, which wraps the ring's end:
            // offer it again in one piece.
            buf.make_contiguous();
            tcb.put_recv_buffer(buf);
            continue;
        }
        tcb.put_recv_buffer(buf);
        // Stop when paused, or when the callback aborted the connection.
        if n == 0 || aborted {
            break;
        }
    }
}

/// The connection is ending: offer unread bytes one last time; whatever the application
/// still leaves is discarded and counted.
fn final_delivery<H: Handler>(
    handler: &mut H,
    slot: &mut Slot<H::Conn>,
    id: ConnId,
    requests: &mut Vec<(SocketAddrV4, H::Conn)>,
    stats: &mut Stats,
) {
    if slot.tcb.readable_len() == 0 {
        return;
    }
    if let Some(state) = slot.app.as_mut() {
        deliver_buffered(handler, &mut slot.tcb, id, state, requests);
    }
    stats.unread_bytes_discarded += slot.tcb.readable_len() as u64;
}

/// Build Ethernet + IPv4 + TCP headers and the payload into `buf` (exactly the frame's
/// length). Returns the offload request for the driver, if any.
#[allow(clippy::too_many_arguments)]
fn write_tcp_frame(
    buf: &mut [u8],
    src_mac: MacAddr,
    dst_mac: MacAddr,
    src_ip: Ipv4Addr,
    key: FlowKey,
    seg: &TxSegment,
    send_buf: Option<&SendBuffer>,
    ident: u16,
    offload: ChecksumOffload,
) -> TxMeta {
    let hl = seg.header_len();
    let tcp_len = hl + seg.payload_len;
    let ip_start = ETHERNET_HEADER_LEN;
    let tcp_start = IPV4_TCP_HEADERS;
    ethernet::write_header(
        &mut buf[..ip_start],
        src_mac,
        dst_mac,
        EthernetProtocol::Ipv4,
    );
    ipv4::write_header(
        &mut buf[ip_start..tcp_start],
        src_ip,
        key.remote_ip,
        IpProtocol::Tcp,
        tcp_len,
        ipv4::DEFAULT_TTL,
        ident,
        true,
        !offload.ipv4,
    );
    seg.write_header(
        &mut buf[tcp_start..tcp_start + hl],
        key.local_port,
        key.remote_port,
    );
    let payload = tcp_start + hl..tcp_start + tcp_len;
    let csum_at = tcp_start + 16;
    let pseudo =
        checksum::pseudo_header_v4(src_ip.octets(), key.remote_ip.octets(), 6, tcp_len as u16);
    let mut meta = TxMeta::default();
    if offload.tcp {
        if let (Some(sb), true) = (send_buf, seg.payload_len > 0) {
            sb.copy_out(seg.payload_offset, &mut buf[payload]);
        }
        // CHECKSUM_PARTIAL: the device adds the segment's sum to the pseudo-header sum.
        let partial = checksum::fold(pseudo);
        buf[csum_at..csum_at + 2].copy_from_slice(&partial.to_be_bytes());
        meta.checksum = Some(ChecksumRequest {
            start: tcp_start as u16,
            offset: 16,
        });
        meta.tso_mss = seg.tso_mss;
    } else {
        // The payload's sum comes with the copy (from precomputed prefix sums for
        // summed bodies), so the body is never read a second time.
        let payload_sum = match (send_buf, seg.payload_len > 0) {
            (Some(sb), true) => sb.copy_out_summed(seg.payload_offset, &mut buf[payload]),
            _ => 0,
        };
        // The header is a multiple of four bytes long, so the payload starts even.
        let sum = checksum::combine(
            checksum::combine(pseudo, checksum::sum(&buf[tcp_start..tcp_start + hl])),
            payload_sum,
        );
        let c = !checksum::fold(sum);
        buf[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    }
    meta
}

#[cfg(test)]
mod scripted_tests;
#[cfg(test)]
mod tests;
