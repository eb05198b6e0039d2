//! Setting the library up in a process: on the first TCP socket the program makes,
//! read the flags `rusty-run` left in the environment, open the link's queue (or, on
//! AF_XDP, its queues) and build the engine.

use std::net::Ipv6Addr;
use std::os::fd::{AsFd, AsRawFd, RawFd};

use rusty::cli::link::{LinkKind, LinkSpec};
use rusty::launch::{engine_config, Launch};
use rusty_drivers_tap::TapConfig;
use rusty_drivers_xdp::{XdpConfig, XdpQueue};
use rusty_stack::time::SystemClock;
use rusty_stack::{Engine, EngineConfig};

use crate::config::{self, Config, FLAGS_VAR};
use crate::handover::Handover;
use crate::process::{self, Process};
use crate::siblings::Siblings;
use crate::sockets::{Stack, Table};
use crate::sys;

/// Set the library up from the environment: `false` (every call goes to libc) when
/// `rusty-run`'s flags are not there; a flag or link that does not work ends the
/// process with a message, since running the program on the kernel instead would hide
/// the mistake.
pub(crate) fn from_env() -> bool {
    let value = std::env::var(FLAGS_VAR).ok();
    let config = match config::from_env(value.as_deref()) {
        None => return false,
        Some(Ok(c)) => c,
        Some(Err(e)) => sys::fatal(&format!("{FLAGS_VAR}: {e}")),
    };
    match open(&config) {
        Ok(p) => {
            process::install(p);
            true
        }
        Err(e) => sys::fatal(&e),
    }
}

/// A process's stack, as [`open_stack`] or [`stack_on`] built it.
pub(crate) struct Opened {
    pub(crate) stack: Stack,
    /// The queue's descriptor, which a sleeping thread waits on.
    pub(crate) link_fd: RawFd,
    pub(crate) clock: SystemClock,
    /// The link's other AF_XDP queues, kept for the children the process forks (see
    /// `handover`); none on a TAP, where each process opens its own.
    pub(crate) spares: Vec<XdpQueue>,
}

/// A stack on a queue of its own on the configured link: a new queue of the TAP, or,
/// on an AF_XDP link, every queue of the interface (the first for this process's
/// engine, the others spare). Whether the link is shared is the process's to say (see
/// `siblings`).
pub(crate) fn open_stack(config: &Config) -> Result<Opened, String> {
    let launch = &config.launch;
    let link = launch.links.first().ok_or("no link configured")?;
    match &link.kind {
        LinkKind::Tap { name } => {
            let mut tap = TapConfig::new(name.clone(), 1);
            tap.host = launch.tap_host;
            tap.host_ipv6 = launch.tap_host_ipv6.clone();
            tap.mac = config.mac;
            let queue = rusty_drivers_tap::open(&tap)
                .map_err(|e| format!("TAP {name}: {e}"))?
                .pop()
                .ok_or_else(|| format!("TAP {name} opened no queue"))?;
            let link_fd = queue.as_fd().as_raw_fd();
            let clock = SystemClock::new();
            let engine = Engine::new(
                queue,
                Table::default(),
                clock,
                engine_config_for(launch, link),
            );
            let mut stack = Stack::new(Box::new(engine));
            stack.set_link_index(sys::if_index(name));
            Ok(Opened {
                stack,
                link_fd,
                clock,
                spares: Vec::new(),
            })
        }
        LinkKind::Xdp { ifname } => {
            let t = launch.xdp;
            let queues = u16::try_from(link.workers)
                .map_err(|_| format!("xdp:{ifname}: {} queues is too many", link.workers))?;
            let mut xdp = XdpConfig::new(ifname.clone(), link.ip, queues);
            xdp.ipv6 = ipv6_addresses(&engine_config_for(launch, link), ifname)?;
            xdp.attach = t.attach;
            xdp.copy = t.copy;
            xdp.ring_size = t.ring_size;
            xdp.frames = t.frames;
            xdp.fork_shared = true;
            let mut queues = rusty_drivers_xdp::open(&xdp)
                .map_err(|e| format!("xdp:{ifname}: {e}"))?
                .into_iter();
            let first = queues
                .next()
                .ok_or_else(|| format!("xdp:{ifname} opened no queue"))?;
            let mut opened = stack_on(config, first)?;
            opened.spares = queues.collect();
            Ok(opened)
        }
        other => Err(format!(
            "{} links are not supported by the preload library; use tap:NAME or xdp:IFNAME",
            other.driver()
        )),
    }
}

/// The IPv6 addresses an engine with `cfg` has on interface `ifname`, its link-local
/// one among them, for the AF_XDP program to redirect (none when the link has no
/// IPv6).
fn ipv6_addresses(cfg: &EngineConfig, ifname: &str) -> Result<Vec<Ipv6Addr>, String> {
    if cfg.ipv6.is_empty() {
        return Ok(Vec::new());
    }
    let path = format!("/sys/class/net/{ifname}/address");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let mac = config::parse_mac(text.trim())?;
    Ok(cfg
        .link_local(mac)
        .into_iter()
        .chain(cfg.ipv6.iter().map(|&(a, _)| a))
        .collect())
}

/// The configuration of this process's engine: the link's, as the other binaries
/// build it, except that a process that joins stacks already running on the link
/// (forked or exec'd from one) uses its IPv6 addresses at once: they are the same in
/// every process, and the first one's engine detects duplicates of them (whose probes
/// the others would never see, on queues of their own).
fn engine_config_for(launch: &Launch, link: &LinkSpec) -> EngineConfig {
    let mut cfg = engine_config(launch, link);
    if crate::siblings::stacks_running() {
        cfg.dad_transmits = 0;
    }
    cfg
}

/// A stack on an AF_XDP queue this process has (opened, or taken over as it forked).
pub(crate) fn stack_on(config: &Config, queue: XdpQueue) -> Result<Opened, String> {
    let launch = &config.launch;
    let link = launch.links.first().ok_or("no link configured")?;
    let link_fd = queue.as_fd().as_raw_fd();
    let clock = SystemClock::new();
    let engine = Engine::new(
        Handover::new(queue),
        Table::default(),
        clock,
        engine_config_for(launch, link),
    );
    let mut stack = Stack::new(Box::new(engine));
    if let LinkKind::Xdp { ifname } = &link.kind {
        stack.set_link_index(sys::if_index(ifname));
    }
    Ok(Opened {
        stack,
        link_fd,
        clock,
        spares: Vec::new(),
    })
}

/// The process's stack on the configured link.
fn open(config: &Config) -> Result<Process, String> {
    let opened = open_stack(config)?;
    let mut config = config.clone();
    config.mac = Some(opened.stack.mac());
    Ok(Process::new(opened, config, Siblings::new()))
}
