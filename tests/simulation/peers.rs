//! The applications on both engines: a client that opens the scenario's connections
//! and a server that answers them, each side sending its payload and checking, byte for
//! byte, what the other sent.

use super::*;

/// One side of one connection.
#[derive(Debug)]
pub(crate) struct Side {
    pub(crate) index: usize,
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

/// The behaviour common to both handlers.
pub(crate) struct Peer {
    name: &'static str,
    scenario: Rc<Scenario>,
    /// Client port → connection index, written by the client when a connection is
    /// established (always before the server accepts it).
    ports: Rc<RefCell<HashMap<u16, usize>>>,
    log: Rc<RefCell<Log>>,
    scratch: Vec<u8>,
}

impl Peer {
    /// The application named `name` for `scenario`, sharing the map of client ports and
    /// the log with the other side's.
    pub(crate) fn new(
        name: &'static str,
        scenario: Rc<Scenario>,
        ports: Rc<RefCell<HashMap<u16, usize>>>,
        log: Rc<RefCell<Log>>,
    ) -> Peer {
        Peer {
            name,
            scenario,
            ports,
            log,
            scratch: Vec::new(),
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

pub(crate) struct Client {
    peer: Peer,
    next: usize,
    /// Connections to open at the next `poll` (a slot freed, or no port was free).
    to_open: usize,
    retry: Vec<(SocketAddr, Side)>,
}

impl Client {
    /// The client over `peer`. Its caller opens the first connection (see
    /// [`Client::next_conn`]); the client opens the rest of the scenario's concurrent ones
    /// at its first `poll`.
    pub(crate) fn new(peer: Peer) -> Client {
        let to_open = peer.scenario.concurrency - 1;
        Client {
            peer,
            next: 0,
            to_open,
            retry: Vec::new(),
        }
    }

    /// The next connection to open, if any is left.
    pub(crate) fn next_conn(&mut self) -> Option<(SocketAddr, Side)> {
        let spec = self.peer.scenario.conns.get(self.next)?;
        let side = Side::new(spec, self.next, true);
        self.next += 1;
        Some((SocketAddr::from((SERVER_IP, SERVER_PORT)), side))
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

    fn accept(&mut self, _: std::net::SocketAddr, remote: std::net::SocketAddr) -> Option<Side> {
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
        remote: std::net::SocketAddr,
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

pub(crate) struct Server {
    peer: Peer,
}

impl Server {
    /// The server over `peer`.
    pub(crate) fn new(peer: Peer) -> Server {
        Server { peer }
    }
}

impl Handler for Server {
    type Conn = Side;

    fn accept(
        &mut self,
        local: std::net::SocketAddr,
        remote: std::net::SocketAddr,
    ) -> Option<Side> {
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
