//! A worker's stack counters and gauges as a fixed row of words, for snapshots that
//! cross from one process to another through shared memory: `rusty-run`, whose
//! stacks run inside the program's processes, gathers them this way.
//!
//! The row is every field of [`Stats`] in the order the exporter lists them, the
//! drops by reason in [`DropReason::ALL`]'s order, then the gauges. Two builds agree
//! on the row when they agree on [`layout`], a hash of the names in it: a reader
//! whose layout differs from the writer's must not read the writer's rows.

use rusty_stack::stats::DropReason;
use rusty_stack::Stats;

use crate::board::Gauges;
use crate::render::FIELDS;

/// Words in a row: the fields of [`Stats`], the drop reasons, three gauges.
pub const WORDS: usize = FIELDS.len() + DropReason::COUNT + 3;

/// A gauge the worker does not have (`None`).
const ABSENT: u64 = u64::MAX;

/// The row for `stats` and `gauges`.
pub fn to_words(stats: &Stats, gauges: Gauges) -> [u64; WORDS] {
    let mut out = [0; WORDS];
    let (fields, rest) = out.split_at_mut(FIELDS.len());
    let (drops, levels) = rest.split_at_mut(DropReason::COUNT);
    for (w, f) in fields.iter_mut().zip(FIELDS) {
        *w = (f.get)(stats);
    }
    for (w, r) in drops.iter_mut().zip(DropReason::ALL) {
        *w = stats.dropped(r);
    }
    levels[0] = gauges.connections;
    levels[1] = gauges.time_wait.unwrap_or(ABSENT);
    levels[2] = gauges.orphans.unwrap_or(ABSENT);
    out
}

/// The counters and gauges in `words` (any words make some counters: a row read from
/// memory another process may have scribbled on never panics).
pub fn from_words(words: &[u64; WORDS]) -> (Stats, Gauges) {
    let mut stats = Stats::default();
    let (fields, rest) = words.split_at(FIELDS.len());
    let (drops, levels) = rest.split_at(DropReason::COUNT);
    for (&w, f) in fields.iter().zip(FIELDS) {
        (f.set)(&mut stats, w);
    }
    for (&w, r) in drops.iter().zip(DropReason::ALL) {
        stats.drops[r.index()] = w;
    }
    let level = |w: u64| (w != ABSENT).then_some(w);
    let gauges = Gauges {
        connections: levels[0],
        time_wait: level(levels[1]),
        orphans: level(levels[2]),
    };
    (stats, gauges)
}

/// The row's layout: a hash (64-bit FNV-1a) of the names of its words in order.
/// Never 0.
pub fn layout() -> u64 {
    let names = FIELDS
        .iter()
        .map(|f| f.field)
        .chain(DropReason::ALL.iter().map(|r| r.name()))
        .chain(["connections", "time_wait", "orphans"]);
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for name in names {
        for &b in name.as_bytes().iter().chain(b"\n") {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each word lands in a field of its own, and comes back from it.
    #[test]
    fn every_word_round_trips_through_its_own_field() {
        let mut words = [0u64; WORDS];
        for (i, w) in words.iter_mut().enumerate() {
            *w = i as u64 + 1;
        }
        let (stats, gauges) = from_words(&words);
        assert_eq!(to_words(&stats, gauges), words);
        assert_eq!(gauges.connections, WORDS as u64 - 2);
        assert_eq!(stats.frames_in, 1, "the first field is the first word");
        let absent = Gauges {
            connections: 3,
            time_wait: None,
            orphans: Some(0),
        };
        let (back, gauges) = from_words(&to_words(&Stats::default(), absent));
        assert_eq!((back, gauges), (Stats::default(), absent));
    }

    #[test]
    fn the_layout_names_the_row() {
        assert_eq!(layout(), layout());
        assert_ne!(layout(), 0);
        assert_eq!(WORDS, FIELDS.len() + DropReason::COUNT + 3);
    }
}
