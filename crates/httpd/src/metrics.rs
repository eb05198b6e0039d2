//! httpd's live metrics: each worker's [`HttpStats`] as `rusty_http_*` families, and
//! under HTTPS the TLS layer's beside them.

use rusty::metrics::{AppMetrics, Report};

use crate::https::Https;
use crate::server::{HttpServer, HttpStats};

const REQUESTS: &str = "Requests answered, by status code.";
const TIMEOUTS: &str = "Connections closed by a timeout, by which: header (408 or a silent \
                        close) or idle keep-alive.";

impl AppMetrics for HttpServer {
    fn report(&self, out: &mut Report) {
        report_http(self.stats(), self.open_connections(), out);
    }
}

impl AppMetrics for Https {
    fn report(&self, out: &mut Report) {
        self.tls().report(out);
    }
}

fn report_http(s: &HttpStats, open: usize, out: &mut Report) {
    out.counter(
        "rusty_http_connections_total",
        "Connections accepted (not counting those refused at --max-connections).",
        s.connections,
    );
    out.gauge(
        "rusty_http_open_connections",
        "Connections open now.",
        open as u64,
    );
    let codes = [
        ("200", s.status_200),
        ("206", s.status_206),
        ("301", s.status_301),
        ("304", s.status_304),
        ("400", s.bad_requests),
        ("404", s.status_404),
        ("405", s.status_405),
        ("414", s.long_targets),
        ("416", s.status_416),
        ("431", s.oversized_headers),
        ("501", s.not_implemented),
        ("505", s.bad_versions),
    ];
    for (code, n) in codes {
        out.counter_with("rusty_http_requests_total", REQUESTS, ("code", code), n);
    }
    out.counter(
        "rusty_http_refused_connections_total",
        "Connections refused at --max-connections.",
        s.refused_connections,
    );
    out.counter_with(
        "rusty_http_timeouts_total",
        TIMEOUTS,
        ("timeout", "header"),
        s.header_timeouts,
    );
    out.counter_with(
        "rusty_http_timeouts_total",
        TIMEOUTS,
        ("timeout", "idle"),
        s.idle_timeouts,
    );
    out.counter(
        "rusty_http_stalled_aborts_total",
        "Connections reset because a client stopped reading a response.",
        s.stalled_aborts,
    );
    out.counter(
        "rusty_http_backpressure_pauses_total",
        "Times a connection stopped taking requests for lack of send-buffer space.",
        s.backpressure_pauses,
    );
    out.counter(
        "rusty_http_body_sent_bytes_total",
        "Response body bytes queued.",
        s.body_bytes,
    );
}
