//! One worker's kernel-socket backend: an epoll instance, this worker's own
//! `SO_REUSEPORT` listeners, and the application core ([`AppCore`]: the handler, the
//! connection table, the callback rules), driven by [`KernelEngine::poll`] in the
//! worker's loop. This file only does the socket side: it learns what happened from
//! epoll and the system calls, and tells the core.
//!
//! Sockets are non-blocking and registered edge-triggered, once, for input, output and
//! peer half-close; each connection remembers what each edge reported (`can_read`,
//! `can_write`) so a connection that is paused, or that used up its read budget for
//! this turn, is picked up again without another edge. Each connection may arm one
//! application timer ([`Conn::set_timer`](rusty_stack::Conn::set_timer)); due timers
//! are kept in a min-heap, cancelled lazily, and fired once per loop turn.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::marker::PhantomData;
use std::mem;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rusty_stack::app::OpenResult;
use rusty_stack::backend::{AppCore, Connection};
use rusty_stack::{CloseReason, ConnId, ConnectError, Handler, Stats};

use crate::config::{bind_listener, set_congestion_control, KernelConfig};
use crate::conn::{close_reason, KernelConn};
use crate::sys::{self, ConnectStart, Epoll};

/// Tokens of listeners carry this bit; connection tokens are [`ConnId::to_bits`], which
/// leaves it clear.
const LISTENER_TOKEN: u64 = 1 << 63;
/// Reads per connection per turn before the others get a turn.
const READ_BUDGET: usize = 4;
/// Connections accepted per listener per turn.
const ACCEPT_BATCH: usize = 64;
const MAX_EVENTS: usize = 256;
const CONN_EVENTS: u32 = sys::IN | sys::OUT | sys::RDHUP | sys::ET;

struct Listener {
    fd: OwnedFd,
    addr: SocketAddr,
    /// An edge said connections are waiting and `accept` has not said EAGAIN since.
    ready: bool,
}

/// One worker's kernel-socket backend: see [the crate docs](crate) for how it behaves.
///
/// Its counters ([`stats`](Self::stats)): kernel sockets hide frames and segments, so
/// `frames_*` stay 0; `bytes_in`/`bytes_out` count TCP payload bytes read from and
/// written to the kernel, `segments_in`/`segments_out` the reads and sends that moved
/// bytes; `rsts_sent` counts aborts and refused accepts (closes with `SO_LINGER` 0).
/// Its `connection_count` includes active opens still connecting.
///
/// Like Rusty's [`Engine`](rusty_stack::Engine) it is `!Send`: it belongs to the worker
/// thread that built it ([`kernel_worker`](crate::kernel_worker) builds it there).
pub struct KernelEngine<H: Handler> {
    app: AppCore<H, KernelConn>,
    cfg: KernelConfig,
    epoll: Epoll,
    listeners: Vec<Listener>,
    stats: Stats,
    /// A listener used up its batch last turn and has more waiting.
    accept_pending: bool,
    rbuf: Vec<u8>,
    ready: Vec<ConnId>,
    soon: Vec<ConnId>,
    lingering: Vec<ConnId>,
    /// Application timers: (deadline, connection id bits), earliest first.
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Connections with a live entry in `timers`.
    timers_live: usize,
    /// Keeps the engine on its worker's thread.
    _not_send: PhantomData<*const ()>,
}

impl<H: Handler> KernelEngine<H> {
    /// An engine with no listener yet (see [`KernelEngine::listen`]); `cfg.listen` is
    /// for [`kernel_worker`](crate::kernel_worker).
    pub fn new(handler: H, cfg: KernelConfig) -> io::Result<KernelEngine<H>> {
        Ok(KernelEngine {
            app: AppCore::new(handler, cfg.max_connections, 4096),
            epoll: Epoll::new(MAX_EVENTS)?,
            listeners: Vec::new(),
            stats: Stats::default(),
            accept_pending: false,
            rbuf: vec![0; cfg.recv_chunk.max(1)],
            ready: Vec::new(),
            soon: Vec::new(),
            lingering: Vec::new(),
            timers: BinaryHeap::new(),
            timers_live: 0,
            _not_send: PhantomData,
            cfg,
        })
    }

    // ----- Public API -----

    /// Listen on `addr` with its own `SO_REUSEPORT` socket; returns the bound address
    /// (useful with port 0).
    pub fn listen(&mut self, addr: SocketAddr, backlog: usize) -> io::Result<SocketAddr> {
        let fd = bind_listener(addr, backlog, self.cfg.congestion_control)?;
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
        self.app.stop_accepting();
        self.accept_pending = false;
        self.listeners.clear();
    }

    /// Start a non-blocking connect to `remote`. The handler's `connected` or `closed`
    /// follows; failures that leave no connection come back as the error.
    pub fn connect(&mut self, remote: std::net::SocketAddr, state: H::Conn) -> OpenResult<H::Conn> {
        let state = self.app.may_open(state)?;
        let Ok(fd) = sys::tcp_socket(&remote) else {
            return Err((ConnectError::TooManyConnections, state));
        };
        let _ = sys::set_nodelay(fd.as_fd());
        set_congestion_control(fd.as_fd(), self.cfg.congestion_control);
        let (immediate, error) = match sys::connect(fd.as_fd(), remote) {
            Ok(ConnectStart::Connected) => (true, None),
            Ok(ConnectStart::InProgress) => (false, None),
            Err(e)
                if matches!(
                    Errno::from_io_error(&e),
                    Some(Errno::ADDRNOTAVAIL | Errno::AGAIN | Errno::ADDRINUSE)
                ) =>
            {
                return Err((ConnectError::NoPortAvailable, state));
            }
            // The connection existed for the application from now on: it ends through
            // `closed`, as a refused or unreachable open does on Rusty's engine.
            Err(e) => (false, Some(close_reason(&e))),
        };
        let local = sys::local_addr(fd.as_fd())
            .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
        let id = self.app.next_id();
        if self
            .epoll
            .add(fd.as_fd(), CONN_EVENTS, id.to_bits())
            .is_err()
        {
            return Err((ConnectError::TooManyConnections, state));
        }
        let mut conn = KernelConn::new(fd, local, remote, self.cfg.send_buffer);
        conn.connecting = true;
        conn.can_write = immediate;
        conn.error = error;
        let id = self.app.insert(conn, Some(state));
        self.stats.conns_opened_active += 1;
        if immediate || error.is_some() {
            self.push_ready(id);
        }
        Ok(id)
    }

    /// Offer a connection's unread bytes to the handler again (after its `data` callback
    /// paused by consuming nothing), after its `receive_resumed` callback (through which
    /// a layer such as TLS offers the bytes it holds itself); neither runs before the
    /// connection is established. Returns false if the connection no longer exists.
    pub fn resume_receive(&mut self, id: ConnId) -> bool {
        let Some(index) = self.app.index_of(id) else {
            return false;
        };
        if !self.app[index].connecting {
            self.app.resume(&mut (), index);
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
        self.app.poll();
        self.start_requested_connects();
        work
    }

    rusty_stack::app_accessors!(H);

    /// What the engine was built with.
    pub fn config(&self) -> &KernelConfig {
        &self.cfg
    }
    /// Local addresses of the listeners.
    pub fn listen_addrs(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.listeners.iter().map(|l| l.addr)
    }
    /// The earliest time the engine has work without new socket events, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        if !self.ready.is_empty() || !self.soon.is_empty() || self.accept_pending {
            return Some(Instant::now());
        }
        // `run_timers` leaves a live entry on top of the heap (callbacks between turns,
        // through `resume_receive`, may make it stale: that costs an early wake-up).
        let timer = self.timers.peek().map(|&Reverse((at, _))| at);
        self.lingering
            .iter()
            .filter_map(|&id| self.app.index_of(id))
            .filter_map(|i| self.app[i].linger_at)
            .chain(timer)
            .min()
    }

    // ----- Events -----

    fn push_ready(&mut self, id: ConnId) {
        if let Some(index) = self.app.index_of(id) {
            let c = &mut self.app[index];
            if !c.queued {
                c.queued = true;
                self.ready.push(id);
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
        let id = ConnId::from_bits(token);
        let Some(index) = self.app.index_of(id) else {
            return;
        };
        let c = &mut self.app[index];
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
        self.push_ready(id);
    }

    fn accept_ready(&mut self) -> usize {
        self.accept_pending = false;
        let mut accepted = 0;
        for li in 0..self.listeners.len() {
            let mut budget = ACCEPT_BATCH;
            while self.listeners.get(li).is_some_and(|l| l.ready) {
                if self.app.is_full() {
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
                            Errno::from_io_error(&e),
                            Some(Errno::CONNABORTED | Errno::PROTO | Errno::PERM)
                        ) => {}
                    // Out of descriptors or memory: try again next turn.
                    Err(_) => break,
                }
            }
        }
        accepted
    }

    fn on_accepted(&mut self, li: usize, fd: OwnedFd, peer: SocketAddr) {
        let _ = sys::set_nodelay(fd.as_fd());
        let bound = self.listeners[li].addr;
        let local = if bound.ip().is_unspecified() {
            sys::local_addr(fd.as_fd()).unwrap_or(bound)
        } else {
            bound
        };
        let conn = KernelConn::new(fd, local, peer, self.cfg.send_buffer);
        let id = self.app.insert(conn, None);
        let index = id.index() as usize;
        if !self.app.accept(index, &mut self.stats) {
            // Refused: reset, counted as Rusty's engine counts it (refused, aborted).
            self.app[index].aborted = true;
            return self.finish(index, CloseReason::Aborted);
        }
        let c = &mut self.app[index];
        if self
            .epoll
            .add(c.fd.as_fd(), CONN_EVENTS, id.to_bits())
            .is_ok()
        {
            self.app.connected(&mut (), index);
        } else {
            // Unwatchable (epoll out of memory): it can only be aborted.
            c.aborted = true;
        }
        self.settle(index);
    }

    fn run_ready(&mut self) -> usize {
        let mut batch = mem::take(&mut self.ready);
        let n = batch.len();
        for &id in &batch {
            let Some(index) = self.app.index_of(id) else {
                continue;
            };
            self.app[index].queued = false;
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
        for &id in &batch {
            let Some(index) = self.app.index_of(id) else {
                continue;
            };
            let c = &mut self.app[index];
            c.soon_queued = false;
            c.writable_soon = false;
            if c.want_writable && c.send_space() > 0 {
                c.want_writable = false;
                self.app.writable(&mut (), index);
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
        let c = &mut self.app[index];
        if c.connecting {
            if c.error.is_none() && (c.can_write || c.err_event) {
                c.err_event = false;
                match sys::take_error(c.fd.as_fd()) {
                    Ok(None) => {
                        c.connecting = false;
                        c.can_write = true;
                        self.app.connected(&mut (), index);
                    }
                    Ok(Some(e)) | Err(e) => c.error = Some(close_reason(&e)),
                }
            }
            if self.app[index].connecting {
                return self.settle(index);
            }
        }
        self.receive(index);
        self.transmit(index);
        let c = &mut self.app[index];
        if c.eof && !c.peer_closed_told && !c.aborted {
            c.peer_closed_told = true;
            self.app.peer_closed(&mut (), index);
        }
        self.settle(index);
    }

    /// Read what the socket holds (within this turn's budget) and hand it to the core,
    /// straight from the worker's read buffer.
    fn receive(&mut self, index: usize) {
        let mut reads = 0;
        loop {
            let c = &mut self.app[index];
            if !c.can_read || c.eof || c.error.is_some() || c.aborted || reads == READ_BUDGET {
                return;
            }
            if !c.rx_closed && c.rx.len() >= self.cfg.recv_buffer {
                // Paused with a full buffer: leave the rest in the kernel (its window closes).
                return;
            }
            match sys::read(c.fd.as_fd(), &mut self.rbuf) {
                Ok(0) => {
                    c.eof = true;
                    c.can_read = false;
                }
                Ok(n) => {
                    reads += 1;
                    self.stats.bytes_in += n as u64;
                    self.stats.segments_in += 1;
                    // A short read drained the socket; new bytes raise a new edge. Not so
                    // after a half-close or error edge: the EOF or error is read next.
                    if n < self.rbuf.len() && !c.hup_seen {
                        c.can_read = false;
                    }
                    if !c.rx_closed {
                        self.app.data(&mut (), index, &self.rbuf[..n]);
                    } else if c
                        .closed_at
                        .is_some_and(|at| at.elapsed() >= self.cfg.close_linger)
                    {
                        // Data long after the application closed: reset, as Rusty's
                        // engine does (RFC 1122 §4.2.2.13).
                        c.aborted = true;
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.can_read = false,
                Err(e) => c.error = Some(close_reason(&e)),
            }
        }
    }

    /// Hand queued bytes to the kernel; when that frees space the application was
    /// waiting for, tell the core (`writable`, then unread bytes again).
    fn transmit(&mut self, index: usize) {
        // Bounded: a writable callback that keeps the queue full and the socket keeps
        // draining would otherwise hold the loop.
        for _ in 0..8 {
            let c = &mut self.app[index];
            if c.queue.is_empty() || !c.can_write || c.error.is_some() || c.aborted || c.done {
                return;
            }
            let n = c.flush();
            if n == 0 || !c.want_writable || c.send_space() == 0 {
                return;
            }
            c.want_writable = false;
            self.app.writable(&mut (), index);
        }
    }

    /// After callbacks: carry out what the application asked for (queued bytes, FIN,
    /// RST) and end the connection when it is over.
    fn settle(&mut self, index: usize) {
        let Some(id) = self.app.id(index) else {
            return;
        };
        if !self.app[index].connecting {
            self.transmit(index);
        }
        let c = &mut self.app[index];
        self.stats.bytes_out += mem::take(&mut c.bytes_out);
        self.stats.segments_out += mem::take(&mut c.sends);
        self.file_timer(id);
        let c = &mut self.app[index];

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
                Err(e) if Errno::from_io_error(&e) == Some(Errno::NOTCONN) => c.fin_sent = true,
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
        if c.fin_sent && c.rx_closed && c.linger_at.is_none() {
            c.linger_at = Some(Instant::now() + self.cfg.fin_timeout);
            self.lingering.push(id);
        }
        if c.writable_soon && !c.soon_queued {
            c.soon_queued = true;
            self.soon.push(id);
        }
        let room = c.rx_closed || c.rx.len() < self.cfg.recv_buffer;
        if c.can_read && !c.eof && room {
            self.push_ready(id);
        }
    }

    /// File the timer the callbacks armed, unless an entry due no later is filed already
    /// (a later deadline is filed when that entry comes up, see `run_timers`).
    fn file_timer(&mut self, id: ConnId) {
        let c = &mut self.app[id.index() as usize];
        let Some(at) = c.timer_at else {
            return;
        };
        if c.timer_filed.is_some_and(|filed| filed <= at) {
            return;
        }
        if c.timer_filed.is_none() {
            self.timers_live += 1;
        }
        c.timer_filed = Some(at);
        self.timers.push(Reverse((at, id.to_bits())));
        if self.timers.len() > 2 * self.timers_live + 64 {
            // Mostly stale entries (closed connections, earlier deadlines re-armed
            // sooner): drop them, amortized over the pushes that made them.
            let app = &self.app;
            self.timers.retain(|&Reverse((at, bits))| {
                app.index_of(ConnId::from_bits(bits))
                    .is_some_and(|i| app[i].timer_filed == Some(at))
            });
        }
    }

    /// The connection is over: stop its timer, let the core offer unread bytes a last
    /// time, count and call `closed`, then close the socket (with a RST for aborts).
    fn finish(&mut self, index: usize, reason: CloseReason) {
        let c = &mut self.app[index];
        c.done = true;
        c.timer_at = None;
        if c.timer_filed.take().is_some() {
            // Its heap entry is stale now.
            self.timers_live -= 1;
        }
        c.queue.clear();
        self.app.finish(&mut (), index, reason, &mut self.stats);
        let conn = self.app.remove(&mut (), index, &mut self.stats);
        if reason == CloseReason::Aborted {
            if !conn.connecting {
                self.stats.rsts_sent += 1;
            }
            let _ = sys::set_linger_zero(conn.fd.as_fd());
        }
        self.stats.bytes_out += conn.bytes_out;
        self.stats.segments_out += conn.sends;
        // Closing the descriptor also takes it off the epoll set.
        drop(conn);
    }

    fn expire_lingering(&mut self, now: Instant) {
        if self.lingering.is_empty() {
            return;
        }
        let mut list = mem::take(&mut self.lingering);
        let app = &self.app;
        list.retain(|&id| app.index_of(id).is_some_and(|i| app[i].linger_at.is_some()));
        let mut i = 0;
        while i < list.len() {
            let index = list[i].index() as usize;
            if self.app[index].linger_at.is_some_and(|at| at <= now) {
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
        while let Some(&Reverse((at, bits))) = self.timers.peek() {
            let Some(index) = self
                .app
                .index_of(ConnId::from_bits(bits))
                .filter(|&i| self.app[i].timer_filed == Some(at))
            else {
                self.timers.pop();
                continue;
            };
            let c = &mut self.app[index];
            let target = c.timer_at;
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
                    c.timer_filed = None;
                    self.timers_live -= 1;
                    continue;
                }
                // Re-armed for later: file the new deadline.
                Some(t) if t > now => {
                    c.timer_filed = Some(t);
                    self.timers.push(Reverse((t, bits)));
                    continue;
                }
                Some(_) => {}
            }
            c.timer_filed = None;
            self.timers_live -= 1;
            c.timer_at = None;
            fired += 1;
            self.app.timer(&mut (), index);
            self.settle(index);
        }
        fired
    }

    fn start_requested_connects(&mut self) {
        AppCore::start_requested(self, |e| &mut e.app, Self::connect);
    }
}

impl<H: Handler> Drop for KernelEngine<H> {
    /// Connections still open when the engine goes (the grace period ended) are reset,
    /// so their peers learn at once; no callbacks run.
    fn drop(&mut self) {
        for (_, c) in self.app.iter() {
            let _ = sys::set_linger_zero(c.fd.as_fd());
        }
    }
}
