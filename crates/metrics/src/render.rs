//! A [`Board`]'s snapshots as one document in the text format: the stack's counters
//! (every field of [`Stats`], drops by reason), the connections each worker holds, and
//! each application family, every sample labelled with its worker (and with the
//! process that took it, for a snapshot that names one).

use std::time::Instant;

use rusty_stack::stats::DropReason;
use rusty_stack::Stats;

use crate::board::{Board, Snapshot};
use crate::report::AppSample;
use crate::text::{Exposition, Format, Kind};

/// One exported field of [`Stats`]. Consecutive entries of one name make one family.
pub(crate) struct Field {
    /// The field of `Stats` it reads, `memory.x` for those of the memory counters (for
    /// the test that every field is exported).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) field: &'static str,
    name: &'static str,
    help: &'static str,
    kind: Kind,
    label: Option<(&'static str, &'static str)>,
    pub(crate) get: fn(&Stats) -> u64,
    /// Writes the field (for [`flat`](crate::flat), which carries snapshots between
    /// processes).
    pub(crate) set: fn(&mut Stats, u64),
}

macro_rules! fields {
    ($( $field:ident $(. $sub:ident)? => $name:literal $( { $l:literal = $v:literal } )?
        $kind:ident $help:literal; )*) => {
        &[$( Field {
            field: stringify!($field $(. $sub)?),
            name: $name,
            help: $help,
            kind: Kind::$kind,
            label: fields!(@label $( $l, $v )?),
            get: |s: &Stats| s.$field $(. $sub)?,
            set: |s: &mut Stats, v: u64| s.$field $(. $sub)? = v,
        }, )*]
    };
    (@label) => { None };
    (@label $l:literal, $v:literal) => { Some(($l, $v)) };
}

/// The stack's counters (drops by reason are written apart).
pub(crate) const FIELDS: &[Field] = fields! {
    frames_in => "rusty_frames_received_total" Counter
        "Frames received from the device or handed over by a sibling worker (0 on kernel sockets).";
    frames_out => "rusty_frames_sent_total" Counter "Frames handed to the device (0 on kernel sockets).";
    bytes_in => "rusty_received_bytes_total" Counter
        "Bytes of the frames received; on kernel sockets, TCP payload bytes read.";
    bytes_out => "rusty_sent_bytes_total" Counter
        "Bytes of the frames sent; on kernel sockets, TCP payload bytes written.";
    segments_in => "rusty_segments_received_total" Counter
        "TCP segments received with a valid header and checksum; on kernel sockets, reads that moved bytes.";
    segments_out => "rusty_segments_sent_total" Counter
        "TCP segments sent; on kernel sockets, writes that moved bytes.";
    arp_requests_sent => "rusty_arp_requests_sent_total" Counter "ARP requests sent to resolve a next hop.";
    arp_replies_sent => "rusty_arp_replies_sent_total" Counter "ARP replies sent for our address.";
    icmp_echo_replies => "rusty_icmp_echo_replies_total" Counter "ICMP echo replies sent.";
    icmp_echo_truncated => "rusty_icmp_echo_truncated_total" Counter
        "Echo replies cut to the link MTU (also in rusty_icmp_echo_replies_total).";
    neighbor_solicitations_sent => "rusty_neighbor_solicitations_sent_total" Counter
        "IPv6 Neighbor Solicitations sent (resolution and duplicate address detection).";
    neighbor_advertisements_sent => "rusty_neighbor_advertisements_sent_total" Counter
        "IPv6 Neighbor Advertisements sent for our addresses.";
    duplicate_addresses => "rusty_duplicate_addresses_total" Counter
        "IPv6 addresses of ours found in use by another node.";
    path_mtu_lowered => "rusty_path_mtu_lowered_total" Counter
        "Connections whose segment size an ICMPv6 Packet Too Big lowered.";
    neighbour_probes_sent => "rusty_neighbour_probes_sent_total" Counter
        "Unicast probes of a cached neighbour's address (ARP requests or Neighbor Solicitations, also counted there).";
    neighbours_unreachable => "rusty_neighbours_unreachable_total" Counter
        "Neighbours that answered none of their probes and were forgotten.";
    icmpv6_errors_sent => "rusty_icmpv6_errors_sent_total" Counter "ICMPv6 errors sent.";
    icmpv6_errors_suppressed => "rusty_icmpv6_errors_suppressed_total" Counter
        "ICMPv6 errors not sent because their budget was spent.";
    conns_opened_active => "rusty_connections_opened_total" {"side" = "active"} Counter
        "Connections opened, by side: active opens started, passive opens accepted.";
    conns_opened_passive => "rusty_connections_opened_total" {"side" = "passive"} Counter "";
    conns_refused => "rusty_connections_refused_total" Counter
        "Connections the application refused in accept.";
    conns_closed => "rusty_connections_ended_total" {"how" = "closed"} Counter
        "Connections ended, by how: both sides closed, reset by the peer, timed out, aborted by us.";
    conns_reset => "rusty_connections_ended_total" {"how" = "reset"} Counter "";
    conns_timed_out => "rusty_connections_ended_total" {"how" = "timed_out"} Counter "";
    conns_aborted => "rusty_connections_ended_total" {"how" = "aborted"} Counter "";
    retransmissions => "rusty_retransmitted_segments_total" Counter
        "Segments sent again (timeouts, fast retransmit, SYN retries).";
    retransmitted_bytes => "rusty_retransmitted_bytes_total" Counter "Payload bytes sent again.";
    fast_retransmits => "rusty_fast_retransmits_total" Counter
        "Loss recoveries entered on duplicate ACKs or SACK.";
    rack_losses => "rusty_rack_losses_total" Counter "Segments RACK marked lost by time.";
    tlps => "rusty_tail_loss_probes_total" Counter "Tail loss probes sent.";
    rtos => "rusty_retransmission_timeouts_total" Counter
        "Retransmission timeouts of established connections.";
    spurious_undos => "rusty_spurious_undos_total" Counter
        "Congestion-window reductions undone because the retransmission was spurious.";
    rsts_sent => "rusty_rsts_sent_total" Counter "RSTs sent.";
    challenge_acks => "rusty_challenge_acks_total" Counter "Challenge ACKs sent (RFC 5961).";
    challenge_acks_suppressed => "rusty_challenge_acks_suppressed_total" Counter
        "Challenge ACKs the per-second budget held back.";
    invalid_acks_suppressed => "rusty_invalid_acks_suppressed_total" Counter
        "ACKs answering invalid segments that a connection's own limit held back.";
    syn_cookies_sent => "rusty_syn_cookies_sent_total" Counter "SYN-ACKs carrying a SYN cookie.";
    syn_cookies_accepted => "rusty_syn_cookies_accepted_total" Counter
        "Connections rebuilt from a valid cookie ACK.";
    syn_cookies_rejected => "rusty_syn_cookies_rejected_total" Counter
        "ACKs on a listening port whose cookie did not check out.";
    syns_dropped_overload => "rusty_syns_dropped_overload_total" Counter
        "SYNs dropped because the worker held its maximum of connections.";
    time_wait_entered => "rusty_time_wait_entered_total" Counter "Connections that entered TIME-WAIT.";
    time_wait_reused => "rusty_time_wait_reused_total" Counter "TIME-WAIT entries a new SYN reopened.";
    orphans_reset => "rusty_orphans_reset_total" Counter
        "Orphans reset because the worker held its maximum of them.";
    orphans_timed_out => "rusty_orphans_timed_out_total" Counter "Orphans that gave up.";
    unread_bytes_discarded => "rusty_unread_discarded_bytes_total" Counter
        "Received bytes the application never consumed before its connection ended.";
    misdirected_forwarded => "rusty_misdirected_forwarded_total" Counter
        "Frames of flows a sibling worker owns, handed over to it.";
    buffer_memory => "rusty_buffer_memory_bytes" Gauge
        "Buffer memory the connections hold (send and receive rings, out-of-order data).";
    buffer_memory_peak => "rusty_buffer_memory_peak_bytes" Gauge "The most rusty_buffer_memory_bytes has been.";
    buffer_pool_idle => "rusty_buffer_pool_idle_bytes" Gauge "Drained ring storage kept for reuse.";
    driver_pool_idle => "rusty_driver_pool_idle_bytes" Gauge "Idle buffers the device queue keeps for reuse.";
    memory.pressure_entered => "rusty_memory_pressure_entered_total" Counter
        "Times the worker entered memory pressure.";
    memory.ooo_refused => "rusty_memory_ooo_refused_total" Counter
        "Out-of-order segments not stored because of memory pressure.";
    memory.ooo_pruned_bytes => "rusty_memory_ooo_pruned_bytes_total" Counter
        "Held out-of-order bytes dropped under memory pressure.";
    memory.rcv_dropped => "rusty_memory_rcv_dropped_total" Counter
        "In-order segments dropped unacknowledged at the memory limit.";
    memory.windows_clamped => "rusty_memory_windows_clamped_total" Counter
        "Window advertisements held down by memory pressure.";
    memory.sends_clamped => "rusty_memory_sends_clamped_total" Counter
        "Sends cut short because memory pressure kept the send ring from growing.";
};

const DROPS: &str = "rusty_drops_total";

/// Names the stack's families take, which application families may not.
fn engine_family(name: &str) -> bool {
    name == DROPS
        || name.starts_with("rusty_worker_")
        || name == "rusty_connections"
        || name == "rusty_time_wait_connections"
        || name == "rusty_orphan_connections"
        || FIELDS.iter().any(|f| f.name == name)
}

/// The document for every worker's latest snapshot, as of `now`, in the Prometheus
/// format.
pub fn render(board: &Board, now: Instant) -> String {
    render_as(board, now, Format::Prometheus)
}

/// One worker's snapshot as the document labels it.
struct Row<'a> {
    worker: String,
    /// The process that took it, if the snapshot names one.
    pid: Option<String>,
    name: &'a str,
    snap: &'a Snapshot,
}

impl<'a> Row<'a> {
    /// The labels of one of this worker's samples: `worker`, `pid` if any, then
    /// `extra`.
    fn labels<'b>(&'b self, extra: Option<(&'b str, &'b str)>) -> Vec<(&'b str, &'b str)> {
        let mut labels = vec![("worker", self.worker.as_str())];
        if let Some(pid) = &self.pid {
            labels.push(("pid", pid));
        }
        labels.extend(extra);
        labels
    }
}

/// [`render`] in `format`.
pub fn render_as(board: &Board, now: Instant, format: Format) -> String {
    let read = board.read();
    let workers: Vec<Row<'_>> = read
        .iter()
        .enumerate()
        .filter_map(|(i, (name, snap))| {
            let snap = snap.as_ref()?;
            Some(Row {
                worker: i.to_string(),
                pid: snap.pid.map(|p| p.to_string()),
                name,
                snap,
            })
        })
        .collect();
    let mut e = Exposition::with_format(format);
    e.family(
        "rusty_worker_info",
        "A worker's thread name (its link and queue), always 1.",
        Kind::Gauge,
    );
    for w in &workers {
        e.sample(&w.labels(Some(("name", w.name))), 1u64);
    }
    e.family(
        "rusty_worker_snapshot_age_seconds",
        "How old the worker's published counters are.",
        Kind::Gauge,
    );
    for w in &workers {
        let age = w
            .snap
            .taken
            .map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64());
        e.sample(&w.labels(None), age);
    }
    let mut previous = "";
    for f in FIELDS {
        if f.name != previous {
            e.family(f.name, f.help, f.kind);
            previous = f.name;
        }
        for w in &workers {
            e.sample(&w.labels(f.label), (f.get)(&w.snap.stats));
        }
    }
    e.family(
        DROPS,
        "Frames dropped, by reason (every drop is counted under one reason).",
        Kind::Counter,
    );
    for w in &workers {
        for r in DropReason::ALL {
            e.sample(
                &w.labels(Some(("reason", r.name()))),
                w.snap.stats.dropped(r),
            );
        }
    }
    gauges(&mut e, &workers);
    app_families(&mut e, &workers);
    e.finish()
}

fn gauges(e: &mut Exposition, workers: &[Row<'_>]) {
    e.family(
        "rusty_connections",
        "Live connections (every state but TIME-WAIT).",
        Kind::Gauge,
    );
    for w in workers {
        e.sample(&w.labels(None), w.snap.gauges.connections);
    }
    type Level = fn(&Snapshot) -> Option<u64>;
    let engines: &[(&str, &str, Level)] = &[
        (
            "rusty_time_wait_connections",
            "TIME-WAIT entries (Rusty's engines).",
            |s| s.gauges.time_wait,
        ),
        (
            "rusty_orphan_connections",
            "Connections the application closed whose data or FIN is unacknowledged (Rusty's engines).",
            |s| s.gauges.orphans,
        ),
    ];
    for (name, help, get) in engines {
        if workers.iter().any(|w| get(w.snap).is_some()) {
            e.family(name, help, Kind::Gauge);
            for w in workers {
                if let Some(v) = get(w.snap) {
                    e.sample(&w.labels(None), v);
                }
            }
        }
    }
}

/// The applications' families, in the order first reported, each with its samples from
/// every worker. A name the stack uses, or one reported again with another type, is
/// left out.
fn app_families(e: &mut Exposition, workers: &[Row<'_>]) {
    let mut families: Vec<(&AppSample, Vec<(&Row<'_>, &AppSample)>)> = Vec::new();
    for w in workers {
        for sample in w.snap.app.samples() {
            if engine_family(sample.name) {
                continue;
            }
            match families.iter_mut().find(|(f, _)| f.name == sample.name) {
                Some((f, samples)) if f.kind == sample.kind => samples.push((w, sample)),
                Some(_) => {}
                None => families.push((sample, vec![(w, sample)])),
            }
        }
    }
    for (first, samples) in families {
        e.family(first.name, first.help, first.kind);
        for (w, s) in samples {
            e.sample(&w.labels(s.label), s.value);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::board::Gauges;
    use crate::report::{AppMetrics, Report};

    /// Every field of `Stats` is exported: the names its `Debug` prints are those the
    /// table reads, besides the drops (written by reason) and the memory counters
    /// (read through `memory`).
    #[test]
    fn every_stats_field_is_exported() {
        let debug = format!("{:?}", Stats::default());
        let inner = &debug[debug.find('{').unwrap() + 1..];
        let mut names: Vec<&str> = inner
            .split(", ")
            .filter_map(|part| part.split_once(": ").map(|(n, _)| n.trim()))
            .filter(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .collect();
        names.dedup();
        for name in names {
            if name == "drops" || name == "memory" {
                continue;
            }
            assert!(
                FIELDS.iter().any(|f| f.field == name
                    || f.field
                        .rsplit('.')
                        .next()
                        .is_some_and(|last| last.trim() == name)),
                "Stats::{name} is not exported"
            );
        }
    }

    struct Http(u64, u64);
    impl AppMetrics for Http {
        fn report(&self, out: &mut Report) {
            out.counter_with(
                "rusty_http_requests_total",
                "Requests.",
                ("code", "200"),
                self.0,
            );
            out.counter_with(
                "rusty_http_requests_total",
                "Requests.",
                ("code", "404"),
                self.1,
            );
            out.counter("rusty_frames_sent_total", "A clash with the stack's.", 99);
        }
    }

    fn board_with(values: &[(u64, u64)]) -> std::sync::Arc<Board> {
        let names = (0..values.len()).map(|i| format!("kernel-{i}")).collect();
        let board = Board::new(names, Duration::from_secs(1));
        let now = Instant::now();
        for (i, &(a, b)) in values.iter().enumerate() {
            let stats = Stats {
                frames_out: a,
                ..Stats::default()
            };
            let mut p = board.publisher(i);
            p.publish(now, &stats, Gauges::default(), &Http(a, b));
        }
        board
    }

    #[test]
    fn each_family_appears_once_with_every_workers_samples() {
        let text = render(&board_with(&[(3, 1), (5, 0)]), Instant::now());
        for family in [
            "rusty_http_requests_total",
            "rusty_frames_sent_total",
            DROPS,
        ] {
            let help = format!("# HELP {family} ");
            assert_eq!(text.matches(&help).count(), 1, "{family}:\n{text}");
            let ty = format!("# TYPE {family} ");
            assert_eq!(text.matches(&ty).count(), 1, "{family}:\n{text}");
        }
        assert!(text.contains("rusty_http_requests_total{worker=\"0\",code=\"200\"} 3\n"));
        assert!(text.contains("rusty_http_requests_total{worker=\"1\",code=\"404\"} 0\n"));
        assert!(text.contains("rusty_frames_sent_total{worker=\"1\"} 5\n"));
        assert!(
            !text.contains(" 99\n"),
            "an app may not redefine the stack's family"
        );
        assert!(text.contains("rusty_drops_total{worker=\"0\",reason=\"truncated\"} 0\n"));
        assert!(text.contains("rusty_worker_info{worker=\"1\",name=\"kernel-1\"} 1\n"));
        // Samples of one family are contiguous: once a family's lines end, its name
        // does not come back.
        let mut seen = Vec::new();
        let mut current = "";
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            if name != current {
                assert!(!seen.contains(&name), "{name} split:\n{text}");
                seen.push(name);
                current = name;
            }
        }
    }

    #[test]
    fn counters_never_go_back_across_snapshots() {
        let board = board_with(&[(1, 1)]);
        let first = render(&board, Instant::now());
        let mut p = board.publisher(0);
        let stats = Stats {
            frames_out: 4,
            ..Stats::default()
        };
        p.publish(Instant::now(), &stats, Gauges::default(), &Http(2, 1));
        let second = render(&board, Instant::now());
        let values = |text: &str| -> Vec<(String, u64)> {
            let mut counters = Vec::new();
            let mut counter = false;
            for line in text.lines() {
                if let Some(t) = line.strip_prefix("# TYPE ") {
                    counter = t.ends_with(" counter");
                } else if counter && !line.starts_with('#') {
                    let (k, v) = line.rsplit_once(' ').unwrap();
                    counters.push((k.to_string(), v.parse().unwrap()));
                }
            }
            counters
        };
        let (a, b) = (values(&first), values(&second));
        assert_eq!(a.len(), b.len());
        for ((ka, va), (kb, vb)) in a.iter().zip(&b) {
            assert_eq!(ka, kb);
            assert!(vb >= va, "{ka} went from {va} to {vb}");
        }
        assert!(second.contains("rusty_frames_sent_total{worker=\"0\"} 4\n"));
    }

    /// Snapshots stored from elsewhere carry the process that took them as `pid`,
    /// after `worker` and before a family's own label; an emptied slot is left out.
    #[test]
    fn stored_snapshots_are_labelled_with_their_process() {
        let board = Board::new(vec!["tap0".into(), "tap0".into()], Duration::from_secs(1));
        let snapshot = |pid, frames_out| Snapshot {
            stats: Stats {
                frames_out,
                ..Stats::default()
            },
            taken: Some(Instant::now()),
            pid: Some(pid),
            ..Snapshot::default()
        };
        board.store(0, Some(snapshot(4242, 7)));
        board.store(1, Some(snapshot(4343, 9)));
        board.store(9, Some(snapshot(1, 1)));
        let text = render(&board, Instant::now());
        for want in [
            "rusty_worker_info{worker=\"0\",pid=\"4242\",name=\"tap0\"} 1\n",
            "rusty_frames_sent_total{worker=\"1\",pid=\"4343\"} 9\n",
            "rusty_drops_total{worker=\"0\",pid=\"4242\",reason=\"truncated\"} 0\n",
            "rusty_connections_opened_total{worker=\"1\",pid=\"4343\",side=\"active\"} 0\n",
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
        assert!(!text.contains("worker=\"9\""), "{text}");
        board.store(0, None);
        let text = render(&board, Instant::now());
        assert!(!text.contains("pid=\"4242\""), "{text}");
        assert!(text.contains("pid=\"4343\""), "{text}");
    }

    #[test]
    fn workers_that_have_not_published_are_left_out() {
        let board = Board::new(vec!["a".into(), "b".into()], Duration::from_secs(1));
        board.publisher(1).publish(
            Instant::now(),
            &Stats::default(),
            Gauges::default(),
            &Http(0, 0),
        );
        let text = render(&board, Instant::now());
        assert!(!text.contains("worker=\"0\""), "{text}");
        assert!(text.contains("worker=\"1\""), "{text}");
        assert!(
            !text.contains("rusty_time_wait_connections"),
            "kernel workers: {text}"
        );
    }
}
