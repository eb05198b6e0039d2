//! Bursts of 32 frames through the ixgbe driver over the model of the 82599, on one
//! core, with the driver's cost measured apart from the model's (criterion).
//!
//! - `rx/driver`: the driver takes 32 written-back descriptors, lends the frames, drops
//!   them, refills the ring and moves the tail. The model wrote them beforehand, outside
//!   the timing.
//! - `rx/model`: the model receives 32 frames: RSS hash, RETA, descriptor fetch, copy,
//!   checksum checks, write-back.
//! - `tx/driver`: the driver hands out 32 buffers, the frames are filled, and it writes
//!   32 descriptors (checksum offload, so one context descriptor first). The doorbell,
//!   which makes the model send, is outside the timing.
//! - `tx/model`: the doorbell (TDT): the model reads the descriptors, gathers, inserts
//!   the checksums, puts 32 frames on its wire and writes DD back.
//!
//! `cargo bench --bench ixgbe_model`; frames per second are criterion's `thrpt`.

use std::cell::RefCell;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rusty_drivers_ixgbe::model::{Model, ModelConfig, Wire};
use rusty_drivers_ixgbe::{open, IxgbeConfig, IxgbeQueue, IxgbeRx};
use rusty_stack::io::{ChecksumRequest, PacketIo, TxFrame, TxMeta};

const BURST: usize = 32;
const MAC: [u8; 6] = [0x02, 0x1b, 0x21, 0, 0, 1];

/// A 64-byte-payload IPv4/TCP frame to the model's MAC, checksums right.
fn frame(port: u16) -> Vec<u8> {
    let mut f = MAC.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0x99, 1, 0x08, 0x00]);
    let total: u16 = 20 + 20 + 64;
    let mut ip = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        1,
        0x40,
        0,
        64,
        6,
        0,
        0,
    ];
    ip.extend_from_slice(&[10, 0, 9, 1, 10, 0, 9, 2]);
    let c = !fold(sum(&ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&port.to_be_bytes());
    tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18;
    tcp.extend_from_slice(&[0x5a; 64]);
    let mut pseudo = vec![10, 0, 9, 1, 10, 0, 9, 2, 0, 6, 0, tcp.len() as u8];
    pseudo.truncate(12);
    let c = !fold(sum(&pseudo) + sum(&tcp));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&tcp);
    f
}

fn sum(b: &[u8]) -> u32 {
    b.chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum()
}

fn fold(mut s: u32) -> u16 {
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

fn setup() -> (Model, Wire, IxgbeQueue) {
    let model = Model::new(ModelConfig::new(MAC, 64 << 20));
    let wire = model.wire();
    let q = open(model.device(), &IxgbeConfig::new(1))
        .expect("the model comes up")
        .remove(0);
    (model, wire, q)
}

fn bench(c: &mut Criterion) {
    let frames: Vec<Vec<u8>> = (0..BURST as u16).map(|i| frame(1000 + i)).collect();
    let mut g = c.benchmark_group("ixgbe_model");
    g.throughput(Throughput::Elements(BURST as u64));

    // The setup and timed closures of `iter_batched` both use the queue.
    let (_m, wire, q) = setup();
    let q = RefCell::new(q);
    let rx: RefCell<Vec<IxgbeRx>> = RefCell::new(Vec::with_capacity(BURST));
    let drain = || {
        q.borrow_mut().receive(&mut rx.borrow_mut(), usize::MAX);
        rx.borrow_mut().clear();
    };
    let deliver = || {
        for f in &frames {
            let _ = wire.deliver(f);
        }
    };
    g.bench_function("rx/driver", |b| {
        b.iter_batched(deliver, |()| drain(), BatchSize::PerIteration)
    });
    g.bench_function("rx/model", |b| {
        b.iter_batched(drain, |()| deliver(), BatchSize::PerIteration)
    });

    let (_m, wire, q) = setup();
    let q = RefCell::new(q);
    let sent = RefCell::new(Vec::with_capacity(BURST));
    let meta = TxMeta {
        checksum: Some(ChecksumRequest {
            start: 34,
            offset: 16,
        }),
        tso_mss: None,
    };
    let fill = || {
        let mut q = q.borrow_mut();
        let mut tx = Vec::with_capacity(BURST);
        for f in &frames {
            let mut b = q.alloc_tx(f.len()).expect("a transmit buffer");
            b.copy_from_slice(f);
            b.set_meta(meta);
            tx.push(b);
        }
        q.transmit(&mut tx);
    };
    let take = || {
        wire.take_transmitted(&mut sent.borrow_mut());
        sent.borrow_mut().clear();
    };
    g.bench_function("tx/driver", |b| {
        b.iter_batched(
            || {
                q.borrow_mut().flush();
                take();
            },
            |()| fill(),
            BatchSize::PerIteration,
        )
    });
    g.bench_function("tx/model", |b| {
        b.iter_batched(
            || {
                take();
                fill();
            },
            |()| q.borrow_mut().flush(),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
