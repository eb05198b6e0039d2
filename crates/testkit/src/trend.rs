//! [`MemoryTrend`]: whether the memory a process holds keeps growing under a steady load.

use std::fmt::Write;
use std::time::Duration;

use crate::sim::SimPair;
use rusty_stack::Handler;

/// Bytes held, sampled over a run.
///
/// Tests and soak runs that put a server under steady load for a while (on virtual time
/// or real) take samples of the bytes it holds (the heap, from a counting global
/// allocator the test binary declares, or the resident set from `/proc`) and ask
/// whether the samples still rise once the load has warmed up: a leak, or memory kept
/// for reuse without a bound, keeps rising; caches and pools that fill to their bound
/// and stop do not.
#[derive(Debug, Clone, Default)]
pub struct MemoryTrend {
    samples: Vec<(Duration, i64)>,
}

impl MemoryTrend {
    /// No samples yet.
    pub fn new() -> MemoryTrend {
        MemoryTrend::default()
    }

    /// `live` bytes held at `at` into the run.
    pub fn record(&mut self, at: Duration, live: i64) {
        self.samples.push((at, live));
    }

    /// The samples, in the order recorded.
    pub fn samples(&self) -> &[(Duration, i64)] {
        &self.samples
    }

    /// Whether the heap stayed flat after `warm_up`: the samples taken after it are cut
    /// into an earlier and a later half (by time), and the later half's highest sample
    /// may exceed the earlier half's highest by at most `slack` bytes. A heap that keeps
    /// growing fails; one that grew to a bound during the warm-up and stayed there
    /// passes. `Err` says why, with every sample.
    pub fn check_flat(&self, warm_up: Duration, slack: u64) -> Result<(), String> {
        let after: Vec<_> = self.samples.iter().filter(|(t, _)| *t >= warm_up).collect();
        let (Some(first), Some(last)) = (after.first(), after.last()) else {
            return Err(format!("no samples after the warm-up ({warm_up:?})"));
        };
        let middle = first.0 + (last.0 - first.0) / 2;
        let peak = |earlier: bool| {
            after
                .iter()
                .filter(|(t, _)| (*t < middle) == earlier)
                .map(|&&(_, b)| b)
                .max()
        };
        let (Some(earlier), Some(later)) = (peak(true), peak(false)) else {
            return Err(format!(
                "too few samples after the warm-up:\n{}",
                self.table()
            ));
        };
        if later - earlier > slack as i64 {
            return Err(format!(
                "memory kept growing: {} bytes more at the end than in the first half \
                 after the warm-up ({slack} allowed)\n{}",
                later - earlier,
                self.table()
            ));
        }
        Ok(())
    }

    /// The samples as a table: time, live bytes.
    pub fn table(&self) -> String {
        let mut out = String::from("      time      bytes held\n");
        for (t, b) in &self.samples {
            let _ = writeln!(out, "{:>9.1}s {b:>15}", t.as_secs_f64());
        }
        out
    }
}

/// Run `net` for `samples` periods of `every` (virtual time), recording `live()` (the
/// heap bytes the process holds, from the test's counting allocator) after each.
pub fn heap_trend<HC: Handler, HS: Handler>(
    net: &mut SimPair<HC, HS>,
    every: Duration,
    samples: usize,
    live: impl Fn() -> i64,
) -> MemoryTrend {
    let start = net.now();
    let mut trend = MemoryTrend::new();
    for _ in 0..samples {
        net.run_until(every, |_| false);
        trend.record(net.now() - start, live());
    }
    trend
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trend(values: &[i64]) -> MemoryTrend {
        let mut t = MemoryTrend::new();
        for (i, &v) in values.iter().enumerate() {
            t.record(Duration::from_secs(10 * i as u64), v);
        }
        t
    }

    #[test]
    fn a_heap_that_fills_to_a_bound_during_warm_up_is_flat() {
        let t = trend(&[
            100, 5_000, 9_000, 10_000, 10_100, 9_900, 10_050, 10_000, 10_020,
        ]);
        assert_eq!(t.check_flat(Duration::from_secs(30), 100), Ok(()));
    }

    #[test]
    fn a_heap_that_keeps_growing_is_not() {
        let t = trend(&[
            100, 5_000, 9_000, 10_000, 11_000, 12_000, 13_000, 14_000, 15_000,
        ]);
        let err = t.check_flat(Duration::from_secs(30), 1_000).unwrap_err();
        assert!(err.contains("kept growing"), "{err}");
        // A slow leak still shows over the halves.
        let t = trend(&[0, 100, 200, 300, 400, 500, 600, 700, 800, 900]);
        assert!(t.check_flat(Duration::from_secs(0), 300).is_err());
    }

    #[test]
    fn too_few_samples_are_an_error() {
        assert!(trend(&[1, 2])
            .check_flat(Duration::from_secs(100), 0)
            .is_err());
        assert!(trend(&[1, 2, 3])
            .check_flat(Duration::from_secs(20), 0)
            .is_err());
    }
}
