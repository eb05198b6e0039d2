//! Starting a `Handler` on the links named on a command line: the one place that turns
//! link specs into pinned workers, shared by every binary (echo, echo-load, httpd).
//!
//! - No links: the kernel backend on all addresses, one worker per allowed core.
//! - `kernel <addresses> <n>`: `n` kernel-socket workers bound to those addresses
//!   (`0.0.0.0` or `::`: every address, both families).
//! - `tapN` / `tap:NAME <addresses> <n>`: a TAP device with `n` queues, one Rusty
//!   engine per queue.
//! - `xdp:IFNAME <addresses> <n>`: AF_XDP sockets on queues 0..n of an existing
//!   interface, one Rusty engine per queue; the host keeps the interface for its own
//!   addresses. Each queue's mode (native or generic XDP, zero-copy or copy) is logged.
//!
//! Each link of Rusty's logs its addresses when it opens, the link-local address its
//! engines draw among them (see [`engine_config`] for the secret they draw it with).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod metrics;

use crate::cli::link::{LinkKind, LinkSpec, LinkSpecError};
use rusty_drivers_tap::{TapConfig, TapError};
use rusty_drivers_xdp::{AttachMode, CopyMode, XdpConfig, XdpError};
use rusty_kernel::{kernel_worker, KernelConfig};
use rusty_metrics::{AppMetrics, ExportError};
use rusty_runtime::pcap::PcapCapture;
use rusty_runtime::{
    self as runtime, RuntimeConfig, RuntimeError, StopHandle, Worker, WorkerContext,
};
use rusty_stack::engine::BUFFER_SIZE_CLASSES as CLASSES;
use rusty_stack::io::fault::{FaultConfig, FaultInjector};
use rusty_stack::io::PacketIo;
use rusty_stack::CongestionAlgorithm;
use rusty_stack::{EngineConfig, Handler, MemoryBudget, Stats, SystemClock, TcpConfig};

/// Drivers this build can run.
pub const BUILT_IN: &[&str] = &[
    "kernel",
    "tap",
    "xdp",
    "ixgbe",
    "ixgbe-model",
    "mpipe",
    "mpipe-model",
];

/// Everything about where and how workers run, from the command line.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The links to run on; none means kernel sockets on every address, one worker per
    /// allowed core.
    pub links: Vec<LinkSpec>,
    /// Capture every TAP worker's frames (one file per worker when there are several).
    pub pcap: Option<PathBuf>,
    /// IPv4 address and prefix for the host side of the (single) TAP link.
    pub tap_host: Option<(Ipv4Addr, u8)>,
    /// IPv6 addresses and prefixes for the host side of the TAP link.
    pub tap_host_ipv6: Vec<(Ipv6Addr, u8)>,
    /// How the workers are pinned, spin, report and stop.
    pub runtime: RuntimeConfig,
    /// TCP settings for Rusty's engines (see [`Launch::engine_tcp`]).
    pub tcp: TcpConfig,
    /// The congestion control asked for: Rusty's engines run it instead of `tcp`'s, and
    /// the kernel backend asks the kernel for it. `None`: each backend's default.
    pub congestion_control: Option<CongestionAlgorithm>,
    /// Most live connections per worker, on every backend.
    pub max_connections: usize,
    /// Rusty's engines: connection-table room reserved at start
    /// ([`EngineConfig::reserved_connections`]).
    pub reserved_connections: usize,
    /// Rusty's engines: most TIME-WAIT entries per worker.
    pub max_time_wait: usize,
    /// Rusty's engines: local ports for active opens.
    pub ephemeral_ports: std::ops::RangeInclusive<u16>,
    /// Connections a listener may have half-open or waiting to be accepted: the
    /// `listen(2)` backlog on kernel sockets; on Rusty's engines, SYNs beyond it are
    /// answered with SYN cookies. Default 1024.
    pub backlog: usize,
    /// Rusty's engines: each worker's buffer-memory budget.
    pub memory: MemoryBudget,
    /// Rusty's engines: drained buffer storage each worker keeps for reuse, per size
    /// class ([`EngineConfig::buffer_pool`]).
    pub buffer_pool: usize,
    /// Rusty's engines: most orphans per worker.
    pub max_orphans: usize,
    /// Inject faults on the transmit path of Rusty's workers (testing): the config and
    /// a seed (each worker adds its index).
    pub faults: Option<(FaultConfig, u64)>,
    /// Let Rusty's engines use TSO where the device offers it.
    pub tso: bool,
    /// Settings of AF_XDP links.
    pub xdp: XdpTuning,
    /// Serve live metrics on this address (`--metrics`).
    pub metrics: Option<SocketAddr>,
    /// Write the metrics to this file at each interval (`--metrics-file`).
    pub metrics_file: Option<PathBuf>,
    /// How often workers publish their metrics (1 s).
    pub metrics_interval: std::time::Duration,
}

/// How AF_XDP links are opened (see [`XdpConfig`]); the defaults are `XdpConfig::new`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpTuning {
    /// Where the XDP program runs ([`XdpConfig::attach`]).
    pub attach: AttachMode,
    /// Whether frames are copied into the UMEM ([`XdpConfig::copy`]).
    pub copy: CopyMode,
    /// Entries of each ring ([`XdpConfig::ring_size`]).
    pub ring_size: u32,
    /// UMEM frames per queue ([`XdpConfig::frames`]).
    pub frames: u32,
}

impl Default for XdpTuning {
    fn default() -> XdpTuning {
        let c = XdpConfig::new("", Ipv4Addr::UNSPECIFIED, 1);
        XdpTuning {
            attach: c.attach,
            copy: c.copy,
            ring_size: c.ring_size,
            frames: c.frames,
        }
    }
}

impl Launch {
    /// A launch on `links` with the engines' defaults (those of [`EngineConfig::new`],
    /// [`TcpConfig::default`] and [`RuntimeConfig::default`]), a backlog of 1024, TSO
    /// on, no capture and no faults.
    pub fn new(links: Vec<LinkSpec>) -> Launch {
        let engine = EngineConfig::new(Ipv4Addr::UNSPECIFIED);
        Launch {
            links,
            pcap: None,
            tap_host: None,
            tap_host_ipv6: Vec::new(),
            runtime: RuntimeConfig::default(),
            tcp: TcpConfig::default(),
            congestion_control: None,
            max_connections: engine.max_connections,
            reserved_connections: engine.reserved_connections,
            max_time_wait: engine.max_time_wait,
            ephemeral_ports: engine.ephemeral_ports.clone(),
            backlog: 1024,
            memory: MemoryBudget::default(),
            buffer_pool: engine.buffer_pool,
            max_orphans: engine.max_orphans,
            faults: None,
            tso: true,
            xdp: XdpTuning::default(),
            metrics: None,
            metrics_file: None,
            metrics_interval: std::time::Duration::from_secs(1),
        }
    }

    /// The TCP settings Rusty's engines run with: `tcp` and the congestion control asked
    /// for.
    pub fn engine_tcp(&self) -> TcpConfig {
        let mut tcp = self.tcp.clone();
        if let Some(cc) = self.congestion_control {
            tcp.congestion_control = cc;
        }
        tcp
    }

    /// Where the workers will run, for a binary's status line: `tap:tap0
    /// 10.0.2.2,fd00::2 x2, kernel 0.0.0.0 x1`, or the default when no link was named.
    pub fn describe_links(&self) -> String {
        if self.links.is_empty() {
            return "kernel sockets, all addresses".to_string();
        }
        self.links
            .iter()
            .map(|l| format!("{} {} x{}", l.kind, l.describe_addresses(), l.workers))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why the workers could not be built or run.
#[derive(Debug)]
pub enum LaunchError {
    /// A link spec this binary cannot run.
    Link(LinkSpecError),
    /// A TAP device (its name) could not be opened.
    Tap(String, TapError),
    /// The AF_XDP queues of an interface (its name) could not be opened.
    Xdp(String, XdpError),
    /// A real 82599: probing, opening or bringing it up.
    Ixgbe(String, String),
    /// The ixgbe driver on the model: its TAP, or bringing the model up.
    IxgbeModel(String, String),
    /// An mPIPE link (TILE-Gx), or the mPIPE driver on the gxio model.
    Mpipe(String, String),
    /// A worker's capture file could not be created.
    Pcap(PathBuf, std::io::Error),
    /// The runtime could not start the workers.
    Runtime(RuntimeError),
    /// Flags and links that do not go together; the message says why.
    Usage(String),
    /// A kernel-socket listener could not bind its address and port.
    Listen(std::io::Error),
    /// The metrics endpoint or file could not start.
    Metrics(ExportError),
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::Link(e) => write!(f, "{e}"),
            LaunchError::Tap(name, e) => write!(f, "TAP {name}: {e}"),
            LaunchError::Xdp(name, e) => write!(f, "xdp:{name}: {e}"),
            LaunchError::Ixgbe(pci, e) => write!(f, "ixgbe:{pci}: {e}"),
            LaunchError::IxgbeModel(name, e) => write!(f, "ixgbe-model:{name}: {e}"),
            LaunchError::Mpipe(name, e) => write!(f, "{name}: {e}"),
            LaunchError::Pcap(p, e) => write!(f, "pcap file {}: {e}", p.display()),
            LaunchError::Runtime(e) => write!(f, "{e}"),
            LaunchError::Usage(s) => write!(f, "{s}"),
            LaunchError::Listen(e) => write!(f, "{e}"),
            LaunchError::Metrics(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LaunchError {}

impl From<RuntimeError> for LaunchError {
    fn from(e: RuntimeError) -> Self {
        LaunchError::Runtime(e)
    }
}

/// `cap.pcap` for a single worker, `cap.w3.pcap` for worker 3 of several.
fn pcap_path(base: &Path, worker: usize, workers: usize) -> PathBuf {
    if workers <= 1 {
        return base.to_path_buf();
    }
    let stem = base
        .file_stem()
        .map_or_else(|| "capture".into(), |s| s.to_string_lossy().into_owned());
    let name = match base.extension() {
        Some(ext) => format!("{stem}.w{worker}.{}", ext.to_string_lossy()),
        None => format!("{stem}.w{worker}"),
    };
    base.with_file_name(name)
}

/// The ports a server's workers listen on: `Some(port)` or `None` (a client), or a
/// list (`&[80, 443][..]`); every worker's handler gets the connections of all of them,
/// and `accept`'s local address says which.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ports(Vec<u16>);

impl From<Option<u16>> for Ports {
    fn from(port: Option<u16>) -> Ports {
        Ports(port.into_iter().collect())
    }
}

impl From<&[u16]> for Ports {
    fn from(ports: &[u16]) -> Ports {
        Ports(ports.to_vec())
    }
}

/// Build the workers for `launch`; a server passes `listen = Some(port)` (see [`Ports`]).
pub fn workers<H, F>(
    launch: &Launch,
    listen: impl Into<Ports>,
    make_handler: F,
) -> Result<Vec<Worker>, LaunchError>
where
    H: Handler + AppMetrics + 'static,
    F: Fn(&WorkerContext) -> H + Clone + Send + 'static,
{
    let Ports(ports) = listen.into();
    let ports = &ports[..];
    let mut out = Vec::new();
    let default_links;
    let links = if launch.links.is_empty() {
        let n = match &launch.runtime.cpus {
            Some(list) => list.len(),
            None => runtime::allowed_cpus().map_or(1, |c| c.len()),
        };
        default_links = vec![LinkSpec::kernel(n.max(1))];
        &default_links
    } else {
        &launch.links
    };
    let taps = links.iter().filter(|l| opens_a_tap(&l.kind)).count();
    if (launch.tap_host.is_some() || !launch.tap_host_ipv6.is_empty()) && taps != 1 {
        return Err(LaunchError::Usage(format!(
            "--tap-host needs exactly one TAP link, there are {taps}"
        )));
    }
    let mut engines = Engines {
        launch,
        ports,
        make_handler,
        index: 0,
        announced: None,
        total: links
            .iter()
            .filter(|l| !matches!(l.kind, LinkKind::Kernel))
            .map(|l| l.workers)
            .sum(),
    };
    for (link_index, link) in links.iter().enumerate() {
        link.kind.require(BUILT_IN).map_err(LaunchError::Link)?;
        match &link.kind {
            LinkKind::Kernel => {
                let mut cfg = KernelConfig::default();
                cfg.max_connections = launch.max_connections;
                cfg.send_buffer = launch.tcp.send_buffer;
                cfg.congestion_control = launch.congestion_control;
                let any = link.ip.is_unspecified() && link.ipv6.is_empty();
                cfg.listen = ports
                    .iter()
                    .flat_map(|&p| kernel_listen(link, p, launch.backlog))
                    .collect();
                if cfg.check_listen().is_err() && any {
                    for (addr, _) in &mut cfg.listen {
                        addr.set_ip(Ipv4Addr::UNSPECIFIED.into());
                    }
                }
                cfg.check_listen().map_err(LaunchError::Listen)?;
                for w in 0..link.workers {
                    out.push(Worker::new(
                        format!("kernel-{w}"),
                        link_index,
                        Box::new(kernel_worker(cfg.clone(), engines.make_handler.clone())),
                    ));
                }
            }
            LinkKind::Tap { name } => {
                let mut tap = TapConfig::new(name.clone(), link.workers as u16);
                tap.host = launch.tap_host;
                tap.host_ipv6 = launch.tap_host_ipv6.clone();
                let queues =
                    rusty_drivers_tap::open(&tap).map_err(|e| LaunchError::Tap(name.clone(), e))?;
                for (q, dev) in queues.into_iter().enumerate() {
                    let name = format!("{name}-q{q}");
                    out.push(engines.worker(name, link_index, link, dev)?);
                }
            }
            LinkKind::Xdp { ifname } => {
                let t = launch.xdp;
                let mut cfg = XdpConfig::new(ifname.clone(), link.ip, link.workers as u16);
                cfg.ipv6 = xdp_ipv6(ifname, launch, link)?;
                cfg.attach = t.attach;
                cfg.copy = t.copy;
                cfg.ring_size = t.ring_size;
                cfg.frames = t.frames;
                let queues = rusty_drivers_xdp::open(&cfg)
                    .map_err(|e| LaunchError::Xdp(ifname.clone(), e))?;
                for (q, dev) in queues.into_iter().enumerate() {
                    log::info!("xdp:{ifname} queue {q}: {}", dev.mode());
                    let name = format!("xdp-{ifname}-q{q}");
                    out.push(engines.worker(name, link_index, link, dev)?);
                }
            }
            LinkKind::Ixgbe { pci } => {
                let cfg = rusty_drivers_ixgbe::IxgbeConfig::new(link.workers);
                let queues = rusty_drivers_ixgbe::open_pci(pci, &cfg)
                    .map_err(|e| LaunchError::Ixgbe(pci.clone(), e.to_string()))?;
                for (q, dev) in queues.into_iter().enumerate() {
                    let name = format!("ixgbe-{pci}-q{q}");
                    out.push(engines.worker(name, link_index, link, dev)?);
                }
            }
            LinkKind::Mpipe { link: name } => {
                let queues = rusty_drivers_mpipe::open_tilegx(name, link.workers)
                    .map_err(|e| LaunchError::Mpipe(name.clone(), e.to_string()))?;
                for (q, dev) in queues.into_iter().enumerate() {
                    out.push(engines.worker(
                        format!("mpipe-{name}-q{q}"),
                        link_index,
                        link,
                        dev,
                    )?);
                }
            }
            LinkKind::MpipeModel { tap } => {
                for (q, dev) in mpipe_model(tap, link, launch)?.into_iter().enumerate() {
                    let name = format!("mpipe-model-{tap}-q{q}");
                    out.push(engines.worker(name, link_index, link, dev)?);
                }
            }
            LinkKind::IxgbeModel { tap } => {
                for (q, dev) in ixgbe_model(tap, link, launch)?.into_iter().enumerate() {
                    let name = format!("ixgbe-model-{tap}-q{q}");
                    out.push(engines.worker(name, link_index, link, dev)?);
                }
            }
        }
    }
    Ok(out)
}

/// What the kernel backend on `link` listens on for a server on `port`: with every
/// address (`0.0.0.0` and no IPv6 address), `[::]` for both families; otherwise each
/// address given.
fn kernel_listen(link: &LinkSpec, port: u16, backlog: usize) -> Vec<(SocketAddr, usize)> {
    let ips: Vec<IpAddr> = if link.ip.is_unspecified() && link.ipv6.is_empty() {
        vec![Ipv6Addr::UNSPECIFIED.into()]
    } else {
        let v4 = (!link.ip.is_unspecified()).then_some(IpAddr::V4(link.ip));
        v4.into_iter()
            .chain(link.ipv6.iter().map(|&(ip, _)| IpAddr::V6(ip)))
            .collect()
    };
    ips.into_iter()
        .map(|ip| (SocketAddr::new(ip, port), backlog))
        .collect()
}

/// Whether a link opens a TAP device, which `--tap-host` addresses: a TAP link, or a
/// model device, whose wire is a TAP device.
fn opens_a_tap(kind: &LinkKind) -> bool {
    matches!(
        kind,
        LinkKind::Tap { .. } | LinkKind::IxgbeModel { .. } | LinkKind::MpipeModel { .. }
    )
}

/// A TAP device with one queue and no offloads, for a model device's wire (which
/// carries plain frames), and the MAC the model answers to.
fn model_tap(
    tap: &str,
    mac: [u8; 6],
    launch: &Launch,
) -> Result<rusty_drivers_tap::TapQueue, LaunchError> {
    let mut cfg = TapConfig::new(tap.to_string(), 1);
    cfg.offloads = false;
    cfg.host = launch.tap_host;
    cfg.host_ipv6 = launch.tap_host_ipv6.clone();
    cfg.mac = Some(rusty_stack::io::MacAddr(mac));
    rusty_drivers_tap::open(&cfg)
        .map_err(|e| LaunchError::Tap(tap.to_string(), e))?
        .pop()
        .ok_or_else(|| LaunchError::Usage(format!("TAP {tap} opened no queue")))
}

/// The IPv6 addresses the XDP program of `link` on `ifname` redirects to Rusty: the
/// link's own and the link-local address its engines draw from the interface's MAC.
fn xdp_ipv6(ifname: &str, launch: &Launch, link: &LinkSpec) -> Result<Vec<Ipv6Addr>, LaunchError> {
    if link.ipv6.is_empty() {
        return Ok(Vec::new());
    }
    let mac = rusty_netdev::Interface::new(ifname)
        .and_then(|i| i.hw_addr())
        .map_err(|e| LaunchError::Usage(format!("xdp:{ifname}: reading its MAC address: {e}")))?;
    let cfg = engine_config(launch, link);
    let link_local = cfg.link_local(rusty_stack::io::MacAddr(mac));
    Ok(link_local
        .into_iter()
        .chain(link.ipv6.iter().map(|&(ip, _)| ip))
        .collect())
}

/// Log the addresses of `link`, whose engines run on a device with `mac`: the
/// configured ones and, with IPv6, the link-local address they draw.
fn announce_addresses(link: &LinkSpec, cfg: &EngineConfig, mac: rusty_stack::io::MacAddr) {
    let mut all = Vec::new();
    if !link.ip.is_unspecified() {
        all.push(format!("{}/{}", link.ip, link.prefix_len));
    }
    all.extend(link.ipv6.iter().map(|(ip, len)| format!("{ip}/{len}")));
    let Some(link_local) = cfg.link_local(mac) else {
        log::info!("{}: addresses {} (MAC {mac})", link.kind, all.join(", "));
        return;
    };
    all.push(format!("{link_local}/64 (link-local)"));
    log::info!(
        "{}: addresses {} (MAC {mac}); IPv6 ones usable once duplicate address detection \
         passes, about {} s",
        link.kind,
        all.join(", "),
        cfg.dad_transmits
    );
}

/// Bridge `wire` to `port` on a thread that lives as long as the queues that get the
/// returned handle.
fn bridge(
    wire: impl rusty_stack::io::FrameWire,
    port: rusty_drivers_tap::TapQueue,
) -> std::io::Result<Arc<dyn std::any::Any + Send + Sync>> {
    Ok(Arc::new(rusty_runtime::bridge::Bridge::spawn(wire, port)?))
}

/// The ixgbe driver's queues on a model of the 82599 whose wire is the TAP device
/// `tap`, bridged on a thread that lives as long as the queues.
fn ixgbe_model(
    tap: &str,
    link: &LinkSpec,
    launch: &Launch,
) -> Result<Vec<rusty_drivers_ixgbe::IxgbeQueue>, LaunchError> {
    use rusty_drivers_ixgbe::model::{Model, ModelConfig};
    let err = |e: String| LaunchError::IxgbeModel(tap.to_string(), e);
    // A locally administered MAC in Intel's style, as if read from the EEPROM.
    let mac = [0x02, 0x1b, 0x21, 0x00, 0x00, 0x01];
    let model = Model::new(ModelConfig::new(mac, 256 << 20));
    let keep = bridge(model.wire(), model_tap(tap, mac, launch)?)
        .map_err(|e| err(format!("bridge thread: {e}")))?;
    let mut queues = rusty_drivers_ixgbe::open(
        model.device(),
        &rusty_drivers_ixgbe::IxgbeConfig::new(link.workers),
    )
    .map_err(|e| err(e.to_string()))?;
    for q in &mut queues {
        q.keep_alive(Arc::clone(&keep));
    }
    Ok(queues)
}

/// The mPIPE driver's queues on the host model of gxio whose wire is the TAP device
/// `tap`, bridged on a thread that lives as long as the queues.
fn mpipe_model(
    tap: &str,
    link: &LinkSpec,
    launch: &Launch,
) -> Result<Vec<rusty_drivers_mpipe::MpipeQueue>, LaunchError> {
    use rusty_drivers_mpipe::model::{Model, ModelConfig};
    let err = |e: String| LaunchError::Mpipe(format!("mpipe-model:{tap}"), e);
    let mac = [0x02, 0x00, 0x7a, 0x00, 0x00, 0x01];
    let model = Model::new(ModelConfig::new(mac));
    let keep = bridge(model.wire(), model_tap(tap, mac, launch)?)
        .map_err(|e| err(format!("bridge thread: {e}")))?;
    let mut queues = rusty_drivers_mpipe::open(
        model.gxio(),
        "xgbe0",
        &rusty_drivers_mpipe::MpipeConfig::new(link.workers),
    )
    .map_err(|e| err(e.to_string()))?;
    for q in &mut queues {
        q.keep_alive(Arc::clone(&keep));
    }
    Ok(queues)
}

type Body = Box<dyn FnOnce(WorkerContext) -> Stats + Send>;

/// Builds Rusty engine workers, numbering them across links (for capture files and
/// fault seeds).
struct Engines<'a, F> {
    launch: &'a Launch,
    ports: &'a [u16],
    make_handler: F,
    /// Engine workers built so far, and how many there will be.
    index: usize,
    total: usize,
    /// The link whose addresses were logged last (each is, with its first worker).
    announced: Option<usize>,
}

impl<F> Engines<'_, F> {
    /// An engine worker on `dev`, queue of `link`.
    fn worker<H, D>(
        &mut self,
        name: String,
        link_index: usize,
        link: &LinkSpec,
        dev: D,
    ) -> Result<Worker, LaunchError>
    where
        H: Handler + AppMetrics + 'static,
        F: Fn(&WorkerContext) -> H + Clone + Send + 'static,
        D: PacketIo + Send + 'static,
        D::Tx: Send,
    {
        let launch = self.launch;
        let cfg = engine_config(launch, link);
        if self.index == 0 {
            announce_memory::<H>(&cfg, self.total);
        }
        if self.announced != Some(link_index) {
            self.announced = Some(link_index);
            announce_addresses(link, &cfg, dev.capabilities().mac);
        }
        let ports = self.ports.iter().map(|&p| (p, launch.backlog)).collect();
        let pcap = launch
            .pcap
            .as_ref()
            .map(|base| pcap_path(base, self.index, self.total));
        let faults = launch
            .faults
            .map(|(f, seed)| (f, seed.wrapping_add(self.index as u64)));
        self.index += 1;
        let body = engine_body(dev, pcap, faults, cfg, ports, self.make_handler.clone())?;
        Ok(Worker::new(name, link_index, body))
    }
}

/// The configuration of an engine on `link` with `launch`'s settings. Its IPv6
/// link-local address is drawn with a secret derived from the machine ID and the link's
/// name (see the `secret` module), so it stays the same across restarts.
pub fn engine_config(launch: &Launch, link: &LinkSpec) -> EngineConfig {
    let mut cfg = EngineConfig::new(link.ip);
    cfg.prefix_len = link.prefix_len;
    cfg.ipv6 = link.ipv6.clone();
    cfg.gateway = link.gateway;
    cfg.ipv6_gateway = link.ipv6_gateway;
    if !cfg.ipv6.is_empty() {
        cfg.stable_secret = crate::secret::stable_secret(&link.kind.to_string());
    }
    cfg.tcp = launch.engine_tcp();
    cfg.max_connections = launch.max_connections;
    cfg.reserved_connections = launch.reserved_connections;
    cfg.max_time_wait = launch.max_time_wait;
    cfg.ephemeral_ports = launch.ephemeral_ports.clone();
    cfg.memory = launch.memory;
    cfg.buffer_pool = launch.buffer_pool;
    cfg.max_orphans = launch.max_orphans;
    cfg.tso = launch.tso;
    cfg
}

/// An engine worker over `dev`, wrapped in the capture and fault decorators asked for.
fn engine_body<D, H, F>(
    dev: D,
    pcap: Option<PathBuf>,
    faults: Option<(FaultConfig, u64)>,
    cfg: EngineConfig,
    ports: Vec<(u16, usize)>,
    make_handler: F,
) -> Result<Body, LaunchError>
where
    D: PacketIo + Send + 'static,
    D::Tx: Send,
    H: Handler + AppMetrics + 'static,
    F: FnOnce(&WorkerContext) -> H + Send + 'static,
{
    let capture = |dev: D| -> Result<_, LaunchError> {
        let path = pcap.clone().unwrap_or_default();
        PcapCapture::create(dev, SystemClock::new(), &path).map_err(|e| LaunchError::Pcap(path, e))
    };
    fn inject<D: PacketIo>(dev: D, (f, seed): (FaultConfig, u64)) -> FaultInjector<D, SystemClock> {
        FaultInjector::new(dev, SystemClock::new(), f, seed)
    }
    Ok(match (&pcap, faults) {
        (None, None) => Box::new(runtime::engine_worker(dev, cfg, ports, make_handler)),
        (Some(_), None) => Box::new(runtime::engine_worker(
            capture(dev)?,
            cfg,
            ports,
            make_handler,
        )),
        (None, Some(f)) => Box::new(runtime::engine_worker(
            inject(dev, f),
            cfg,
            ports,
            make_handler,
        )),
        // Capture what the injector lets through, as the peer sees it.
        (Some(_), Some(f)) => Box::new(runtime::engine_worker(
            inject(capture(dev)?, f),
            cfg,
            ports,
            make_handler,
        )),
    })
}

/// Build the workers (opening every link), start the metrics endpoint and file if
/// `launch` asks for them, call `ready` (where a binary says it is listening: only once
/// its links are open), then run them until they stop; returns each worker's counters.
/// The metrics file gets the workers' last counters before this returns.
pub fn run<H, F>(
    launch: &Launch,
    listen: impl Into<Ports>,
    stop: &StopHandle,
    make_handler: F,
    ready: impl FnOnce(),
) -> Result<Vec<Stats>, LaunchError>
where
    H: Handler + AppMetrics + 'static,
    F: Fn(&WorkerContext) -> H + Clone + Send + 'static,
{
    let workers = workers(launch, listen, make_handler)?;
    let mut cfg = launch.runtime.clone();
    let exporter = metrics::export(launch, &workers, &mut cfg)?;
    ready();
    let stats = runtime::run(workers, &cfg, stop);
    // The file, if any, gets the workers' last counters before run returns.
    drop(exporter);
    Ok(stats?)
}

/// Where an application's workers leave their own counters when their handlers are
/// dropped: (worker index, counters). httpd, `echo --discard` and `ws-echo` use one.
pub type CounterSink<T> = Arc<std::sync::Mutex<Vec<(usize, T)>>>;

/// An application's counters for [`log_counters`]: a label, the sink its workers filled
/// and how two counter sets add up.
pub type AppCounters<'a, T> = (&'a str, &'a CounterSink<T>, fn(&mut T, &T));

/// What a server binary logs when [`run`] returns: each worker's stack counters, then
/// (with `app`) each worker's application counters in worker order and their total.
pub fn log_counters<T: Clone + Default + fmt::Display>(
    stats: &[Stats],
    app: Option<AppCounters<'_, T>>,
) {
    for (i, s) in stats.iter().enumerate() {
        log::info!("worker {i}: {s}");
    }
    let Some((label, sink, add)) = app else {
        return;
    };
    let mut per_worker = sink.lock().map(|v| v.clone()).unwrap_or_default();
    per_worker.sort_by_key(|(i, _)| *i);
    let mut total = T::default();
    for (i, s) in &per_worker {
        log::info!("{label} worker {i}: {s}");
        add(&mut total, s);
    }
    log::info!("{label} total: {total}");
}

/// Says at start what memory each of `workers` engine workers sets aside and what bounds
/// the rest, with the flags that size each.
fn announce_memory<H: Handler>(cfg: &EngineConfig, workers: usize) {
    const MIB: f64 = (1 << 20) as f64;
    let room = cfg.reserved_connections.min(cfg.max_connections);
    log::info!(
        "rusty: each of {workers} workers reserves {:.1} MiB of address space for {room} \
         connections (--reserved-connections; resident only as connections use it), keeps \
         up to {:.0} MiB of drained buffers for reuse ({} size classes of --buffer-pool \
         {:.1} MiB) and lets its connections' buffers hold up to {:.0} MiB (--tcp-mem)",
        rusty_stack::engine::reserved_bytes::<H>(cfg) as f64 / MIB,
        (CLASSES * cfg.buffer_pool) as f64 / MIB,
        CLASSES,
        cfg.buffer_pool as f64 / MIB,
        cfg.memory.limit as f64 / MIB,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcap_paths_per_worker() {
        assert_eq!(
            pcap_path(Path::new("/tmp/x.pcap"), 0, 1),
            PathBuf::from("/tmp/x.pcap")
        );
        assert_eq!(
            pcap_path(Path::new("/tmp/x.pcap"), 2, 3),
            PathBuf::from("/tmp/x.w2.pcap")
        );
        assert_eq!(pcap_path(Path::new("cap"), 1, 2), PathBuf::from("cap.w1"));
    }

    #[test]
    fn every_link_with_a_tap_device_takes_tap_host() {
        let s = |v: &str| v.to_string();
        assert!(opens_a_tap(&LinkKind::Tap { name: s("tap0") }));
        assert!(opens_a_tap(&LinkKind::IxgbeModel { tap: s("tap0") }));
        assert!(opens_a_tap(&LinkKind::MpipeModel { tap: s("tap0") }));
        assert!(!opens_a_tap(&LinkKind::Kernel));
        assert!(!opens_a_tap(&LinkKind::Xdp { ifname: s("eth0") }));
        assert!(!opens_a_tap(&LinkKind::Ixgbe {
            pci: s("0000:01:00.0")
        }));
        assert!(!opens_a_tap(&LinkKind::Mpipe { link: s("xgbe1") }));
    }

    #[test]
    fn links_are_described_for_status_lines() {
        assert_eq!(
            Launch::new(Vec::new()).describe_links(),
            "kernel sockets, all addresses"
        );
        let links = crate::cli::link::parse_links(&[
            "2",
            "tap0",
            "10.0.2.2",
            "2",
            "kernel",
            "127.0.0.1",
            "1",
        ])
        .unwrap();
        assert_eq!(
            Launch::new(links).describe_links(),
            "tap:tap0 10.0.2.2 x2, kernel 127.0.0.1 x1"
        );
    }

    #[test]
    fn a_kernel_link_listens_on_each_address_or_on_every_one() {
        let listen = |spec: &str| {
            let links = crate::cli::link::parse_links(&["1", "kernel", spec, "1"]).unwrap();
            kernel_listen(&links[0], 80, 16)
                .into_iter()
                .map(|(a, _)| a.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(listen("0.0.0.0"), ["[::]:80"]);
        assert_eq!(listen("::"), ["[::]:80"]);
        assert_eq!(listen("127.0.0.1"), ["127.0.0.1:80"]);
        assert_eq!(listen("::1"), ["[::1]:80"]);
        assert_eq!(listen("127.0.0.1,::1"), ["127.0.0.1:80", "[::1]:80"]);
    }

    /// An engine takes the link's IPv6 addresses, its gateways, and a secret of the
    /// machine's and the link's, so its link-local address stays put across restarts
    /// (and engine configs).
    #[test]
    fn engines_take_the_links_ipv6_addresses_and_a_stable_secret() {
        let links = crate::cli::link::parse_links(&[
            "3",
            "tap0",
            "10.0.2.2/24,fd00::2",
            "1",
            "tap1",
            "fd01::2/56",
            "1",
            "tap2",
            "10.0.4.2",
            "1",
        ])
        .unwrap();
        let mut links = links;
        links[0].gateway = Some(Ipv4Addr::new(10, 0, 2, 1));
        links[0].ipv6_gateway = Some("fe80::1".parse().unwrap());
        let l = Launch::new(links.clone());
        let dual = engine_config(&l, &links[0]);
        assert_eq!(dual.ip, Ipv4Addr::new(10, 0, 2, 2));
        assert_eq!(dual.ipv6, vec![("fd00::2".parse().unwrap(), 64)]);
        assert_eq!(
            (dual.gateway, dual.ipv6_gateway),
            (links[0].gateway, links[0].ipv6_gateway)
        );
        let only6 = engine_config(&l, &links[1]);
        assert!(only6.ip.is_unspecified());
        assert_eq!(only6.ipv6, vec![("fd01::2".parse().unwrap(), 56)]);
        let mac = rusty_stack::io::MacAddr([2, 0, 0, 0, 0, 9]);
        let ll = dual
            .link_local(mac)
            .expect("an IPv6 link has a link-local address");
        assert!(ll.is_unicast_link_local());
        assert_eq!(engine_config(&l, &links[0]).link_local(mac), Some(ll));
        assert_eq!(engine_config(&l, &links[2]).link_local(mac), None);
    }

    /// Links this host cannot open are refused with the reason, never a panic: an 82599
    /// that is not there, an mPIPE link off a TILE-Gx.
    #[test]
    fn links_this_host_cannot_open_are_refused_clearly() {
        for (spec, want) in [
            ("ixgbe:0000:7f:1f.7", "there is no PCI device 0000:7f:1f.7"),
            (
                "xgbe1",
                "mPIPE needs a TILE-Gx; on this host use mpipe-model:TAP",
            ),
            ("mpipe:gbe0", "mPIPE needs a TILE-Gx"),
        ] {
            let links = crate::cli::link::parse_links(&["1", spec, "10.0.0.2", "1"]).unwrap();
            let l = Launch::new(links);
            let err = workers(&l, Some(80), |_: &WorkerContext| rusty_echo_free_handler())
                .err()
                .unwrap_or_else(|| panic!("{spec} opened"));
            assert!(err.to_string().contains(want), "{spec}: {err}");
        }
        // A driver this binary lacks is named as such.
        let e = LinkKind::Ixgbe { pci: "x".into() }
            .require(&["kernel"])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the ixgbe driver is not built into this binary"
        );
    }

    /// A handler type for the tests above (never run).
    fn rusty_echo_free_handler() -> Nothing {
        Nothing
    }
    struct Nothing;
    impl AppMetrics for Nothing {}
    impl Handler for Nothing {
        type Conn = ();
        fn accept(&mut self, _: std::net::SocketAddr, _: std::net::SocketAddr) -> Option<()> {
            None
        }
        fn data(&mut self, _: &mut rusty_stack::Conn<'_, ()>, d: &[u8]) -> usize {
            d.len()
        }
    }
}
