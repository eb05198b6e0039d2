//! Per-worker counters. Plain integers owned by one worker; the runtime copies a snapshot
//! when asked, so counting costs one add and no atomics.

use std::fmt;

pub use crate::drop_reason::DropReason;
use crate::tcp::pool::MemoryCounters;

/// One worker's counters, since it started. On the kernel backend, frame and segment
/// counters mean reads and writes (see `KernelEngine`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Frames received from the device (and from siblings).
    pub frames_in: u64,
    /// Frames handed to the device.
    pub frames_out: u64,
    /// Bytes of the frames received.
    pub bytes_in: u64,
    /// Bytes of the frames sent.
    pub bytes_out: u64,
    /// Frames dropped, by reason ([`DropReason::index`]).
    pub drops: [u64; DropReason::COUNT],
    /// ARP requests sent to resolve a next hop, or to probe it
    /// (`neighbour_probes_sent`).
    pub arp_requests_sent: u64,
    /// ARP replies sent for our address.
    pub arp_replies_sent: u64,
    /// ICMP echo replies sent (answers to ping).
    pub icmp_echo_replies: u64,
    /// Echo replies cut to the link MTU, because their request was longer (RFC 1122
    /// §3.2.2.6); also counted in `icmp_echo_replies`.
    pub icmp_echo_truncated: u64,
    /// Neighbor Solicitations sent: resolving or probing an IPv6 neighbour, and probing
    /// our own addresses for duplicates.
    pub neighbor_solicitations_sent: u64,
    /// Neighbor Advertisements sent for our IPv6 addresses.
    pub neighbor_advertisements_sent: u64,
    /// IPv6 addresses of ours found in use by another node (duplicate address
    /// detection); such an address is not used.
    pub duplicate_addresses: u64,
    /// Connections whose segment size an ICMPv6 Packet Too Big lowered.
    pub path_mtu_lowered: u64,
    /// Solicitations unicast to a neighbour whose reachability was in doubt (RFC 4861
    /// §7.3.3 PROBE; ARP requests for IPv4): also counted in `arp_requests_sent` or
    /// `neighbor_solicitations_sent`.
    pub neighbour_probes_sent: u64,
    /// Neighbours that answered none of their probes, and were forgotten: the next
    /// frame to one resolves it again.
    pub neighbours_unreachable: u64,
    /// ICMPv6 errors sent (port unreachable for UDP, parameter problems).
    pub icmpv6_errors_sent: u64,
    /// ICMPv6 errors not sent because the engine's budget for them was spent.
    pub icmpv6_errors_suppressed: u64,
    /// Active opens started.
    pub conns_opened_active: u64,
    /// Passive opens the application accepted.
    pub conns_opened_passive: u64,
    /// Connections the application refused in `accept`.
    pub conns_refused: u64,
    /// Connections that ended normally (both sides closed).
    pub conns_closed: u64,
    /// Connections that ended by a RST we received (also active opens refused with one).
    pub conns_reset: u64,
    /// Connections that ended because retransmissions, probes or a linger timed out.
    pub conns_timed_out: u64,
    /// Connections we aborted (the application, or a refused accept).
    pub conns_aborted: u64,
    /// TCP segments received with a valid header and checksum.
    pub segments_in: u64,
    /// TCP segments sent.
    pub segments_out: u64,
    /// Segments sent again (timeouts, fast retransmit, SYN retries).
    pub retransmissions: u64,
    /// Payload bytes sent again (every kind of retransmission).
    pub retransmitted_bytes: u64,
    /// Loss recoveries entered on duplicate ACKs or SACK (RFC 6675, RFC 6582).
    pub fast_retransmits: u64,
    /// Segments RACK marked lost by time (RFC 8985 §6.2).
    pub rack_losses: u64,
    /// Tail loss probes sent (RFC 8985 §7).
    pub tlps: u64,
    /// Retransmission timeouts of established connections (RFC 6298 §5.4).
    pub rtos: u64,
    /// Congestion-window reductions undone because the retransmission was spurious
    /// (D-SACK, RFC 2883; timestamps, RFC 3522).
    pub spurious_undos: u64,
    /// RSTs sent: answers to segments for no connection or with an unacceptable ACK,
    /// and aborts (the application's, and refused accepts).
    pub rsts_sent: u64,
    /// Challenge ACKs sent (RFC 5961).
    pub challenge_acks: u64,
    /// Challenge ACKs the engine's per-second budget held back (RFC 5961 §7).
    pub challenge_acks_suppressed: u64,
    /// ACKs answering invalid segments (out of window, failing PAWS, challenged) that a
    /// connection's own limit held back (one per `invalid_ack_interval`).
    pub invalid_acks_suppressed: u64,
    /// SYN-ACKs carrying a SYN cookie (the backlog was full).
    pub syn_cookies_sent: u64,
    /// Connections rebuilt from a valid cookie ACK.
    pub syn_cookies_accepted: u64,
    /// ACKs on a listening port whose cookie did not check out, counted while a cookie
    /// sent could still come back (for 128 to 192 s after the last one); at other
    /// times such an ACK is a [`DropReason::NoConnection`] drop only.
    pub syn_cookies_rejected: u64,
    /// SYNs dropped because the engine held its maximum of connections.
    pub syns_dropped_overload: u64,
    /// Connections that entered (compact) TIME-WAIT.
    pub time_wait_entered: u64,
    /// Orphans (connections the application closed) reset because the engine held
    /// [`EngineConfig::max_orphans`](crate::EngineConfig) of them: the oldest goes.
    pub orphans_reset: u64,
    /// Orphans that gave up ([`TcpConfig::orphan_retries`](crate::TcpConfig) or
    /// `orphan_timeout` without progress, or the FIN-WAIT-2 timeout); also counted in
    /// `conns_timed_out`.
    pub orphans_timed_out: u64,
    /// TIME-WAIT entries a new SYN reopened (RFC 6191 / RFC 1122 §4.2.2.13).
    pub time_wait_reused: u64,
    /// Received bytes the application never consumed before its connection ended.
    pub unread_bytes_discarded: u64,
    /// Segments of flows a sibling worker owns, handed over through the runtime (links
    /// whose steering the stack cannot predict).
    pub misdirected_forwarded: u64,
    /// Buffer memory the connections hold now (send and receive rings, out-of-order
    /// data): the engine's [`MemoryBudget`](crate::tcp::pool::MemoryBudget) account.
    /// Summed over workers by [`Stats::accumulate`].
    pub buffer_memory: u64,
    /// The most `buffer_memory` has been (summed over workers: an upper bound).
    pub buffer_memory_peak: u64,
    /// Drained ring storage the engine keeps for reuse, outside `buffer_memory`: at most
    /// [`EngineConfig::buffer_pool`](crate::EngineConfig) per size class.
    pub buffer_pool_idle: u64,
    /// Idle buffers the device queue keeps for reuse ([`PacketIo::pooled_bytes`]), as
    /// of the last second.
    ///
    /// [`PacketIo::pooled_bytes`]: crate::io::PacketIo::pooled_bytes
    pub driver_pool_idle: u64,
    /// What memory pressure made connections give up.
    pub memory: MemoryCounters,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            frames_in: 0,
            frames_out: 0,
            bytes_in: 0,
            bytes_out: 0,
            drops: [0; DropReason::COUNT],
            arp_requests_sent: 0,
            arp_replies_sent: 0,
            icmp_echo_replies: 0,
            icmp_echo_truncated: 0,
            neighbor_solicitations_sent: 0,
            neighbor_advertisements_sent: 0,
            duplicate_addresses: 0,
            path_mtu_lowered: 0,
            neighbour_probes_sent: 0,
            neighbours_unreachable: 0,
            icmpv6_errors_sent: 0,
            icmpv6_errors_suppressed: 0,
            conns_opened_active: 0,
            conns_opened_passive: 0,
            conns_refused: 0,
            conns_closed: 0,
            conns_reset: 0,
            conns_timed_out: 0,
            conns_aborted: 0,
            segments_in: 0,
            segments_out: 0,
            retransmissions: 0,
            retransmitted_bytes: 0,
            fast_retransmits: 0,
            rack_losses: 0,
            tlps: 0,
            rtos: 0,
            spurious_undos: 0,
            rsts_sent: 0,
            challenge_acks: 0,
            challenge_acks_suppressed: 0,
            invalid_acks_suppressed: 0,
            syn_cookies_sent: 0,
            syn_cookies_accepted: 0,
            syn_cookies_rejected: 0,
            syns_dropped_overload: 0,
            time_wait_entered: 0,
            orphans_reset: 0,
            orphans_timed_out: 0,
            time_wait_reused: 0,
            unread_bytes_discarded: 0,
            misdirected_forwarded: 0,
            buffer_memory: 0,
            buffer_memory_peak: 0,
            buffer_pool_idle: 0,
            driver_pool_idle: 0,
            memory: MemoryCounters::default(),
        }
    }
}

impl Stats {
    /// Add one connection's retransmission and loss-recovery events.
    #[inline]
    pub fn count_loss(&mut self, c: &crate::tcp::tcb::LossCounters) {
        if *c == Default::default() {
            return;
        }
        self.retransmissions += u64::from(c.retransmitted_segments);
        self.retransmitted_bytes += u64::from(c.retransmitted_bytes);
        self.fast_retransmits += u64::from(c.fast_retransmits);
        self.rack_losses += u64::from(c.rack_losses);
        self.tlps += u64::from(c.tlps);
        self.rtos += u64::from(c.rtos);
        self.spurious_undos += u64::from(c.spurious_undos);
    }

    /// Count one dropped frame.
    pub fn drop(&mut self, reason: DropReason) {
        self.drops[reason.index()] += 1;
    }
    /// Frames dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }
    /// Frames dropped for any reason.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
    /// Add another worker's counters to these.
    pub fn accumulate(&mut self, other: &Stats) {
        macro_rules! add {
            ($($f:ident),*) => { $( self.$f += other.$f; )* };
        }
        add!(
            frames_in,
            frames_out,
            bytes_in,
            bytes_out,
            arp_requests_sent,
            arp_replies_sent,
            icmp_echo_replies,
            icmp_echo_truncated,
            neighbor_solicitations_sent,
            neighbor_advertisements_sent,
            duplicate_addresses,
            path_mtu_lowered,
            neighbour_probes_sent,
            neighbours_unreachable,
            icmpv6_errors_sent,
            icmpv6_errors_suppressed,
            conns_opened_active,
            conns_opened_passive,
            conns_refused,
            conns_closed,
            conns_reset,
            conns_timed_out,
            conns_aborted,
            segments_in,
            segments_out,
            retransmissions,
            retransmitted_bytes,
            fast_retransmits,
            rack_losses,
            tlps,
            rtos,
            spurious_undos,
            rsts_sent,
            challenge_acks,
            challenge_acks_suppressed,
            invalid_acks_suppressed,
            syn_cookies_sent,
            syn_cookies_accepted,
            syn_cookies_rejected,
            syns_dropped_overload,
            time_wait_entered,
            orphans_reset,
            orphans_timed_out,
            time_wait_reused,
            unread_bytes_discarded,
            misdirected_forwarded,
            buffer_memory,
            buffer_memory_peak,
            buffer_pool_idle,
            driver_pool_idle
        );
        self.memory.add(&other.memory);
        for (a, b) in self.drops.iter_mut().zip(other.drops.iter()) {
            *a += b;
        }
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "frames in {} out {}; segments in {} out {}; retransmissions {} ({} bytes; fast {} rack-lost {} tlp {} rto {} undone {}); conns opened {}+{} closed {} reset {} timed-out {} aborted {} refused {}; rst sent {}; syn cookies {}/{}",
            self.frames_in,
            self.frames_out,
            self.segments_in,
            self.segments_out,
            self.retransmissions,
            self.retransmitted_bytes,
            self.fast_retransmits,
            self.rack_losses,
            self.tlps,
            self.rtos,
            self.spurious_undos,
            self.conns_opened_passive,
            self.conns_opened_active,
            self.conns_closed,
            self.conns_reset,
            self.conns_timed_out,
            self.conns_aborted,
            self.conns_refused,
            self.rsts_sent,
            self.syn_cookies_accepted,
            self.syn_cookies_sent,
        )?;
        if self.orphans_reset + self.orphans_timed_out > 0 {
            write!(
                f,
                "; orphans reset {} timed-out {}",
                self.orphans_reset, self.orphans_timed_out
            )?;
        }
        if self.neighbor_solicitations_sent
            + self.neighbor_advertisements_sent
            + self.duplicate_addresses
            + self.path_mtu_lowered
            > 0
        {
            write!(
                f,
                "; neighbor solicitations {} advertisements {}; duplicate addresses {}; path mtu lowered {}",
                self.neighbor_solicitations_sent,
                self.neighbor_advertisements_sent,
                self.duplicate_addresses,
                self.path_mtu_lowered
            )?;
        }
        if self.icmpv6_errors_sent + self.icmpv6_errors_suppressed > 0 {
            write!(
                f,
                "; icmpv6 errors {} (budget held back {})",
                self.icmpv6_errors_sent, self.icmpv6_errors_suppressed
            )?;
        }
        if self.neighbour_probes_sent + self.neighbours_unreachable > 0 {
            write!(
                f,
                "; neighbours probed {} unreachable {}",
                self.neighbour_probes_sent, self.neighbours_unreachable
            )?;
        }
        if self.misdirected_forwarded > 0 {
            write!(f, "; handed to siblings {}", self.misdirected_forwarded)?;
        }
        if self.challenge_acks + self.challenge_acks_suppressed + self.invalid_acks_suppressed > 0 {
            write!(
                f,
                "; challenge acks {} (budget held back {}); invalid-segment acks held back {}",
                self.challenge_acks, self.challenge_acks_suppressed, self.invalid_acks_suppressed
            )?;
        }
        if self.buffer_memory_peak > 0 {
            write!(
                f,
                "; buffer memory {} KiB (peak {} KiB); idle rings {} KiB",
                self.buffer_memory >> 10,
                self.buffer_memory_peak >> 10,
                self.buffer_pool_idle >> 10
            )?;
        }
        if self.driver_pool_idle > 0 {
            write!(
                f,
                "; driver buffers {} KiB idle",
                self.driver_pool_idle >> 10
            )?;
        }
        let m = &self.memory;
        if *m != MemoryCounters::default() {
            write!(
                f,
                "; memory pressure {} (out-of-order refused {} pruned {} B; in-order dropped {}; windows clamped {}; sends clamped {})",
                m.pressure_entered, m.ooo_refused, m.ooo_pruned_bytes, m.rcv_dropped, m.windows_clamped, m.sends_clamped
            )?;
        }
        for r in DropReason::ALL {
            let n = self.dropped(r);
            if n > 0 {
                write!(f, "; drop {} {}", r.name(), n)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memory fields of the counters line, each its own `; `-separated field in the
    /// form scripts and tests read.
    #[test]
    fn the_counters_line_names_memory_held_and_kept() {
        let s = Stats {
            buffer_memory: 12 << 10,
            buffer_memory_peak: 34 << 10,
            buffer_pool_idle: 2 << 10,
            driver_pool_idle: 5 << 10,
            ..Stats::default()
        };
        assert_fields(
            &s,
            &[
                "buffer memory 12 KiB (peak 34 KiB)",
                "idle rings 2 KiB",
                "driver buffers 5 KiB idle",
            ],
        );
    }

    /// Neighbour probes join the line once there were some.
    #[test]
    fn the_counters_line_names_neighbour_probes_when_there_were_some() {
        assert!(!Stats::default().to_string().contains("probed"));
        let s = Stats {
            neighbour_probes_sent: 3,
            neighbours_unreachable: 1,
            ..Stats::default()
        };
        assert_fields(&s, &["neighbours probed 3 unreachable 1"]);
    }

    /// IPv6's counters join the line once the engine has done IPv6 (Neighbor Discovery
    /// always comes first) or sent or held back an ICMPv6 error, so an IPv4-only
    /// worker's line is as it was.
    #[test]
    fn the_counters_line_names_ipv6_work_when_there_was_some() {
        assert!(!Stats::default().to_string().contains("neighbor"));
        assert!(!Stats::default().to_string().contains("icmpv6"));
        let s = Stats {
            neighbor_solicitations_sent: 3,
            neighbor_advertisements_sent: 2,
            path_mtu_lowered: 1,
            icmpv6_errors_sent: 50,
            icmpv6_errors_suppressed: 7,
            ..Stats::default()
        };
        assert_fields(
            &s,
            &[
                "neighbor solicitations 3 advertisements 2",
                "duplicate addresses 0",
                "path mtu lowered 1",
                "icmpv6 errors 50 (budget held back 7)",
            ],
        );
    }

    /// Every one of `want` is a field of the line `s` prints.
    fn assert_fields(s: &Stats, want: &[&str]) {
        let line = s.to_string();
        let fields: Vec<&str> = line.split("; ").collect();
        for want in want {
            assert!(fields.contains(want), "{want:?} not in {line}");
        }
    }
}
