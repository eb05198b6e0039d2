//! The command line every Rusty binary shares: the flags (clap) and how they shape a
//! [`Launch`]. The grammars of its values live beside it: link specs in [`link`],
//! addresses, CPU lists and congestion-control names in [`parse`]; the logger the flags
//! choose in [`logging`]; the servers' TLS flags in [`tls`].

pub mod gateway;
pub mod link;
pub mod logging;
pub mod parse;
pub mod tls;

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::launch::{Launch, XdpTuning};
use gateway::{parse_gateway, Gateway};
use link::parse_links;
pub use logging::LogLevel;
use parse::{
    parse_congestion, parse_cpus, parse_host_addresses, parse_memory_budget, parse_port_range,
    parse_size, Addresses,
};
use rusty_drivers_xdp::{AttachMode, CopyMode};
use rusty_stack::io::fault::FaultConfig;
use rusty_stack::CongestionAlgorithm;
use rusty_stack::MemoryBudget;

fn parse_xdp_attach(s: &str) -> Result<AttachMode, String> {
    match s {
        "auto" => Ok(AttachMode::Auto),
        "native" => Ok(AttachMode::Native),
        "generic" => Ok(AttachMode::Generic),
        _ => Err(format!("'{s}' (expected auto, native or generic)")),
    }
}

fn parse_xdp_copy(s: &str) -> Result<CopyMode, String> {
    match s {
        "auto" => Ok(CopyMode::Auto),
        "zero-copy" => Ok(CopyMode::ZeroCopy),
        "copy" => Ok(CopyMode::Copy),
        _ => Err(format!("'{s}' (expected auto, zero-copy or copy)")),
    }
}

/// A CPU list such as `0,2-3` (one clap value, not several).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    parse_cpus(s).map(CpuList)
}

/// The address `--metrics` serves on: an IP address and a port.
fn parse_metrics_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    s.parse().map_err(|_| {
        format!(
            "'{s}' is not an address and port (such as 127.0.0.1:9464, [::1]:9464 or \
             0.0.0.0:9464)"
        )
    })
}

/// A count of at least 1.
fn parse_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("'{s}': {e}")),
    }
}

/// The flags every Rusty binary takes: links and workers' placement, logging, engine
/// and AF_XDP tuning, and fault injection for tests. Flatten it into a binary's clap
/// parser and turn it into a [`Launch`] with [`CommonArgs::launch`].
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Write every frame of Rusty's workers to this pcap file (one file per worker,
    /// NAME.wN.pcap, when there are several).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Print per-worker counters every SECONDS.
    #[arg(long, value_name = "SECONDS")]
    pub stats: Option<u64>,
    /// Serve live metrics (every worker's counters, Prometheus text format) at
    /// http://ADDR:PORT/metrics, from a thread of their own on kernel sockets.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_metrics_addr)]
    pub metrics: Option<std::net::SocketAddr>,
    /// Write the same metrics to PATH every second (a temporary file renamed over it),
    /// for node_exporter's textfile collector.
    #[arg(long, value_name = "PATH")]
    pub metrics_file: Option<PathBuf>,
    /// Configure the host side of the TAP link with these addresses, as a link's are
    /// written: one IPv4 address, IPv6 addresses or both, comma-separated (e.g.
    /// 10.0.2.1/24,fd00::1/64; without a prefix, /24 for IPv4 and /64 for IPv6). IPv6
    /// addresses are usable at once (no duplicate address detection).
    #[arg(long, value_name = "ADDRESSES", value_parser = parse_host_addresses)]
    pub tap_host: Option<Addresses>,
    /// Rusty's links: send traffic outside a link's subnet to this router, one per
    /// family and link (repeat the flag). A gateway goes to the link whose subnet holds
    /// it; a link-local IPv6 one names its link after '%' (fe80::1%tap0) unless only one
    /// link has IPv6. Without one, every address of that family is on-link.
    #[arg(long, value_name = "ADDRESS", value_parser = parse_gateway)]
    pub gateway: Vec<Gateway>,
    /// Pin workers to these CPUs, in order (e.g. 0,2-3); default: the allowed CPU set.
    #[arg(long, value_name = "LIST", value_parser = parse_cpu_list)]
    pub cpus: Option<CpuList>,
    /// Allow more workers than CPUs.
    #[arg(long)]
    pub oversubscribe: bool,
    /// Microseconds an idle worker keeps polling before it sleeps on its queue.
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 200)]
    pub spin_us: u64,
    /// Seconds open connections may run on after SIGINT/SIGTERM.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub grace: u64,
    /// How much goes to stderr. Given, this level wins; otherwise RUST_LOG applies
    /// (env_logger syntax, e.g. rusty_stack=debug; targets it does not name stay at
    /// info); otherwise info, which shows status lines and worker counters.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub log_level: Option<LogLevel>,
    /// Connections a listener may have half-open or waiting to be accepted (the
    /// `listen(2)` backlog on kernel sockets; on Rusty's stack, SYNs beyond it are
    /// answered with SYN cookies).
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub backlog: u32,
    /// Rusty's engines: the budget for the buffer memory each worker's connections hold,
    /// LOW,PRESSURE,LIMIT in bytes (K, M, G suffixes), like Linux's tcp_mem: from
    /// PRESSURE until below LOW, out-of-order data is pruned, windows stop opening and
    /// send buffers stop growing; in-order data beyond LIMIT is dropped unacknowledged.
    #[arg(long, value_name = "LOW,PRESSURE,LIMIT", value_parser = parse_memory_budget, default_value = "128M,192M,256M")]
    pub tcp_mem: MemoryBudget,
    /// Rusty's engines: bytes of drained connection buffers each worker keeps for reuse
    /// in each of its 8 size classes (2 KiB … 256 KiB rings; K, M, G suffixes); beyond
    /// it drained buffers go back to the allocator.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "4M")]
    pub buffer_pool: usize,
    /// Rusty's engines: most orphans (connections the application closed whose data or
    /// FIN is not yet acknowledged) per worker; past it the oldest is reset.
    #[arg(long, value_name = "N", default_value_t = 16384)]
    pub max_orphans: usize,
    /// The connection table's limit per worker (TIME-WAIT not counted), on Rusty's
    /// engines and on kernel sockets alike; past it the stack refuses new connections
    /// before the application sees them. (An application's own limit, such as httpd's
    /// --max-connections, counts what it accepts.)
    #[arg(long, value_name = "N", default_value_t = 65536, value_parser = parse_count)]
    pub engine_max_connections: usize,
    /// Rusty's engines: connection-table room each worker reserves at start, so that
    /// the tables never move up to this many connections (address space until used).
    /// Default: --engine-max-connections, at most 65536; raise both on workers meant to
    /// hold hundreds of thousands.
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub reserved_connections: Option<usize>,
    /// Rusty's engines: most TIME-WAIT entries per worker (about 40 bytes each); past
    /// it, closing connections skip TIME-WAIT, as with Linux's tcp_max_tw_buckets.
    #[arg(long, value_name = "N", default_value_t = 65536)]
    pub max_time_wait: usize,
    /// Rusty's engines: local ports for active opens, LOW-HIGH (Linux's
    /// ip_local_port_range). Taken per destination, so each server address and port
    /// gets the whole range.
    #[arg(long, value_name = "LOW-HIGH", value_parser = parse_port_range, default_value = "32768-60999")]
    pub ephemeral_ports: std::ops::RangeInclusive<u16>,
    /// Rusty's engines: seconds an orphan may go without progress before it gives up.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub orphan_timeout: u64,
    /// Send bulk data as MTU-sized segments even where the device offers TSO.
    #[arg(long)]
    pub no_tso: bool,
    /// Congestion control: cubic or newreno. Rusty's engines run CUBIC without it; the
    /// kernel backend asks the kernel for it (TCP_CONGESTION; NewReno is the kernel's
    /// reno) and otherwise keeps the system default.
    #[arg(long, value_name = "NAME", value_parser = parse_congestion)]
    pub cc: Option<CongestionAlgorithm>,
    /// AF_XDP links: where the XDP program runs: auto (native where the driver
    /// supports it, else generic), native or generic.
    #[arg(long, value_name = "MODE", value_parser = parse_xdp_attach, default_value = "auto")]
    pub xdp_attach: AttachMode,
    /// AF_XDP links: auto (zero-copy where the driver supports it, else copy),
    /// zero-copy or copy.
    #[arg(long, value_name = "MODE", value_parser = parse_xdp_copy, default_value = "auto")]
    pub xdp_copy: CopyMode,
    /// AF_XDP links: entries of each ring (fill, completion, RX, TX; a power of two).
    #[arg(long, value_name = "ENTRIES", default_value_t = 2048)]
    pub xdp_ring: u32,
    /// AF_XDP links: frames in each worker's UMEM (2 KiB each at MTU 1500).
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub xdp_frames: u32,
    /// Testing: drop this fraction (0..1) of the frames Rusty's workers send.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub fault_loss: f64,
    /// Testing: duplicate this fraction of sent frames.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub fault_duplicate: f64,
    /// Testing: hold back this fraction of sent frames by 2 ms, so later ones overtake.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub fault_reorder: f64,
    /// Testing: seed of the fault injector.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub fault_seed: u64,
}

impl CommonArgs {
    /// A [`Launch`] for the positional link arguments `links` with these flags.
    pub fn launch(&self, links: &[String]) -> Result<Launch, String> {
        let mut links = parse_links(links).map_err(|e| e.to_string())?;
        gateway::assign(&mut links, &self.gateway)?;
        let mut l = Launch::new(links);
        l.pcap = self.pcap.clone();
        l.metrics = self.metrics;
        l.metrics_file = self.metrics_file.clone();
        if let Some(host) = &self.tap_host {
            l.tap_host = host.ipv4;
            l.tap_host_ipv6 = host.ipv6.clone();
        }
        l.runtime.cpus = self.cpus.clone().map(|c| c.0);
        l.runtime.oversubscribe = self.oversubscribe;
        l.runtime.spin = Duration::from_micros(self.spin_us);
        l.runtime.grace = Duration::from_secs(self.grace);
        l.runtime.stats_interval = self.stats.filter(|&s| s > 0).map(Duration::from_secs);
        l.tso = !self.no_tso;
        l.backlog = self.backlog as usize;
        l.memory = self.tcp_mem;
        l.buffer_pool = self.buffer_pool;
        l.max_orphans = self.max_orphans;
        l.max_connections = self.engine_max_connections;
        l.reserved_connections = self
            .reserved_connections
            .unwrap_or(self.engine_max_connections.min(l.reserved_connections));
        l.max_time_wait = self.max_time_wait;
        l.ephemeral_ports = self.ephemeral_ports.clone();
        l.tcp.orphan_timeout = Duration::from_secs(self.orphan_timeout);
        l.congestion_control = self.cc;
        l.xdp = XdpTuning {
            attach: self.xdp_attach,
            copy: self.xdp_copy,
            ring_size: self.xdp_ring,
            frames: self.xdp_frames,
        };
        for (name, p) in [
            ("--fault-loss", self.fault_loss),
            ("--fault-duplicate", self.fault_duplicate),
            ("--fault-reorder", self.fault_reorder),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{name} must be between 0 and 1"));
            }
        }
        if self.fault_loss + self.fault_duplicate + self.fault_reorder > 0.0 {
            let f = FaultConfig::none()
                .with_loss(self.fault_loss)
                .with_duplicate(self.fault_duplicate)
                .with_reorder(self.fault_reorder)
                .with_reorder_delay(Duration::from_millis(2));
            l.faults = Some((f, self.fault_seed));
        }
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        links: Vec<String>,
        #[command(flatten)]
        common: CommonArgs,
    }

    #[test]
    fn flags_parse_into_a_launch() {
        let cli = Cli::try_parse_from([
            "x",
            "1",
            "tap0",
            "10.0.0.2/24",
            "2",
            "--cpus",
            "0,1",
            "--oversubscribe",
            "--stats",
            "5",
            "--tap-host",
            "10.0.0.1/24",
            "--fault-loss",
            "0.1",
        ])
        .unwrap();
        let l = cli.common.launch(&cli.links).unwrap();
        assert_eq!(l.runtime.cpus, Some(vec![0, 1]));
        assert!(l.runtime.oversubscribe);
        assert_eq!(l.runtime.stats_interval, Some(Duration::from_secs(5)));
        assert_eq!(l.tap_host, Some((std::net::Ipv4Addr::new(10, 0, 0, 1), 24)));
        assert!(l.tap_host_ipv6.is_empty());
        assert_eq!(l.links[0].prefix_len, 24);
        assert_eq!(l.links.len(), 1);
        assert!(l.faults.is_some());
        assert_eq!(l.backlog, 1024, "the default");
        assert_eq!(l.memory, rusty_stack::MemoryBudget::default());
        assert_eq!(l.max_orphans, 16384);
        assert_eq!(l.tcp.orphan_timeout, Duration::from_secs(60));
        let engine = rusty_stack::EngineConfig::new(std::net::Ipv4Addr::UNSPECIFIED);
        assert_eq!(l.max_connections, engine.max_connections);
        assert_eq!(l.reserved_connections, engine.reserved_connections);
        assert_eq!(l.max_time_wait, engine.max_time_wait);
        assert_eq!(l.ephemeral_ports, engine.ephemeral_ports);
        let million = Cli::try_parse_from([
            "x",
            "--engine-max-connections",
            "1000000",
            "--reserved-connections",
            "1000000",
            "--max-time-wait",
            "200000",
            "--ephemeral-ports",
            "1024-65535",
        ])
        .unwrap();
        let l = million.common.launch(&million.links).unwrap();
        assert_eq!(
            (l.max_connections, l.reserved_connections),
            (1_000_000, 1_000_000)
        );
        assert_eq!(l.max_time_wait, 200_000);
        assert_eq!(l.ephemeral_ports, 1024..=65535);
        let few = Cli::try_parse_from(["x", "--engine-max-connections", "100"]).unwrap();
        let l = few.common.launch(&few.links).unwrap();
        assert_eq!(l.reserved_connections, 100, "no more room than connections");
        assert!(Cli::try_parse_from(["x", "--engine-max-connections", "0"]).is_err());
        assert!(Cli::try_parse_from(["x", "--ephemeral-ports", "60000-1024"]).is_err());
        assert!(Cli::try_parse_from(["x", "--ephemeral-ports", "0-10"]).is_err());
        assert!(Cli::try_parse_from(["x", "--ephemeral-ports", "1024"]).is_err());
        let tight = Cli::try_parse_from([
            "x",
            "--tcp-mem",
            "1M,2M,4M",
            "--max-orphans",
            "10",
            "--orphan-timeout",
            "5",
        ])
        .unwrap();
        let l = tight.common.launch(&tight.links).unwrap();
        assert_eq!((l.memory.pressure, l.memory.limit), (2 << 20, 4 << 20));
        assert_eq!(l.max_orphans, 10);
        assert_eq!(l.tcp.orphan_timeout, Duration::from_secs(5));
        assert!(Cli::try_parse_from(["x", "--tcp-mem", "4M,2M,1M"]).is_err());
        assert!(Cli::try_parse_from(["x", "--orphan-timeout", "0"]).is_err());
        let small = Cli::try_parse_from(["x", "--backlog", "16"]).unwrap();
        assert_eq!(small.common.launch(&small.links).unwrap().backlog, 16);
        assert!(Cli::try_parse_from(["x", "--backlog", "0"]).is_err());
        let bad = Cli::try_parse_from(["x", "--fault-loss", "2"]).unwrap();
        assert!(bad.common.launch(&bad.links).is_err());
        assert!(Cli::try_parse_from(["x", "--cpus", "a"]).is_err());
        assert_eq!(
            cli.common.log_level, None,
            "no flag: RUST_LOG or info decide"
        );
        let quiet = Cli::try_parse_from(["x", "--log-level", "trace"]).unwrap();
        assert_eq!(quiet.common.log_level, Some(LogLevel::Trace));
        assert!(Cli::try_parse_from(["x", "--log-level", "loud"]).is_err());
    }

    #[test]
    fn metrics_takes_an_address_and_a_port() {
        let none = Cli::try_parse_from(["x"]).unwrap();
        let l = none.common.launch(&none.links).unwrap();
        assert_eq!((l.metrics, l.metrics_file), (None, None));
        let cli = Cli::try_parse_from([
            "x",
            "--metrics",
            "[::1]:9464",
            "--metrics-file",
            "/tmp/rusty.prom",
        ])
        .unwrap();
        let l = cli.common.launch(&cli.links).unwrap();
        assert_eq!(l.metrics, Some("[::1]:9464".parse().unwrap()));
        assert_eq!(l.metrics_file, Some(PathBuf::from("/tmp/rusty.prom")));
        for bad in ["9464", "localhost:9464", "127.0.0.1", "127.0.0.1:99999", ""] {
            let err = Cli::try_parse_from(["x", "--metrics", bad]).unwrap_err();
            assert!(
                err.to_string().contains("is not an address and port"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn cc_chooses_the_congestion_control_of_both_backends() {
        let none = Cli::try_parse_from(["x"]).unwrap();
        let l = none.common.launch(&none.links).unwrap();
        assert_eq!(l.congestion_control, None, "each backend's default");
        assert_eq!(
            l.engine_tcp().congestion_control,
            CongestionAlgorithm::Cubic
        );
        let reno = Cli::try_parse_from(["x", "--cc", "newreno"]).unwrap();
        let l = reno.common.launch(&reno.links).unwrap();
        assert_eq!(l.congestion_control, Some(CongestionAlgorithm::NewReno));
        assert_eq!(
            l.engine_tcp().congestion_control,
            CongestionAlgorithm::NewReno
        );
        let cubic = Cli::try_parse_from(["x", "--cc", "cubic"]).unwrap();
        let l = cubic.common.launch(&cubic.links).unwrap();
        assert_eq!(l.congestion_control, Some(CongestionAlgorithm::Cubic));
        let err = Cli::try_parse_from(["x", "--cc", "bbr"]).unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown congestion control 'bbr' (expected cubic or newreno)"),
            "{err}"
        );
        assert!(Cli::try_parse_from(["x", "--cc"]).is_err());
    }

    #[test]
    fn xdp_flags_tune_the_af_xdp_links() {
        let d = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(d.common.launch(&d.links).unwrap().xdp, XdpTuning::default());
        let cli = Cli::try_parse_from([
            "x",
            "--xdp-attach",
            "generic",
            "--xdp-copy",
            "copy",
            "--xdp-ring",
            "512",
            "--xdp-frames",
            "1024",
        ])
        .unwrap();
        let t = cli.common.launch(&cli.links).unwrap().xdp;
        assert_eq!(
            (t.attach, t.copy, t.ring_size, t.frames),
            (AttachMode::Generic, CopyMode::Copy, 512, 1024)
        );
        let err = Cli::try_parse_from(["x", "--xdp-attach", "fast"]).unwrap_err();
        assert!(
            err.to_string().contains("expected auto, native or generic"),
            "{err}"
        );
    }

    #[test]
    fn tap_host_reads_like_a_link_address() {
        let bare = Cli::try_parse_from(["x", "--tap-host", "10.0.0.1"]).unwrap();
        let l = bare.common.launch(&bare.links).unwrap();
        assert_eq!(l.tap_host, Some((std::net::Ipv4Addr::new(10, 0, 0, 1), 24)));
        let wide = Cli::try_parse_from(["x", "--tap-host", "10.0.0.1/16"]).unwrap();
        assert_eq!(
            wide.common.tap_host.and_then(|h| h.ipv4).map(|h| h.1),
            Some(16)
        );
        let dual = Cli::try_parse_from(["x", "--tap-host", "10.0.0.1/24,fd00::1"]).unwrap();
        let l = dual.common.launch(&dual.links).unwrap();
        assert_eq!(l.tap_host.map(|h| h.1), Some(24));
        assert_eq!(l.tap_host_ipv6, vec![("fd00::1".parse().unwrap(), 64)]);
        let only6 = Cli::try_parse_from(["x", "--tap-host", "fd00::1/120"]).unwrap();
        let l = only6.common.launch(&only6.links).unwrap();
        assert_eq!((l.tap_host, l.tap_host_ipv6.len()), (None, 1));
        let err = Cli::try_parse_from(["x", "--tap-host", "10.0.0.1,10.0.0.3"]).unwrap_err();
        assert!(
            err.to_string().contains("at most one IPv4 address"),
            "{err}"
        );
        assert!(Cli::try_parse_from(["x", "--tap-host", "ff02::1"]).is_err());
        let err = Cli::try_parse_from(["x", "--tap-host", "10.0.0.1/40"]).unwrap_err();
        assert!(
            err.to_string().contains("prefix length /40 is over 32"),
            "{err}"
        );
        assert!(Cli::try_parse_from(["x", "--tap-host", "tap0"]).is_err());
    }
}
