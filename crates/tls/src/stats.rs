//! [`TlsStats`]: one worker's TLS counters, and the [`StatsSink`] a worker leaves them
//! in when it ends.

use std::sync::{Arc, Mutex};

/// Where each worker's [`Tls`](crate::Tls) handler leaves its counters, with the
/// worker's index, when it is dropped (see [`Tls::with_sink`](crate::Tls::with_sink)):
/// how a program prints them once its workers have stopped.
pub type StatsSink = Arc<Mutex<Vec<(usize, TlsStats)>>>;

/// One worker's TLS counters, kept by its [`Tls`](crate::Tls) handler.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsStats {
    /// Handshakes that finished.
    pub handshakes_completed: u64,
    /// Of those, how many resumed an earlier session (tickets).
    pub handshakes_resumed: u64,
    /// Handshakes that did not finish, for any of the reasons below or because the
    /// connection ended under them.
    pub handshakes_failed: u64,
    /// Connections refused at once because the worker held its maximum of handshakes.
    pub handshakes_refused: u64,
    /// Handshakes aborted by the handshake timeout.
    pub handshake_timeouts: u64,
    /// Connections closed because the peer broke the protocol (a rustls error other
    /// than a bad record or a received alert), handshake or not.
    pub protocol_errors: u64,
    /// Connections closed on a malformed, oversize or undecryptable record.
    pub records_rejected: u64,
    /// Fatal alerts received from peers.
    pub alerts_received: u64,
    /// Fatal alerts we sent when closing a connection on an error.
    pub alerts_sent: u64,
    /// TLS 1.2 renegotiation attempts (handshake records after the handshake); each
    /// closes its connection.
    pub renegotiation_attempts: u64,
    /// Peers that ended TCP without `close_notify` after the handshake.
    pub truncations: u64,
    /// `close_notify` alerts received.
    pub close_notify_received: u64,
    /// Decrypted bytes the application had not consumed when its connection ended.
    pub plaintext_discarded: u64,
}

impl TlsStats {
    /// Add `o` into `self` (to total the workers' counters).
    pub fn add(&mut self, o: &TlsStats) {
        self.handshakes_completed += o.handshakes_completed;
        self.handshakes_resumed += o.handshakes_resumed;
        self.handshakes_failed += o.handshakes_failed;
        self.handshakes_refused += o.handshakes_refused;
        self.handshake_timeouts += o.handshake_timeouts;
        self.protocol_errors += o.protocol_errors;
        self.records_rejected += o.records_rejected;
        self.alerts_received += o.alerts_received;
        self.alerts_sent += o.alerts_sent;
        self.renegotiation_attempts += o.renegotiation_attempts;
        self.truncations += o.truncations;
        self.close_notify_received += o.close_notify_received;
        self.plaintext_discarded += o.plaintext_discarded;
    }
}

impl std::fmt::Display for TlsStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "handshakes={} resumed={} handshakes_failed={} handshakes_refused={} \
             handshake_timeouts={} protocol_errors={} records_rejected={} alerts_received={} \
             alerts_sent={} renegotiation_attempts={} truncations={} close_notify_received={} \
             plaintext_discarded={}",
            self.handshakes_completed,
            self.handshakes_resumed,
            self.handshakes_failed,
            self.handshakes_refused,
            self.handshake_timeouts,
            self.protocol_errors,
            self.records_rejected,
            self.alerts_received,
            self.alerts_sent,
            self.renegotiation_attempts,
            self.truncations,
            self.close_notify_received,
            self.plaintext_discarded
        )
    }
}
