//! The socket layer: stream sockets with POSIX meaning on one Rusty engine, with no
//! system call and no descriptor in sight.
//!
//! A [`Stack`] owns the engine and a table of sockets ([`Table`], which is the engine's
//! `Handler`). Each operation is what a socket call does, never blocking: where Linux
//! would block it returns `EAGAIN`, and the caller waits (`process.rs`). The engine's
//! callbacks only update socket state (bytes into the receive queue, readiness, errors)
//! and bump the socket's event count, which edge-triggered waits compare.
//!
//! Receiving: the engine offers in-order bytes; the socket takes what fits in its
//! receive queue (the socket's `SO_RCVBUF`) and leaves the rest in the engine, which
//! then shrinks the window it advertises; a read that frees room pulls them in. So a
//! slow reader back-pressures its peer as on Linux, and bytes the engine delivered are
//! never dropped: they are in the socket or still in the engine.
//!
//! Sending: `send` goes straight into the connection's send buffer; segments leave in
//! the call, or, for small writes, at the program's next call that is not a send
//! ([`Stack::send`]). When the buffer is full the socket asks to hear when it is
//! writable again.
//!
//! Families: a socket is AF_INET or AF_INET6. Addresses go in and out as the program
//! sees them (on an AF_INET6 socket, IPv4 ones IPv4-mapped) and are kept as the engine
//! sees them (`addr`); binding follows Linux's rules across the two families (`bind`).
//!
//! Errors are `libc` errno values, chosen to match what Linux returns for the same call
//! in the same state.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use rusty_stack::io::MacAddr;
use rusty_stack::time::Instant;
use rusty_stack::{ConnectError, Keepalive};

/// An errno value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

/// A socket's slot in the [`Table`].
pub type SockId = usize;

/// Readiness bits, with the values `poll` and `epoll` share (`POLLIN` = `EPOLLIN`, …).
pub mod ready {
    /// Readable: bytes, end of stream, an error, or a connection to accept.
    pub const IN: u32 = libc::EPOLLIN as u32;
    /// Writable: send space, or a connect that finished (either way).
    pub const OUT: u32 = libc::EPOLLOUT as u32;
    /// A pending error (`SO_ERROR`).
    pub const ERR: u32 = libc::EPOLLERR as u32;
    /// Both directions are shut, or the socket is not connected.
    pub const HUP: u32 = libc::EPOLLHUP as u32;
    /// The peer shut its sending side.
    pub const RDHUP: u32 = libc::EPOLLRDHUP as u32;
}

/// How `shutdown` shuts a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shut {
    /// `SHUT_RD`.
    Read,
    /// `SHUT_WR`.
    Write,
    /// `SHUT_RDWR`.
    Both,
}

/// One engine and its sockets.
pub struct Stack {
    engine: Box<dyn EngineOps>,
    /// Small writes are queued but not sent yet (see [`Stack::send`]).
    held: bool,
    /// See [`Stack::listen_epoch`].
    listen_epoch: u64,
    /// Whether the kernel steers frames to the queue (see [`Stack::set_steered`]).
    steered: bool,
    /// See [`Stack::link_index`].
    link_index: u32,
    /// Active opens waiting for a source address: the engine's IPv6 addresses were
    /// still tentative (duplicate address detection, about a second after it starts).
    /// Each is tried again every turn until detection ends.
    unsourced: Vec<(SockId, SocketAddr)>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("address", &self.engine.address())
            .field("sockets", &self.engine.table().len())
            .finish()
    }
}

const EBADF: Errno = Errno(libc::EBADF);

impl Stack {
    /// A stack on `engine`, whose handler must be an empty [`Table`].
    pub fn new(engine: Box<dyn EngineOps>) -> Stack {
        Stack {
            engine,
            held: false,
            listen_epoch: 0,
            steered: true,
            link_index: 0,
            unsourced: Vec::new(),
        }
    }

    fn sock(&self, s: SockId) -> Result<&Sock, Errno> {
        self.engine.table().get(s).ok_or(EBADF)
    }

    fn sock_mut(&mut self, s: SockId) -> Result<&mut Sock, Errno> {
        self.engine.table_mut().get_mut(s).ok_or(EBADF)
    }

    /// Run one engine turn; frames received. What [`send`](Self::send) held back goes
    /// out too.
    pub fn poll(&mut self) -> usize {
        self.held = false;
        let frames = self.engine.poll();
        if !self.unsourced.is_empty() {
            self.start_unsourced();
        }
        frames
    }

    /// Try again the active opens that found no source address: each starts, or
    /// waits on while duplicate detection runs, or fails (`EADDRNOTAVAIL`: no
    /// address of ours fits the peer).
    fn start_unsourced(&mut self) {
        for (s, remote) in std::mem::take(&mut self.unsourced) {
            if !matches!(self.sock(s).map(|k| &k.state), Ok(State::Connecting)) {
                continue;
            }
            if let Err(e) = self.start_connect(s, remote) {
                if let Ok(sock) = self.sock_mut(s) {
                    sock.error = e.0;
                    sock.ended = true;
                    bump(sock);
                }
            }
        }
    }

    /// Have the engine open a connection to `remote` for connecting socket `s`; one
    /// that finds no source address while duplicate detection runs waits for it
    /// (see `unsourced`). An error fails the socket.
    fn start_connect(&mut self, s: SockId, remote: SocketAddr) -> Result<(), Errno> {
        match self.engine.connect(remote, s) {
            Ok(()) => Ok(()),
            Err(ConnectError::NoSourceAddress) if self.engine.detecting_duplicates() => {
                self.unsourced.push((s, remote));
                Ok(())
            }
            Err(e) => {
                let sock = self.sock_mut(s)?;
                sock.state = State::Failed;
                sock.peer = None;
                Err(connect_errno(e))
            }
        }
    }

    /// Whether [`send`](Self::send) holds small writes back.
    pub fn holding(&self) -> bool {
        self.held
    }

    /// Send the small writes [`send`](Self::send) held back.
    pub fn release_held(&mut self) {
        if std::mem::take(&mut self.held) {
            self.engine.flush();
        }
    }

    /// The earliest time the engine has timer work.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.engine.next_deadline()
    }

    /// The stack's own IPv4 address (unspecified when the link has none).
    pub fn address(&self) -> Ipv4Addr {
        self.engine.address()
    }

    /// Sockets in the table, the program's and those the engine is still closing.
    pub fn sockets(&self) -> usize {
        self.engine.table().len()
    }

    /// A new stream socket of `family`.
    pub fn socket(&mut self, family: Family) -> SockId {
        let default = self.engine.keepalive();
        let table = self.engine.table_mut();
        table.default_keepalive = default;
        let mut sock = Sock::new(State::Fresh, family);
        sock.opts.keepalive = default.is_some();
        sock.opts.keepalive_timing = default.unwrap_or_default();
        table.insert(sock)
    }

    /// One more descriptor refers to `s` (`dup`).
    pub fn add_ref(&mut self, s: SockId) -> Result<(), Errno> {
        self.sock_mut(s)?.refs += 1;
        Ok(())
    }

    /// The socket's options.
    pub fn opts(&self, s: SockId) -> Result<SockOpts, Errno> {
        Ok(self.sock(s)?.opts)
    }

    /// Set the socket's options; a user timeout reaches a live connection at once.
    pub fn set_opts(&mut self, s: SockId, opts: SockOpts) -> Result<(), Errno> {
        let sock = self.sock_mut(s)?;
        let old = std::mem::replace(&mut sock.opts, opts);
        let Some(id) = sock.conn else {
            return Ok(());
        };
        let keepalive = opts.keepalive.then_some(opts.keepalive_timing);
        let keepalive_changed = old.keepalive.then_some(old.keepalive_timing) != keepalive;
        self.engine.with_conn(id, &mut |c| {
            if old.user_timeout != opts.user_timeout {
                c.set_user_timeout(opts.user_timeout);
            }
            if keepalive_changed {
                c.set_keepalive(keepalive);
            }
        });
        Ok(())
    }

    /// The family of socket `s`.
    pub fn family(&self, s: SockId) -> Result<Family, Errno> {
        Ok(self.sock(s)?.family)
    }

    /// Give up the engine's AF_XDP queue, for a child this process forked (see
    /// `handover`); the engine runs on no queue from then on.
    pub fn hand_over(&mut self) -> Option<rusty_drivers_xdp::XdpQueue> {
        self.engine.hand_over()
    }

    /// Whether any socket has a connection in the engine, or one starting.
    pub fn has_connections(&self) -> bool {
        self.engine
            .table()
            .socks
            .iter()
            .flatten()
            .any(|s| s.conn.is_some() || matches!(s.state, State::Connecting))
    }

    /// Take over the sockets of `old`, the stack this process had before it forked
    /// (its engine and queue stay the parent's): listening, fresh and bound sockets
    /// come over as they were (listeners not engaged); a connection, which only the
    /// parent can carry on, comes over as one that ended (reads find the end of the
    /// stream, writes `EPIPE`). Returns each old socket's new one.
    pub fn adopt(&mut self, old: &Stack) -> std::collections::HashMap<SockId, SockId> {
        let mut map = std::collections::HashMap::new();
        for (id, sock) in old.engine.table().socks.iter().enumerate() {
            let Some(sock) = sock.as_ref().filter(|s| s.refs > 0) else {
                continue;
            };
            let state = match &sock.state {
                State::Fresh => State::Fresh,
                State::Bound => State::Bound,
                State::Listening { backlog, .. } => State::Listening {
                    backlog: *backlog,
                    queue: VecDeque::new(),
                },
                _ => State::Connected,
            };
            let ended = matches!(state, State::Connected);
            let mut new = Sock::new(state, sock.family);
            new.local = sock.local;
            new.peer = sock.peer;
            new.opts = sock.opts;
            new.refs = sock.refs;
            new.ended = ended;
            new.eof = ended;
            new.shut_wr = ended;
            map.insert(id, self.engine.table_mut().insert(new));
        }
        self.listen_epoch += 1;
        map
    }

    /// A number that changes whenever a socket starts or stops listening.
    pub fn listen_epoch(&self) -> u64 {
        self.listen_epoch
    }

    /// The ports the program listens on in this stack (whether or not the engine takes
    /// connections for them now), in order.
    pub fn listening_ports(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self
            .engine
            .table()
            .socks
            .iter()
            .flatten()
            .filter(|s| matches!(s.state, State::Listening { .. }))
            .filter_map(|s| s.local.map(|l| l.port()))
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// The ports some stack sharing the link listens on: on a shared link a SYN for
    /// any other port is refused with a reset.
    pub fn set_link_listeners(&mut self, ports: Vec<u16>) {
        self.engine.set_link_listeners(ports);
    }

    /// Whether other processes' engines share the link: then segments for
    /// connections this engine does not know are theirs to answer.
    pub fn set_shared_link(&mut self, shared: bool) {
        self.engine.set_shared_link(shared);
    }

    /// Whether a connection still has data or a FIN of ours to deliver.
    pub fn delivering(&self) -> bool {
        self.engine.delivering()
    }

    /// Close every socket the program still has open, as the kernel does when a
    /// process exits: listeners stop, connections close (or reset, with unread bytes).
    pub fn release_all(&mut self) {
        let open: Vec<SockId> = self
            .engine
            .table()
            .socks
            .iter()
            .enumerate()
            .filter_map(|(id, s)| s.as_ref().filter(|s| s.refs > 0).map(|_| id))
            .collect();
        for s in open {
            if let Ok(sock) = self.sock_mut(s) {
                sock.refs = 1;
            }
            let _ = self.release(s);
        }
    }

    /// Neighbour mappings (ARP's and Neighbor Discovery's) the engine learned since
    /// the last call.
    pub fn drain_learned_arp(&mut self, out: &mut Vec<(IpAddr, MacAddr)>) {
        self.engine.drain_learned_arp(out);
    }

    /// A neighbour mapping another process's engine learned.
    pub fn import_arp(&mut self, ip: IpAddr, mac: MacAddr) {
        self.engine.import_arp(ip, mac);
    }

    /// The stack's MAC address.
    pub fn mac(&self) -> MacAddr {
        self.engine.mac()
    }

    /// Let the kernel steer frames to this stack's queue, or stop it (a system call
    /// on a TAP, made only when that changes).
    pub fn set_steered(&mut self, on: bool) {
        if self.steered != on {
            self.steered = on;
            self.engine.set_steered(on);
        }
    }

    /// `accept`: the oldest established connection, as a socket of its own.
    pub fn accept(&mut self, s: SockId) -> Result<SockId, Errno> {
        let sock = self.sock_mut(s)?;
        let State::Listening { queue, .. } = &mut sock.state else {
            return Err(Errno(libc::EINVAL));
        };
        let c = queue.pop_front().ok_or(Errno(libc::EAGAIN))?;
        let accepted = self.sock_mut(c)?;
        accepted.queued_on = None;
        accepted.refs = 1;
        Ok(c)
    }

    /// Put connection `c`, just accepted from listener `s`, back at the head of its
    /// queue (the program could not be given a descriptor for it).
    pub fn requeue(&mut self, s: SockId, c: SockId) {
        if let Ok(accepted) = self.sock_mut(c) {
            accepted.queued_on = Some(s);
            accepted.refs = 0;
        }
        if let Ok(Sock {
            state: State::Listening { queue, .. },
            ..
        }) = self.sock_mut(s)
        {
            queue.push_front(c);
        }
    }

    /// Whether `s` has neither a connection nor a listen yet (a `connect` would start
    /// one).
    pub fn is_unconnected(&self, s: SockId) -> Result<bool, Errno> {
        Ok(matches!(self.sock(s)?.state, State::Fresh | State::Bound))
    }

    /// Linux's errors for a connect from `s` to `remote` (as the program gave it, to
    /// an address the link reaches) that its state does not explain: another family's
    /// address (`EAFNOSUPPORT`), an IPv4-mapped peer for an IPv6-only socket
    /// (`ENETUNREACH`), an IPv6 peer for a socket bound to an IPv4-mapped address
    /// (`EAFNOSUPPORT`).
    fn may_connect(&self, s: SockId, remote: SocketAddr) -> Result<(), Errno> {
        let sock = self.sock(s)?;
        if sock.family != addr_family(remote) {
            return Err(Errno(libc::EAFNOSUPPORT));
        }
        match (canonical(remote), sock.local) {
            (SocketAddr::V4(_), _) if sock.family == Family::V6 && sock.opts.v6only => {
                Err(Errno(libc::ENETUNREACH))
            }
            (SocketAddr::V6(_), Some(SocketAddr::V4(_))) => Err(Errno(libc::EAFNOSUPPORT)),
            _ => Ok(()),
        }
    }

    /// `connect` to `remote`, as the program gave it (IPv4-mapped on an AF_INET6
    /// socket for an IPv4 peer): `Ok` once connected; `EINPROGRESS` while the
    /// handshake runs (the caller waits for writability, then reads `SO_ERROR`).
    pub fn connect(&mut self, s: SockId, remote: SocketAddr) -> Result<(), Errno> {
        let sock = self.sock_mut(s)?;
        match sock.state {
            State::Fresh | State::Bound => {}
            State::Connecting => return Err(Errno(libc::EALREADY)),
            State::Connected if std::mem::take(&mut sock.connect_unreported) => return Ok(()),
            State::Connected => return Err(Errno(libc::EISCONN)),
            State::Listening { .. } | State::Failed => return Err(Errno(libc::EINVAL)),
        }
        self.may_connect(s, remote)?;
        let remote = canonical(remote);
        let sock = self.sock_mut(s)?;
        sock.state = State::Connecting;
        sock.peer = Some(remote);
        self.start_connect(s, remote)?;
        let sock = self.sock_mut(s)?;
        match sock.state {
            State::Connected => Ok(()),
            _ => {
                sock.connect_unreported = true;
                Err(Errno(libc::EINPROGRESS))
            }
        }
    }

    /// Where an active open stands: `Ok(true)` connected, `Ok(false)` still going,
    /// `Err` failed (the error taken, as `SO_ERROR` would).
    pub fn connect_result(&mut self, s: SockId) -> Result<bool, Errno> {
        let sock = self.sock_mut(s)?;
        match sock.state {
            State::Connecting => Ok(false),
            State::Connected => {
                sock.connect_unreported = false;
                Ok(true)
            }
            _ => Err(Errno(std::mem::take(&mut sock.error)).nonzero()),
        }
    }

    /// `recv`: bytes into `out` (left in place with `peek`); 0 at the end of the
    /// stream.
    pub fn recv(&mut self, s: SockId, out: &mut [u8], peek: bool) -> Result<usize, Errno> {
        let sock = self.sock(s)?;
        if sock.rx.len() < out.len() && sock.rx_held {
            if let Some(id) = sock.conn {
                self.engine.resume_receive(id);
            }
        }
        let sock = self.sock_mut(s)?;
        match sock.state {
            State::Connected => {}
            State::Connecting => return Err(Errno(libc::EAGAIN)),
            _ => return Err(Errno(libc::ENOTCONN)),
        }
        if out.is_empty() {
            return Ok(0);
        }
        if !sock.rx.is_empty() {
            let (a, b) = sock.rx.as_slices();
            let n = out.len().min(a.len() + b.len());
            let from_a = n.min(a.len());
            out[..from_a].copy_from_slice(&a[..from_a]);
            out[from_a..n].copy_from_slice(&b[..n - from_a]);
            if !peek {
                sock.rx.drain(..n);
                if sock.rx.is_empty() && sock.rx.capacity() > DEFAULT_RCVBUF {
                    sock.rx.shrink_to(DEFAULT_RCVBUF);
                }
            }
            return Ok(n);
        }
        if sock.error != 0 {
            return Err(Errno(std::mem::take(&mut sock.error)));
        }
        if sock.eof || sock.shut_rd {
            return Ok(0);
        }
        Err(Errno(libc::EAGAIN))
    }

    /// Bytes waiting to be read (`FIONREAD`): those in the receive queue.
    pub fn unread(&self, s: SockId) -> Result<usize, Errno> {
        Ok(self.sock(s)?.rx.len())
    }

    /// `send`: how many bytes of `data` went into the send buffer. `EPIPE` once the
    /// sending side is shut or the connection is gone (the caller raises `SIGPIPE`
    /// unless asked not to).
    ///
    /// While the connection's unacknowledged bytes stay under a full segment, they are
    /// held back rather than sent at once: a program often writes one answer in
    /// several calls (nginx: the header with `writev`, the body with `sendfile`), and
    /// what one call after another adds leaves as one segment, as with `MSG_MORE`.
    /// Held bytes go at the program's next call that is not a send ([`poll`], or
    /// [`release_held`], which the library's every other call makes first), much as a
    /// `Handler`'s writes leave when its callback returns.
    ///
    /// [`poll`]: Self::poll
    /// [`release_held`]: Self::release_held
    pub fn send(&mut self, s: SockId, data: &[u8]) -> Result<usize, Errno> {
        let sock = self.sock_mut(s)?;
        match sock.state {
            State::Connected => {}
            State::Connecting => return Err(Errno(libc::EAGAIN)),
            State::Failed if sock.error != 0 => return Err(Errno(std::mem::take(&mut sock.error))),
            _ => return Err(Errno(libc::EPIPE)),
        }
        if sock.error != 0 {
            return Err(Errno(std::mem::take(&mut sock.error)));
        }
        let Some(id) = sock.conn.filter(|_| !sock.shut_wr) else {
            return Err(Errno(libc::EPIPE));
        };
        if data.is_empty() {
            return Ok(0);
        }
        let mut sent = Err(Errno(libc::EPIPE));
        let mut small = false;
        let full = self.engine.segment_size();
        self.engine.with_conn_deferred(id, &mut |c| {
            sent = match c.send(data) {
                Ok(n) => {
                    if n < data.len() {
                        c.notify_writable();
                    }
                    Ok(n)
                }
                Err(_) => Err(Errno(libc::EPIPE)),
            };
            small = c.unacked_len() < full;
        });
        if small {
            self.held = true;
        } else {
            self.held = false;
            self.engine.flush();
        }
        let sock = self.sock_mut(s)?;
        match sent {
            Ok(0) => {
                sock.writable = false;
                Err(Errno(libc::EAGAIN))
            }
            Ok(n) => {
                if n < data.len() {
                    sock.writable = false;
                }
                Ok(n)
            }
            Err(e) => Err(e),
        }
    }

    /// `shutdown`.
    pub fn shutdown(&mut self, s: SockId, how: Shut) -> Result<(), Errno> {
        let sock = self.sock_mut(s)?;
        if !matches!(sock.state, State::Connected) {
            return Err(Errno(libc::ENOTCONN));
        }
        if matches!(how, Shut::Read | Shut::Both) {
            sock.shut_rd = true;
            sock.rx.clear();
            bump(sock);
        }
        if matches!(how, Shut::Write | Shut::Both) && !sock.shut_wr {
            sock.shut_wr = true;
            bump(sock);
            if let Some(id) = sock.conn {
                self.engine.with_conn(id, &mut |c| c.shutdown_write());
            }
        }
        Ok(())
    }

    /// A descriptor of `s` was closed; the last one closes the socket: a listener
    /// stops listening and resets what it had not accepted; a connection closes
    /// gracefully, or is reset when unread bytes remain or `SO_LINGER` is zero, as
    /// Linux does.
    pub fn release(&mut self, s: SockId) -> Result<(), Errno> {
        let sock = self.sock_mut(s)?;
        sock.refs = sock.refs.saturating_sub(1);
        if sock.refs > 0 {
            return Ok(());
        }
        let queued = match &mut sock.state {
            State::Listening { queue, .. } => Some(std::mem::take(queue)),
            _ => None,
        };
        if let Some(queued) = queued {
            let port = sock.local.map_or(0, |l| l.port());
            self.listen_epoch += 1;
            self.disengage(s, port);
            for c in queued {
                if let Some(q) = self.engine.table_mut().get_mut(c) {
                    q.queued_on = None;
                }
                self.close_conn(c, true);
            }
            self.engine.table_mut().remove(s);
            return Ok(());
        }
        let sock = self.sock(s)?;
        let reset = !sock.rx.is_empty() || sock.rx_held || sock.opts.linger == Some(Duration::ZERO);
        self.close_conn(s, reset);
        Ok(())
    }

    /// Close (or `reset`) the connection of released socket `s`, and drop the socket
    /// now if the engine no longer has a connection for it (else at `closed`).
    fn close_conn(&mut self, s: SockId, reset: bool) {
        let Some(sock) = self.engine.table_mut().get_mut(s) else {
            return;
        };
        sock.rx.clear();
        match sock.conn.filter(|_| !sock.ended) {
            Some(id) => {
                let live = self.engine.with_conn(id, &mut |c| {
                    if reset {
                        c.abort();
                    } else {
                        c.close();
                    }
                });
                if !live {
                    self.engine.table_mut().remove(s);
                }
            }
            // An active open still resolving ARP or handshaking keeps its socket until
            // the engine reports it; one still waiting for a source address, which the
            // engine never had, goes now, as do the rest.
            None if matches!(sock.state, State::Connecting) => {
                if let Some(i) = self.unsourced.iter().position(|&(u, _)| u == s) {
                    self.unsourced.remove(i);
                    self.engine.table_mut().remove(s);
                }
            }
            None => self.engine.table_mut().remove(s),
        }
    }

    /// The readiness bits of `s` ([`ready`]).
    pub fn readiness(&self, s: SockId) -> u32 {
        let Ok(sock) = self.sock(s) else {
            return ready::ERR | ready::HUP;
        };
        let mut bits = 0;
        if sock.error != 0 {
            bits |= ready::ERR;
        }
        match &sock.state {
            State::Fresh | State::Bound => bits |= ready::OUT | ready::HUP,
            State::Listening { queue, .. } => {
                if !queue.is_empty() {
                    bits |= ready::IN;
                }
            }
            State::Connecting => {}
            State::Failed => bits |= ready::OUT | ready::HUP,
            State::Connected => {
                if !sock.rx.is_empty() || sock.rx_held || sock.eof || sock.shut_rd {
                    bits |= ready::IN;
                }
                if sock.eof || sock.shut_rd {
                    bits |= ready::RDHUP;
                }
                if sock.writable || sock.shut_wr || sock.ended {
                    bits |= ready::OUT;
                }
                if (sock.eof && sock.shut_wr) || sock.ended {
                    bits |= ready::HUP;
                }
                if sock.ended && sock.error != 0 {
                    bits |= ready::IN;
                }
            }
        }
        bits
    }

    /// The socket's event count, which changes with every event on it: an
    /// edge-triggered wait reports a socket again only once it has moved.
    pub fn events(&self, s: SockId) -> u64 {
        self.sock(s).map_or(0, |sock| sock.events)
    }

    /// Take the pending error (`SO_ERROR`).
    pub fn take_error(&mut self, s: SockId) -> Result<i32, Errno> {
        Ok(std::mem::take(&mut self.sock_mut(s)?.error))
    }

    /// The backlog of `s`, if it is listening.
    pub fn backlog(&self, s: SockId) -> Option<usize> {
        match self.sock(s).ok()?.state {
            State::Listening { backlog, .. } => Some(backlog),
            _ => None,
        }
    }

    /// Whether `s` is listening (`SO_ACCEPTCONN`).
    pub fn is_listening(&self, s: SockId) -> Result<bool, Errno> {
        Ok(matches!(self.sock(s)?.state, State::Listening { .. }))
    }

    /// Whether `s` has no address and no connection yet (a kernel socket may still
    /// take its place).
    pub fn is_fresh(&self, s: SockId) -> Result<bool, Errno> {
        Ok(matches!(self.sock(s)?.state, State::Fresh))
    }

    /// `getsockname`: as the socket's family shows it (see `addr`).
    pub fn local_addr(&self, s: SockId) -> Result<SocketAddr, Errno> {
        let sock = self.sock(s)?;
        let local = sock.local.unwrap_or(sock.family.unspecified());
        Ok(sock.family.shown(local, self.link_index))
    }

    /// `getpeername`: as the socket's family shows it.
    pub fn peer_addr(&self, s: SockId) -> Result<SocketAddr, Errno> {
        let sock = self.sock(s)?;
        match (&sock.state, sock.peer) {
            (State::Connected, Some(p)) => Ok(sock.family.shown(p, self.link_index)),
            _ => Err(Errno(libc::ENOTCONN)),
        }
    }

    /// Keepalive probing, when the stack runs it.
    pub fn keepalive(&self) -> Option<Keepalive> {
        self.engine.keepalive()
    }

    /// The congestion control connections run, by Linux's name for it.
    pub fn congestion(&self) -> &'static str {
        self.engine.congestion()
    }

    /// Connections reset because a listener's queue was full.
    pub fn overflowed(&self) -> u64 {
        self.engine.table().overflowed
    }

    /// The engine's counters, and the connections it holds.
    pub fn counters(&self) -> (&rusty_stack::Stats, rusty_metrics::Gauges) {
        (self.engine.stats(), self.engine.gauges())
    }
}

impl Errno {
    /// `self`, or `EINVAL` in place of "no error" (a failed state always has a reason).
    fn nonzero(self) -> Errno {
        if self.0 == 0 {
            Errno(libc::EINVAL)
        } else {
            self
        }
    }
}

/// The family of the addresses in `a`.
fn addr_family(a: SocketAddr) -> Family {
    match a {
        SocketAddr::V4(_) => Family::V4,
        SocketAddr::V6(_) => Family::V6,
    }
}

mod addr;
mod bind;
mod ops;
mod table;

pub use addr::{bind_address, canonical, connect_address, sockaddr_of, Family, MAX_SOCKADDR};
pub use ops::{EngineOps, Steered};
use table::{bump, connect_errno, Sock, State};
pub use table::{SockOpts, Table, DEFAULT_RCVBUF};

#[cfg(test)]
mod tests;
