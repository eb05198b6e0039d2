//! The applications on both engines: each opens the scenario's connections that start
//! on its side (the client engine most of them, the server engine the reversed ones)
//! and accepts the others, sends its payload and checks, byte for byte, what the other
//! sent.

use super::*;

/// One side of one connection.
#[derive(Debug)]
pub(crate) struct Side {
    pub(crate) index: usize,
    /// This side opened the connection.
    pub(crate) opened: bool,
    pub(crate) send: Flow,
    pub(crate) recv: Flow,
    /// This side closes only after the peer's FIN.
    pub(crate) waits_for_peer: bool,
    pub(crate) use_close: bool,
    pub(crate) read_limit: Option<usize>,
    pub(crate) sent: usize,
    pub(crate) received: usize,
    pub(crate) peer_closed: bool,
    pub(crate) fin_sent: bool,
}

impl Side {
    /// The side of connection `index` on the client engine (`client`) or the server
    /// engine.
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
            opened: client != spec.reverse,
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
pub(crate) struct Log {
    /// Per connection index: the close reasons seen (client, server).
    pub(crate) client_closed: Vec<Vec<CloseReason>>,
    pub(crate) server_closed: Vec<Vec<CloseReason>>,
    pub(crate) errors: Vec<String>,
}

impl Log {
    fn error(&mut self, msg: String) {
        if self.errors.len() < 20 {
            self.errors.push(msg);
        }
    }
}

/// Where one engine listens, and its address for each kind of destination.
#[derive(Debug, Clone, Copy)]
pub(crate) struct End {
    pub(crate) v4: Ipv4Addr,
    pub(crate) v6: Ipv6Addr,
    /// Its link-local address (engines that speak IPv6).
    pub(crate) link_local: Option<Ipv6Addr>,
    /// Its address outside the link's prefix, if it has one.
    pub(crate) routed: Option<Ipv6Addr>,
    pub(crate) port: u16,
}

impl End {
    /// The address of this end that a connection to `dest` uses.
    pub(crate) fn ip(&self, dest: Dest) -> IpAddr {
        match dest {
            Dest::V4 => IpAddr::V4(self.v4),
            Dest::V6 => IpAddr::V6(self.v6),
            Dest::LinkLocal => IpAddr::V6(self.link_local.unwrap_or(Ipv6Addr::UNSPECIFIED)),
            Dest::Routed => IpAddr::V6(self.routed.unwrap_or(Ipv6Addr::UNSPECIFIED)),
        }
    }
}

/// The acceptor's address and the opener's, of one connection.
pub(crate) type Pair = (SocketAddr, SocketAddr);

/// The application on one engine.
pub(crate) struct Peer {
    /// The client engine's (which sends `to_server`).
    client: bool,
    scenario: Rc<Scenario>,
    /// This engine's end and the other's.
    own: End,
    other: End,
    /// (Acceptor's address, opener's address) → connection index, written by the
    /// opener when a connection is established (always before the acceptor accepts
    /// it). One port of the opener may serve several destinations at once.
    ports: Rc<RefCell<HashMap<Pair, usize>>>,
    log: Rc<RefCell<Log>>,
    scratch: Vec<u8>,
    /// The connections this engine opens, in order.
    opens: Vec<usize>,
    next: usize,
    /// Connections to open at the next `poll` (a slot freed, or no port or no address
    /// was ready).
    to_open: usize,
    retry: Vec<(SocketAddr, Side)>,
    /// Before this virtual time this engine's IPv6 addresses may still be tentative, so
    /// a connect may fail for want of one; set once the engines exist.
    tentative_until: Option<(VirtualClock, Instant)>,
}

impl Peer {
    /// The application of the client engine (`client`) or the server engine for
    /// `scenario`, at `own` and talking to `other`, sharing the map of opened
    /// connections and the log with the other engine's. It opens up to the scenario's
    /// concurrency of its own connections at its first `poll` (see [`Peer::first`] for
    /// opening one through the engine's API instead).
    pub(crate) fn new(
        client: bool,
        scenario: Rc<Scenario>,
        (own, other): (End, End),
        ports: Rc<RefCell<HashMap<Pair, usize>>>,
        log: Rc<RefCell<Log>>,
    ) -> Peer {
        let opens = (scenario.conns.iter().enumerate())
            .filter(|(_, c)| c.reverse != client)
            .map(|(i, _)| i)
            .collect();
        let to_open = scenario.concurrency;
        Peer {
            client,
            scenario,
            own,
            other,
            ports,
            log,
            scratch: Vec::new(),
            opens,
            next: 0,
            to_open,
            retry: Vec::new(),
            tentative_until: None,
        }
    }

    fn name(&self) -> &'static str {
        if self.client {
            "client"
        } else {
            "server"
        }
    }

    /// Connects that fail for want of a usable address are retried until `until`.
    pub(crate) fn set_tentative_until(&mut self, clock: VirtualClock, until: Instant) {
        self.tentative_until = Some((clock, until));
    }

    /// The next connection to open, if any is left, counted as open.
    pub(crate) fn first(&mut self) -> Option<(SocketAddr, Side)> {
        let next = self.next_conn()?;
        self.to_open = self.to_open.saturating_sub(1);
        Some(next)
    }

    fn next_conn(&mut self) -> Option<(SocketAddr, Side)> {
        let &index = self.opens.get(self.next)?;
        let spec = &self.scenario.conns[index];
        let side = Side::new(spec, index, self.client);
        self.next += 1;
        let remote = SocketAddr::new(self.other.ip(spec.dest), self.other.port);
        Some((remote, side))
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

    /// An active open could not start: try again later when that is expected, an
    /// error otherwise.
    pub(crate) fn open_failed(&mut self, remote: SocketAddr, side: Side, error: ConnectError) {
        let retry = match error {
            // Every port of the narrow range is busy (TIME-WAIT).
            ConnectError::NoPortAvailable => self.client && self.scenario.client_ports.is_some(),
            // Duplicate address detection is not over.
            ConnectError::NoSourceAddress => self
                .tentative_until
                .as_ref()
                .is_some_and(|(clock, until)| clock.now() < *until),
            _ => false,
        };
        if retry {
            self.retry.push((remote, side));
            self.to_open += 1;
        } else {
            let msg = format!(
                "{} conn {}: connect to {remote} failed: {error}",
                self.name(),
                side.index
            );
            self.log.borrow_mut().error(msg);
        }
    }

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
                        .error(format!("{} conn {index}: send_shared: {e:?}", self.name()))
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
                    self.log.borrow_mut().error(format!(
                        "{} conn {index}: send at {sent}: {e:?}",
                        self.name()
                    ));
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

    fn receive(&mut self, conn: &mut Conn<'_, Side>, data: &[u8]) -> usize {
        let side = conn.state();
        let data = &data[..data.len().min(side.read_limit.unwrap_or(usize::MAX))];
        let index = side.index;
        let start = side.received;
        if side.peer_closed && side.read_limit.is_none() {
            // (A slow reader is offered what it left behind after the FIN, by design.)
            self.log.borrow_mut().error(format!(
                "{} conn {index}: {} bytes after FIN",
                self.name(),
                data.len()
            ));
        }
        if start + data.len() > side.recv.len {
            self.log.borrow_mut().error(format!(
                "{} conn {index}: {} bytes at {start}, but only {} expected",
                self.name(),
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
                    self.name(),
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

    fn fin(&mut self, conn: &mut Conn<'_, Side>) {
        let side = conn.state();
        if side.peer_closed {
            let msg = format!("{} conn {}: peer_closed twice", self.name(), side.index);
            self.log.borrow_mut().error(msg);
        }
        side.peer_closed = true;
        self.pump(conn);
    }

    fn record_close(&mut self, side: Side, reason: CloseReason) {
        let mut log = self.log.borrow_mut();
        let list = if self.client {
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
                log.error(format!("{} conn {i}: {what}", self.name()));
            }
        }
    }
}

impl Handler for Peer {
    type Conn = Side;

    fn accept(&mut self, local: SocketAddr, remote: SocketAddr) -> Option<Side> {
        let index = self.ports.borrow().get(&(local, remote)).copied();
        let Some(i) = index else {
            let msg = format!("{}: accept of unknown {remote} on {local}", self.name());
            self.log.borrow_mut().error(msg);
            return None;
        };
        let spec = &self.scenario.conns[i];
        let closed = {
            let log = self.log.borrow();
            let list = if self.client {
                &log.client_closed
            } else {
                &log.server_closed
            };
            list[i].len()
        };
        let problem = if spec.reverse != self.client || local.port() != self.own.port {
            Some(format!(
                "conn {i} accepted on the wrong engine or port ({local})"
            ))
        } else if closed > 0 {
            Some(format!("conn {i} accepted again from {remote}"))
        } else {
            None
        };
        if let Some(p) = problem {
            self.log.borrow_mut().error(format!("{}: {p}", self.name()));
        }
        Some(Side::new(spec, i, self.client))
    }

    fn connected(&mut self, conn: &mut Conn<'_, Side>) {
        let (local, remote) = (conn.local_addr(), conn.peer_addr());
        let side = conn.state();
        if side.opened {
            // The source address a connection to this destination must use (RFC 6724:
            // a link-local peer gets our link-local address, a routed one the address
            // with the longest prefix in common, the only one of the client).
            let dest = match self.scenario.conns[side.index].dest {
                Dest::Routed => Dest::V6,
                dest => dest,
            };
            if local.ip() != self.own.ip(dest) {
                let msg = format!("{} conn {}: opened from {local}", self.name(), side.index);
                self.log.borrow_mut().error(msg);
            }
            // A port may be reused once its previous connection is over.
            self.ports.borrow_mut().insert((remote, local), side.index);
        }
        self.pump(conn);
    }

    fn data(&mut self, conn: &mut Conn<'_, Side>, data: &[u8]) -> usize {
        self.receive(conn, data)
    }

    fn writable(&mut self, conn: &mut Conn<'_, Side>) {
        self.pump(conn);
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, Side>) {
        self.fin(conn);
    }

    fn closed(&mut self, opener: &mut Opener<'_, Side>, side: Side, reason: CloseReason) {
        let opened = side.opened;
        self.record_close(side, reason);
        if opened {
            self.to_open += 1;
            self.open_pending(opener);
        }
    }

    fn connect_failed(
        &mut self,
        _: &mut Opener<'_, Side>,
        remote: SocketAddr,
        side: Side,
        error: ConnectError,
    ) {
        self.open_failed(remote, side, error);
    }

    fn poll(&mut self, opener: &mut Opener<'_, Side>) {
        self.open_pending(opener);
    }
}
