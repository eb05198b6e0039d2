//! The flight block: what a connection keeps about the data it has in flight, taken
//! from the engine's pool when it sends and given back when it has been idle for a
//! while, so that an idle connection holds none of it inline.
//!
//! Everything here is read or written on every segment of a busy connection (the
//! scoreboard's record and RACK state, the segment being timed, the recovery point, the
//! tail loss probe) and means nothing once SND.UNA has caught up with SND.MAX: the
//! records are gone, the timed segment gave its sample, recovery and the probe are
//! over. What RACK keeps from one flight to the next stays inline ([`RackKeep`]).
//!
//! The block is taken when there is something to send (the handshake takes none: the
//! SYN is timed without it) and lives like the drained send ring: a keep-alive
//! connection that answers request after request takes it once. Once everything is
//! acknowledged the engine lists the connection for its idle sweep
//! ([`Tcb::holds_idle_send_ring`]), which gives the block back to the pool with the
//! ring after a quiet second ([`Tcb::release_idle_send_ring`]); and it goes back with
//! the buffers when the connection block goes away ([`Tcb::release_buffers`]).

use super::{PendingOutput, Tcb};
use crate::tcp::pool::RingPool;
use crate::tcp::scoreboard::{RackKeep, Scoreboard};
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Flight {
    /// What is in flight and what the peer's SACK blocks and RACK say about it.
    pub(super) board: Scoreboard,
    /// The segment being timed for an RTT sample (Karn's rule: none if retransmitted).
    pub(super) rtt_seq: Option<(SeqNum, Instant)>,
    /// The recovery point (RFC 6675 "RecoveryPoint", RFC 6582 "recover"): SND.MAX when
    /// recovery or a timeout began, while SND.UNA has not passed it yet; `None` once it
    /// has. Sequence comparisons only hold within 2^31, so a value left behind would
    /// read as "ahead" again after 2 GiB; dropping it keeps the test meaningful at any
    /// distance.
    pub(super) recover: Option<SeqNum>,
    /// The tail loss probe in flight (RFC 8985 §7): TLP.end_seq and whether it resent
    /// old data.
    pub(super) tlp: Option<(SeqNum, bool)>,
    /// The furthest right edge the peer has offered since the flight began, as far as
    /// it matters: the edge when the flight began, raised to the edge offered before
    /// each window update that ended short of SND.MAX. A peer may have taken what was
    /// sent inside it even after its window shrank ([`Tcb::acceptable_seq`]).
    pub(super) edge: SeqNum,
}

/// What a connection without a flight block reads: nothing in flight.
static NO_FLIGHT: Flight = Flight::EMPTY;

impl Flight {
    /// Nothing in flight, nothing learnt.
    pub(crate) const EMPTY: Flight = Flight {
        board: Scoreboard::EMPTY,
        rtt_seq: None,
        recover: None,
        tlp: None,
        edge: SeqNum(0),
    };

    /// A flight starting at SND.UNA = `una`, the peer offering up to `edge`, with what
    /// RACK kept from the last one.
    fn resume(keep: RackKeep, una: SeqNum, edge: SeqNum) -> Flight {
        let mut flight = Flight::EMPTY;
        flight.board.resume_from(keep, una);
        flight.edge = edge;
        flight
    }

    /// Nothing in it but what [`RackKeep`] keeps.
    fn is_idle(&self) -> bool {
        self.board.is_empty()
            && self.rtt_seq.is_none()
            && self.recover.is_none()
            && self.tlp.is_none()
    }
}

impl Tcb {
    /// The flight block, or an empty one when the connection holds none.
    #[inline]
    pub(super) fn flight(&self) -> &Flight {
        match &self.flight {
            Some(f) => f,
            None => &NO_FLIGHT,
        }
    }

    /// The flight block to write, taken from the allocator if the connection holds
    /// none: the paths that send take it from the pool first ([`Tcb::start_flight`]),
    /// so this only allocates where a rare event writes to an empty flight.
    #[inline]
    pub(super) fn flight_mut(&mut self) -> &mut Flight {
        if self.flight.is_none() {
            self.flight = Some(self.new_flight());
        }
        self.flight.as_deref_mut().expect("just set")
    }

    /// Set one of the flight block's `Option` fields; clearing it needs no block.
    #[inline]
    fn set_in_flight<T>(&mut self, value: Option<T>, field: fn(&mut Flight) -> &mut Option<T>) {
        match (value, self.flight.as_deref_mut()) {
            (None, None) => {}
            (value, Some(flight)) => *field(flight) = value,
            (value, None) => *field(self.flight_mut()) = value,
        }
    }

    /// Set the recovery point.
    #[inline]
    pub(super) fn set_recover(&mut self, recover: Option<SeqNum>) {
        self.set_in_flight(recover, |f| &mut f.recover);
    }

    /// Set the tail loss probe in flight.
    #[inline]
    pub(super) fn set_tlp(&mut self, tlp: Option<(SeqNum, bool)>) {
        self.set_in_flight(tlp, |f| &mut f.tlp);
    }

    /// Set the segment being timed.
    #[inline]
    pub(super) fn set_rtt_seq(&mut self, timed: Option<(SeqNum, Instant)>) {
        self.set_in_flight(timed, |f| &mut f.rtt_seq);
    }

    /// The scoreboard to change where an empty one would not change (dropping,
    /// marking or clearing records): none without a flight block.
    #[inline]
    pub(super) fn board_if_any(&mut self) -> Option<&mut Scoreboard> {
        self.flight.as_deref_mut().map(|f| &mut f.board)
    }

    #[cold]
    #[inline(never)]
    fn new_flight(&self) -> Box<Flight> {
        Box::new(Flight::resume(self.rack, self.snd.una, self.wnd_end()))
    }

    /// Take a flight block from `pool` before something may be sent (a SYN, data, a
    /// FIN or a probe): what the sending paths record goes into it.
    #[inline]
    pub(super) fn start_flight(&mut self, pool: &mut RingPool) {
        if self.flight.is_none() && self.may_start_flight() {
            self.take_flight(pool);
        }
    }

    fn may_start_flight(&self) -> bool {
        self.pending.has(PendingOutput::PROBE)
            || self.snd.unsent_data() > 0
            || self.snd.fin_unsent()
    }

    #[cold]
    #[inline(never)]
    fn take_flight(&mut self, pool: &mut RingPool) {
        // Blocks in the pool are idle ([`Flight::is_idle`]): only RACK's state is
        // left to set.
        let mut flight = pool.take_flight();
        flight.board.resume_from(self.rack, self.snd.una);
        flight.edge = self.wnd_end();
        self.flight = Some(flight);
    }

    /// Give the flight block back to `pool` if nothing is in flight any more, keeping
    /// what RACK carries over to the next flight.
    pub(super) fn end_flight(&mut self, pool: &mut RingPool) {
        if self.flight.as_ref().is_some_and(|f| f.is_idle()) {
            let flight = self.flight.take().expect("just tested");
            self.rack = flight.board.keep();
            pool.give_flight(flight);
        }
    }

    /// Give the flight block back to `pool` whatever it holds (emptied: the pool
    /// keeps idle blocks only): the block is going away.
    pub(super) fn drop_flight(&mut self, pool: &mut RingPool) {
        if let Some(mut flight) = self.flight.take() {
            if !flight.is_idle() {
                *flight = Flight::EMPTY;
            }
            pool.give_flight(flight);
        }
    }
}
