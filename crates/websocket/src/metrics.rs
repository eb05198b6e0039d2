//! The WebSocket endpoints' live metrics: each worker's [`WsStats`] as
//! `rusty_websocket_*` families, for the server and the client role alike.

use rusty::metrics::{AppMetrics, Report};

use crate::app::{WsApp, WsServerApp};
use crate::client::WsClient;
use crate::error::ProtocolError;
use crate::server::WsServer;
use crate::stats::WsStats;

impl<A: WsServerApp> AppMetrics for WsServer<A> {
    fn report(&self, out: &mut Report) {
        report_ws(self.stats(), out);
    }
}

impl<A: WsApp> AppMetrics for WsClient<A> {
    fn report(&self, out: &mut Report) {
        report_ws(self.stats(), out);
    }
}

fn report_ws(s: &WsStats, out: &mut Report) {
    const HANDSHAKES: &str = "Opening handshakes, by result: completed, rejected by the \
                              protocol or limits, rejected by the application, timed out.";
    const MESSAGES: &str = "Data messages, by direction.";
    const BYTES: &str = "Data message payload bytes (uncompressed), by direction.";
    const COMPRESSED: &str =
        "Data messages that went compressed (permessage-deflate), by direction.";
    const CLOSE_FRAMES: &str = "Close frames, by direction.";
    const CLOSES: &str =
        "Connections ended after a handshake, by whether the close handshake completed.";
    const ERRORS: &str = "Protocol violations by the peer, by kind.";
    let h = "rusty_websocket_handshakes_total";
    out.counter_with(h, HANDSHAKES, ("result", "completed"), s.handshakes);
    let protocol = s.rejected.saturating_sub(s.rejected_by_app);
    out.counter_with(h, HANDSHAKES, ("result", "rejected"), protocol);
    out.counter_with(
        h,
        HANDSHAKES,
        ("result", "rejected_by_app"),
        s.rejected_by_app,
    );
    out.counter_with(h, HANDSHAKES, ("result", "timed_out"), s.handshake_timeouts);
    let pairs: [(&'static str, &'static str, u64, u64); 4] = [
        (
            "rusty_websocket_messages_total",
            MESSAGES,
            s.messages_in,
            s.messages_out,
        ),
        (
            "rusty_websocket_message_bytes_total",
            BYTES,
            s.bytes_in,
            s.bytes_out,
        ),
        (
            "rusty_websocket_compressed_messages_total",
            COMPRESSED,
            s.compressed_in,
            s.compressed_out,
        ),
        (
            "rusty_websocket_close_frames_total",
            CLOSE_FRAMES,
            s.closes_in,
            s.closes_out,
        ),
    ];
    for (name, help, received, sent) in pairs {
        out.counter_with(name, help, ("direction", "received"), received);
        out.counter_with(name, help, ("direction", "sent"), sent);
    }
    out.counter_with(
        "rusty_websocket_closes_total",
        CLOSES,
        ("clean", "true"),
        s.clean_closes,
    );
    out.counter_with(
        "rusty_websocket_closes_total",
        CLOSES,
        ("clean", "false"),
        s.unclean_closes,
    );
    out.counters(&[
        (
            "rusty_websocket_deflate_sessions_total",
            "Handshakes that negotiated permessage-deflate.",
            s.deflate,
        ),
        (
            "rusty_websocket_pings_received_total",
            "Pings received.",
            s.pings_in,
        ),
        (
            "rusty_websocket_pongs_received_total",
            "Pongs received.",
            s.pongs_in,
        ),
        (
            "rusty_websocket_idle_timeouts_total",
            "Connections closed by the idle timeout.",
            s.idle_timeouts,
        ),
        (
            "rusty_websocket_close_timeouts_total",
            "Close handshakes the peer did not finish in time.",
            s.close_timeouts,
        ),
        (
            "rusty_websocket_read_pauses_total",
            "Times reading stopped because too much output was queued.",
            s.paused,
        ),
    ]);
    for e in ProtocolError::ALL {
        let n = s.errors[e.index()];
        out.counter_with(
            "rusty_websocket_protocol_errors_total",
            ERRORS,
            ("kind", e.as_str()),
            n,
        );
    }
}
