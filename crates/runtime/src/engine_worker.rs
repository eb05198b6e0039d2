//! The body of a worker that runs Rusty's own stack: one engine over one packet-IO
//! queue, its handler built on the worker's own thread.

use std::time::{Duration, Instant as StdInstant};

use crate::{ControlMsg, LoopControl, Next, WorkerContext};
use rusty_metrics::{AppMetrics, Gauges};
use rusty_stack::app::Handler;
use rusty_stack::engine::{Engine, EngineConfig};
use rusty_stack::io::{Doorbell, PacketIo, Ringer};
use rusty_stack::time::{Clock, SystemClock};
use rusty_stack::Stats;

/// Longest a parked worker sleeps before it looks at its control channel again.
pub const MAX_PARK: Duration = Duration::from_millis(10);

/// A worker body: build the handler with `make_handler` on the worker's thread (so it
/// need not be `Send`), listen on `listen` (port, backlog), and run the engine loop
/// until the runtime stops it: busy-poll while there is traffic, park on the queue
/// after `ctx.spin()` of idleness until the next timer is due, pass learned ARP mappings
/// to siblings, and on a stop signal stop accepting and let connections finish within
/// the grace period.
///
/// On a link whose steering the stack cannot predict, it also hands the frames of
/// flows a sibling owns to that sibling and processes those handed to it. It then gives
/// its queue a [`Doorbell`] ([`PacketIo::set_doorbell`]) and its siblings a ringer for
/// it ([`ControlMsg::Doorbell`]), and rings a sibling's after handing it frames, so a
/// parked owner wakes at once instead of after up to [`MAX_PARK`]. A sibling whose
/// ringer has not arrived yet (they start in any order) is not rung; its park timeout
/// bounds the delay.
///
/// With a metrics board ([`RuntimeConfig::metrics`](crate::RuntimeConfig::metrics)) it
/// publishes the engine's counters, its connections, TIME-WAIT entries and orphans, and
/// what the handler reports, once per interval and once more when it ends.
pub fn engine_worker<D, H, F>(
    dev: D,
    cfg: EngineConfig,
    listen: Vec<(u16, usize)>,
    make_handler: F,
) -> impl FnOnce(WorkerContext) -> Stats + Send
where
    D: PacketIo + Send + 'static,
    H: Handler + AppMetrics,
    F: FnOnce(&WorkerContext) -> H + Send + 'static,
{
    move |mut ctx: WorkerContext| {
        let handler = make_handler(&ctx);
        let clock = SystemClock::new();
        let link = ctx.link();
        let mut engine = Engine::new(dev, handler, clock, cfg);
        for (port, backlog) in listen {
            engine.listen(port, backlog);
        }
        let caps = engine.device().capabilities();
        let own_queue = caps.queue;
        let mut siblings = Siblings::new(caps.queue_count);
        if caps.unpredictable_steering() {
            match Doorbell::new() {
                Ok(bell) => {
                    let ringer = bell.ringer();
                    engine.device_mut().set_doorbell(bell);
                    ctx.publish(ControlMsg::Doorbell {
                        link,
                        queue: own_queue,
                        ringer,
                    });
                }
                Err(e) => log::warn!(
                    "worker {}: no doorbell ({e}); siblings' hand-overs wait for its park \
                     timeout",
                    ctx.index()
                ),
            }
        }
        let gauges = Gauges::of_engine::<D, H, SystemClock>;
        let mut learned = Vec::new();
        let mut misdirected = Vec::new();
        let mut handed_over = Vec::new();
        let mut control = LoopControl::new();
        loop {
            let mut work = engine.poll();
            engine.drain_learned_arp(&mut learned);
            for (ip, mac) in learned.drain(..) {
                ctx.publish(ControlMsg::Arp { link, ip, mac });
            }
            engine.take_misdirected(&mut misdirected);
            if !misdirected.is_empty() {
                for (queue, data) in misdirected.drain(..) {
                    ctx.publish(ControlMsg::Frame { link, queue, data });
                    siblings.due(queue);
                }
                siblings.ring_due();
            }
            while let Some(msg) = ctx.try_recv() {
                match msg {
                    ControlMsg::Arp { ip, mac, .. } => engine.import_arp(ip, mac),
                    ControlMsg::Frame { queue, data, .. } => {
                        if queue == own_queue {
                            handed_over.push(data);
                        }
                    }
                    ControlMsg::Doorbell { queue, ringer, .. } => siblings.learn(queue, ringer),
                }
            }
            if !handed_over.is_empty() {
                work += handed_over.len();
                engine.inject_frames(handed_over.drain(..));
            }
            if ctx.stats_due() {
                ctx.send_stats(engine.stats().clone());
            }
            let next = control.after_turn(&ctx, work, engine.connection_count());
            let now = control.now();
            ctx.publish_due_metrics(now, engine.stats(), gauges(&engine), engine.handler());
            match next {
                Next::Poll => {}
                Next::StopAccepting => engine.stop_accepting(),
                Next::Exit => break,
                Next::Park => {
                    let now = clock.now();
                    let timeout = engine
                        .next_deadline()
                        .map_or(MAX_PARK, |d| d.saturating_duration_since(now))
                        .min(MAX_PARK);
                    if !timeout.is_zero() {
                        engine.device_mut().wait(timeout);
                    }
                }
            }
        }
        ctx.publish_metrics(
            StdInstant::now(),
            engine.stats(),
            gauges(&engine),
            engine.handler(),
        );
        engine.stats().clone()
    }
}

/// The doorbells of this worker's siblings on its link, by queue, and which of them to
/// ring once this turn's frames are sent.
struct Siblings {
    ringers: Vec<Option<Ringer>>,
    due: Vec<bool>,
}

impl Siblings {
    fn new(queues: u16) -> Siblings {
        let queues = usize::from(queues);
        Siblings {
            ringers: vec![None; queues],
            due: vec![false; queues],
        }
    }

    /// The worker serving `queue` is woken with `ringer`.
    fn learn(&mut self, queue: u16, ringer: Ringer) {
        if let Some(slot) = self.ringers.get_mut(usize::from(queue)) {
            *slot = Some(ringer);
        }
    }

    /// Frames were sent to the worker serving `queue`.
    fn due(&mut self, queue: u16) {
        if let Some(due) = self.due.get_mut(usize::from(queue)) {
            *due = true;
        }
    }

    /// Ring every sibling that was sent frames since the last call (once each, after
    /// the frames: it finds them when it wakes).
    fn ring_due(&mut self) {
        for (due, ringer) in self.due.iter_mut().zip(&self.ringers) {
            if std::mem::take(due) {
                if let Some(ringer) = ringer {
                    ringer.ring();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::net::Ipv4Addr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant as StdInstant;

    use smoltcp::wire::{EthernetFrame, Ipv4Packet, TcpPacket};

    use super::*;
    use crate::pcap::PcapCapture;
    use crate::{run, StopHandle, Worker};
    use rusty_stack::app::Conn;
    use rusty_stack::io::fault::{FaultConfig, FaultInjector};
    use rusty_stack::io::{Capabilities, OwnedFrame};
    use rusty_testkit::sim;
    use rusty_testkit::sim::{syn_frame as tcp_frame, SERVER_MAC as MAC_B};

    /// What one queue of the test's link shares with the test: frames to receive,
    /// frames sent, how often its worker parked, and how often its doorbell woke it.
    #[derive(Clone, Default)]
    struct Wire {
        rx: Arc<Mutex<VecDeque<Vec<u8>>>>,
        tx: Arc<Mutex<Vec<Vec<u8>>>>,
        parked: Arc<AtomicUsize>,
        rung: Arc<AtomicUsize>,
    }

    impl Wire {
        fn parked(&self) -> usize {
            self.parked.load(Ordering::Relaxed)
        }

        fn syn_acks(&self) -> usize {
            let is_syn_ack = |frame: &Vec<u8>| {
                let Ok(eth) = EthernetFrame::new_checked(&frame[..]) else {
                    return false;
                };
                let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
                    return false;
                };
                TcpPacket::new_checked(ip.payload()).is_ok_and(|t| t.syn() && t.ack())
            };
            self.tx
                .lock()
                .unwrap()
                .iter()
                .filter(|f| is_syn_ack(f))
                .count()
        }
    }

    /// A queue of a multi-queue link without RSS, on a [`Wire`].
    struct Queue {
        caps: Capabilities,
        wire: Wire,
        bell: Option<Doorbell>,
    }

    impl PacketIo for Queue {
        type Rx = OwnedFrame;
        type Tx = OwnedFrame;
        fn capabilities(&self) -> &Capabilities {
            &self.caps
        }
        fn receive(&mut self, out: &mut Vec<OwnedFrame>, max: usize) -> usize {
            let mut rx = self.wire.rx.lock().unwrap();
            let n = max.min(rx.len());
            out.extend(rx.drain(..n).map(|data| OwnedFrame {
                data,
                ..Default::default()
            }));
            n
        }
        fn alloc_tx(&mut self, len: usize) -> Option<OwnedFrame> {
            Some(OwnedFrame {
                data: vec![0; len],
                ..Default::default()
            })
        }
        fn transmit(&mut self, frames: &mut Vec<OwnedFrame>) {
            let mut tx = self.wire.tx.lock().unwrap();
            tx.extend(frames.drain(..).map(|f| f.data));
        }
        fn set_doorbell(&mut self, bell: Doorbell) {
            self.bell = Some(bell);
        }
        /// Watches what a driver polls: the receive queue and the doorbell.
        fn wait(&mut self, timeout: Duration) {
            self.wire.parked.fetch_add(1, Ordering::Relaxed);
            let until = StdInstant::now() + timeout;
            while StdInstant::now() < until {
                if self.bell.as_ref().is_some_and(|b| b.drain()) {
                    self.wire.rung.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                if !self.wire.rx.lock().unwrap().is_empty() {
                    return;
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }

    /// Accepts everything; reports one counter of its own, always 7.
    struct Accept;

    impl AppMetrics for Accept {
        fn report(&self, out: &mut rusty_metrics::Report) {
            out.counter("test_reported_total", "Always 7.", 7);
        }
    }

    impl Handler for Accept {
        type Conn = ();
        fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
            Some(())
        }
        fn data(&mut self, _: &mut Conn<'_, ()>, data: &[u8]) -> usize {
            data.len()
        }
    }

    /// Two workers on a two-queue link without RSS, their queues behind the fault and
    /// capture decorators: SYNs that land on queue 0 for flows queue 1 owns are answered
    /// by worker 1 from its own queue, and worker 0 rings worker 1's doorbell (which
    /// reached its queue through both decorators) when it hands them over.
    #[test]
    fn the_owner_answers_handed_over_syns_and_its_doorbell_wakes_it() {
        const SYNS: u16 = 16;
        let (client, server) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let wires = [Wire::default(), Wire::default()];
        let workers = (0..2u16)
            .map(|q| {
                let mut caps = Capabilities::new(MAC_B, 1500);
                caps.queue = q;
                caps.queue_count = 2;
                let queue = Queue {
                    caps,
                    wire: wires[usize::from(q)].clone(),
                    bell: None,
                };
                let clock = SystemClock::new();
                let faulty = FaultInjector::new(queue, clock, FaultConfig::none(), 1);
                let dev = PcapCapture::new(faulty, clock, Vec::new()).unwrap();
                let cfg = sim::engine_config(server, u64::from(q));
                Worker {
                    name: format!("q{q}"),
                    link: 0,
                    body: Box::new(engine_worker(dev, cfg, vec![(7, 64)], |_| Accept)),
                }
            })
            .collect();
        let cfg = crate::tests::test_config();
        let stop = StopHandle::new();
        let runtime = {
            let stop = stop.clone();
            std::thread::spawn(move || run(workers, &cfg, &stop))
        };
        let until = StdInstant::now() + Duration::from_secs(10);
        let wait_for = |done: &dyn Fn() -> bool| {
            while !done() && StdInstant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        // Worker 1 has sent its ringer once it parks; worker 0 has it once it parks
        // again after that (it reads its channel between two parks).
        wait_for(&|| wires[1].parked() > 0);
        let seen = wires[0].parked();
        wait_for(&|| wires[0].parked() > seen + 1);
        let syns = (0..SYNS).map(|i| tcp_frame(client, server, 50000 + i, 7));
        wires[0].rx.lock().unwrap().extend(syns);
        wait_for(&|| wires[0].syn_acks() + wires[1].syn_acks() == usize::from(SYNS));
        stop.stop();
        let stats = runtime.join().unwrap().unwrap();
        let (own, handed) = (wires[0].syn_acks(), wires[1].syn_acks());
        assert_eq!(
            own + handed,
            usize::from(SYNS),
            "{}\n{}",
            stats[0],
            stats[1]
        );
        assert!(
            handed > 0,
            "no SYN landed on a worker that does not own its flow"
        );
        assert_eq!(stats[0].misdirected_forwarded, handed as u64);
        assert_eq!(stats[1].misdirected_forwarded, 0);
        assert!(
            wires[1].rung.load(Ordering::Relaxed) > 0,
            "worker 1 was never rung"
        );
        assert_eq!(
            wires[0].rung.load(Ordering::Relaxed),
            0,
            "worker 0 was rung"
        );
    }

    /// With a metrics board, the worker publishes the engine's counters, its
    /// connections and its handler's report while it runs, from its own loop.
    #[test]
    fn an_engine_worker_publishes_its_counters_and_its_handlers() {
        const SYNS: u16 = 4;
        let (client, server) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let wire = Wire::default();
        let queue = Queue {
            caps: Capabilities::new(MAC_B, 1500),
            wire: wire.clone(),
            bell: None,
        };
        let cfg = sim::engine_config(server, 0);
        let body = engine_worker(queue, cfg, vec![(7, 64)], |_| Accept);
        let workers = vec![Worker::new("q0", 0, Box::new(body))];
        let board = rusty_metrics::Board::new(vec!["q0".into()], Duration::from_millis(10));
        let mut cfg = crate::tests::test_config();
        cfg.metrics = Some(board.clone());
        let stop = StopHandle::new();
        let runtime = {
            let stop = stop.clone();
            std::thread::spawn(move || run(workers, &cfg, &stop))
        };
        let syns = (0..SYNS).map(|i| tcp_frame(client, server, 50000 + i, 7));
        wire.rx.lock().unwrap().extend(syns);
        let until = StdInstant::now() + Duration::from_secs(10);
        let snapshot = loop {
            let snap = board.read().remove(0).1;
            if let Some(s) = snap.filter(|s| s.stats.segments_in == u64::from(SYNS)) {
                break s;
            }
            assert!(StdInstant::now() < until, "no snapshot with the SYNs");
            std::thread::sleep(Duration::from_millis(5));
        };
        stop.stop();
        runtime.join().unwrap().unwrap();
        assert_eq!(snapshot.gauges.connections, u64::from(SYNS));
        assert_eq!(snapshot.gauges.time_wait, Some(0));
        let app = snapshot.app.samples();
        assert_eq!(app.len(), 1);
        assert_eq!((app[0].name, app[0].value), ("test_reported_total", 7));
    }
}
