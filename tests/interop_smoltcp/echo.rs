//! Our applications: an echo server and a client that sends, half-closes and collects
//! the echo.

use super::*;

// ----- Our handlers -----

/// Echo server. Keeps what the send buffer refused in its own queue so it can consume
/// everything at once and close exactly when the echo is complete.
#[derive(Default)]
pub(crate) struct EchoServer {
    pub(crate) closed: Vec<CloseReason>,
    pub(crate) accepted: usize,
    pub(crate) echoed: usize,
}

#[derive(Default)]
pub(crate) struct EchoConn {
    pub(crate) backlog: VecDeque<u8>,
    pub(crate) peer_closed: bool,
    pub(crate) closing: bool,
}

impl EchoServer {
    pub(crate) fn flush(&mut self, conn: &mut Conn<'_, EchoConn>) {
        loop {
            let (a, _) = conn.state().backlog.as_slices();
            if a.is_empty() {
                break;
            }
            let chunk = a.to_vec();
            let n = conn.send(&chunk).unwrap_or(0);
            self.echoed += n;
            conn.state().backlog.drain(..n);
            if n < chunk.len() {
                return;
            }
        }
        if conn.state().peer_closed && !conn.state().closing {
            conn.state().closing = true;
            conn.close();
        }
    }
}

impl Handler for EchoServer {
    type Conn = EchoConn;
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<EchoConn> {
        self.accepted += 1;
        Some(EchoConn::default())
    }
    fn data(&mut self, conn: &mut Conn<'_, EchoConn>, data: &[u8]) -> usize {
        conn.state().backlog.extend(data);
        self.flush(conn);
        data.len()
    }
    fn writable(&mut self, conn: &mut Conn<'_, EchoConn>) {
        self.flush(conn);
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, EchoConn>) {
        conn.state().peer_closed = true;
        self.flush(conn);
    }
    fn closed(&mut self, _: &mut Opener<'_, EchoConn>, _: EchoConn, reason: CloseReason) {
        self.closed.push(reason);
    }
}

/// Client: sends `payload`, half-closes, collects what comes back.
pub(crate) struct Sender {
    pub(crate) payload: Vec<u8>,
    pub(crate) sent: usize,
    pub(crate) received: Vec<u8>,
    pub(crate) connected: bool,
    pub(crate) peer_closed: bool,
    pub(crate) closed: Vec<CloseReason>,
}

impl Sender {
    pub(crate) fn new(payload: Vec<u8>) -> Sender {
        Sender {
            payload,
            sent: 0,
            received: Vec::new(),
            connected: false,
            peer_closed: false,
            closed: Vec::new(),
        }
    }

    pub(crate) fn pump(&mut self, conn: &mut Conn<'_, ()>) {
        while self.sent < self.payload.len() {
            let n = conn.send(&self.payload[self.sent..]).unwrap_or(0);
            if n == 0 {
                break;
            }
            self.sent += n;
        }
        if self.sent == self.payload.len() {
            conn.shutdown_write();
        }
    }
}

impl Handler for Sender {
    type Conn = ();
    fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
        None
    }
    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        self.connected = true;
        self.pump(conn);
    }
    fn writable(&mut self, conn: &mut Conn<'_, ()>) {
        self.pump(conn);
    }
    fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        self.received.extend_from_slice(data);
        data.len()
    }
    fn peer_closed(&mut self, _: &mut Conn<'_, ()>) {
        self.peer_closed = true;
    }
    fn closed(&mut self, _: &mut Opener<'_, ()>, _: (), reason: CloseReason) {
        self.closed.push(reason);
    }
}
