//! The echo and discard servers' live metrics; the load client reports the stack's
//! counters only (its own results are its report at the end).

use rusty::metrics::{AppMetrics, Report};

use crate::{DiscardServer, EchoServer, LoadClient};

impl AppMetrics for EchoServer {
    fn report(&self, out: &mut Report) {
        out.counter(
            "rusty_echo_echoed_bytes_total",
            "Bytes queued back to the peers.",
            self.echoed,
        );
    }
}

impl AppMetrics for DiscardServer {
    fn report(&self, out: &mut Report) {
        let s = &self.stats;
        out.counter(
            "rusty_discard_received_bytes_total",
            "Bytes received and dropped.",
            s.bytes,
        );
        out.counter(
            "rusty_discard_connections_total",
            "Connections accepted.",
            s.connections,
        );
        out.counter(
            "rusty_discard_failed_connections_total",
            "Connections that ended other than by both sides closing.",
            s.failed,
        );
    }
}

impl AppMetrics for LoadClient {}
