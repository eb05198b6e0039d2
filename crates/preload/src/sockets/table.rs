//! The socket table: each socket's state, and the engine callbacks that move it.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use rusty_stack::{CloseReason, Conn, ConnId, ConnectError, Handler, Keepalive, Opener};

use super::addr::{Binding, Family};
use super::{Errno, SockId};

/// Default receive queue of a socket, in bytes (Linux's default `tcp_rmem` is 128 KiB).
pub const DEFAULT_RCVBUF: usize = 128 << 10;

/// Socket options Rusty stores; each is either applied or answered as it is in effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockOpts {
    /// `SO_REUSEADDR`.
    pub reuse_addr: bool,
    /// `SO_REUSEPORT`.
    pub reuse_port: bool,
    /// `SO_RCVBUF`: the receive queue's bound.
    pub rcvbuf: usize,
    /// `SO_SNDBUF`, as set (the engine sizes send buffers itself).
    pub sndbuf: usize,
    /// `SO_LINGER`: `Some(0)` makes `close` reset the connection.
    pub linger: Option<Duration>,
    /// `TCP_USER_TIMEOUT`.
    pub user_timeout: Option<Duration>,
    /// `SO_KEEPALIVE`.
    pub keepalive: bool,
    /// `TCP_NODELAY`, as set. Rusty never holds back a small segment (it has no
    /// Nagle algorithm), so both values send at once; 0 only permits a delay.
    pub nodelay: bool,
    /// `TCP_KEEPIDLE`, `TCP_KEEPINTVL` and `TCP_KEEPCNT`.
    pub keepalive_timing: Keepalive,
    /// `IPV6_V6ONLY` (AF_INET6 sockets): IPv6 only, no IPv4-mapped traffic. Off by
    /// default, as Linux's `net.ipv6.bindv6only=0`; binding a specific IPv6 address
    /// sets it.
    pub v6only: bool,
}

impl Default for SockOpts {
    fn default() -> SockOpts {
        SockOpts {
            reuse_addr: false,
            reuse_port: false,
            rcvbuf: DEFAULT_RCVBUF,
            sndbuf: 16 << 10,
            linger: None,
            user_timeout: None,
            keepalive: false,
            nodelay: false,
            keepalive_timing: Keepalive::default(),
            v6only: false,
        }
    }
}

/// Where a socket is in its life.
#[derive(Debug)]
pub(super) enum State {
    /// Made by `socket`, not bound.
    Fresh,
    /// Bound to a port, not listening or connected.
    Bound,
    /// Listening: connections established and not yet accepted, oldest first.
    Listening {
        backlog: usize,
        queue: VecDeque<SockId>,
    },
    /// An active open in progress.
    Connecting,
    /// Established (or closing): a connection of the engine's, or one that ended.
    Connected,
    /// An active open that failed; the error is in `error` until read.
    Failed,
}

#[derive(Debug)]
pub(super) struct Sock {
    pub(super) state: State,
    pub(super) family: Family,
    /// The bound or connected local address, as the engine sees it (`canonical`).
    pub(super) local: Option<SocketAddr>,
    /// The peer, as the engine sees it.
    pub(super) peer: Option<SocketAddr>,
    /// The engine's connection, while it lives.
    pub(super) conn: Option<ConnId>,
    /// Received bytes not yet read.
    pub(super) rx: VecDeque<u8>,
    /// The engine holds bytes the receive queue had no room for.
    pub(super) rx_held: bool,
    /// The peer has shut its sending side (or the connection ended).
    pub(super) eof: bool,
    /// The engine's connection is gone.
    pub(super) ended: bool,
    /// The send buffer has room (as of the last send or `writable`).
    pub(super) writable: bool,
    pub(super) shut_rd: bool,
    pub(super) shut_wr: bool,
    /// Pending error (`SO_ERROR`), 0 for none.
    pub(super) error: i32,
    /// Counts events (bytes, room, end of stream, errors, connections to accept).
    pub(super) events: u64,
    pub(super) opts: SockOpts,
    /// Descriptors that refer to the socket; 0 for one still in a listener's queue or
    /// one the program has closed.
    pub(super) refs: usize,
    /// A `connect` answered `EINPROGRESS`; the next `connect` after the connection is
    /// made answers 0 (and later ones `EISCONN`), as on Linux.
    pub(super) connect_unreported: bool,
    /// In this listener's queue, not yet accepted.
    pub(super) queued_on: Option<SockId>,
}

impl Sock {
    pub(super) fn new(state: State, family: Family) -> Sock {
        Sock {
            state,
            family,
            local: None,
            peer: None,
            conn: None,
            rx: VecDeque::new(),
            rx_held: false,
            eof: false,
            ended: false,
            writable: false,
            shut_rd: false,
            shut_wr: false,
            error: 0,
            events: 0,
            opts: SockOpts::default(),
            refs: 1,
            connect_unreported: false,
            queued_on: None,
        }
    }

    /// Whether nothing refers to the socket any more, so its slot may go once the
    /// engine is done with its connection.
    pub(super) fn released(&self) -> bool {
        self.refs == 0 && self.queued_on.is_none()
    }

    /// What the socket takes, once bound.
    pub(super) fn binding(&self) -> Option<Binding> {
        let local = self.local?;
        Some(Binding::new(self.family, local, self.opts.v6only))
    }
}

/// The sockets of one engine: the engine's `Handler`.
#[derive(Debug, Default)]
pub struct Table {
    pub(super) socks: Vec<Option<Sock>>,
    pub(super) free: Vec<SockId>,
    /// Listening sockets the engine takes connections for, by port, in the order
    /// they started to.
    pub(super) listeners: HashMap<u16, Vec<SockId>>,
    /// The engine's own keepalive, which connections have unless their socket says
    /// otherwise.
    pub(super) default_keepalive: Option<Keepalive>,
    /// Connections reset because their listener's queue was full.
    pub overflowed: u64,
}

impl Table {
    pub(super) fn insert(&mut self, sock: Sock) -> SockId {
        match self.free.pop() {
            Some(id) => {
                self.socks[id] = Some(sock);
                id
            }
            None => {
                self.socks.push(Some(sock));
                self.socks.len() - 1
            }
        }
    }

    pub(super) fn remove(&mut self, id: SockId) {
        if self.socks.get_mut(id).and_then(Option::take).is_some() {
            self.free.push(id);
        }
    }

    pub(super) fn get(&self, id: SockId) -> Option<&Sock> {
        self.socks.get(id).and_then(Option::as_ref)
    }

    pub(super) fn get_mut(&mut self, id: SockId) -> Option<&mut Sock> {
        self.socks.get_mut(id).and_then(Option::as_mut)
    }

    pub(super) fn sock(&mut self, id: SockId) -> &mut Sock {
        self.get_mut(id)
            .expect("a connection's socket stays until `closed`")
    }

    /// Sockets in the table (for tests and leak checks).
    pub fn len(&self) -> usize {
        self.socks.len() - self.free.len()
    }

    /// No socket in the table.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The listening socket a connection to `local` goes to: of those on its port
    /// that take its address, the closest fit (see `Binding::fit`), the first to
    /// listen among equals. `None` when none takes it (the engine then resets it).
    fn listener_for(&self, local: SocketAddr) -> Option<SockId> {
        let mut best: Option<(u8, SockId)> = None;
        for &id in self.listeners.get(&local.port())? {
            let Some(sock) = self.get(id) else { continue };
            let Some(binding) = sock.binding().filter(|b| b.takes(local.ip())) else {
                continue;
            };
            let fit = binding.fit(sock.family);
            if best.is_none_or(|(f, _)| fit > f) {
                best = Some((fit, id));
            }
        }
        best.map(|(_, id)| id)
    }
}

/// How many established connections a listener with `backlog` holds for `accept`:
/// Linux holds `backlog + 1` and makes the rest wait, half-open, for their handshake's
/// last ACK to be taken; Rusty's engine cannot leave a connection half-open once it has
/// completed, so it holds more (at least [`MIN_ACCEPT_QUEUE`]) rather than reset
/// clients of a small backlog (Python's servers ask for 5) in a burst.
fn accept_queue_room(backlog: usize) -> usize {
    (backlog + 1).max(MIN_ACCEPT_QUEUE)
}

/// The least room a listener's accept queue has.
pub(super) const MIN_ACCEPT_QUEUE: usize = 128;

pub(super) fn bump(sock: &mut Sock) {
    sock.events = sock.events.wrapping_add(1);
}

impl Handler for Table {
    type Conn = SockId;

    fn accept(
        &mut self,
        local: std::net::SocketAddr,
        remote: std::net::SocketAddr,
    ) -> Option<SockId> {
        let listener = self.listener_for(local)?;
        let Some(Sock {
            state: State::Listening { backlog, queue },
            ..
        }) = self.get(listener)
        else {
            return None;
        };
        if queue.len() >= accept_queue_room(*backlog) {
            self.overflowed += 1;
            return None;
        }
        // An accepted socket inherits its listener's family and options, as on Linux.
        let l = self.get(listener)?;
        let (family, opts) = (l.family, l.opts);
        let mut sock = Sock::new(State::Connected, family);
        sock.local = Some(local);
        sock.peer = Some(remote);
        sock.refs = 0;
        sock.queued_on = Some(listener);
        sock.opts = opts;
        let id = self.insert(sock);
        let l = self.sock(listener);
        if let State::Listening { queue, .. } = &mut l.state {
            queue.push_back(id);
        }
        bump(l);
        Some(id)
    }

    fn connected(&mut self, conn: &mut Conn<'_, SockId>) {
        let (id, local, peer) = (conn.id(), conn.local_addr(), conn.peer_addr());
        let sock = self.sock(*conn.state());
        sock.conn = Some(id);
        sock.local = Some(local);
        sock.peer = Some(peer);
        sock.state = State::Connected;
        sock.writable = true;
        let opts = sock.opts;
        if let Some(timeout) = opts.user_timeout {
            conn.set_user_timeout(Some(timeout));
        }
        let keepalive = opts.keepalive.then_some(opts.keepalive_timing);
        if keepalive != self.default_keepalive {
            conn.set_keepalive(keepalive);
        }
        bump(self.sock(*conn.state()));
    }

    fn data(&mut self, conn: &mut Conn<'_, SockId>, data: &[u8]) -> usize {
        let sock = self.sock(*conn.state());
        if sock.released() || sock.shut_rd {
            // Nobody will read them (Linux resets a connection closed with unread
            // bytes; `release` does the same).
            return data.len();
        }
        let room = sock.opts.rcvbuf.saturating_sub(sock.rx.len());
        let n = room.min(data.len());
        sock.rx.extend(&data[..n]);
        sock.rx_held = n < data.len();
        if n > 0 {
            bump(sock);
        }
        n
    }

    fn writable(&mut self, conn: &mut Conn<'_, SockId>) {
        let sock = self.sock(*conn.state());
        sock.writable = true;
        bump(sock);
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, SockId>) {
        let sock = self.sock(*conn.state());
        sock.eof = true;
        bump(sock);
    }

    fn closed(&mut self, _: &mut Opener<'_, SockId>, id: SockId, reason: CloseReason) {
        let sock = self.sock(id);
        let connecting = matches!(sock.state, State::Connecting);
        sock.error = match reason {
            CloseReason::Normal | CloseReason::Aborted => sock.error,
            CloseReason::Reset | CloseReason::Refused if connecting => libc::ECONNREFUSED,
            CloseReason::Reset | CloseReason::Refused => libc::ECONNRESET,
            CloseReason::TimedOut => libc::ETIMEDOUT,
            _ => libc::ECONNABORTED,
        };
        if connecting {
            sock.state = State::Failed;
        }
        sock.conn = None;
        sock.ended = true;
        sock.eof = true;
        sock.rx_held = false;
        bump(sock);
        if sock.released() {
            self.remove(id);
        }
    }

    fn connect_failed(
        &mut self,
        _: &mut Opener<'_, SockId>,
        _: std::net::SocketAddr,
        id: SockId,
        error: ConnectError,
    ) {
        let sock = self.sock(id);
        sock.error = connect_errno(error).0;
        sock.state = State::Failed;
        sock.ended = true;
        bump(sock);
        if sock.released() {
            self.remove(id);
        }
    }
}

/// The errno Linux gives for the nearest failure to start an active open.
pub(super) fn connect_errno(error: ConnectError) -> Errno {
    Errno(match error {
        ConnectError::NoPortAvailable => libc::EADDRNOTAVAIL,
        ConnectError::TooManyConnections => libc::ENOBUFS,
        ConnectError::ShuttingDown => libc::ECONNABORTED,
        ConnectError::InvalidAddress => libc::ENETUNREACH,
        // Linux's answer when no address of ours may be the source (one still
        // tentative, say).
        ConnectError::NoSourceAddress => libc::EADDRNOTAVAIL,
        _ => libc::EINVAL,
    })
}
