//! Micro-benchmarks of the stack's hot small pieces, one criterion group each:
//!
//! - `checksum`: the Internet checksum of 64, 1,500 and 65,536 bytes, the stack's
//!   ([`checksum::checksum`], the pieces folded apart as `finish(combine(pseudo,
//!   sum(data)))`, and the engine's TCP path, pseudo-header and bytes in one
//!   [`checksum::Wide`] folded once) against a plain reference loop written here (16-bit big-endian words added into a
//!   `u64`, then folded). Throughput in bytes, so criterion shows bytes/s of both.
//! - `toeplitz`: [`Toeplitz::hash`] of the 12-byte IPv4/TCP input with the Microsoft key,
//!   and [`RssConfig::pick_local_port`] finding a port whose return flow lands on a given
//!   queue.
//! - `timer_wheel`: schedule, (lazy) cancel and expire of N timers in the engine's wheel
//!   (1 ms ticks, 1,024 slots), monomorphized for an item of the engine's size. The
//!   wheel is crate-private in `rusty-stack`; this benchmark reaches it, and the flow
//!   table below, through the stack's `internals` feature.
//! - `flow_lookup`: the engine's table of connections by flow (`Flows`: the key as one
//!   word under `FlowHash`, a folded multiply, to a `u32` slot, with its per-destination
//!   port counts). Hits and misses in tables of 1, 1,000 and 100,000 flows, probing in a
//!   shuffled order so the large table is not read from cache alone. Lookups run back to back and do not
//!   depend on each other, so the core overlaps their cache misses; in the engine each
//!   one sits among a frame's other work, which can make a miss to memory cost more.
//! - `segment`: [`Segment::parse`] of a data segment carrying timestamps and three SACK
//!   blocks (with the checksum checked in software, and with it verified by the device),
//!   and [`TxSegment::write_header`] building such a header (with `header_len`, which the
//!   engine computes for every frame too).
//!
//! Inputs go through `black_box` and results come back out of the timed closures, so the
//! compiler can neither precompute nor discard the work; set-up the real path does once
//! (the Toeplitz tables, a filled table) is outside the timing, work it does per packet is
//! inside.
//!
//! `cargo bench --bench micro` (a group: `cargo bench --bench micro -- checksum`).

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rusty_stack::checksum;
use rusty_stack::internals::Rng;
use rusty_stack::internals::SeqNum;
use rusty_stack::internals::{self, Segment, TxSegment};
use rusty_stack::rss::{self, RssConfig, Toeplitz, MICROSOFT_RSS_KEY};

use rusty_stack::internals::TimerWheel;
use rusty_stack::time::Instant;

// ---------------------------------------------------------------------------------------
// checksum

/// The textbook checksum (RFC 1071 §4.1): big-endian 16-bit words added into a wide
/// accumulator, an odd last byte padded with zero, carries folded at the end.
fn reference_checksum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

fn bench_checksum(c: &mut Criterion) {
    let mut g = c.benchmark_group("checksum");
    let mut rng = Rng::new(0x5eed_c0de);
    let pseudo =
        internals::pseudo_header_sum(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 1500);
    for len in [64usize, 1500, 65536] {
        let data = rng.bytes(len);
        // Both sides compute the same value, or the comparison would mean nothing.
        assert_eq!(checksum::checksum(&data), reference_checksum(&data));
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("rusty", len), &data, |b, d| {
            b.iter(|| checksum::checksum(black_box(d)))
        });
        g.bench_with_input(BenchmarkId::new("rusty_pseudo", len), &data, |b, d| {
            b.iter(|| {
                checksum::finish(checksum::combine(
                    black_box(pseudo),
                    checksum::sum(black_box(d)),
                ))
            })
        });
        // What the engine's frame writer and parser now do: the pseudo-header and the
        // bytes in one accumulator, folded once.
        let (src, dst) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        let wide = |d: &[u8]| {
            internals::Wide::pseudo_v4(src, dst, 6, d.len() as u16)
                .add_bytes(d)
                .checksum_bytes()
        };
        let pseudo_len =
            internals::pseudo_header_sum(Ipv4Addr::from(src), Ipv4Addr::from(dst), len as u16);
        assert_eq!(
            u16::from_be_bytes(wide(&data)),
            checksum::finish(checksum::combine(pseudo_len, checksum::sum(&data)))
        );
        g.bench_with_input(BenchmarkId::new("rusty_wide", len), &data, |b, d| {
            b.iter(|| wide(black_box(d)))
        });
        g.bench_with_input(BenchmarkId::new("reference", len), &data, |b, d| {
            b.iter(|| reference_checksum(black_box(d)))
        });
    }
    g.finish();
}

// ---------------------------------------------------------------------------------------
// toeplitz

fn bench_toeplitz(c: &mut Criterion) {
    let mut g = c.benchmark_group("toeplitz");
    // The tables are built once per key (the engine and drivers cache them).
    let hasher = Toeplitz::new(&MICROSOFT_RSS_KEY);
    let input = rss::ipv4_tcp_input(
        Ipv4Addr::new(66, 9, 149, 187),
        Ipv4Addr::new(161, 142, 100, 80),
        2794,
        1766,
    );
    g.bench_function("hash_ipv4_tcp", |b| {
        b.iter(|| hasher.hash(black_box(&input)))
    });

    // Two queues, as on this two-core machine: about every second port qualifies. The
    // start port moves on every call, so the average covers where the search begins.
    let config = RssConfig::symmetric_default(2);
    let local = Ipv4Addr::new(10, 0, 0, 1);
    let remote = Ipv4Addr::new(10, 0, 0, 2);
    let mut start: u16 = 32768;
    g.bench_function("pick_local_port", |b| {
        b.iter(|| {
            start = if start >= 60_999 { 32768 } else { start + 7 };
            config.pick_local_port(
                black_box(local),
                black_box(remote),
                black_box(80),
                black_box(1),
                32768..=60999,
                black_box(start),
                |port| black_box(port) != 0,
            )
        })
    });
    g.finish();
}

// ---------------------------------------------------------------------------------------
// timer_wheel

/// An item the size of the engine's (a connection id and the deadline it was armed for).
#[derive(Debug, Clone, Copy)]
struct Item {
    conn: u64,
    at: Instant,
}

/// The engine's wheel: 1 ms ticks, 1,024 slots.
fn engine_wheel(now: Instant) -> TimerWheel<Item> {
    TimerWheel::new(now, Duration::from_millis(1), 1024)
}

/// `n` deadlines spread over 1..=500 ms after `now` (delayed ACKs, RTOs, probes: within
/// one revolution, as the wheel is sized for).
fn deadlines(rng: &mut Rng, now: Instant, n: usize) -> Vec<Item> {
    (0..n as u64)
        .map(|conn| Item {
            conn,
            at: now + Duration::from_micros(1_000 + rng.next_u64() % 499_000),
        })
        .collect()
}

/// Runs `iters` rounds of: `schedule` N items, then `expire` them all, timing only what
/// `timed` selects. The same wheel and output vector are kept across rounds, so their
/// storage is warm as in a running engine ("scheduling allocates nothing in steady
/// state").
fn wheel_rounds(
    n: usize,
    iters: u64,
    mut round: impl FnMut(&mut TimerWheel<Item>, &[Item], Instant, &mut Vec<Item>) -> Duration,
) -> Duration {
    let mut rng = Rng::new(0x0071_31e5);
    let mut now = Instant::from_millis(1_000);
    let mut wheel = engine_wheel(now);
    let mut out = Vec::with_capacity(n);
    let mut total = Duration::ZERO;
    // One untimed round first, to size the slots.
    for i in 0..=iters {
        let items = deadlines(&mut rng, now, n);
        let t = round(&mut wheel, &items, now, &mut out);
        if i > 0 {
            total += t;
        }
        assert_eq!(out.len(), n, "every timer fired once");
        out.clear();
        now += Duration::from_millis(600);
    }
    total
}

fn bench_timer_wheel(c: &mut Criterion) {
    let mut g = c.benchmark_group("timer_wheel");
    for n in [1_000usize, 100_000] {
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new("schedule", n), |b| {
            b.iter_custom(|iters| {
                wheel_rounds(n, iters, |wheel, items, now, out| {
                    let t = std::time::Instant::now();
                    for item in black_box(items) {
                        wheel.schedule(item.at, *item);
                    }
                    let elapsed = t.elapsed();
                    black_box(wheel.next_deadline());
                    wheel.expire(now + Duration::from_millis(500), out);
                    elapsed
                })
            })
        });
        g.bench_function(BenchmarkId::new("expire", n), |b| {
            b.iter_custom(|iters| {
                wheel_rounds(n, iters, |wheel, items, now, out| {
                    for item in items {
                        wheel.schedule(item.at, *item);
                    }
                    let t = std::time::Instant::now();
                    wheel.expire(black_box(now + Duration::from_millis(500)), out);
                    black_box(&out);
                    t.elapsed()
                })
            })
        });
        // The wheel has no cancel (see timer.rs): the owner forgets its deadline, and the
        // stale item is dropped when it comes back. So a cancel costs the clearing, then
        // its share of the expire that hands the stale items back and of the owner's check
        // (as in the engine's `run_timers`), all timed here.
        let mut armed: Vec<Option<Instant>> = vec![None; n];
        g.bench_function(BenchmarkId::new("cancel_lazy", n), |b| {
            b.iter_custom(|iters| {
                wheel_rounds(n, iters, |wheel, items, now, out| {
                    for item in items {
                        wheel.schedule(item.at, *item);
                        armed[item.conn as usize] = Some(item.at);
                    }
                    let t = std::time::Instant::now();
                    for item in black_box(items) {
                        armed[item.conn as usize] = None;
                    }
                    wheel.expire(black_box(now + Duration::from_millis(500)), out);
                    let live = out
                        .iter()
                        .filter(|i| armed[i.conn as usize] == Some(i.at))
                        .count();
                    black_box(live);
                    t.elapsed()
                })
            })
        });
    }
    g.finish();
}

// ---------------------------------------------------------------------------------------
// flow_lookup

use rusty_stack::internals::{Flow, FlowKey, Flows};

/// Probes cycled through by a lookup benchmark: at least 1,024, so that a one-entry
/// table's misses still vary.
const MIN_PROBES: usize = 1024;

fn bench_flow_lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("flow_lookup");
    for n in [1usize, 1_000, 100_000] {
        let mut rng = Rng::new(0xf10e ^ n as u64);
        // Clients spread over a /16, ephemeral ports, all to one listening port.
        let key = |rng: &mut Rng| {
            FlowKey::new(
                Ipv4Addr::from(0x0a00_0000 | (rng.next_u64() as u32 & 0xffff)).into(),
                32768 + (rng.next_u64() % 28232) as u16,
                80,
                0,
            )
        };
        let mut flows = Flows::new(n, 0, 32768..=60999);
        let mut hits: Vec<FlowKey> = Vec::with_capacity(n);
        while hits.len() < n {
            let k = key(&mut rng);
            if !flows.contains_key(&k) {
                flows.insert(k, Flow::Conn(hits.len() as u32));
                hits.push(k);
            }
        }
        while hits.len() < MIN_PROBES {
            hits.extend_from_within(..n.min(MIN_PROBES - hits.len()));
        }
        rng.shuffle(&mut hits);
        let mut misses = Vec::with_capacity(hits.len());
        while misses.len() < hits.len() {
            let k = key(&mut rng);
            if !flows.contains_key(&k) {
                misses.push(k);
            }
        }
        for (name, probes) in [("hit", &hits), ("miss", &misses)] {
            g.bench_function(BenchmarkId::new(name, n), |b| {
                let mut i = 0;
                b.iter(|| {
                    i = if i + 1 == probes.len() { 0 } else { i + 1 };
                    flows.get(black_box(&probes[i]))
                })
            });
        }
    }
    g.finish();
}

// ---------------------------------------------------------------------------------------
// segment

/// A data segment with ACK and PSH, timestamps and three SACK blocks: 60-byte header,
/// the longest options allow.
fn data_segment() -> TxSegment {
    TxSegment {
        seq: SeqNum(0x1234_5678),
        ack: Some(SeqNum(0x9abc_def0)),
        psh: true,
        window: 501,
        timestamp: Some((0x0102_0304, 0x0506_0708)),
        sack: [
            Some((0x9abc_e000, 0x9abc_e5a8)),
            Some((0x9abc_f000, 0x9abc_f5a8)),
            Some((0x9abd_0000, 0x9abd_05a8)),
        ],
        payload_len: 1420,
        ..Default::default()
    }
}

fn bench_segment(c: &mut Criterion) {
    let mut g = c.benchmark_group("segment");
    let (src, dst) = (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1));
    let tx = data_segment();
    let hl = tx.header_len();
    let mut wire = vec![0u8; hl + tx.payload_len];
    tx.write_header(&mut wire[..hl], 44_321, 80);
    let body = Rng::new(0xda7a).bytes(tx.payload_len);
    wire[hl..].copy_from_slice(&body);
    let pseudo = internals::pseudo_header_sum(src, dst, wire.len() as u16);
    let c_sum = checksum::finish(checksum::combine(pseudo, checksum::sum(&wire)));
    let off = internals::CHECKSUM_OFFSET;
    wire[off..off + 2].copy_from_slice(&c_sum.to_be_bytes());
    let (seg, payload) = Segment::parse(&wire, src, dst, false).expect("the segment parses");
    assert_eq!((seg.sack, payload.len()), (tx.sack, tx.payload_len));

    for (name, verified) in [("parse_sw_checksum", false), ("parse_hw_checksum", true)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                Segment::parse(
                    black_box(&wire),
                    black_box(src),
                    black_box(dst),
                    black_box(verified),
                )
                .map(|(seg, payload)| (seg, payload.len()))
            })
        });
    }
    let mut buf = [0u8; internals::MAX_HEADER_LEN];
    g.bench_function("write_header", |b| {
        b.iter(|| {
            let seg = black_box(&tx);
            let hl = seg.header_len();
            seg.write_header(&mut buf[..hl], black_box(80), black_box(44_321));
            black_box(&buf);
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_checksum,
    bench_toeplitz,
    bench_timer_wheel,
    bench_flow_lookup,
    bench_segment
);
criterion_main!(benches);
