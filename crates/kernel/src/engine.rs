//! One worker's kernel-socket backend: an epoll instance, this worker's own
//! `SO_REUSEPORT` listeners, a connection table (a slab with generations, application
//! state next to each connection) and the application's [`Handler`], driven by
//! [`KernelEngine::poll`] in the worker's loop.
//!
//! Sockets are non-blocking and registered edge-triggered, once, for input, output and
//! peer half-close; the table remembers what each edge reported (`can_read`,
//! `can_write`) so a connection that is paused, or that used up its read budget for
//! this turn, is picked up again without another edge.
//!
//! Callbacks follow the same rules as on Rusty's own engine (see [`Handler`]): `accept`
//! then `connected` for passive opens, `connected` when a non-blocking connect
//! completes, `data` with partial consumption and re-offer, `writable` after a refused
//! send once queued bytes reach the kernel, `peer_closed` on EOF, and exactly one
//! `closed` per connection. Each connection may arm one application timer
//! ([`Conn::set_timer`]); due timers are kept in a min-heap, cancelled lazily, and
//! fired with the handler's `timer` callback once per loop turn.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::mem;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use slab::Slab;

use rusty_stack::{CloseReason, Conn, ConnId, ConnectError, Handler, Opener, Stats};

use crate::conn::{close_reason, KernelConn};
use crate::sys::{self, ConnectStart, Epoll};

/// How a kernel-backend worker listens and bounds its memory.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    /// Addresses to listen on, each with its accept backlog. Every worker binds its own
    /// socket to each address (`SO_REUSEPORT`); the kernel spreads connections over them.
    pub listen: Vec<(SocketAddrV4, usize)>,
    /// Per-connection bound on copied bytes queued in user space while the socket is
    /// full (shared bytes do not count), like `TcpConfig::send_buffer`.
    pub send_buffer: usize,
    /// Size of one `read` (the worker's receive buffer).
    pub recv_chunk: usize,
    /// Per-connection bound on received bytes the application has not consumed; past
    /// it the socket is not read, so the kernel's window closes (like
    /// `TcpConfig::recv_buffer`).
    pub recv_buffer: usize,
    pub max_connections: usize,
    /// After `close`, how long to wait for the peer's FIN before giving up with
    /// `TimedOut` (Rusty's FIN-WAIT-2 timeout).
    pub fin_timeout: Duration,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            listen: Vec::new(),
            send_buffer: 256 * 1024,
            recv_chunk: 64 * 1024,
            recv_buffer: 256 * 1024,
            max_connections: 65536,
            fin_timeout: Duration::from_secs(60),
        }
    }
}

impl KernelConfig {
    /// Bind (and release) a socket on every listen address, so that a bad address or a
    /// port held by someone else is reported before workers start. With
    /// `SO_REUSEPORT`, a port held by another `SO_REUSEPORT` socket of the same user
    /// is shared, not refused.
    pub fn check_listen(&self) -> io::Result<()> {
        for (addr, backlog) in &self.listen {
            bind_listener(*addr, *backlog)
                .map_err(|e| io::Error::new(e.kind(), format!("listen on {addr}: {e}")))?;
        }
        Ok(())
    }
}

fn bind_listener(addr: SocketAddrV4, backlog: usize) -> io::Result<OwnedFd> {
    let fd = sys::tcp_socket()?;
    sys::set_reuse(fd.as_fd())?;
    sys::bind(fd.as_fd(), addr)?;
    sys::listen(fd.as_fd(), backlog)?;
    Ok(fd)
}

/// Tokens of listeners carry this bit; connection tokens are (generation << 32 | index)
/// with 31-bit generations.
const LISTENER_TOKEN: u64 = 1 << 63;
/// Reads per connection per turn before the others get a turn.
const READ_BUDGET: usize = 4;
/// Connections accepted per listener per turn.
const ACCEPT_BATCH: usize = 64;
const MAX_EVENTS: usize = 256;
const CONN_EVENTS: u32 = sys::IN | sys::OUT | sys::RDHUP | sys::ET;

struct Listener {
    fd: OwnedFd,
    addr: SocketAddrV4,
    /// An edge said connections are waiting and `accept` has not said EAGAIN since.
    ready: bool,
}

/// A connection and the application's state next to it.
struct Slot<S> {
    conn: KernelConn,
    app: Option<S>,
    generation: u32,
    /// In the ready list.
    queued: bool,
    /// In the list of deferred `writable` calls.
    soon_queued: bool,
    /// After `close` and our FIN: when to stop waiting for the peer's.
    linger_at: Option<Instant>,
    /// The deadline of this connection's live entry in the timer heap: no later than
    /// `conn.timer_at` when that is set. Entries that do not match are stale.
    timer_filed: Option<Instant>,
}

/// One worker's kernel-socket backend. See the [module docs](self).
pub struct KernelEngine<H: Handler> {
    handler: H,
    cfg: KernelConfig,
    epoll: Epoll,
    listeners: Vec<Listener>,
    conns: Slab<Slot<H::Conn>>,
    next_generation: u32,
    stats: Stats,
    accepting: bool,
    /// A listener used up its batch last turn and has more waiting.
    accept_pending: bool,
    rbuf: Vec<u8>,
    ready: Vec<(usize, u32)>,
    soon: Vec<(usize, u32)>,
    lingering: Vec<(usize, u32)>,
    /// Application timers: (deadline, index, generation), earliest first.
    timers: BinaryHeap<Reverse<(Instant, usize, u32)>>,
    /// Connections with a live entry in `timers`.
    timers_live: usize,
    connect_requests: Vec<(SocketAddrV4, H::Conn)>,
}

impl<H: Handler> KernelEngine<H> {
    /// An engine with no listener yet (see [`KernelEngine::listen`]); `cfg.listen` is
    /// for [`kernel_worker`](crate::kernel_worker).
    pub fn new(handler: H, cfg: KernelConfig) -> io::Result<KernelEngine<H>> {
        Ok(KernelEngine {
            handler,
            epoll: Epoll::new(MAX_EVENTS)?,
            listeners: Vec::new(),
            conns: Slab::with_capacity(cfg.max_connections.min(4096)),
            next_generation: 1,
            stats: Stats::default(),
            accepting: true,
            accept_pending: false,
            rbuf: vec![0; cfg.recv_chunk.max(1)],
            ready: Vec::new(),
            soon: Vec::new(),
            lingering: Vec::new(),
            timers: BinaryHeap::new(),
            timers_live: 0,
            connect_requests: Vec::new(),
            cfg,
        })
    }

    // ----- Public API -----

    /// Listen on `addr` with its own `SO_REUSEPORT` socket; returns the bound address
    /// (useful with port 0).
    pub fn listen(&mut self, addr: SocketAddrV4, backlog: usize) -> io::Result<SocketAddrV4> {
        let fd = bind_listener(addr, backlog)?;
        let bound = sys::local_addr(fd.as_fd())?;
        let token = LISTENER_TOKEN | self.listeners.len() as u64;
        self.epoll.add(fd.as_fd(), sys::IN | sys::ET, token)?;
        self.listeners.push(Listener {
            fd,
            addr: bound,
            ready: false,
        });
        Ok(bound)
    }

    /// Stop accepting (graceful shutdown): close the listeners; open connections carry
    /// on. Active opens are refused from now on, as on Rusty's engine.
    pub fn stop_accepting(&mut self) {
        self.accepting = false;
        self.accept_pending = false;
        self.listeners.clear();
    }

    /// Start a non-blocking connect to `remote`. The handler's `connected` or `closed`
    /// follows; failures that leave no connection come back as the error.
    pub fn connect(
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
        let Ok(fd) = sys::tcp_socket() else {
            return Err((ConnectError::TooManyConnections, state));
        };
        let _ = sys::set_nodelay(fd.as_fd());
        let (immediate, error) = match sys::connect(fd.as_fd(), remote) {
            Ok(ConnectStart::Connected) => (true, None),
            Ok(ConnectStart::InProgress) => (false, None),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EADDRNOTAVAIL | libc::EAGAIN | libc::EADDRINUSE)
                ) =>
            {
                return Err((ConnectError::NoPortAvailable, state));
            }
            // The connection existed for the application from now on: it ends through
            // `closed`, as a refused or unreachable open does on Rusty's engine.
            Err(e) => (false, Some(close_reason(&e))),
        };
        let local = sys::local_addr(fd.as_fd())
            .unwrap_or_else(|_| SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        let generation = self.take_generation();
        let entry = self.conns.vacant_entry();
        let index = entry.key();
        if self
            .epoll
            .add(fd.as_fd(), CONN_EVENTS, token(index, generation))
            .is_err()
        {
            return Err((ConnectError::TooManyConnections, state));
        }
        let mut conn = KernelConn::new(fd, local, remote, self.cfg.send_buffer);
        conn.connecting = true;
        conn.can_write = immediate;
        conn.error = error;
        entry.insert(Slot {
            conn,
            app: Some(state),
            generation,
            queued: false,
            soon_queued: false,
            linger_at: None,
            timer_filed: None,
        });
        self.stats.conns_opened_active += 1;
        if immediate || error.is_some() {
            self.push_ready(index);
        }
        Ok(ConnId::new(index as u32, generation))
    }

    /// Offer a connection's unread bytes to the handler again (after its `data` callback
    /// paused by consuming nothing). Returns false if the connection no longer exists.
    pub fn resume_receive(&mut self, id: ConnId) -> bool {
        let index = id.index() as usize;
        let Some(slot) = self.conns.get_mut(index) else {
            return false;
        };
        if ConnId::new(id.index(), slot.generation) != id {
            return false;
        }
        let Some(state) = slot.app.as_mut() else {
            return false;
        };
        if !slot.conn.connecting {
            deliver_buffered(
                &mut self.handler,
                &mut slot.conn,
                id,
                state,
                &mut self.connect_requests,
            );
        }
        self.settle(index);
        self.start_requested_connects();
        true
    }

    /// Run one loop turn: wait up to `timeout` for socket events (not at all when work
    /// is pending, no later than the next timer), accept, read, write and call back,
    /// fire due timers, then the handler's `poll` and the active opens it asked for.
    /// Returns how much happened (0: idle).
    pub fn poll(&mut self, timeout: Duration) -> usize {
        let busy = !self.ready.is_empty() || !self.soon.is_empty() || self.accept_pending;
        let timeout = if busy {
            Duration::ZERO
        } else {
            match self.next_deadline() {
                Some(at) => timeout.min(at.saturating_duration_since(Instant::now())),
                None => timeout,
            }
        };
        let n = self.epoll.wait(timeout).unwrap_or(0);
        for i in 0..n {
            let (bits, token) = self.epoll.event(i);
            self.on_event(bits, token);
        }
        let mut work = n;
        work += self.accept_ready();
        work += self.run_ready();
        work += self.run_soon();
        let now = Instant::now();
        self.expire_lingering(now);
        work += self.run_timers(now);
        self.handler
            .poll(&mut Opener::new(&mut self.connect_requests));
        self.start_requested_connects();
        work
    }

    pub fn handler(&self) -> &H {
        &self.handler
    }
    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }
    /// This worker's counters. Kernel sockets hide frames and segments, so `frames_*`
    /// stay 0; `bytes_in`/`bytes_out` count TCP payload bytes read from and written to
    /// the kernel, `segments_in`/`segments_out` the reads and sends that moved bytes;
    /// `rsts_sent` counts aborts and refused accepts (closes with `SO_LINGER` 0).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    pub fn config(&self) -> &KernelConfig {
        &self.cfg
    }
    /// Open connections, including active opens still connecting.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }
    /// Local addresses of the listeners.
    pub fn listen_addrs(&self) -> impl Iterator<Item = SocketAddrV4> + '_ {
        self.listeners.iter().map(|l| l.addr)
    }
    /// The earliest time the engine has work without new socket events, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        if !self.ready.is_empty() || !self.soon.is_empty() || self.accept_pending {
            return Some(Instant::now());
        }
        // `run_timers` leaves a live entry on top of the heap (callbacks between turns,
        // through `resume_receive`, may make it stale: that costs an early wake-up).
        let timer = self.timers.peek().map(|&Reverse((at, _, _))| at);
        self.lingering
            .iter()
            .filter_map(|&(i, g)| self.conns.get(i).filter(|s| s.generation == g))
            .filter_map(|s| s.linger_at)
            .chain(timer)
            .min()
    }

    // ----- Events -----

    fn take_generation(&mut self) -> u32 {
        let g = self.next_generation;
        self.next_generation = (g + 1) & 0x7fff_ffff;
        if self.next_generation == 0 {
            self.next_generation = 1;
        }
        g
    }

    fn push_ready(&mut self, index: usize) {
        if let Some(slot) = self.conns.get_mut(index) {
            if !slot.queued {
                slot.queued = true;
                self.ready.push((index, slot.generation));
            }
        }
    }

    fn on_event(&mut self, bits: u32, token: u64) {
        if token & LISTENER_TOKEN != 0 {
            if let Some(l) = self.listeners.get_mut((token & !LISTENER_TOKEN) as usize) {
                l.ready = true;
            }
            return;
        }
        let index = (token & 0xffff_ffff) as usize;
        let generation = (token >> 32) as u32;
        let Some(slot) = self.conns.get_mut(index) else {
            return;
        };
        if slot.generation != generation {
            return;
        }
        let c = &mut slot.conn;
        if bits & (sys::IN | sys::RDHUP | sys::HUP | sys::ERR) != 0 {
            c.can_read = true;
        }
        if bits & (sys::RDHUP | sys::HUP | sys::ERR) != 0 {
            c.hup_seen = true;
        }
        if bits & (sys::OUT | sys::HUP | sys::ERR) != 0 {
            c.can_write = true;
        }
        if bits & sys::ERR != 0 {
            c.err_event = true;
        }
        self.push_ready(index);
    }

    fn accept_ready(&mut self) -> usize {
        self.accept_pending = false;
        let mut accepted = 0;
        for li in 0..self.listeners.len() {
            let mut budget = ACCEPT_BATCH;
            while self.listeners.get(li).is_some_and(|l| l.ready) {
                if self.conns.len() >= self.cfg.max_connections {
                    // Left in the kernel's accept queue until a connection ends.
                    break;
                }
                if budget == 0 {
                    self.accept_pending = true;
                    break;
                }
                budget -= 1;
                match sys::accept(self.listeners[li].fd.as_fd()) {
                    Ok((fd, peer)) => {
                        accepted += 1;
                        self.on_accepted(li, fd, peer);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.listeners[li].ready = false;
                    }
                    // The connection died in the queue; the next one may be fine.
                    Err(e)
                        if matches!(
                            e.raw_os_error(),
                            Some(libc::ECONNABORTED | libc::EPROTO | libc::EPERM)
                        ) => {}
                    // Out of descriptors or memory: try again next turn.
                    Err(_) => break,
                }
            }
        }
        accepted
    }

    fn on_accepted(&mut self, li: usize, fd: OwnedFd, peer: SocketAddrV4) {
        let _ = sys::set_nodelay(fd.as_fd());
        let bound = self.listeners[li].addr;
        let local = if bound.ip().is_unspecified() {
            sys::local_addr(fd.as_fd()).unwrap_or(bound)
        } else {
            bound
        };
        let Some(state) = self.handler.accept(local, peer) else {
            // Refused: reset, and counted as Rusty's engine counts it (refused, aborted).
            self.stats.conns_refused += 1;
            self.stats.conns_aborted += 1;
            self.stats.rsts_sent += 1;
            let _ = sys::set_linger_zero(fd.as_fd());
            return;
        };
        self.stats.conns_opened_passive += 1;
        let generation = self.take_generation();
        let entry = self.conns.vacant_entry();
        let index = entry.key();
        let registered = self
            .epoll
            .add(fd.as_fd(), CONN_EVENTS, token(index, generation))
            .is_ok();
        let mut conn = KernelConn::new(fd, local, peer, self.cfg.send_buffer);
        // Unwatchable (epoll out of memory): it can only be aborted.
        conn.aborted = !registered;
        let slot = entry.insert(Slot {
            conn,
            app: Some(state),
            generation,
            queued: false,
            soon_queued: false,
            linger_at: None,
            timer_filed: None,
        });
        if registered {
            let id = ConnId::new(index as u32, generation);
            if let Some(state) = slot.app.as_mut() {
                self.handler.connected(&mut Conn::new(
                    id,
                    &mut slot.conn,
                    state,
                    &mut self.connect_requests,
                ));
            }
        }
        self.settle(index);
    }

    fn run_ready(&mut self) -> usize {
        let mut batch = mem::take(&mut self.ready);
        let n = batch.len();
        for &(index, generation) in &batch {
            match self.conns.get_mut(index) {
                Some(slot) if slot.generation == generation => slot.queued = false,
                _ => continue,
            }
            self.process(index);
        }
        batch.clear();
        if self.ready.is_empty() {
            self.ready = batch;
        }
        n
    }

    /// Deferred `writable` calls (`notify_writable` with nothing queued).
    fn run_soon(&mut self) -> usize {
        let mut batch = mem::take(&mut self.soon);
        let n = batch.len();
        for &(index, generation) in &batch {
            let Some(slot) = self.conns.get_mut(index) else {
                continue;
            };
            if slot.generation != generation {
                continue;
            }
            slot.soon_queued = false;
            let id = ConnId::new(index as u32, generation);
            let c = &mut slot.conn;
            c.writable_soon = false;
            if let Some(state) = slot.app.as_mut() {
                if c.want_writable && rusty_stack::Connection::send_space(c) > 0 {
                    c.want_writable = false;
                    let reqs = &mut self.connect_requests;
                    self.handler.writable(&mut Conn::new(id, c, state, reqs));
                    deliver_buffered(&mut self.handler, c, id, state, reqs);
                }
            }
            self.settle(index);
        }
        batch.clear();
        if self.soon.is_empty() {
            self.soon = batch;
        }
        n
    }

    /// Everything the socket reported for one connection: the end of a connect, input,
    /// output, the peer's FIN.
    fn process(&mut self, index: usize) {
        let KernelEngine {
            conns,
            handler,
            connect_requests: reqs,
            rbuf,
            stats,
            cfg,
            ..
        } = self;
        let slot = &mut conns[index];
        let id = ConnId::new(index as u32, slot.generation);
        let Some(state) = slot.app.as_mut() else {
            return;
        };
        let c = &mut slot.conn;
        if c.connecting {
            if c.error.is_none() && (c.can_write || c.err_event) {
                c.err_event = false;
                match sys::take_error(c.fd.as_fd()) {
                    Ok(None) => {
                        c.connecting = false;
                        c.can_write = true;
                        handler.connected(&mut Conn::new(id, c, state, reqs));
                    }
                    Ok(Some(e)) | Err(e) => c.error = Some(close_reason(&e)),
                }
            }
            if c.connecting {
                return self.settle(index);
            }
        }
        receive(handler, c, id, state, reqs, rbuf, stats, cfg.recv_buffer);
        transmit(handler, c, id, state, reqs);
        if c.eof && !c.peer_closed_told && !c.aborted {
            c.peer_closed_told = true;
            handler.peer_closed(&mut Conn::new(id, c, state, reqs));
        }
        self.settle(index);
    }

    /// After callbacks: carry out what the application asked for (queued bytes, FIN,
    /// RST) and end the connection when it is over.
    fn settle(&mut self, index: usize) {
        let KernelEngine {
            conns,
            handler,
            connect_requests: reqs,
            stats,
            ..
        } = self;
        let slot = &mut conns[index];
        let id = ConnId::new(index as u32, slot.generation);
        let c = &mut slot.conn;
        if let (false, Some(state)) = (c.connecting, slot.app.as_mut()) {
            transmit(handler, c, id, state, reqs);
        }
        stats.bytes_out += mem::take(&mut c.bytes_out);
        stats.segments_out += mem::take(&mut c.sends);
        self.file_timer(index);
        let slot = &mut self.conns[index];
        let c = &mut slot.conn;

        if c.aborted {
            return self.finish(index, CloseReason::Aborted);
        }
        if let Some(reason) = c.error {
            return self.finish(index, reason);
        }
        if c.connecting {
            return;
        }
        if c.fin_requested && !c.fin_sent && c.queue.is_empty() {
            match sys::shutdown_write(c.fd.as_fd()) {
                Ok(()) => c.fin_sent = true,
                // Already shut down by the peer's RST; reading reports it.
                Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => c.fin_sent = true,
                Err(e) => return self.finish(index, close_reason(&e)),
            }
        }
        if c.fin_sent && c.eof {
            return self.finish(index, CloseReason::Normal);
        }
        if c.err_event {
            // An error edge the receive path did not see (reading is paused).
            c.err_event = false;
            if let Ok(Some(e)) = sys::take_error(c.fd.as_fd()) {
                return self.finish(index, close_reason(&e));
            }
        }
        if c.fin_sent && c.rx_closed && slot.linger_at.is_none() {
            slot.linger_at = Some(Instant::now() + self.cfg.fin_timeout);
            self.lingering.push((index, slot.generation));
        }
        if c.writable_soon && !slot.soon_queued {
            slot.soon_queued = true;
            self.soon.push((index, slot.generation));
        }
        let room = c.rx_closed || c.rx.len() < self.cfg.recv_buffer;
        if c.can_read && !c.eof && room {
            self.push_ready(index);
        }
    }

    /// File the timer the callbacks armed, unless an entry due no later is filed already
    /// (a later deadline is filed when that entry comes up, see `run_timers`).
    fn file_timer(&mut self, index: usize) {
        let slot = &mut self.conns[index];
        let Some(at) = slot.conn.timer_at else {
            return;
        };
        if slot.timer_filed.is_some_and(|filed| filed <= at) {
            return;
        }
        if slot.timer_filed.is_none() {
            self.timers_live += 1;
        }
        slot.timer_filed = Some(at);
        self.timers.push(Reverse((at, index, slot.generation)));
        if self.timers.len() > 2 * self.timers_live + 64 {
            // Mostly stale entries (closed connections, earlier deadlines re-armed
            // sooner): drop them, amortized over the pushes that made them.
            let conns = &self.conns;
            self.timers.retain(|&Reverse((at, i, g))| {
                conns
                    .get(i)
                    .is_some_and(|s| s.generation == g && s.timer_filed == Some(at))
            });
        }
    }

    /// The connection is over: offer unread bytes a last time, count, close the socket
    /// (with a RST for aborts), and hand the application its state back.
    fn finish(&mut self, index: usize, reason: CloseReason) {
        let KernelEngine {
            conns,
            handler,
            connect_requests: reqs,
            stats,
            ..
        } = self;
        let slot = &mut conns[index];
        let id = ConnId::new(index as u32, slot.generation);
        slot.conn.done = true;
        slot.conn.timer_at = None;
        if slot.timer_filed.take().is_some() {
            // Its heap entry is stale now.
            self.timers_live -= 1;
        }
        slot.conn.queue.clear();
        if !slot.conn.rx.is_empty() {
            if let Some(state) = slot.app.as_mut() {
                deliver_buffered(handler, &mut slot.conn, id, state, reqs);
            }
            stats.unread_bytes_discarded += slot.conn.rx.len() as u64;
        }
        match reason {
            CloseReason::Normal => stats.conns_closed += 1,
            CloseReason::Reset | CloseReason::Refused => stats.conns_reset += 1,
            CloseReason::TimedOut => stats.conns_timed_out += 1,
            CloseReason::Aborted => stats.conns_aborted += 1,
        }
        let slot = conns.remove(index);
        if reason == CloseReason::Aborted {
            if !slot.conn.connecting {
                stats.rsts_sent += 1;
            }
            let _ = sys::set_linger_zero(slot.conn.fd.as_fd());
        }
        stats.bytes_out += slot.conn.bytes_out;
        stats.segments_out += slot.conn.sends;
        // Closing the descriptor also takes it off the epoll set.
        drop(slot.conn);
        if let Some(state) = slot.app {
            handler.closed(&mut Opener::new(reqs), state, reason);
        }
    }

    fn expire_lingering(&mut self, now: Instant) {
        if self.lingering.is_empty() {
            return;
        }
        let mut list = mem::take(&mut self.lingering);
        list.retain(|&(i, g)| {
            self.conns
                .get(i)
                .is_some_and(|s| s.generation == g && s.linger_at.is_some())
        });
        let mut i = 0;
        while i < list.len() {
            let (index, _) = list[i];
            if self.conns[index].linger_at.is_some_and(|at| at <= now) {
                list.swap_remove(i);
                self.finish(index, CloseReason::TimedOut);
            } else {
                i += 1;
            }
        }
        list.append(&mut self.lingering);
        self.lingering = list;
    }

    /// Fire the application timers due at `now`, and drop or re-file the heap entries
    /// that no longer match their connection's timer, so that the top entry is a live
    /// deadline afterwards. Returns how many fired.
    fn run_timers(&mut self, now: Instant) -> usize {
        // Bounded: a handler that re-arms with a zero delay gets its next call on the
        // next turn, not in a loop here.
        let budget = self.timers.len();
        let mut fired = 0;
        while let Some(&Reverse((at, index, generation))) = self.timers.peek() {
            let Some(slot) = self
                .conns
                .get_mut(index)
                .filter(|s| s.generation == generation && s.timer_filed == Some(at))
            else {
                self.timers.pop();
                continue;
            };
            let target = slot.conn.timer_at;
            if at > now && target.is_some_and(|t| t <= at) {
                // Live and not due: the earliest deadline.
                break;
            }
            if fired == budget && target.is_some_and(|t| t <= now) {
                break;
            }
            self.timers.pop();
            match target {
                // Cancelled.
                None => {
                    slot.timer_filed = None;
                    self.timers_live -= 1;
                    continue;
                }
                // Re-armed for later: file the new deadline.
                Some(t) if t > now => {
                    slot.timer_filed = Some(t);
                    self.timers.push(Reverse((t, index, generation)));
                    continue;
                }
                Some(_) => {}
            }
            slot.timer_filed = None;
            self.timers_live -= 1;
            slot.conn.timer_at = None;
            fired += 1;
            let id = ConnId::new(index as u32, generation);
            if let Some(state) = slot.app.as_mut() {
                self.handler.timer(&mut Conn::new(
                    id,
                    &mut slot.conn,
                    state,
                    &mut self.connect_requests,
                ));
            }
            self.settle(index);
        }
        fired
    }

    fn start_requested_connects(&mut self) {
        // Requests made by `connect_failed` itself wait for the next turn, so a handler
        // that retries at once cannot spin here.
        let mut batch = mem::take(&mut self.connect_requests);
        for (remote, state) in batch.drain(..) {
            if let Err((e, state)) = self.connect(remote, state) {
                let mut opener = Opener::new(&mut self.connect_requests);
                self.handler.connect_failed(&mut opener, remote, state, e);
            }
        }
        if self.connect_requests.is_empty() {
            self.connect_requests = batch;
        }
    }
}

impl<H: Handler> Drop for KernelEngine<H> {
    /// Connections still open when the engine goes (the grace period ended) are reset,
    /// so their peers learn at once; no callbacks run.
    fn drop(&mut self) {
        for (_, slot) in self.conns.iter() {
            let _ = sys::set_linger_zero(slot.conn.fd.as_fd());
        }
    }
}

fn token(index: usize, generation: u32) -> u64 {
    (u64::from(generation) << 32) | index as u64
}

/// Read what the socket holds (within this turn's budget) and offer it: straight from
/// the worker's read buffer when nothing is left over, else after what is.
#[allow(clippy::too_many_arguments)]
fn receive<H: Handler>(
    handler: &mut H,
    c: &mut KernelConn,
    id: ConnId,
    state: &mut H::Conn,
    reqs: &mut Vec<(SocketAddrV4, H::Conn)>,
    rbuf: &mut [u8],
    stats: &mut Stats,
    recv_buffer: usize,
) {
    let mut reads = 0;
    while c.can_read && !c.eof && c.error.is_none() && !c.aborted && reads < READ_BUDGET {
        if !c.rx_closed && c.rx.len() >= recv_buffer {
            // Paused with a full buffer: leave the rest in the kernel (its window closes).
            break;
        }
        match sys::read(c.fd.as_fd(), rbuf) {
            Ok(0) => {
                c.eof = true;
                c.can_read = false;
            }
            Ok(n) => {
                reads += 1;
                stats.bytes_in += n as u64;
                stats.segments_in += 1;
                // A short read drained the socket; new bytes raise a new edge. Not so
                // after a half-close or error edge: the EOF or error is read next.
                if n < rbuf.len() && !c.hup_seen {
                    c.can_read = false;
                }
                if c.rx_closed {
                    continue;
                }
                let data = &rbuf[..n];
                if c.rx.is_empty() {
                    let k = handler
                        .data(&mut Conn::new(id, c, state, reqs), data)
                        .min(n);
                    c.rx.extend(&data[k..]);
                    if k > 0 {
                        deliver_buffered(handler, c, id, state, reqs);
                    }
                } else {
                    c.rx.extend(data);
                    deliver_buffered(handler, c, id, state, reqs);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.can_read = false,
            Err(e) => c.error = Some(close_reason(&e)),
        }
    }
}

/// Offer the unread bytes for as long as the application makes progress: one that
/// takes one request at a time is offered the next straight away; one that takes
/// nothing has paused.
fn deliver_buffered<H: Handler>(
    handler: &mut H,
    c: &mut KernelConn,
    id: ConnId,
    state: &mut H::Conn,
    reqs: &mut Vec<(SocketAddrV4, H::Conn)>,
) {
    while !c.rx.is_empty() {
        // The buffer leaves the connection while the application reads it, so the
        // application can use its handle at the same time.
        let mut buf = mem::take(&mut c.rx);
        let data = buf.readable();
        let len = data.len();
        let n = handler
            .data(&mut Conn::new(id, c, state, reqs), data)
            .min(len);
        buf.consume(n);
        c.rx = buf;
        if n == 0 {
            break;
        }
    }
}

/// Hand queued bytes to the kernel; when that frees space the application was waiting
/// for, call `writable` (and re-offer unread bytes, as Rusty's engine does).
fn transmit<H: Handler>(
    handler: &mut H,
    c: &mut KernelConn,
    id: ConnId,
    state: &mut H::Conn,
    reqs: &mut Vec<(SocketAddrV4, H::Conn)>,
) {
    // Bounded: a writable callback that keeps the queue full and the socket keeps
    // draining would otherwise hold the loop.
    for _ in 0..8 {
        if c.queue.is_empty() || !c.can_write || c.error.is_some() || c.aborted || c.done {
            return;
        }
        let n = c.flush();
        if n > 0 && c.want_writable && rusty_stack::Connection::send_space(c) > 0 {
            c.want_writable = false;
            handler.writable(&mut Conn::new(id, c, state, reqs));
            deliver_buffered(handler, c, id, state, reqs);
        } else {
            return;
        }
    }
}
