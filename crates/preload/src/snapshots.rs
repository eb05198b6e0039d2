//! The counters each process's stack publishes for `rusty-run --metrics`.
//!
//! The stacks run inside the program's processes, and the endpoint in `rusty-run`,
//! which stays beside the program as its parent (see `supervisor`). So each process
//! that runs a stack holds a slot in the table the program's processes share, and
//! once a second, from its engine turns, copies its engine's counters there as a row
//! of words ([`rusty_metrics::flat`]); `rusty-run` reads the slots.
//!
//! A slot is written by one process and read by another, with no lock between them:
//! each is a sequence lock ([`SeqCell`]). The writer makes the sequence odd, writes,
//! and makes it even again; a reader takes a copy between two reads of an even,
//! unchanged sequence, and tries again otherwise (a few times: a writer killed in the
//! middle leaves the sequence odd, and its slot is then not read until the slot's
//! next owner writes it whole).
//!
//! Who holds a slot is one word (the process's id and start time, which `exec` keeps
//! and a later process reusing the id does not have), taken with a compare-and-swap
//! and cleared as the process exits. The row names its process too, inside the
//! sequence lock, so a reader never takes one process's counters for another's, and
//! reports a row only while that process runs: the slot of a process killed before it
//! could clear it is not reported, and goes to the next process that needs one.
//!
//! Nothing is published unless a reader said it reads ([`Table::watch`]), with rows
//! laid out as this library lays them out.

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::time::Duration;

use rusty_metrics::flat::{self, WORDS};
use rusty_metrics::Gauges;
use rusty_stack::Stats;

use crate::heirs::Me;

/// Processes of the program that can publish at once.
pub(crate) const SLOTS: usize = 64;

/// How often a process publishes.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);

/// How many times a reader tries a slot that a writer keeps changing.
const READ_ATTEMPTS: usize = 16;

/// `N` words that one process writes and others read whole, under a sequence lock.
#[repr(C)]
pub(crate) struct SeqCell<const N: usize> {
    /// Odd while a writer is in the words; moves with every write.
    seq: AtomicU64,
    words: [AtomicU64; N],
}

impl<const N: usize> Default for SeqCell<N> {
    fn default() -> Self {
        SeqCell {
            seq: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl<const N: usize> SeqCell<N> {
    /// Replace the words. One writer at a time (the slot's owner, under its process
    /// lock); a sequence left odd by a writer that died is taken over as it is.
    pub(crate) fn write(&self, words: &[u64; N]) {
        let odd = self.seq.load(Ordering::Relaxed) | 1;
        self.seq.store(odd, Ordering::Relaxed);
        // The odd sequence is visible before any of the words below: a reader that
        // sees one of them sees the sequence move (its acquire fence pairs with this).
        fence(Ordering::Release);
        for (cell, &w) in self.words.iter().zip(words) {
            cell.store(w, Ordering::Relaxed);
        }
        self.seq.store(odd.wrapping_add(1), Ordering::Release);
    }

    /// A copy of the words as one write left them; `None` when writers kept changing
    /// them (or one died halfway) through every attempt.
    pub(crate) fn read(&self) -> Option<[u64; N]> {
        for _ in 0..READ_ATTEMPTS {
            let before = self.seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let words: [u64; N] = std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed));
            // Orders the loads above before the second read of the sequence: if one of
            // them saw a write under way, the sequence read below has moved.
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == before {
                return Some(words);
            }
        }
        None
    }
}

/// A slot's words: its process, when the row was taken, then the row.
const HEAD: usize = 2;
const ROW: usize = HEAD + WORDS;

/// One process's slot.
#[repr(C)]
#[derive(Default)]
struct Slot {
    /// Who holds it ([`owner_word`]); 0: free.
    owner: AtomicU64,
    /// [`owner_word`] of the process that wrote the row (0: none), the monotonic
    /// clock's nanoseconds when it was taken, and the row.
    cell: SeqCell<ROW>,
}

/// The slots, in the memory the program's processes share (`siblings::Mapped`).
#[repr(C)]
pub(crate) struct Table {
    /// The layout of the rows the reader expects ([`flat::layout`]); 0: nobody reads.
    reader: AtomicU64,
    slots: [Slot; SLOTS],
}

impl Default for Table {
    fn default() -> Table {
        Table {
            reader: AtomicU64::new(0),
            slots: std::array::from_fn(|_| Slot::default()),
        }
    }
}

/// A process as one word: its start time above its id (ids stay below 2^22, Linux's
/// `PID_MAX_LIMIT`). Never 0.
fn owner_word(me: Me) -> u64 {
    (me.started << 22) | u64::from(me.pid)
}

fn owner_of(word: u64) -> Me {
    Me {
        pid: (word & ((1 << 22) - 1)) as u32,
        started: word >> 22,
    }
}

/// One process's published counters, as a reader finds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Published {
    pub(crate) pid: u32,
    /// The monotonic clock's nanoseconds when they were taken.
    pub(crate) taken: u64,
    pub(crate) stats: Stats,
    pub(crate) gauges: Gauges,
}

impl Table {
    /// A reader reads the slots from now on: processes publish (rows laid out as
    /// this library lays them out).
    pub(crate) fn watch(&self) {
        self.reader.store(flat::layout(), Ordering::Release);
    }

    /// A slot for `me` to publish to, if a reader reads rows of this library's layout
    /// and a slot is free (or was `me`'s before an `exec`).
    pub(crate) fn publisher(&'static self, me: Me) -> Option<Publisher> {
        if self.reader.load(Ordering::Acquire) != flat::layout() {
            return None;
        }
        let owner = owner_word(me);
        let slot = self
            .slots
            .iter()
            .find(|s| s.owner.load(Ordering::Acquire) == owner)
            .or_else(|| self.claim(owner))
            .or_else(|| {
                self.free_the_departed();
                self.claim(owner)
            });
        let Some(slot) = slot else {
            log::warn!("no slot left to publish metrics in");
            return None;
        };
        Some(Publisher {
            slot,
            owner,
            next: 0,
            moved: [u64::MAX; 5],
        })
    }

    fn claim(&self, owner: u64) -> Option<&Slot> {
        self.slots.iter().find(|s| {
            s.owner
                .compare_exchange(0, owner, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// Free the slots of processes that ended without saying so (killed).
    fn free_the_departed(&self) {
        for slot in &self.slots {
            let owner = slot.owner.load(Ordering::Acquire);
            let me = owner_of(owner);
            if owner != 0 && !Me::alive(me.pid, me.started) {
                let _ = slot
                    .owner
                    .compare_exchange(owner, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }

    /// The counters in slot `index`, if a process that still runs published them.
    pub(crate) fn read(&self, index: usize) -> Option<Published> {
        let words = self.slots.get(index)?.cell.read()?;
        let (head, row) = words.split_at(HEAD);
        let [writer, taken] = [head[0], head[1]];
        if writer == 0 || taken == 0 {
            return None;
        }
        let me = owner_of(writer);
        if !Me::alive(me.pid, me.started) {
            return None;
        }
        let row: &[u64; WORDS] = row.try_into().ok()?;
        let (stats, gauges) = flat::from_words(row);
        Some(Published {
            pid: me.pid,
            taken,
            stats,
            gauges,
        })
    }
}

/// How one process publishes to its slot. Held by its `Process`, under its lock.
pub(crate) struct Publisher {
    slot: &'static Slot,
    owner: u64,
    /// When the next publication is due (monotonic nanoseconds).
    next: u64,
    /// What the last publication saw of the engine's activity ([`activity`]).
    moved: [u64; 5],
}

/// The counters that move when an engine does anything a reader would want to see
/// soon: frames in and out, and the connections it holds (TIME-WAIT entries expire
/// without a frame).
fn activity(stats: &Stats, gauges: Gauges) -> [u64; 5] {
    [
        stats.frames_in,
        stats.frames_out,
        gauges.connections,
        gauges.time_wait.unwrap_or(0),
        gauges.orphans.unwrap_or(0),
    ]
}

impl Publisher {
    /// Whether a publication is due at `now` (monotonic nanoseconds).
    pub(crate) fn due(&self, now: u64) -> bool {
        now >= self.next
    }

    /// Publish `stats` and `gauges` as of `now`; the next is due one interval later.
    pub(crate) fn publish(&mut self, now: u64, stats: &Stats, gauges: Gauges) {
        self.next = now.saturating_add(INTERVAL.as_nanos() as u64);
        self.moved = activity(stats, gauges);
        let mut words = [0u64; ROW];
        words[0] = self.owner;
        words[1] = now.max(1);
        words[HEAD..].copy_from_slice(&flat::to_words(stats, gauges));
        self.slot.cell.write(&words);
    }

    /// How long a process about to sleep may sleep before its next publication: the
    /// time until it is due (at `now()`, read only then) if the engine did something
    /// since the last one, so that what it did shows within an interval even if
    /// nothing wakes the process again; else no limit.
    pub(crate) fn sleep_limit(
        &self,
        stats: &Stats,
        gauges: Gauges,
        now: impl FnOnce() -> u64,
    ) -> Option<Duration> {
        (activity(stats, gauges) != self.moved)
            .then(|| Duration::from_nanos(self.next.saturating_sub(now())))
    }

    /// The process is ending: its row goes, then its hold on the slot.
    pub(crate) fn release(self) {
        self.slot.cell.write(&[0; ROW]);
        let _ =
            self.slot
                .owner
                .compare_exchange(self.owner, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;

    /// A writer that keeps writing rows whose words are all equal, and a reader that
    /// keeps reading: every row read is one the writer wrote whole.
    #[test]
    fn a_reader_never_sees_a_torn_write() {
        let cell: &'static SeqCell<ROW> = Box::leak(Box::default());
        let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let writer = std::thread::spawn(move || {
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                k += 1;
                cell.write(&[k; ROW]);
            }
            k
        });
        let (mut read, mut last) = (0u64, 0u64);
        let deadline = std::time::Instant::now() + Duration::from_millis(500);
        while std::time::Instant::now() < deadline {
            if let Some(words) = cell.read() {
                assert!(words.iter().all(|&w| w == words[0]), "torn: {words:?}");
                assert!(words[0] >= last, "went back from {last} to {}", words[0]);
                last = words[0];
                read += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let written = writer.join().unwrap();
        assert!(read > 0 && written > 0, "read {read}, written {written}");
    }

    /// A writer that died halfway leaves the sequence odd: the cell reads as nothing,
    /// until the next writer writes it whole.
    #[test]
    fn a_write_left_halfway_is_not_read() {
        let cell = SeqCell::<4>::default();
        cell.write(&[1, 2, 3, 4]);
        assert_eq!(cell.read(), Some([1, 2, 3, 4]));
        cell.seq.fetch_add(1, Ordering::Relaxed);
        cell.words[0].store(9, Ordering::Relaxed);
        assert_eq!(cell.read(), None);
        cell.write(&[5, 6, 7, 8]);
        assert_eq!(cell.read(), Some([5, 6, 7, 8]));
        assert_eq!(cell.seq.load(Ordering::Relaxed) % 2, 0);
    }

    fn stats(frames_in: u64) -> Stats {
        Stats {
            frames_in,
            conns_opened_passive: 3,
            ..Stats::default()
        }
    }

    const GAUGES: Gauges = Gauges {
        connections: 2,
        time_wait: Some(1),
        orphans: Some(0),
    };

    #[test]
    fn a_running_process_is_read_and_one_that_ended_is_not() {
        let table: &'static Table = Box::leak(Box::default());
        let me = Me::current();
        assert!(table.publisher(me).is_none(), "nobody reads yet");
        table.watch();
        let mut p = table.publisher(me).unwrap();
        assert!(table.read(0).is_none(), "nothing published yet");
        assert!(p.due(5));
        p.publish(5, &stats(7), GAUGES);
        assert!(!p.due(6) && p.due(5 + INTERVAL.as_nanos() as u64));
        let got = table.read(0).unwrap();
        assert_eq!((got.pid, got.taken), (me.pid, 5));
        assert_eq!((got.stats, got.gauges), (stats(7), GAUGES));
        // The same process after an exec (same id and start time) gets its slot back.
        let again = table.publisher(me).unwrap();
        assert!(std::ptr::eq(again.slot, p.slot));
        // A process that is gone: its row is not reported, and its slot is taken
        // when no other is free.
        let gone = Me {
            pid: (1 << 22) - 1,
            started: 1,
        };
        let mut dead = table.publisher(gone).unwrap();
        dead.publish(9, &stats(1), GAUGES);
        assert!(table.read(1).is_none());
        for _ in 2..SLOTS {
            assert!(table.claim(owner_word(Me { pid: 1, started: 0 })).is_some());
        }
        let other = Me {
            pid: me.pid,
            started: me.started + 1,
        };
        let taken_over = table.publisher(other).expect("the dead one's slot");
        assert!(std::ptr::eq(taken_over.slot, dead.slot));
        // An ending process takes its row with it.
        p.release();
        assert!(table.read(0).is_none());
        assert_eq!(table.slots[0].owner.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_process_that_did_something_wakes_to_publish_it() {
        let table: &'static Table = Box::leak(Box::default());
        table.watch();
        let mut p = table.publisher(Me::current()).unwrap();
        p.publish(100, &stats(7), GAUGES);
        let at = || 200;
        assert_eq!(p.sleep_limit(&stats(7), GAUGES, at), None, "idle");
        let limit = p.sleep_limit(&stats(8), GAUGES, at);
        assert_eq!(limit, Some(INTERVAL - Duration::from_nanos(100)));
        let fewer = Gauges {
            time_wait: Some(0),
            ..GAUGES
        };
        assert!(
            p.sleep_limit(&stats(7), fewer, at).is_some(),
            "TIME-WAIT expired"
        );
        p.release();
    }

    #[test]
    fn garbage_in_a_slot_is_never_a_panic() {
        let table: &'static Table = Box::leak(Box::default());
        for (i, slot) in table.slots.iter().enumerate() {
            let junk = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let words: [u64; ROW] = std::array::from_fn(|j| junk.rotate_left(j as u32));
            slot.cell.write(&words);
        }
        for i in 0..SLOTS + 2 {
            let _ = table.read(i);
        }
    }
}
