//! Orphans: connections the application has closed but whose FIN or data the peer has
//! not acknowledged yet (FIN-WAIT-1/2, CLOSING, LAST-ACK). Each is bounded in time by
//! its state machine (`TcpConfig::orphan_retries`, `orphan_timeout`); here the engine
//! bounds their number (`EngineConfig::max_orphans`): past it the oldest is reset, as
//! Linux does past tcp_max_orphans.
//!
//! A queue of ids, oldest first. Connections that ended are not looked for: their ids
//! go stale (the slot's generation moves on) and are skipped when met, and dropped in
//! one pass once they outnumber the live ones, so every operation is O(1) amortised.

use std::collections::VecDeque;

use super::Engine;
use crate::app::{CloseReason, ConnId, Handler};
use crate::io::PacketIo;
use crate::tcp::tcb::RxOutcome;
use crate::time::Clock;

/// The engine's orphans, oldest first.
#[derive(Default)]
pub(super) struct Orphans {
    queue: VecDeque<ConnId>,
    /// Blocks marked as orphans and still in the table.
    live: usize,
}

impl Orphans {
    /// An orphan's block leaves the table.
    pub(super) fn released(&mut self) {
        self.live -= 1;
    }

    /// Orphans in the table.
    pub(super) fn len(&self) -> usize {
        self.live
    }
}

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    /// The connection in slot `index` has just become an orphan: count it, and reset
    /// the oldest orphans while there are more than `max_orphans`.
    pub(super) fn adopt_orphan(&mut self, index: usize) {
        let Some(id) = self.app.id(index) else {
            return;
        };
        self.app[index].orphan = true;
        self.orphans.live += 1;
        self.orphans.queue.push_back(id);
        while self.orphans.live > self.cfg.max_orphans {
            let Some(oldest) = self.orphans.queue.pop_front() else {
                break;
            };
            let Some(i) = self.app.index_of(oldest) else {
                continue;
            };
            let block = &mut self.app[i];
            if !block.orphan {
                continue;
            }
            block.orphan = false;
            self.orphans.live -= 1;
            block.tcb.reset(CloseReason::Aborted);
            self.stats.orphans_reset += 1;
            self.dispatch(i, RxOutcome::default(), &[]);
        }
        if self.orphans.queue.len() > 2 * self.orphans.live + 64 {
            let app = &self.app;
            self.orphans
                .queue
                .retain(|id| app.index_of(*id).is_some_and(|i| app[i].orphan));
        }
    }
}
