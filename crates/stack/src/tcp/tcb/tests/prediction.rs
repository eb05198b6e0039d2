//! Header prediction (`tcb/fast.rs`) changes no outcome: random conversations between
//! two connections, over a lossy, duplicating, reordering and delaying wire, run once
//! with it on and once with it off, and every output (segments, receive outcomes,
//! events, deadlines) and every part of both connections' state after each step must
//! be the same; with it on, the predicted path must have been taken.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use super::{Opening, Tcb, TcbLimits};
use crate::rng::Rng;
use crate::tcp::config::{CongestionAlgorithm, TcpConfig};
use crate::tcp::pool::{MemoryBudget, RingPool};
use crate::tcp::segment::{Flags, Segment, TxSegment};
use crate::tcp::seq::SeqNum;
use crate::tcp::tcb::fast::PREDICTED;
use crate::tcp::tcb::{ConnFlags, PendingOutput};
use crate::time::Instant;

impl Tcb {
    /// Every part of the block's state as text, to compare two blocks which should
    /// have taken the same steps.
    fn fingerprint(&self) -> String {
        let s = &self.snd;
        let r = &self.rcv;
        let rec = &self.recovery;
        let p = &self.pending;
        let f = self.flight();
        format!(
            "{:?} snd[iss {:?} una {:?} nxt {:?} max {:?} wnd {} wl1 {:?} wl2 {:?} max_wnd {} \
             ws {} mss {} tso {} buf {:?} syn_acked {} fin_q {} fin {:?} pp {} pb {} sp {} \
             stall {:?}] rcv[irs {:?} nxt {:?} adv {:?} ws {} las {:?} buf {:?} fin {:?} \
             closed {} du {:?} mss {} unacked {} offer {}] rec[dup {} in {} recover {:?} \
             retries {} rescued {} tlp {:?} probes {} cold {:?}] pend[{} {} {} {} {} {:?} \
             {:?}] timers {:?} rtt {:?} rtt_seq {:?} cc {:?} board {:?} cwl {} ls {:?} \
             lr {:?} ln {:?} st {} ka {} ut {:?} lia {:?} ts {:?} sack {} ws {} ao {} ev {:?} ww {}",
            self.state,
            s.iss,
            s.una,
            s.nxt,
            s.max,
            s.wnd,
            s.wl1,
            s.wl2,
            s.max_wnd,
            s.wscale,
            s.mss,
            s.tso_max,
            (s.buf.len(), s.buf.space()),
            s.syn_acked,
            s.fin_queued,
            s.fin,
            s.persist_probes,
            s.persist_backoff,
            s.stalled_probes,
            s.stall_from,
            r.irs,
            r.nxt,
            r.adv,
            r.wscale,
            r.last_ack_sent,
            (
                r.buf.readable_len(),
                r.buf.window(),
                r.buf.capacity(),
                r.buf.has_out_of_order(),
                r.buf.readable().first(),
                {
                    let mut ranges = [(0u32, 0u32); 3];
                    let n = r.buf.sack_ranges(&mut ranges);
                    (n, ranges)
                },
            ),
            r.fin,
            r.closed,
            r.discard_until,
            r.mss,
            r.unacked_segs,
            r.offer,
            rec.dupacks,
            rec.in_recovery,
            f.recover,
            rec.retries,
            rec.rescued,
            f.tlp,
            rec.probes,
            rec.cold,
            p.has(PendingOutput::SYN),
            p.has(PendingOutput::ACK_NOW),
            p.has(PendingOutput::PROBE),
            p.has(PendingOutput::KEEPALIVE_PROBE),
            p.has(PendingOutput::TLP),
            self.timers.extra().and_then(|r| r.dsack),
            self.timers.extra().and_then(|r| r.rst),
            self.timers,
            self.rtt,
            f.rtt_seq,
            self.cc,
            (self.flight.is_some(), &f.board, self.rack),
            self.cwnd_limited,
            self.last_send,
            self.last_recv,
            self.last_now,
            self.flags.has(ConnFlags::SYN_TIMED),
            self.keepalive_sent,
            self.user_timeout(),
            self.last_invalid_ack(),
            self.ts,
            self.flags.has(ConnFlags::SACK_OK),
            self.flags.has(ConnFlags::WS_OK),
            self.flags.has(ConnFlags::ACTIVE_OPEN),
            self.events,
            self.want_writable,
        )
    }
}

const A: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    Ipv4Addr::new(10, 0, 0, 1),
    40000,
));
const B: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 80));

/// `percent` in a hundred.
fn chance(rng: &mut Rng, percent: u64) -> bool {
    rng.below(100) < percent
}

/// What a seed says about the conversation.
struct Knobs {
    cfg_a: TcpConfig,
    cfg_b: TcpConfig,
    budget: Option<MemoryBudget>,
    loss: u64,
    dup: u64,
    reorder: u64,
    steps: usize,
}

fn tcp_config(rng: &mut Rng) -> TcpConfig {
    let buffers = [2048, 4096, 16 * 1024, 64 * 1024, 256 * 1024];
    TcpConfig {
        send_buffer: buffers[rng.below(5) as usize],
        recv_buffer: buffers[rng.below(5) as usize],
        window_scaling: chance(rng, 80),
        timestamps: chance(rng, 80),
        sack: chance(rng, 80),
        congestion_control: if chance(rng, 50) {
            CongestionAlgorithm::Cubic
        } else {
            CongestionAlgorithm::NewReno
        },
        max_retries: 50,
        ..TcpConfig::default()
    }
}

fn knobs(seed: u64) -> Knobs {
    let mut rng = Rng::new(seed);
    Knobs {
        cfg_a: tcp_config(&mut rng),
        cfg_b: tcp_config(&mut rng),
        budget: chance(&mut rng, 20).then_some(MemoryBudget {
            low: 4096,
            pressure: 8192,
            limit: 16384,
        }),
        loss: [0, 0, 1, 5, 15][rng.below(5) as usize],
        dup: [0, 0, 2, 10][rng.below(4) as usize],
        reorder: [0, 0, 5, 30][rng.below(4) as usize],
        steps: 500 + rng.below(4000) as usize,
    }
}

/// A segment on the wire: the receiver's view of a [`TxSegment`], and its payload.
struct Wire {
    at: Instant,
    seg: Segment,
    payload: Vec<u8>,
}

fn to_wire(tcb: &Tcb, tx: &TxSegment, from: SocketAddr, to: SocketAddr, at: Instant) -> Wire {
    let mut payload = vec![0; tx.payload_len];
    if !payload.is_empty() {
        tcb.write_payload(tx, &mut payload);
    }
    let sends_sack = !tx.sack_permitted && tx.ack.is_some();
    Wire {
        at,
        seg: Segment {
            src_port: from.port(),
            dst_port: to.port(),
            seq: tx.seq,
            ack: tx.ack.unwrap_or(SeqNum(0)),
            flags: Flags {
                syn: tx.syn,
                ack: tx.ack.is_some(),
                fin: tx.fin,
                rst: tx.rst,
                psh: tx.psh,
            },
            window: tx.window,
            mss: tx.mss,
            wscale: tx.wscale,
            sack_permitted: tx.sack_permitted,
            timestamp: tx.timestamp,
            sack: if sends_sack { tx.sack } else { [None; 3] },
            payload_len: tx.payload_len,
        },
        payload,
    }
}

/// One side of the conversation: its connection (once it exists), what it still has
/// to send, and the segments travelling towards it.
struct End {
    tcb: Option<Tcb>,
    to_send: usize,
    closed: bool,
    inbox: VecDeque<Wire>,
}

struct World {
    rng: Rng,
    knobs: Knobs,
    now: Instant,
    pool: RingPool,
    ends: [End; 2],
    limits: [Rc<TcbLimits>; 2],
    log: Vec<String>,
    /// Most bytes each side sends before it may close.
    transfer: u64,
}

impl World {
    /// A conversation in which each side sends fewer than `transfer` bytes, then may
    /// close.
    fn with_transfer(seed: u64, predict: bool, transfer: u64) -> World {
        let knobs = knobs(seed);
        let limits = |cfg: &TcpConfig| {
            let l = TcbLimits::new(cfg);
            Rc::new(if predict { l } else { l.without_prediction() })
        };
        let pool = match knobs.budget {
            Some(b) => RingPool::with_budget(1 << 20, b),
            None => RingPool::default(),
        };
        let end = || End {
            tcb: None,
            to_send: 0,
            closed: false,
            inbox: VecDeque::new(),
        };
        World {
            rng: Rng::new(seed ^ 0xfeed),
            limits: [limits(&knobs.cfg_a), limits(&knobs.cfg_b)],
            knobs,
            now: Instant::from_millis(1),
            pool,
            ends: [end(), end()],
            log: Vec::new(),
            transfer,
        }
    }

    fn addrs(side: usize) -> (SocketAddr, SocketAddr) {
        if side == 0 {
            (A, B)
        } else {
            (B, A)
        }
    }

    fn opening(&self, side: usize) -> Opening<'_> {
        Opening {
            iss: SeqNum(if side == 0 { 0xffff_f000 } else { 77_000 }),
            ts_offset: if side == 0 { 12345 } else { 0xffff_0000 },
            our_mss: [1460, 536][side],
            now: self.now,
            cfg: if side == 0 {
                &self.knobs.cfg_a
            } else {
                &self.knobs.cfg_b
            },
            limits: Rc::clone(&self.limits[side]),
        }
    }

    /// Let `side` send what it wants; the wire loses, duplicates and delays it.
    fn transmit(&mut self, side: usize) {
        let Some(tcb) = self.ends[side].tcb.as_mut() else {
            return;
        };
        let mut out = Vec::new();
        tcb.poll_transmit(self.now, &mut out, &mut self.pool);
        let (from, to) = World::addrs(side);
        for tx in &out {
            self.log.push(format!("{side} tx {tx:?}"));
            let tcb = self.ends[side].tcb.as_ref().expect("a connection");
            if chance(&mut self.rng, self.knobs.loss) {
                continue;
            }
            let copies = 1 + usize::from(chance(&mut self.rng, self.knobs.dup));
            for _ in 0..copies {
                let delay = Duration::from_micros(50 + self.rng.below(2000));
                let w = to_wire(tcb, tx, from, to, self.now + delay);
                let inbox = &mut self.ends[1 - side].inbox;
                if chance(&mut self.rng, self.knobs.reorder) && !inbox.is_empty() {
                    let i = self.rng.below(inbox.len() as u64) as usize;
                    inbox.insert(i, w);
                } else {
                    inbox.push_back(w);
                }
            }
        }
        self.settle(side);
    }

    /// Log what `side` shows to the outside after a step.
    fn settle(&mut self, side: usize) {
        let Some(tcb) = self.ends[side].tcb.as_mut() else {
            return;
        };
        let ev = tcb.take_events();
        self.log.push(format!(
            "{side} ev {ev:?} deadline {:?}",
            tcb.next_deadline()
        ));
        self.log.push(format!("{side} state {}", tcb.fingerprint()));
    }

    /// Deliver the next segment waiting for `side`, if it is due.
    fn deliver(&mut self, side: usize) {
        let due = self.ends[side]
            .inbox
            .front()
            .is_some_and(|w| w.at <= self.now);
        if !due {
            return;
        }
        let w = self.ends[side].inbox.pop_front().expect("a segment");
        if self.ends[side].tcb.is_none() {
            if side == 1 && w.seg.flags.syn && !w.seg.flags.ack {
                let tcb = Tcb::accept_syn(&self.opening(1), &w.seg);
                self.ends[1].tcb = Some(tcb);
                self.transmit(1);
            }
            return;
        }
        let tcb = self.ends[side].tcb.as_mut().expect("a connection");
        let out = tcb.on_segment(self.now, &w.seg, &w.payload, &mut self.pool);
        self.log.push(format!("{side} rx {:?} -> {out:?}", w.seg));
        if let Some((a, b)) = out.deliver {
            // The application takes some of it and leaves the rest.
            let n = b - a;
            let take = if chance(&mut self.rng, 70) {
                n
            } else {
                self.rng.below(n as u64 + 1) as usize
            };
            tcb.keep_unconsumed(&w.payload[a + take..b], &mut self.pool);
        }
        self.transmit(side);
    }

    fn app(&mut self, side: usize) {
        let end = &mut self.ends[side];
        let Some(tcb) = end.tcb.as_mut() else {
            return;
        };
        match self.rng.below(4) {
            0 | 1 if end.to_send > 0 => {
                let len = end.to_send.min(1 + self.rng.below(20_000) as usize);
                let data: Vec<u8> = (0..len).map(|i| (i * 7 + side) as u8).collect();
                if let Ok(n) = tcb.send(&data, &mut self.pool) {
                    end.to_send -= n;
                }
            }
            2 => {
                let n = tcb.readable_len();
                let take = if chance(&mut self.rng, 50) {
                    n
                } else {
                    self.rng.below(n as u64 + 1) as usize
                };
                tcb.consume(take, &mut self.pool);
            }
            _ => {
                if end.to_send == 0 && !end.closed && chance(&mut self.rng, 5) {
                    end.closed = true;
                    tcb.close();
                }
            }
        }
        self.transmit(side);
    }

    fn run(mut self) -> (Vec<String>, [u64; 2]) {
        let hits = PREDICTED.with(|n| n.get());
        let a = Tcb::connect(&self.opening(0));
        self.ends[0].tcb = Some(a);
        self.ends[0].to_send = self.rng.below(self.transfer) as usize;
        self.ends[1].to_send = self.rng.below(self.transfer) as usize;
        self.transmit(0);
        for _ in 0..self.knobs.steps {
            let side = self.rng.below(2) as usize;
            match self.rng.below(10) {
                0..=4 => self.deliver(side),
                5..=7 => self.app(side),
                8 => {
                    self.now += Duration::from_micros(1 + self.rng.below(3000));
                }
                _ => {
                    // Jump to the next thing due: a segment or a timer.
                    let next = self
                        .ends
                        .iter()
                        .flat_map(|e| {
                            [
                                e.inbox.front().map(|w| w.at),
                                e.tcb.as_ref().and_then(|t| t.next_deadline()),
                            ]
                        })
                        .flatten()
                        .min();
                    if let Some(t) = next {
                        if t > self.now {
                            self.now = t;
                        }
                    }
                    for s in 0..2 {
                        if let Some(tcb) = self.ends[s].tcb.as_mut() {
                            tcb.on_timer(self.now);
                            self.transmit(s);
                        }
                    }
                }
            }
        }
        let after = PREDICTED.with(|n| n.get());
        (self.log, [after[0] - hits[0], after[1] - hits[1]])
    }
}

/// Runs `seeds` conversations of `transfer` bytes at most each way, with header
/// prediction and without, and fails at the first step where the two differ. Returns
/// how many segments the predicted path took, received and sent.
fn compare(seeds: std::ops::Range<u64>, transfer: u64) -> [u64; 2] {
    let mut taken = [0; 2];
    for seed in seeds {
        let (predicted, hits) = World::with_transfer(seed, true, transfer).run();
        let (general, none) = World::with_transfer(seed, false, transfer).run();
        assert_eq!(
            none, [0; 2],
            "seed {seed}: the predicted path ran while off"
        );
        taken = [taken[0] + hits[0], taken[1] + hits[1]];
        if let Some(i) =
            (0..predicted.len().max(general.len())).find(|&i| predicted.get(i) != general.get(i))
        {
            let from = i.saturating_sub(6);
            panic!(
                "seed {seed}: the paths differ at step {i}\nbefore:\n{}\npredicted: {:?}\n\
                 general: {:?}",
                predicted[from..i].join("\n"),
                predicted.get(i),
                general.get(i)
            );
        }
    }
    taken
}

#[test]
fn header_prediction_changes_nothing() {
    let [received, sent] = compare(0..400, 1 << 20);
    assert!(
        received > 10_000,
        "only {received} received segments predicted"
    );
    assert!(sent > 100_000, "only {sent} sent segments predicted");
}

/// As [`header_prediction_changes_nothing`], with short conversations that mostly end:
/// the handshake, a few segments and the closing FINs (the connection-rate workload's
/// shape).
#[test]
fn header_prediction_changes_nothing_in_short_conversations() {
    let [received, sent] = compare(0..400, 4096);
    assert!(
        received > 1_000,
        "only {received} received segments predicted"
    );
    assert!(sent > 10_000, "only {sent} sent segments predicted");
}
