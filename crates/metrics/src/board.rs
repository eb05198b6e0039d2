//! The board the workers publish to: one slot per worker, each holding the latest
//! [`Snapshot`] of that worker's counters.
//!
//! A worker fills its slot at a fixed interval through its [`Publisher`], checked in
//! its loop against the clock the loop already reads. The slot is a mutex: the worker
//! takes it once per interval, for as long as a swap of two snapshots takes, and the
//! exporter takes it for as long as a copy takes. The data path never touches it, and a
//! scrape can delay a worker by one copy at most, once per interval. Atomics per
//! counter would cost nothing more at the interval but would let a scrape see one
//! worker's counters from two different moments.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusty_stack::Stats;

use crate::report::{AppMetrics, Report};

/// Levels a worker reports beside its counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Live connections (every state but TIME-WAIT).
    pub connections: u64,
    /// TIME-WAIT entries (Rusty's engines only).
    pub time_wait: Option<u64>,
    /// Connections the application closed whose data or FIN is still unacknowledged
    /// (Rusty's engines only).
    pub orphans: Option<u64>,
}

impl Gauges {
    /// What Rusty's `engine` holds now.
    pub fn of_engine<D, H, C>(engine: &rusty_stack::Engine<D, H, C>) -> Gauges
    where
        D: rusty_stack::io::PacketIo,
        H: rusty_stack::Handler,
        C: rusty_stack::time::Clock,
    {
        Gauges {
            connections: engine.connection_count() as u64,
            time_wait: Some(engine.time_wait_count() as u64),
            orphans: Some(engine.orphan_count() as u64),
        }
    }
}

/// One worker's counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The stack's counters.
    pub stats: Stats,
    /// Connections held.
    pub gauges: Gauges,
    /// The application's counters.
    pub app: Report,
    /// When it was taken.
    pub taken: Option<Instant>,
    /// The process that took it, for a board that gathers the snapshots of several
    /// processes ([`Board::store`]); exported as the `pid` label.
    pub pid: Option<u32>,
}

struct Slot {
    name: String,
    latest: Mutex<Option<Snapshot>>,
}

/// Every worker's latest snapshot.
pub struct Board {
    slots: Vec<Slot>,
    interval: Duration,
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Board")
            .field("workers", &self.slots.len())
            .field("interval", &self.interval)
            .finish()
    }
}

impl Board {
    /// A board for workers with these names (`tap0-q0`, `kernel-1`), in worker order,
    /// published every `interval`.
    pub fn new(names: Vec<String>, interval: Duration) -> Arc<Board> {
        Arc::new(Board {
            slots: names
                .into_iter()
                .map(|name| Slot {
                    name,
                    latest: Mutex::new(None),
                })
                .collect(),
            interval,
        })
    }

    /// How often workers publish.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// How many workers publish here.
    pub fn workers(&self) -> usize {
        self.slots.len()
    }

    /// The publisher of worker `index`; its first snapshot is due at once.
    pub fn publisher(self: &Arc<Board>, index: usize) -> Publisher {
        Publisher {
            board: self.clone(),
            index,
            next: None,
            spare: Snapshot::default(),
        }
    }

    /// Put `snapshot` in worker `index`'s slot, or, given `None`, empty it (its
    /// worker is left out of the document): for a program whose workers publish
    /// elsewhere, such as other processes' shared memory, and which copies their
    /// snapshots here. An index beyond the board's workers is ignored.
    pub fn store(&self, index: usize, snapshot: Option<Snapshot>) {
        if let Some(slot) = self.slots.get(index) {
            *slot.latest.lock().unwrap_or_else(PoisonError::into_inner) = snapshot;
        }
    }

    /// Each worker's name and latest snapshot (`None` before its first).
    pub fn read(&self) -> Vec<(&str, Option<Snapshot>)> {
        self.slots
            .iter()
            .map(|s| {
                let latest = s.latest.lock().unwrap_or_else(PoisonError::into_inner);
                (s.name.as_str(), latest.clone())
            })
            .collect()
    }
}

/// How one worker publishes to the [`Board`]. Owned by the worker.
pub struct Publisher {
    board: Arc<Board>,
    index: usize,
    next: Option<Instant>,
    spare: Snapshot,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("index", &self.index)
            .field("next", &self.next)
            .finish()
    }
}

impl Publisher {
    /// Whether a snapshot is due at `now`.
    #[inline]
    pub fn due(&self, now: Instant) -> bool {
        self.next.is_none_or(|next| now >= next)
    }

    /// Publish the worker's counters as of `now`: `stats`, `gauges` and what `app`
    /// reports. The next is due one interval later.
    pub fn publish(&mut self, now: Instant, stats: &Stats, gauges: Gauges, app: &dyn AppMetrics) {
        self.next = Some(now + self.board.interval);
        let Some(slot) = self.board.slots.get(self.index) else {
            return;
        };
        let mut snap = std::mem::take(&mut self.spare);
        snap.stats.clone_from(stats);
        snap.gauges = gauges;
        snap.app.clear();
        app.report(&mut snap.app);
        snap.taken = Some(now);
        let mut latest = slot.latest.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = latest.replace(snap) {
            self.spare = old;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Requests(u64);
    impl AppMetrics for Requests {
        fn report(&self, out: &mut Report) {
            out.counter("app_requests_total", "Requests.", self.0);
        }
    }

    #[test]
    fn a_publisher_is_due_at_once_then_once_per_interval() {
        let board = Board::new(vec!["w0".into()], Duration::from_secs(1));
        let mut p = board.publisher(0);
        let t0 = Instant::now();
        assert!(p.due(t0));
        assert_eq!(board.read()[0].1, None, "nothing before the first");
        p.publish(t0, &Stats::default(), Gauges::default(), &Requests(1));
        assert!(!p.due(t0 + Duration::from_millis(999)));
        assert!(p.due(t0 + Duration::from_secs(1)));
        let s = Stats {
            frames_in: 7,
            ..Stats::default()
        };
        let gauges = Gauges {
            connections: 3,
            ..Gauges::default()
        };
        p.publish(t0 + Duration::from_secs(1), &s, gauges, &Requests(5));
        let read = board.read();
        let snap = read[0].1.as_ref().unwrap();
        assert_eq!(read[0].0, "w0");
        assert_eq!(snap.stats.frames_in, 7);
        assert_eq!(snap.gauges.connections, 3);
        assert_eq!(snap.app.samples().len(), 1, "the old report was cleared");
        assert_eq!(snap.app.samples()[0].value, 5);
    }
}
