//! The body of a worker that runs Rusty's own stack: one engine over one packet-IO
//! queue, its handler built on the worker's own thread.

use std::time::Duration;

use super::{ControlMsg, LoopControl, Next, WorkerContext};
use crate::app::Handler;
use crate::engine::{Engine, EngineConfig};
use crate::io::PacketIo;
use crate::stats::Stats;
use crate::time::{Clock, SystemClock};

/// Longest a parked worker sleeps before it looks at its control channel again.
pub const MAX_PARK: Duration = Duration::from_millis(10);

/// A worker body: build the handler with `make_handler` on the worker's thread (so it
/// need not be `Send`), listen on `listen` (port, backlog), and run the engine loop
/// until the runtime stops it: busy-poll while there is traffic, park on the queue
/// after `ctx.spin()` of idleness until the next timer is due, pass learned ARP mappings
/// to siblings, and on a stop signal stop accepting and let connections finish within
/// the grace period.
pub fn engine_worker<D, H, F>(
    dev: D,
    cfg: EngineConfig,
    listen: Vec<(u16, usize)>,
    make_handler: F,
) -> impl FnOnce(WorkerContext) -> Stats + Send
where
    D: PacketIo + Send + 'static,
    H: Handler,
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
            for (queue, data) in misdirected.drain(..) {
                ctx.publish(ControlMsg::Frame { link, queue, data });
            }
            let own_queue = engine.device().capabilities().queue;
            while let Some(msg) = ctx.try_recv() {
                match msg {
                    ControlMsg::Arp { ip, mac, .. } => engine.import_arp(ip, mac),
                    ControlMsg::Frame { queue, data, .. } => {
                        if queue == own_queue {
                            handed_over.push(data);
                        }
                    }
                }
            }
            if !handed_over.is_empty() {
                work += handed_over.len();
                engine.inject_frames(handed_over.drain(..));
            }
            if ctx.stats_due() {
                ctx.send_stats(engine.stats().clone());
            }
            match control.after_turn(&ctx, work, engine.connection_count()) {
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
        engine.stats().clone()
    }
}
