//! Which connections go through which entry of the neighbour cache: the engine's side
//! of Neighbour Unreachability Detection (RFC 4861 §7.3, run in
//! [`crate::arp::cache`]).
//!
//! A connection's block keeps its next hop's MAC while the entry sends directly
//! (REACHABLE, DELAY, PROBE), so sending costs the cache nothing; when the entry stops
//! or starts to, or its MAC changes, the cache reports it and the connections through
//! it follow ([`Engine::apply_neighbour_changes`]). TCP's forward progress confirms the
//! neighbour: each connection notes when it last made some
//! ([`Tcb::last_progress`](crate::tcp::tcb::Tcb::last_progress)), and that note is read
//! here only when the entry's timer asks ([`Users::latest_progress`]), as Linux reads
//! `neigh->confirmed` only when the neighbour's timer runs.
//!
//! Each entry's list of connections is kept lazily, as the connections' slots in the
//! table: a connection is added when it is made and not removed when it ends. A slot
//! whose block is gone, or now goes through another entry, is skipped; a slot that a
//! new connection through the same entry took is listed twice, which changes nothing.
//! Whenever a list has grown to twice the connections the cache counts on the entry,
//! it is cut down to them, so a list stays within that.

use super::{Block, Engine};
use crate::app::{AppCore, Handler};
use crate::arp::{ArpCache, NeighbourId};
use crate::io::PacketIo;
use crate::time::{Clock, Instant};

/// The connections through each entry of the neighbour cache, by [`NeighbourId`]: their
/// slots in the connection table.
#[derive(Debug, Default)]
pub(super) struct Users {
    lists: Vec<Vec<u32>>,
}

impl Users {
    /// The connection in slot `index` goes through entry `n`, which `users`
    /// connections use now (it among them).
    pub(super) fn add<H: Handler>(
        &mut self,
        n: NeighbourId,
        index: usize,
        users: u32,
        app: &AppCore<H, Block>,
    ) {
        if self.lists.len() <= n.index() {
            self.lists.resize_with(n.index() + 1, Vec::new);
        }
        let list = &mut self.lists[n.index()];
        if list.len() >= 2 * users as usize + 8 {
            list.retain(|&i| through(app, i as usize, n).is_some());
            list.sort_unstable();
            list.dedup();
        }
        list.push(index as u32);
    }

    /// The connection `block` leaves the table at `now`: it no longer goes through its
    /// entry of `arp`, which keeps the connection's last progress as a confirmation.
    pub(super) fn detach(&mut self, arp: &mut ArpCache, block: &Block, now: Instant) {
        let n = block.neigh;
        if arp.detach(n, block.tcb.last_progress(), now) {
            // The last one: the entry may go, and its number be taken again.
            if let Some(list) = self.lists.get_mut(n.index()) {
                *list = Vec::new();
            }
        }
    }

    /// When a connection through entry `n` last made forward progress.
    pub(super) fn latest_progress<H: Handler>(
        &self,
        n: NeighbourId,
        app: &AppCore<H, Block>,
    ) -> Option<Instant> {
        self.lists
            .get(n.index())
            .into_iter()
            .flatten()
            .filter_map(|&i| through(app, i as usize, n)?.tcb.last_progress())
            .max()
    }

    /// Apply `f` to the block of every connection through entry `n`.
    fn for_each<H: Handler>(
        &self,
        n: NeighbourId,
        app: &mut AppCore<H, Block>,
        mut f: impl FnMut(&mut Block),
    ) {
        for &i in self.lists.get(n.index()).into_iter().flatten() {
            if let Some(block) = app.get_mut(i as usize).filter(|b| b.neigh == n) {
                f(block);
            }
        }
    }
}

/// The block in slot `index`, if its connection goes through entry `n`.
fn through<H: Handler>(app: &AppCore<H, Block>, index: usize, n: NeighbourId) -> Option<&Block> {
    app.get(index).filter(|b| b.neigh == n)
}

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    /// The connections through the entries whose sendable MAC changed take the new
    /// one (or none: their next frame goes through the cache).
    #[inline]
    pub(super) fn apply_neighbour_changes(&mut self) {
        if self.arp.has_changed() {
            self.move_neighbour_users();
        }
    }

    /// [`apply_neighbour_changes`](Self::apply_neighbour_changes) with changes to
    /// apply: rare, out of line.
    #[inline(never)]
    fn move_neighbour_users(&mut self) {
        let mut changed = std::mem::take(&mut self.neighbour_changes);
        self.arp.take_changed(&mut changed);
        for &n in &changed {
            let mac = self.arp.sendable(n);
            self.neighbour_users
                .for_each(n, &mut self.app, |block| block.mac = mac);
        }
        changed.clear();
        self.neighbour_changes = changed;
    }
}
