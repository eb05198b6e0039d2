//! The echo server's handler: every byte received goes back, in order; when the peer
//! has closed its side and everything has been echoed, we close ours.

use rusty_stack::{Conn, Handler};

/// Echoes on every connection. Backpressure is the stack's: when the send buffer is
/// full the handler consumes only what it could queue, the rest stays in the receive
/// buffer (shrinking the window) and is offered again after `writable`.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct EchoServer {
    /// Bytes queued back to the peers so far, over all of this worker's connections.
    pub echoed: u64,
}

/// Per-connection state.
#[derive(Debug, Default)]
pub struct EchoConn {
    /// Received bytes we could not queue yet (the stack holds them for us).
    backlog: bool,
    peer_closed: bool,
}

impl Handler for EchoServer {
    type Conn = EchoConn;

    fn accept(
        &mut self,
        _local: std::net::SocketAddr,
        _remote: std::net::SocketAddr,
    ) -> Option<EchoConn> {
        Some(EchoConn::default())
    }

    fn data(&mut self, conn: &mut Conn<'_, EchoConn>, data: &[u8]) -> usize {
        let n = conn.send(data).unwrap_or(0);
        self.echoed += n as u64;
        let st = conn.state();
        st.backlog = n < data.len();
        if st.peer_closed && !st.backlog {
            conn.shutdown_write();
        }
        n
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, EchoConn>) {
        let st = conn.state();
        st.peer_closed = true;
        if !st.backlog {
            conn.shutdown_write();
        }
    }
}
