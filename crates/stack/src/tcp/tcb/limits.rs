//! What a connection consults of the configuration after it is created
//! ([`TcbLimits`]), shared by the engine's connections.

use std::net::IpAddr;
use std::time::Duration;

use crate::tcp::config::{Keepalive, TcpConfig};
use crate::tcp::rtt::{RtoBounds, RttEstimator};

/// The parts of [`TcpConfig`] a connection consults after creation: the same for
/// every connection of an engine, so the engine builds them once
/// ([`TcbLimits::new`]) and its connections share them ([`Opening::limits`](super::Opening::limits)) instead
/// of each keeping a copy. A connection whose application sets a keepalive other
/// than the configuration's takes a copy of its own ([`Tcb::set_keepalive`](super::Tcb::set_keepalive)).
#[derive(Debug, Clone)]
pub(crate) struct TcbLimits {
    pub(super) max_retries: u32,
    pub(super) max_syn_retries: u32,
    pub(super) max_synack_retries: u32,
    /// The delayed-ACK timeout in microseconds (armed on most data segments: converted
    /// from its `Duration` once, here).
    pub(super) delayed_ack_us: u64,
    pub(super) time_wait: Duration,
    pub(super) fin_wait2_timeout: Duration,
    pub(super) close_linger: Duration,
    pub(super) max_persist: Duration,
    pub(super) orphan_retries: u32,
    pub(super) orphan_timeout: Duration,
    pub(super) invalid_ack_interval: Duration,
    pub(super) keepalive: Option<Keepalive>,
    pub(super) window_scaling: bool,
    pub(super) timestamps: bool,
    pub(super) sack: bool,
    /// Take header prediction's shortcut for the common segment, in and out
    /// (`fast.rs`). Always on but in the tests that compare it with the general path.
    pub(super) header_prediction: bool,
    /// The RTO bounds, converted from `Duration` once here rather than for every
    /// connection, and kept here rather than in every connection's estimator.
    pub(super) rto: RtoBounds,
    /// A new connection's RTT estimator.
    pub(super) rtt: RttEstimator,
    /// The engine's address: our end of every connection.
    pub(super) local_ip: IpAddr,
}

impl TcbLimits {
    /// What connections under `cfg` consult during their life.
    pub(crate) fn new(cfg: &TcpConfig) -> TcbLimits {
        let rto = RtoBounds::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto);
        TcbLimits {
            max_retries: cfg.max_retries,
            max_syn_retries: cfg.max_syn_retries,
            max_synack_retries: cfg.max_synack_retries,
            delayed_ack_us: crate::time::micros(cfg.delayed_ack),
            time_wait: cfg.time_wait,
            fin_wait2_timeout: cfg.fin_wait2_timeout,
            close_linger: cfg.close_linger,
            max_persist: cfg.max_persist,
            orphan_retries: cfg.orphan_retries,
            orphan_timeout: cfg.orphan_timeout,
            invalid_ack_interval: cfg.invalid_ack_interval,
            keepalive: cfg.keepalive,
            window_scaling: cfg.window_scaling,
            timestamps: cfg.timestamps,
            sack: cfg.sack,
            header_prediction: true,
            rto,
            rtt: RttEstimator::new(&rto),
            local_ip: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        }
    }

    /// Our address: our end of every connection that shares these limits.
    #[cfg(test)]
    pub(crate) fn local_ip(&self) -> IpAddr {
        self.local_ip
    }

    /// The same limits for an engine at `ip`.
    pub(crate) fn at(mut self, ip: IpAddr) -> TcbLimits {
        self.local_ip = ip;
        self
    }

    /// The same limits with header prediction off: every segment takes the general path
    /// (for the tests that check both paths agree).
    #[cfg(test)]
    pub(crate) fn without_prediction(mut self) -> TcbLimits {
        self.header_prediction = false;
        self
    }
}
