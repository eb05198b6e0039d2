//! Per-connection TCP tunables. One value per engine; every connection of that engine
//! copies what it needs at creation. Defaults follow Linux where the RFCs leave a choice,
//! so that Rusty behaves the way a Linux user expects.

use std::time::Duration;

pub use super::cc::CongestionAlgorithm;

/// Keepalive probing (RFC 1122 §4.2.3.6); off unless configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe (Linux: 2 h).
    pub idle: Duration,
    /// Time between unanswered probes (Linux: 75 s).
    pub interval: Duration,
    /// Unanswered probes before the connection is dropped (Linux: 9).
    pub probes: u32,
}

impl Default for Keepalive {
    fn default() -> Self {
        Keepalive {
            idle: Duration::from_secs(7200),
            interval: Duration::from_secs(75),
            probes: 9,
        }
    }
}

/// TCP settings of one engine: buffer sizes, options offered, timers and limits.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TcpConfig {
    /// Bytes the application may queue by copy per connection (shared, zero-copy sends
    /// are not counted).
    pub send_buffer: usize,
    /// Receive buffer: the most we advertise, and the bound on held in-order plus
    /// out-of-order bytes.
    pub recv_buffer: usize,
    /// Bound on disjoint out-of-order ranges kept per connection.
    pub max_ooo_ranges: usize,
    /// Offer window scaling (RFC 7323 §2).
    pub window_scaling: bool,
    /// Offer timestamps (RFC 7323 §3) with PAWS.
    pub timestamps: bool,
    /// Offer SACK-permitted and send SACK blocks (RFC 2018).
    pub sack: bool,
    /// The congestion-control algorithm (see [`CongestionAlgorithm`]).
    pub congestion_control: CongestionAlgorithm,
    /// RFC 6298 §2.1 initial retransmission timeout (1 s).
    pub initial_rto: Duration,
    /// Lower bound of the retransmission timeout. RFC 6298 §2.4 says 1 s; like Linux we
    /// use 200 ms.
    pub min_rto: Duration,
    /// Upper bound of the retransmission timeout after backoff (RFC 6298 §2.5: at least
    /// 60 s).
    pub max_rto: Duration,
    /// Retransmissions of data (or FIN) before the connection is aborted (Linux tcp_retries2: 15).
    pub max_retries: u32,
    /// Retransmissions of a SYN before an active open fails (Linux tcp_syn_retries: 6).
    pub max_syn_retries: u32,
    /// Retransmissions of a SYN-ACK before a half-open connection is dropped (Linux: 5).
    pub max_synack_retries: u32,
    /// Delayed-ACK timeout (RFC 9293 §3.8.6.3: under 0.5 s; Linux uses 40 ms).
    pub delayed_ack: Duration,
    /// How long TIME-WAIT lasts (2·MSL). Linux uses 60 s.
    pub time_wait: Duration,
    /// After the application closed its side, how long FIN-WAIT-2 waits for the peer's
    /// FIN before dropping the connection (Linux tcp_fin_timeout: 60 s).
    pub fin_wait2_timeout: Duration,
    /// After the application closes, how long data that still arrives is acknowledged
    /// and discarded (a lingering close, as nginx's `lingering_timeout` does, so a reply
    /// sent just before the close is not destroyed by a reset). Data arriving later gets
    /// a RST: nobody will read it (RFC 1122 §4.2.2.13; Linux resets at once).
    pub close_linger: Duration,
    /// Maximum persist (zero-window probe) interval.
    pub max_persist: Duration,
    /// Persist probes or retransmission timeouts in a row without progress (SND.UNA
    /// advancing or the peer's window opening) after which an orphan, a connection the
    /// application has closed, gives up: it resets the peer and reports
    /// [`CloseReason::TimedOut`](crate::CloseReason). Linux's tcp_orphan_retries, whose
    /// 0 means 8; here 8. A connection the application still holds keeps probing a
    /// zero window for as long as the peer answers (RFC 1122 §4.2.2.17) and is bounded
    /// only by [`TcpConfig::max_retries`] of unanswered probes and
    /// [`TcpConfig::user_timeout`].
    pub orphan_retries: u32,
    /// How long an orphan may go without progress (unacknowledged data or FIN, or a
    /// zero window the peer keeps shut) before it gives up like after
    /// [`TcpConfig::orphan_retries`], whichever comes first. 60 s: as long as Linux's
    /// FIN-WAIT-2 timeout and nginx's `send_timeout`, long enough for any client that is
    /// reading at all, short enough that a client which stops reading (a zero window it
    /// answers probes for) cannot hold a server's memory and connection slot for longer
    /// than a minute after the application let go.
    pub orphan_timeout: Duration,
    /// The user timeout (RFC 9293 §3.10.1 USER TIMEOUT, RFC 5482, Linux
    /// TCP_USER_TIMEOUT) every connection starts with; the application may change it per
    /// connection ([`Conn::set_user_timeout`](crate::Conn::set_user_timeout)). When data
    /// or a FIN stays unacknowledged, or zero-window probing makes no progress, for
    /// longer than this, the connection is reset and reports
    /// [`CloseReason::TimedOut`](crate::CloseReason). `None` (the default, as on Linux):
    /// only [`TcpConfig::max_retries`] bounds it. For orphans the tighter of this and
    /// [`TcpConfig::orphan_timeout`] applies.
    pub user_timeout: Option<Duration>,
    /// Keepalive probing, off when `None` (RFC 1122 §4.2.3.6: off by default).
    pub keepalive: Option<Keepalive>,
    /// Challenge ACKs (RFC 5961 §7) the engine sends per second over all connections:
    /// each second's budget is drawn at random between half and one and a half times
    /// this, so an off-path observer cannot count it out (CVE-2016-5696; Linux 4.7's
    /// fix). The per-connection limit below comes first.
    pub challenge_ack_limit: u32,
    /// Per connection, at most one ACK per this interval answers a segment without data
    /// that is out of window, fails PAWS or is challenged (RFC 5961): ACK-storm and
    /// probing fuel otherwise. Linux's tcp_invalid_ratelimit: 500 ms. Segments carrying
    /// data or a FIN are always answered (their ACKs and D-SACKs are what a sender
    /// recovers with, and they cannot loop).
    pub invalid_ack_interval: Duration,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            send_buffer: 256 * 1024,
            recv_buffer: 256 * 1024,
            max_ooo_ranges: 8,
            window_scaling: true,
            timestamps: true,
            sack: true,
            congestion_control: CongestionAlgorithm::default(),
            initial_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            max_retries: 15,
            max_syn_retries: 6,
            max_synack_retries: 5,
            delayed_ack: Duration::from_millis(40),
            time_wait: Duration::from_secs(60),
            fin_wait2_timeout: Duration::from_secs(60),
            close_linger: Duration::from_secs(5),
            max_persist: Duration::from_secs(60),
            orphan_retries: 8,
            orphan_timeout: Duration::from_secs(60),
            user_timeout: None,
            keepalive: None,
            challenge_ack_limit: 1000,
            invalid_ack_interval: Duration::from_millis(500),
        }
    }
}

impl TcpConfig {
    /// The window-scale shift we offer: the smallest that lets the receive buffer be
    /// advertised in full (RFC 7323 §2.3, at most 14).
    pub fn rcv_wscale(&self) -> u8 {
        let mut shift = 0u8;
        while shift < 14 && (self.recv_buffer >> shift) > 65535 {
            shift += 1;
        }
        shift
    }
}
