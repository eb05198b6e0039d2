//! Loss recovery's state: what every ACK reads inline ([`Recovery`]), and out of line
//! what only a recovery, a timeout or a retransmission needs ([`ColdRecovery`]): PRR
//! (RFC 6937), the evidence an undo needs (RFC 2883, RFC 3522) and the counters. The
//! logic that drives it is in `ack.rs`, `output.rs` and `timers.rs`.

use super::reached;
use crate::tcp::seq::SeqNum;

/// Loss recovery (RFC 6675 with RACK-TLP, RFC 8985, and PRR, RFC 6937), duplicate ACKs
/// for peers without SACK (RFC 5681 §3.2, RFC 6582), consecutive retransmission
/// timeouts (RFC 6298 §5) and what an undo needs (RFC 2883, RFC 3522). What every ACK
/// reads is here; what only a recovery, a timeout or a retransmission needs is out of
/// line ([`ColdRecovery`]).
pub(super) struct Recovery {
    /// Duplicate ACKs in a row (RFC 5681 §3.2), saturating: only up to DupThresh
    /// matters.
    pub(super) dupacks: u16,
    /// In loss recovery (RFC 6675 §5), sending under PRR. (The recovery point and the
    /// tail loss probe are in the flight block, [`Flight`](super::flight::Flight).)
    pub(super) in_recovery: bool,
    /// Retransmission timeouts (or SYN retries) since the last progress, saturating
    /// ([`Recovery::retries_reached`]).
    pub(super) retries: u16,
    /// The rescue retransmission of this recovery was sent (RFC 6675 §4 NextSeg rule 4).
    pub(super) rescued: bool,
    /// Probes sent since the last ACK that delivered data (at most `MAX_PROBES`).
    pub(super) probes: u8,
    /// Allocated by the first recovery, timeout or retransmission; freed by
    /// [`Tcb::take_counters`](super::Tcb::take_counters) once the counters are taken, no recovery is on and no
    /// undo is possible.
    pub(super) cold: Option<Box<ColdRecovery>>,
}

/// The rare part of [`Recovery`].
#[derive(Debug, Default)]
pub(super) struct ColdRecovery {
    /// Proportional Rate Reduction state while in recovery.
    pub(super) prr: Prr,
    /// Evidence that the last reduction was spurious.
    pub(super) undo: Option<Undo>,
    /// Retransmissions and loss-recovery events, for statistics.
    pub(super) counters: LossCounters,
}

impl Recovery {
    /// `retries` reached `limit` ([`reached`]).
    pub(super) fn retries_reached(&self, limit: u32) -> bool {
        reached(self.retries, limit, u16::MAX)
    }

    pub(super) fn cold(&mut self) -> &mut ColdRecovery {
        self.cold.get_or_insert_with(Box::default)
    }

    /// PRR state, for a recovery going on (or starting).
    pub(super) fn prr_mut(&mut self) -> &mut Prr {
        &mut self.cold().prr
    }

    /// PRR's sndcnt: what the latest ACK lets recovery send.
    pub(super) fn prr_budget(&self) -> usize {
        self.cold.as_ref().map_or(0, |c| c.prr.budget)
    }

    pub(super) fn undo_mut(&mut self) -> Option<&mut Undo> {
        self.cold.as_mut()?.undo.as_mut()
    }

    pub(super) fn set_undo(&mut self, undo: Option<Undo>) {
        match (undo, self.cold.as_mut()) {
            (None, None) => {}
            (None, Some(cold)) => cold.undo = None,
            (undo, _) => self.cold().undo = undo,
        }
    }

    /// The counters, to count an event in.
    pub(super) fn counters(&mut self) -> &mut LossCounters {
        &mut self.cold().counters
    }

    /// Take the counters, and free the cold part if nothing else in it is in use.
    pub(super) fn take_counters(&mut self) -> LossCounters {
        let Some(cold) = self.cold.as_mut() else {
            return LossCounters::default();
        };
        let counters = std::mem::take(&mut cold.counters);
        if !self.in_recovery && cold.undo.is_none() {
            self.cold = None;
        }
        counters
    }
}

/// RFC 6937 state: RecoverFS, prr_delivered, prr_out and what the latest ACK allows.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Prr {
    pub(super) recover_fs: usize,
    pub(super) delivered: usize,
    pub(super) out: usize,
    /// sndcnt: bytes the latest ACK lets us send.
    pub(super) budget: usize,
}

/// Since the last reduction (fast recovery, a TLP repair or a timeout): retransmissions
/// not yet shown to be duplicates by a D-SACK (RFC 2883 §5), and for Eifel detection
/// (RFC 3522) the first retransmission's sequence number and TSval.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Undo {
    pub(super) retrans: u32,
    pub(super) first: Option<(SeqNum, u32)>,
    /// The Eifel test has been made for this episode.
    pub(super) eifel_done: bool,
}

/// Retransmissions and loss-recovery events of one connection since the last
/// [`Tcb::take_counters`](super::Tcb::take_counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LossCounters {
    /// Segments sent again (timeouts, fast retransmit, probes that resend, repeated
    /// zero-window probes; not SYN retries).
    pub retransmitted_segments: u32,
    /// Payload bytes sent again.
    pub retransmitted_bytes: u32,
    /// Loss recoveries entered (RFC 6675 §5).
    pub fast_retransmits: u32,
    /// Records RACK marked lost by time (RFC 8985 §6.2): segments, or a whole TSO run
    /// not cut by SACK blocks or retransmissions.
    pub rack_losses: u32,
    /// Tail loss probes sent (RFC 8985 §7).
    pub tlps: u32,
    /// Retransmission timeouts in a synchronized state (RFC 6298 §5.4).
    pub rtos: u32,
    /// Reductions undone as spurious.
    pub spurious_undos: u32,
}
