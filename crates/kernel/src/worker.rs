//! The body of a worker that runs the application on the host kernel's TCP: one
//! [`KernelEngine`] (epoll loop, own `SO_REUSEPORT` listeners) per pinned worker.

use std::time::{Duration, Instant};

use rusty_metrics::{AppMetrics, Gauges};
use rusty_runtime::{LoopControl, Next, WorkerContext, MAX_PARK};
use rusty_stack::{Handler, Stats};

use crate::config::KernelConfig;
use crate::engine::KernelEngine;

/// A worker body, the kernel-socket twin of
/// [`engine_worker`](rusty_runtime::engine_worker): build the handler with
/// `make_handler` on the worker's thread (so it need not be `Send`), listen on every
/// address of `cfg.listen` with this worker's own socket, and run the epoll loop until
/// the runtime stops it: poll without blocking while there is traffic, block in
/// `epoll_wait` (at most 10 ms) after `ctx.spin()` of idleness, and on a stop signal
/// close the listeners and let connections finish within the grace period.
///
/// With a metrics board ([`RuntimeConfig::metrics`](rusty_runtime::RuntimeConfig::metrics))
/// it publishes its counters, its connections and what the handler reports once per
/// interval and once more when it ends.
///
/// A listen address that cannot be bound is logged as an error and the worker ends at
/// once; call [`KernelConfig::check_listen`] first to fail before starting workers.
pub fn kernel_worker<H, F>(
    cfg: KernelConfig,
    make_handler: F,
) -> impl FnOnce(WorkerContext) -> Stats + Send
where
    H: Handler + AppMetrics,
    F: FnOnce(&WorkerContext) -> H + Send + 'static,
{
    move |mut ctx: WorkerContext| {
        let handler = make_handler(&ctx);
        let listen = cfg.listen.clone();
        let mut engine = match KernelEngine::new(handler, cfg) {
            Ok(e) => e,
            Err(e) => {
                log::error!("worker {}: epoll: {e}", ctx.index());
                return Stats::default();
            }
        };
        for (addr, backlog) in listen {
            if let Err(e) = engine.listen(addr, backlog) {
                log::error!("worker {}: cannot listen on {addr}: {e}", ctx.index());
                return engine.stats().clone();
            }
        }
        let mut control = LoopControl::new();
        let mut park = Duration::ZERO;
        loop {
            let n = engine.poll(park);
            // Siblings' messages (ARP, frames) mean nothing to kernel sockets.
            while ctx.try_recv().is_some() {}
            if ctx.stats_due() {
                ctx.send_stats(engine.stats().clone());
            }
            park = Duration::ZERO;
            let next = control.after_turn(&ctx, n, engine.connection_count());
            let now = control.now();
            ctx.publish_due_metrics(now, engine.stats(), gauges(&engine), engine.handler());
            match next {
                Next::Poll => {}
                Next::StopAccepting => engine.stop_accepting(),
                Next::Park => park = MAX_PARK,
                Next::Exit => break,
            }
        }
        ctx.publish_metrics(
            Instant::now(),
            engine.stats(),
            gauges(&engine),
            engine.handler(),
        );
        engine.stats().clone()
    }
}

fn gauges<H: Handler>(engine: &KernelEngine<H>) -> Gauges {
    Gauges {
        connections: engine.connection_count() as u64,
        ..Gauges::default()
    }
}
