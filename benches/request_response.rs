//! Request/response throughput of the whole stack on one thread: a client engine and a
//! server engine joined by the in-memory link exchange 64-byte requests and 64-byte
//! responses, with one request outstanding per connection, over K = 1 and K = 32
//! connections. Criterion reports time per request and requests per second (throughput
//! in elements). Two more cases put the simulator's fault injector (with no faults) on
//! the link, to show what that decorator costs.
//!
//! The workload lives in `support/rr.rs`, shared with `examples/request_response.rs`,
//! which `scripts/callgrind-rr.sh` runs under callgrind for instructions per request.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rusty::io::PacketIo;

#[path = "support/common.rs"]
mod common;
#[path = "support/rr.rs"]
mod rr;

use rr::{RrPair, RrServerSide};

/// An established pair and the round trips it completed beyond what was asked for.
///
/// With K connections, up to K round trips complete in one loop turn, so a run overshoots
/// its target by up to K - 1; those requests were timed already and count towards the
/// next sample, which keeps the total of requests and of time exact.
struct Timed<D: PacketIo, S> {
    pair: RrPair<D, S>,
    surplus: u64,
}

impl<D: PacketIo, S: RrServerSide> Timed<D, S> {
    fn new(pair: RrPair<D, S>) -> Timed<D, S> {
        Timed { pair, surplus: 0 }
    }

    /// Time `iters` round trips.
    fn time_requests(&mut self, iters: u64) -> Duration {
        let wanted = iters.saturating_sub(self.surplus);
        let start = Instant::now();
        let done = self.pair.run(wanted);
        let elapsed = start.elapsed();
        assert!(done >= wanted, "exchange stuck: {}", self.pair.describe());
        self.surplus = self.surplus + done - iters;
        elapsed
    }
}

fn request_response(c: &mut Criterion) {
    let mut group = c.benchmark_group("request_response_64B");
    group.throughput(Throughput::Elements(1));
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    for (family, name) in [
        (rr::Family::V4, "memory_link"),
        (rr::Family::V6, "memory_link_ipv6"),
    ] {
        for k in [1usize, 32] {
            let pair = RrPair::memory(k, rr::default_burst(), family)
                .unwrap_or_else(|e| panic!("K={k}: {e}"));
            let mut timed = Timed::new(pair);
            group.bench_function(BenchmarkId::new(name, format!("K={k}")), |b| {
                b.iter_custom(|iters| timed.time_requests(iters))
            });
            // A retransmission would mean the run measured timers, not the data path.
            assert_eq!(timed.pair.retransmissions(), 0, "{}", timed.pair.describe());
        }
    }
    for k in [1usize, 32] {
        let pair = RrPair::fault_injector(k, rr::default_burst(), rr::Family::V4)
            .unwrap_or_else(|e| panic!("K={k}: {e}"));
        let mut timed = Timed::new(pair);
        group.bench_function(
            BenchmarkId::new("fault_injector_link", format!("K={k}")),
            |b| b.iter_custom(|iters| timed.time_requests(iters)),
        );
    }
    group.finish();
}

criterion_group!(benches, request_response);
criterion_main!(benches);
