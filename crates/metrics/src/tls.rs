//! The counters of rusty-tls's [`Tls`] adapter, beside those of the application it
//! wraps.

use rusty_stack::{Clock, Handler};
use rusty_tls::{Tls, TlsStats};

use crate::report::{AppMetrics, Report};

impl<H: Handler + AppMetrics, C: Clock> AppMetrics for Tls<H, C> {
    fn report(&self, out: &mut Report) {
        report_tls(self.stats(), out);
        self.inner().report(out);
    }
}

/// Add one worker's TLS counters to `out`.
pub fn report_tls(s: &TlsStats, out: &mut Report) {
    const HANDSHAKES: &str = "TLS handshakes, by result: completed, failed, or refused at \
                              once because the worker held its maximum of handshakes.";
    out.counter_with(
        "rusty_tls_handshakes_total",
        HANDSHAKES,
        ("result", "completed"),
        s.handshakes_completed,
    );
    out.counter_with(
        "rusty_tls_handshakes_total",
        HANDSHAKES,
        ("result", "failed"),
        s.handshakes_failed,
    );
    out.counter_with(
        "rusty_tls_handshakes_total",
        HANDSHAKES,
        ("result", "refused"),
        s.handshakes_refused,
    );
    out.counters(&[
        (
            "rusty_tls_resumptions_total",
            "Completed handshakes that resumed a session.",
            s.handshakes_resumed,
        ),
        (
            "rusty_tls_handshake_timeouts_total",
            "Handshakes aborted by the handshake timeout.",
            s.handshake_timeouts,
        ),
        (
            "rusty_tls_protocol_errors_total",
            "Connections closed because the peer broke the protocol.",
            s.protocol_errors,
        ),
        (
            "rusty_tls_records_rejected_total",
            "Connections closed on a malformed, oversize or undecryptable record.",
            s.records_rejected,
        ),
        (
            "rusty_tls_alerts_received_total",
            "Fatal alerts received.",
            s.alerts_received,
        ),
        (
            "rusty_tls_alerts_sent_total",
            "Fatal alerts sent.",
            s.alerts_sent,
        ),
        (
            "rusty_tls_renegotiation_attempts_total",
            "TLS 1.2 renegotiation attempts (each closes its connection).",
            s.renegotiation_attempts,
        ),
        (
            "rusty_tls_truncations_total",
            "Peers that ended TCP without close_notify after the handshake.",
            s.truncations,
        ),
        (
            "rusty_tls_close_notify_received_total",
            "close_notify alerts received.",
            s.close_notify_received,
        ),
        (
            "rusty_tls_plaintext_discarded_bytes_total",
            "Decrypted bytes the application had not consumed when its connection ended.",
            s.plaintext_discarded,
        ),
    ]);
}
