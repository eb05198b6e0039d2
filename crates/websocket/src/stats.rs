//! Per-worker WebSocket counters: plain integers, summed across workers by the binary.

use std::fmt;

use crate::error::ProtocolError;

/// What a worker's WebSocket endpoint did. Read it from
/// [`WsServer::stats`](crate::WsServer::stats) or [`WsClient::stats`](crate::WsClient::stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WsStats {
    /// Opening handshakes completed (101 sent, or accepted by our client).
    pub handshakes: u64,
    /// Opening handshakes refused: HTTP errors we sent, or responses our client refused.
    pub rejected: u64,
    /// Of those, refused by the application's `open`.
    pub rejected_by_app: u64,
    /// Handshakes that did not complete within the handshake timeout.
    pub handshake_timeouts: u64,
    /// Data messages received.
    pub messages_in: u64,
    /// Their payload bytes (after decompression).
    pub bytes_in: u64,
    /// Data messages sent.
    pub messages_out: u64,
    /// Their payload bytes (before compression).
    pub bytes_out: u64,
    /// Of the data messages received, those that came compressed (RSV1).
    pub compressed_in: u64,
    /// Of the data messages sent, those sent compressed (RSV1).
    pub compressed_out: u64,
    /// Handshakes that negotiated permessage-deflate.
    pub deflate: u64,
    /// Pings received.
    pub pings_in: u64,
    /// Pongs received.
    pub pongs_in: u64,
    /// Close frames received.
    pub closes_in: u64,
    /// Close frames sent.
    pub closes_out: u64,
    /// Connections that ended after a complete close handshake.
    pub clean_closes: u64,
    /// Open connections that ended without one (peer vanished, reset, or failed).
    pub unclean_closes: u64,
    /// Connections closed by the idle timeout.
    pub idle_timeouts: u64,
    /// Close handshakes the peer did not finish in time.
    pub close_timeouts: u64,
    /// Times reading stopped because too much output was queued.
    pub paused: u64,
    /// Protocol violations by kind, indexed by [`ProtocolError::index`].
    pub errors: [u64; ProtocolError::ALL.len()],
}

impl WsStats {
    /// Add another worker's counters.
    pub fn add(&mut self, o: &WsStats) {
        self.handshakes += o.handshakes;
        self.rejected += o.rejected;
        self.rejected_by_app += o.rejected_by_app;
        self.handshake_timeouts += o.handshake_timeouts;
        self.messages_in += o.messages_in;
        self.bytes_in += o.bytes_in;
        self.messages_out += o.messages_out;
        self.bytes_out += o.bytes_out;
        self.compressed_in += o.compressed_in;
        self.compressed_out += o.compressed_out;
        self.deflate += o.deflate;
        self.pings_in += o.pings_in;
        self.pongs_in += o.pongs_in;
        self.closes_in += o.closes_in;
        self.closes_out += o.closes_out;
        self.clean_closes += o.clean_closes;
        self.unclean_closes += o.unclean_closes;
        self.idle_timeouts += o.idle_timeouts;
        self.close_timeouts += o.close_timeouts;
        self.paused += o.paused;
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
    }

    /// How many times the peer committed `e`.
    pub fn error(&self, e: ProtocolError) -> u64 {
        self.errors[e.index()]
    }

    /// All protocol violations.
    pub fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }
}

impl fmt::Display for WsStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "handshakes {} rejected {} (by app {}, timed out {}), messages in {} ({} B) out {} ({} B), \
             compressed in {} out {} (deflate on {} connections), pings {} pongs {}, closes in {} out {}, clean {} unclean {}, idle timeouts {}, \
             close timeouts {}, paused {}, protocol errors {}",
            self.handshakes,
            self.rejected,
            self.rejected_by_app,
            self.handshake_timeouts,
            self.messages_in,
            self.bytes_in,
            self.messages_out,
            self.bytes_out,
            self.compressed_in,
            self.compressed_out,
            self.deflate,
            self.pings_in,
            self.pongs_in,
            self.closes_in,
            self.closes_out,
            self.clean_closes,
            self.unclean_closes,
            self.idle_timeouts,
            self.close_timeouts,
            self.paused,
            self.total_errors()
        )?;
        let mut first = true;
        for e in ProtocolError::ALL {
            let n = self.error(e);
            if n > 0 {
                write!(f, "{}{e}: {n}", if first { " (" } else { ", " })?;
                first = false;
            }
        }
        if !first {
            f.write_str(")")?;
        }
        Ok(())
    }
}
