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
use rusty_stack::io::{ChecksumRequest, MacAddr, PacketIo, TxFrame, TxMeta};
use rusty_testkit::rig;
use std::net::Ipv4Addr;

const BURST: usize = 32;
const MAC: [u8; 6] = [0x02, 0x1b, 0x21, 0, 0, 1];

/// A 64-byte-payload IPv4/TCP frame to the model's MAC, checksums right.
fn frame(port: u16) -> Vec<u8> {
    rig::tcp_frame(
        (MacAddr(MAC), MacAddr([0x02, 0, 0, 0, 0x99, 1])),
        (Ipv4Addr::new(10, 0, 9, 1), Ipv4Addr::new(10, 0, 9, 2)),
        (port, 80),
        &[0x5a; 64],
    )
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
