//! # rusty-runtime
//!
//! The runtime: one OS thread per worker, each pinned to its own core, started and
//! stopped together. Also what runs beside workers: [`pcap`] capture of a worker's
//! queue and the [`bridge`] that carries a device model's wire to a real link.
//!
//! `rusty-stack` is the sans-IO core and has no threads; this crate is where they
//! are.
//!
//! The runtime knows nothing about packets: a [`Worker`] is a body that runs on its
//! thread until told to stop, and returns its final [`Stats`]. [`engine_worker()`] builds
//! the body that drives an [`Engine`](rusty_stack::Engine) over a packet-IO queue; the
//! kernel-socket backend builds its own bodies on the same runtime. Workers talk only
//! through the [`WorkerContext`]: ARP mappings for siblings on the same link, frames
//! for the sibling that owns their flow on links whose steering the stack cannot
//! predict (with the doorbells that wake a parked sibling), stats snapshots, and the
//! stop signal.
//!
//! SIGINT/SIGTERM start a graceful stop: workers stop accepting, open connections get
//! the configured grace period to finish, then every worker exits and the runtime
//! returns its statistics.
//!
//! With [`RuntimeConfig::metrics`], each worker publishes its counters (the stack's
//! and its handler's, [`AppMetrics`]) to its slot of that board once per interval,
//! checked against the clock its loop reads anyway
//! ([`WorkerContext::publish_due_metrics`]),
//! and once more as it ends. A second signal exits at once. SIGHUP is the program's:
//! [`hangup::on_hangup`] runs a reload of its choosing.
//!
//! The runtime says what it does (stopping, periodic stats) through the `log` facade;
//! where that goes is the binary's choice.

#![warn(missing_docs)]

pub mod bridge;
mod engine_worker;
pub mod hangup;
pub mod pcap;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant as StdInstant};

use crossbeam_channel::{Receiver, Sender};

pub use engine_worker::{engine_worker, MAX_PARK};
/// What workers publish for the metrics exporter, and the [`AppMetrics`] their
/// handlers implement.
pub use rusty_metrics as metrics;

use rusty_metrics::{AppMetrics, Board, Gauges, Publisher};
use rusty_stack::io::{MacAddr, Ringer};
use rusty_stack::Stats;

/// How workers are placed and stopped.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RuntimeConfig {
    /// Cores to pin workers to, in order. `None`: the process's allowed CPU set, in
    /// order (so `taskset -c 1 …` puts a single worker on core 1).
    pub cpus: Option<Vec<usize>>,
    /// Allow more workers than cores (they then share cores round-robin).
    pub oversubscribe: bool,
    /// How long an idle worker keeps polling before it blocks on its queue.
    pub spin: Duration,
    /// How long open connections may run on after a stop signal.
    pub grace: Duration,
    /// Log every worker's counters this often (`log` at info level, so a binary's
    /// default filter shows them).
    pub stats_interval: Option<Duration>,
    /// Install SIGINT/SIGTERM handlers (off in tests that run several runtimes).
    pub handle_signals: bool,
    /// Where workers publish their counters for the metrics exporter, one slot per
    /// worker in order (`None`: they publish nothing).
    pub metrics: Option<Arc<Board>>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cpus: None,
            oversubscribe: false,
            spin: Duration::from_micros(200),
            grace: Duration::from_secs(10),
            stats_interval: None,
            handle_signals: true,
            metrics: None,
        }
    }
}

/// What went wrong starting the runtime.
#[derive(Debug)]
#[non_exhaustive]
pub enum RuntimeError {
    /// More workers than usable cores, without `oversubscribe`.
    TooManyWorkers {
        /// Workers asked for.
        workers: usize,
        /// Cores usable.
        cores: usize,
    },
    /// A core named in `cpus` is not in the process's allowed set.
    CpuNotAllowed(usize),
    /// The allowed CPU set could not be read.
    NoCpus,
    /// A worker thread could not start.
    Spawn(std::io::Error),
    /// The signal handlers could not be installed.
    Signals(std::io::Error),
    /// A worker panicked.
    WorkerPanicked(String),
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::TooManyWorkers { workers, cores } => write!(
                f,
                "{workers} workers but only {cores} usable cores (use --oversubscribe to share cores)"
            ),
            RuntimeError::CpuNotAllowed(c) => {
                write!(f, "CPU {c} is not in this process's allowed CPU set")
            }
            RuntimeError::NoCpus => write!(f, "could not read the allowed CPU set"),
            RuntimeError::Spawn(e) => write!(f, "could not start a worker thread: {e}"),
            RuntimeError::Signals(e) => write!(f, "could not install signal handlers: {e}"),
            RuntimeError::WorkerPanicked(w) => write!(f, "worker {w} panicked"),
        }
    }
}

impl std::error::Error for RuntimeError {}

/// Rare messages between sibling workers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlMsg {
    /// A worker on link `link` learned this neighbour mapping, by ARP or Neighbor
    /// Discovery (the reply may have landed on another worker's queue than the one
    /// that asked).
    Arp {
        /// The link it was learned on.
        link: usize,
        /// The neighbour's address.
        ip: std::net::IpAddr,
        /// Its MAC.
        mac: MacAddr,
    },
    /// A frame that landed on the wrong queue of link `link`, for the worker serving
    /// `queue` (links whose steering the stack cannot predict, such as TAP). The sender
    /// rings that worker's doorbell after sending it.
    Frame {
        /// The link it arrived on.
        link: usize,
        /// The queue whose worker owns its flow.
        queue: u16,
        /// The whole frame.
        data: Vec<u8>,
    },
    /// How to wake the worker serving `queue` of link `link` when it is parked: ring
    /// `ringer` after sending it a [`ControlMsg::Frame`]. Each such worker sends one
    /// when it starts.
    Doorbell {
        /// The worker's link.
        link: usize,
        /// The worker's queue.
        queue: u16,
        /// Rings the doorbell its queue waits on.
        ringer: Ringer,
    },
}

impl ControlMsg {
    /// The link this message concerns.
    pub fn link(&self) -> usize {
        match self {
            ControlMsg::Arp { link, .. }
            | ControlMsg::Frame { link, .. }
            | ControlMsg::Doorbell { link, .. } => *link,
        }
    }
}

/// Where a worker is in its life.
// Exhaustive on purpose: every backend's loop must act on each state, so a new one
// should stop their build rather than be ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopState {
    /// Serving normally.
    Running,
    /// Stop accepting; let open connections finish until the grace period ends.
    Draining,
    /// Leave now.
    Exit,
}

const RUNNING: u8 = 0;
const DRAINING: u8 = 1;
const EXIT: u8 = 2;

/// A worker's handle on the runtime, passed to its body on its own thread.
pub struct WorkerContext {
    index: usize,
    link: usize,
    core: Option<usize>,
    grace: Duration,
    spin: Duration,
    stop: Arc<AtomicU8>,
    stats_epoch: Arc<AtomicU64>,
    seen_epoch: u64,
    stats_tx: Sender<(usize, Stats)>,
    inbox: Receiver<ControlMsg>,
    siblings: Vec<(usize, Sender<ControlMsg>)>,
    metrics: Option<Publisher>,
}

impl WorkerContext {
    /// This worker's position among all workers.
    pub fn index(&self) -> usize {
        self.index
    }
    /// The link this worker serves.
    pub fn link(&self) -> usize {
        self.link
    }
    /// The core this worker is pinned to.
    pub fn core(&self) -> Option<usize> {
        self.core
    }
    /// How long open connections may run on after a stop signal.
    pub fn grace(&self) -> Duration {
        self.grace
    }
    /// How long an idle worker keeps polling before it parks.
    pub fn spin(&self) -> Duration {
        self.spin
    }
    /// Where the runtime is in its life: running, draining, or exiting.
    pub fn stop_state(&self) -> StopState {
        match self.stop.load(Ordering::Relaxed) {
            RUNNING => StopState::Running,
            DRAINING => StopState::Draining,
            _ => StopState::Exit,
        }
    }
    /// Tell every sibling on the same link.
    pub fn publish(&self, msg: ControlMsg) {
        let link = msg.link();
        for (l, tx) in &self.siblings {
            if *l == link {
                let _ = tx.try_send(msg.clone());
            }
        }
    }
    /// The next message from a sibling, if any.
    pub fn try_recv(&self) -> Option<ControlMsg> {
        self.inbox.try_recv().ok()
    }
    /// Whether the runtime asked for a stats snapshot since the last call.
    pub fn stats_due(&mut self) -> bool {
        let e = self.stats_epoch.load(Ordering::Relaxed);
        if e != self.seen_epoch {
            self.seen_epoch = e;
            true
        } else {
            false
        }
    }
    /// Hand the runtime a snapshot of this worker's counters (when
    /// [`WorkerContext::stats_due`]).
    pub fn send_stats(&self, stats: Stats) {
        let _ = self.stats_tx.try_send((self.index, stats));
    }
    /// [`WorkerContext::publish_metrics`] when this worker's metrics are due at `now`
    /// (never without a metrics board). Pass the time the loop last read
    /// ([`LoopControl::now`]) rather than read the clock again.
    #[inline]
    pub fn publish_due_metrics(
        &mut self,
        now: StdInstant,
        stats: &Stats,
        gauges: Gauges,
        app: &dyn AppMetrics,
    ) {
        if self.metrics.as_ref().is_some_and(|p| p.due(now)) {
            self.publish_metrics(now, stats, gauges, app);
        }
    }
    /// Publish this worker's counters to the metrics board: the stack's `stats`, the
    /// connections it holds, and what its handler `app` reports. Does nothing without
    /// a board.
    pub fn publish_metrics(
        &mut self,
        now: StdInstant,
        stats: &Stats,
        gauges: Gauges,
        app: &dyn AppMetrics,
    ) {
        if let Some(p) = &mut self.metrics {
            p.publish(now, stats, gauges, app);
        }
    }
}

/// What a worker loop does after a turn.
// Exhaustive on purpose: every backend's loop must act on each instruction, so a new one
// should stop their build rather than be ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Go straight on polling.
    Poll,
    /// A stop signal arrived: stop accepting new connections (then go on polling).
    StopAccepting,
    /// Idle long enough: block on the queue until something arrives (or a timer).
    Park,
    /// Leave the loop.
    Exit,
}

/// The part of a worker loop every backend shares: the stop signal (stop accepting,
/// then let connections finish within the grace period) and when to stop spinning and
/// park. (Stats snapshots: [`WorkerContext::stats_due`].)
#[derive(Debug)]
pub struct LoopControl {
    idle_since: Option<StdInstant>,
    drain_until: Option<StdInstant>,
    now: StdInstant,
}

impl Default for LoopControl {
    fn default() -> LoopControl {
        LoopControl {
            idle_since: None,
            drain_until: None,
            now: StdInstant::now(),
        }
    }
}

impl LoopControl {
    /// A fresh loop: not idle, not draining.
    pub fn new() -> LoopControl {
        LoopControl::default()
    }

    /// The time the last [`LoopControl::after_turn`] read (or when the loop was made).
    pub fn now(&self) -> StdInstant {
        self.now
    }

    /// Call after each loop turn that did `work` (frames, events) with `connections`
    /// still open.
    pub fn after_turn(&mut self, ctx: &WorkerContext, work: usize, connections: usize) -> Next {
        let now = StdInstant::now();
        self.now = now;
        match ctx.stop_state() {
            StopState::Running => {}
            StopState::Draining => match self.drain_until {
                None => {
                    self.drain_until = Some(now + ctx.grace());
                    return Next::StopAccepting;
                }
                Some(until) if connections == 0 || now >= until => return Next::Exit,
                Some(_) => {}
            },
            StopState::Exit => return Next::Exit,
        }
        if work > 0 {
            self.idle_since = None;
            return Next::Poll;
        }
        let since = *self.idle_since.get_or_insert(now);
        if now - since >= ctx.spin() {
            Next::Park
        } else {
            Next::Poll
        }
    }
}

/// One worker to run: a name for messages, the link it serves, and its body.
#[non_exhaustive]
pub struct Worker {
    /// The worker's thread name (`tap0-q1`, `kernel-0`), for messages.
    pub name: String,
    /// The link it serves (its position in the list of links).
    pub link: usize,
    /// What runs on the worker's pinned thread until the runtime stops it; returns the
    /// final counters.
    pub body: Box<dyn FnOnce(WorkerContext) -> Stats + Send>,
}

impl Worker {
    /// The worker `name`, serving link `link`, running `body`.
    pub fn new(
        name: impl Into<String>,
        link: usize,
        body: Box<dyn FnOnce(WorkerContext) -> Stats + Send>,
    ) -> Worker {
        Worker {
            name: name.into(),
            link,
            body,
        }
    }
}

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    core_affinity::get_core_ids().map(|ids| ids.into_iter().map(|c| c.id).collect())
}

/// The cores workers go on, in order: `cfg.cpus` or the allowed set.
pub fn plan_cores(workers: usize, cfg: &RuntimeConfig) -> Result<Vec<usize>, RuntimeError> {
    let allowed = allowed_cpus().ok_or(RuntimeError::NoCpus)?;
    let cores = match &cfg.cpus {
        Some(list) => {
            for c in list {
                if !allowed.contains(c) {
                    return Err(RuntimeError::CpuNotAllowed(*c));
                }
            }
            list.clone()
        }
        None => allowed,
    };
    if cores.is_empty() {
        return Err(RuntimeError::NoCpus);
    }
    if workers > cores.len() && !cfg.oversubscribe {
        return Err(RuntimeError::TooManyWorkers {
            workers,
            cores: cores.len(),
        });
    }
    Ok((0..workers).map(|i| cores[i % cores.len()]).collect())
}

/// A handle to stop a running runtime from another thread (tests, embedding).
#[derive(Clone)]
pub struct StopHandle {
    flag: Arc<AtomicBool>,
}

impl StopHandle {
    /// A handle that has not been stopped.
    pub fn new() -> StopHandle {
        StopHandle {
            flag: Arc::new(AtomicBool::new(false)),
        }
    }
    /// Begin a graceful stop, as SIGTERM would.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }
}

impl Default for StopHandle {
    fn default() -> Self {
        StopHandle::new()
    }
}

/// Run `workers` pinned to their cores until they all finish (after a stop signal or
/// on their own). Returns each worker's final counters, in order.
pub fn run(
    workers: Vec<Worker>,
    cfg: &RuntimeConfig,
    stop_handle: &StopHandle,
) -> Result<Vec<Stats>, RuntimeError> {
    let cores = plan_cores(workers.len(), cfg)?;
    let term = stop_handle.flag.clone();
    if cfg.handle_signals {
        use signal_hook::consts::{SIGINT, SIGTERM};
        for sig in [SIGINT, SIGTERM] {
            // A second signal while stopping exits at once.
            signal_hook::flag::register_conditional_shutdown(sig, 1, term.clone())
                .map_err(RuntimeError::Signals)?;
            signal_hook::flag::register(sig, term.clone()).map_err(RuntimeError::Signals)?;
        }
    }
    let stop = Arc::new(AtomicU8::new(RUNNING));
    let stats_epoch = Arc::new(AtomicU64::new(0));
    let (stats_tx, stats_rx) = crossbeam_channel::bounded::<(usize, Stats)>(workers.len() * 4);
    let channels: Vec<_> = workers
        .iter()
        .map(|w| (w.link, crossbeam_channel::bounded::<ControlMsg>(1024)))
        .collect();

    let mut handles = Vec::with_capacity(workers.len());
    let names: Vec<String> = workers.iter().map(|w| w.name.clone()).collect();
    for (index, worker) in workers.into_iter().enumerate() {
        let siblings = channels
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != index)
            .map(|(_, (link, (tx, _)))| (*link, tx.clone()))
            .collect();
        let ctx = WorkerContext {
            index,
            link: worker.link,
            core: Some(cores[index]),
            grace: cfg.grace,
            spin: cfg.spin,
            stop: stop.clone(),
            stats_epoch: stats_epoch.clone(),
            seen_epoch: 0,
            stats_tx: stats_tx.clone(),
            inbox: channels[index].1 .1.clone(),
            siblings,
            metrics: cfg.metrics.as_ref().map(|b| b.publisher(index)),
        };
        let core = cores[index];
        let body = worker.body;
        let handle = thread::Builder::new()
            .name(worker.name.clone())
            .spawn(move || {
                core_affinity::set_for_current(core_affinity::CoreId { id: core });
                body(ctx)
            })
            .map_err(RuntimeError::Spawn)?;
        handles.push(handle);
    }
    drop(stats_tx);

    let mut last_stats = StdInstant::now();
    let mut latest: Vec<Option<Stats>> = vec![None; handles.len()];
    while !handles.iter().all(|h| h.is_finished()) {
        if term.load(Ordering::Relaxed) && stop.load(Ordering::Relaxed) == RUNNING {
            log::info!(
                "rusty: stopping; open connections have {:?} to finish",
                cfg.grace
            );
            stop.store(DRAINING, Ordering::Relaxed);
        }
        if let Some(every) = cfg.stats_interval {
            if last_stats.elapsed() >= every {
                last_stats = StdInstant::now();
                stats_epoch.fetch_add(1, Ordering::Relaxed);
            }
        }
        while let Ok((i, s)) = stats_rx.try_recv() {
            log::info!("worker {} ({}): {}", i, names[i], s);
            latest[i] = Some(s);
        }
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(EXIT, Ordering::Relaxed);
    let mut out = Vec::with_capacity(handles.len());
    for (h, name) in handles.into_iter().zip(names) {
        out.push(h.join().map_err(|_| RuntimeError::WorkerPanicked(name))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cores_from_the_allowed_set() {
        let cfg = RuntimeConfig::default();
        let n = core_affinity::get_core_ids().map_or(0, |c| c.len());
        assert!(n > 0);
        assert_eq!(plan_cores(n, &cfg).unwrap().len(), n);
        assert!(matches!(
            plan_cores(n + 1, &cfg),
            Err(RuntimeError::TooManyWorkers { .. })
        ));
        let over = RuntimeConfig {
            oversubscribe: true,
            ..RuntimeConfig::default()
        };
        assert_eq!(plan_cores(n + 1, &over).unwrap().len(), n + 1);
        let bad = RuntimeConfig {
            cpus: Some(vec![100_000]),
            ..RuntimeConfig::default()
        };
        assert!(matches!(
            plan_cores(1, &bad),
            Err(RuntimeError::CpuNotAllowed(100_000))
        ));
    }

    /// A runtime for in-process tests: any number of workers on the cores there are,
    /// no signal handlers, a short grace period.
    pub(super) fn test_config() -> RuntimeConfig {
        RuntimeConfig {
            oversubscribe: true,
            handle_signals: false,
            grace: Duration::from_millis(50),
            ..RuntimeConfig::default()
        }
    }

    #[test]
    fn workers_run_pinned_exchange_messages_and_stop() {
        let cfg = test_config();
        let stop = StopHandle::new();
        let mut workers = Vec::new();
        for i in 0..2 {
            workers.push(Worker {
                name: format!("w{i}"),
                link: 0,
                body: Box::new(move |ctx: WorkerContext| {
                    let mut stats = Stats::default();
                    if ctx.index() == 0 {
                        ctx.publish(ControlMsg::Arp {
                            link: 0,
                            ip: std::net::Ipv4Addr::new(10, 0, 0, 9).into(),
                            mac: MacAddr::BROADCAST,
                        });
                    }
                    while ctx.stop_state() == StopState::Running {
                        if let Some(ControlMsg::Arp { ip, .. }) = ctx.try_recv() {
                            assert_eq!(ip, std::net::IpAddr::from([10, 0, 0, 9]));
                            stats.arp_requests_sent += 1;
                        }
                        thread::sleep(Duration::from_millis(1));
                    }
                    stats
                }),
            });
        }
        let stopper = stop.clone();
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            stopper.stop();
        });
        let stats = run(workers, &cfg, &stop).unwrap();
        t.join().unwrap();
        assert_eq!(stats.len(), 2);
        assert_eq!(stats[0].arp_requests_sent, 0);
        assert_eq!(stats[1].arp_requests_sent, 1, "worker 1 heard worker 0");
    }
}
