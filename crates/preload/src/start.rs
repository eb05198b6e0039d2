//! Setting the library up in a process: on the first TCP socket the program makes,
//! read the flags `rusty-run` left in the environment, open one queue of the link and
//! build the engine.

use std::os::fd::{AsFd, AsRawFd, RawFd};

use rusty::cli::link::LinkKind;
use rusty::launch::engine_config;
use rusty_drivers_tap::TapConfig;
use rusty_drivers_xdp::XdpConfig;
use rusty_stack::time::SystemClock;
use rusty_stack::Engine;

use crate::config::{self, Config, FLAGS_VAR};
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

/// A stack on a queue of its own on the configured link, the queue's descriptor, and
/// the engine's clock. Whether the link is shared is the process's to say (see
/// `siblings`).
pub(crate) fn open_stack(config: &Config) -> Result<(Stack, RawFd, SystemClock), String> {
    let launch = &config.launch;
    let link = launch.links.first().ok_or("no link configured")?;
    let cfg = engine_config(launch, link);
    match &link.kind {
        LinkKind::Tap { name } => {
            let mut tap = TapConfig::new(name.clone(), 1);
            tap.host = launch.tap_host;
            tap.mac = config.mac;
            let queue = rusty_drivers_tap::open(&tap)
                .map_err(|e| format!("TAP {name}: {e}"))?
                .pop()
                .ok_or_else(|| format!("TAP {name} opened no queue"))?;
            let link_fd = queue.as_fd().as_raw_fd();
            let clock = SystemClock::new();
            let engine = Engine::new(queue, Table::default(), clock, cfg);
            Ok((Stack::new(Box::new(engine)), link_fd, clock))
        }
        LinkKind::Xdp { ifname } => {
            if link.workers != 1 {
                return Err(format!(
                    "xdp:{ifname}: the library runs one process on an AF_XDP link, so one queue"
                ));
            }
            let t = launch.xdp;
            let mut xdp = XdpConfig::new(ifname.clone(), link.ip, 1);
            xdp.attach = t.attach;
            xdp.copy = t.copy;
            xdp.ring_size = t.ring_size;
            xdp.frames = t.frames;
            let queue = rusty_drivers_xdp::open(&xdp)
                .map_err(|e| format!("xdp:{ifname}: {e}"))?
                .pop()
                .ok_or_else(|| format!("xdp:{ifname} opened no queue"))?;
            let link_fd = queue.as_fd().as_raw_fd();
            let clock = SystemClock::new();
            let engine = Engine::new(queue, Table::default(), clock, cfg);
            Ok((Stack::new(Box::new(engine)), link_fd, clock))
        }
        other => Err(format!(
            "{} links are not supported by the preload library; use tap:NAME or xdp:IFNAME",
            other.driver()
        )),
    }
}

/// The process's stack on the configured link.
fn open(config: &Config) -> Result<Process, String> {
    let (stack, link_fd, clock) = open_stack(config)?;
    let mut config = config.clone();
    config.mac = Some(stack.mac());
    Ok(Process::new(stack, config, link_fd, clock, Siblings::new()))
}
