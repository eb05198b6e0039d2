//! The transmit path: connections with something to say build their segments straight
//! into driver buffers (or park them with ARP while the next hop is unresolved), blocks
//! that are done leave the table or become compact TIME-WAIT entries, and bursts go to
//! the driver.

use std::net::IpAddr;

use super::{Block, Engine, FlowKey, TimerItem, FAR_WAKE, IDLE_RING_RELEASE, TX_BURST};
use crate::app::CloseReason;
use crate::app::ConnId;
use crate::app::Handler;
use crate::arp::{EnqueueResult, Solicit};
use crate::checksum;
use crate::drop_reason::DropReason;
use crate::ethernet::{self, EthernetProtocol};
use crate::io::{ChecksumOffload, ChecksumRequest, MacAddr, PacketIo, TxFrame, TxMeta};
use crate::ipv4::{self, IdentCounter, IpProtocol};
use crate::stats::Stats;
use crate::tcp::segment::{self, TxSegment};
use crate::tcp::send_buffer::SendBuffer;
use crate::tcp::tcb::fast::PredictedSegment;
use crate::tcp::tcb::State;
use crate::time::Clock;
use crate::time::Instant;
use crate::timer_wheel::TimerWheel;

/// The engine's [`TxQueue`], its fields borrowed one by one: beside it the caller may
/// hold the others, a connection block among them.
macro_rules! tx_queue {
    ($engine:expr) => {
        TxQueue {
            dev: &mut $engine.dev,
            tx: &mut $engine.tx,
            stats: &mut $engine.stats,
            max_frame: $engine.max_frame,
        }
    };
}

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    pub(super) fn flush_dirty(&mut self) {
        // By position, not by taking the list out: nothing to move out and back, and a
        // connection marked while the list is flushed is flushed too.
        let mut i = 0;
        while let Some(&index) = self.dirty.get(i) {
            self.flush_conn(index);
            i += 1;
        }
        self.dirty.clear();
    }

    /// Let one connection send what it wants, then settle its timer and its fate.
    ///
    /// In the common case (a predicted segment to a known MAC, nothing else to send, a
    /// timer already due early enough) the block is looked up once: the frame is
    /// queued through the fields it needs ([`TxQueue`]), not through `self`. The rare
    /// paths that need all of `self` look the block up again after.
    fn flush_conn(&mut self, index: usize) {
        let Some((id, mut block)) = self.app.get_mut_with_id(index) else {
            return;
        };
        if !block.dirty {
            return;
        }
        block.dirty = false;
        let predicted = block
            .tcb
            .poll_transmit_predicted(self.now, &mut self.segs, &mut self.pool);
        if block.tcb.may_have_counters() {
            let c = block.tcb.take_counters();
            self.stats.count_loss(&c);
        }
        if let Some(seg) = predicted {
            match block.mac {
                // The common case with the block at hand (no second table look-up).
                Some(dst_mac) => {
                    let mut frame = TcpFrame::of_conn(self.mac, block, &seg, dst_mac);
                    frame.send(tx_queue!(self), &mut self.ident, self.tx_csum);
                }
                None => {
                    self.send_conn_segment(index, &seg);
                    block = &mut self.app[index];
                }
            }
        }
        if !self.segs.is_empty() {
            let mut segs = std::mem::take(&mut self.segs);
            for seg in &segs {
                // Aborts (the application's, or a refused accept) and answers to
                // unacceptable ACKs, counted like the RSTs sent for no connection.
                self.stats.rsts_sent += u64::from(seg.rst);
                self.send_conn_segment(index, seg);
            }
            segs.clear();
            self.segs = segs;
            block = &mut self.app[index];
        }

        match block.tcb.state() {
            State::Closed => return self.remove_conn(index),
            State::TimeWait => return self.enter_time_wait(index),
            _ => {}
        }
        if !block.ring_listed && block.tcb.holds_idle_send_ring() {
            block.ring_listed = true;
            self.ring_keepers.push(id);
        }
        if let Some(at) = block.tcb.take_wake() {
            schedule_wake(&mut self.timers, self.now, block, id, at);
        }
    }

    /// Give back the empty send rings of connections that sent nothing for
    /// [`IDLE_RING_RELEASE`]; the others stay listed for the next sweep, one period on.
    /// Also, once a second, what sat unused in the pool since the last sweep goes back
    /// to the allocator, and the device says what it keeps for reuse.
    pub(super) fn sweep_idle_rings(&mut self) {
        self.ring_sweep_at = self.now + IDLE_RING_RELEASE;
        self.pool.trim_idle();
        self.stats.driver_pool_idle = self.dev.pooled_bytes() as u64;
        let quiet_since = self.now - IDLE_RING_RELEASE;
        let (app, pool) = (&mut self.app, &mut self.pool);
        self.ring_keepers.retain(|&id| {
            let Some(block) = app.index_of(id).and_then(|index| app.get_mut(index)) else {
                return false;
            };
            let keeps = block.tcb.release_idle_send_ring(quiet_since, pool);
            block.ring_listed = keeps;
            keeps
        });
    }

    fn remove_conn(&mut self, index: usize) {
        let (orphans, flows) = (&mut self.orphans, &mut self.flows);
        let (arp, users, now) = (&mut self.arp, &mut self.neighbour_users, self.now);
        self.app
            .remove_with(&mut self.pool, index, &mut self.stats, |pool, block| {
                if block.orphan {
                    orphans.released();
                }
                block.tcb.release_buffers(pool);
                flows.remove(&block.key);
                users.detach(arp, block, now);
            });
    }

    /// Replace a connection block in TIME-WAIT by a compact entry (RFC 9293 §3.10.7.4
    /// TIME-WAIT only needs to re-ACK a retransmitted FIN). For the application the
    /// connection is over.
    fn enter_time_wait(&mut self, index: usize) {
        let block = &self.app[index];
        let key = block.key;
        let at = block
            .tcb
            .linger_deadline()
            .unwrap_or(self.now + self.cfg.tcp.time_wait);
        // The flow stays in the flow table, mapped to the entry (or leaves it when
        // the TIME-WAIT table is full).
        if self.time_wait.insert(&mut self.flows, key, &block.tcb, at) {
            self.stats.time_wait_entered += 1;
        }
        self.app
            .finish(&mut self.pool, index, CloseReason::Normal, &mut self.stats);
        let orphans = &mut self.orphans;
        let (arp, users, now) = (&mut self.arp, &mut self.neighbour_users, self.now);
        self.app
            .remove_with(&mut self.pool, index, &mut self.stats, |pool, block| {
                if block.orphan {
                    orphans.released();
                }
                block.tcb.release_buffers(pool);
                users.detach(arp, block, now);
            });
    }

    fn send_conn_segment<S: SegmentHeader>(&mut self, index: usize, seg: &S) {
        let block = &mut self.app[index];
        let neigh = block.neigh;
        let hop = self.cfg.next_hop(block.key.remote_ip());
        if block.mac.is_none() {
            // The entry is STALE (this frame makes it DELAY, and the connections
            // through it keep the MAC again), or has no MAC.
            block.mac = self.arp.output(neigh, self.now);
        }
        let dst_mac = block.mac.unwrap_or(MacAddr::BROADCAST);
        let mut frame = TcpFrame::of_conn(self.mac, block, seg, dst_mac);
        if block.mac.is_some() {
            frame.send(tx_queue!(self), &mut self.ident, self.tx_csum);
        } else {
            // Next hop unresolved: park the frame with ARP (copied; rare path), its
            // destination filled in when the reply comes.
            let header_len = seg.header_len();
            let mut parked = vec![0u8; frame.len(header_len)];
            frame.ident = self.ident.next();
            frame.write(&mut parked, header_len, ChecksumOffload::NONE);
            self.stats.segments_out += 1;
            match self.arp.enqueue(neigh, parked, self.now) {
                EnqueueResult::SendRequest => self.send_solicit(Solicit {
                    ip: hop,
                    unicast: None,
                }),
                EnqueueResult::Queued => {}
                EnqueueResult::Dropped => self.stats.drop(DropReason::ArpQueueFull),
            }
        }
        self.apply_neighbour_changes();
    }

    /// A segment outside any connection (RST replies, cookie SYN-ACKs, TIME-WAIT ACKs),
    /// to `mac`, the source of the frame it answers. Never to a group MAC
    /// ([`DropReason::SendToGroupMac`]): input drops frames from one, and this keeps the
    /// rule where replies are made.
    pub(super) fn send_raw(&mut self, mac: MacAddr, key: FlowKey, seg: &TxSegment) {
        if mac.is_multicast() {
            return self.stats.drop(DropReason::SendToGroupMac);
        }
        let mut frame = TcpFrame {
            src_mac: self.mac,
            dst_mac: mac,
            src_ip: self.addrs.get(key.local).ip,
            key,
            seg,
            payload: None,
            ident: 0,
        };
        frame.send(tx_queue!(self), &mut self.ident, self.tx_csum);
    }

    /// Queue a frame for the device: see [`TxQueue::push`].
    #[inline]
    pub(super) fn push_tx(&mut self, buf: D::Tx, tso: bool) {
        self.tx_queue().push(buf, tso);
    }

    #[inline]
    fn tx_queue(&mut self) -> TxQueue<'_, D> {
        tx_queue!(self)
    }

    pub(super) fn submit(&mut self) {
        if !self.tx.is_empty() {
            self.dev.transmit(&mut self.tx);
        }
    }
}

/// The engine's fields that queueing a frame touches, borrowed apart from the rest of
/// it so that a caller can hold a connection block meanwhile (see `flush_conn`).
struct TxQueue<'a, D: PacketIo> {
    dev: &'a mut D,
    tx: &'a mut Vec<D::Tx>,
    stats: &'a mut Stats,
    max_frame: usize,
}

impl<D: PacketIo> TxQueue<'_, D> {
    /// Queue a frame for the device. Every frame passes here, and this is the one
    /// guard on its size: a frame longer than the MTU plus the Ethernet header is
    /// dropped and counted ([`DropReason::OverMtu`]) unless it is a TSO super-frame
    /// (`tso`), which the device cuts to size and `alloc_tx` held to `tso_max`.
    // Always inlined: see `TcpFrame::send`.
    #[inline(always)]
    fn push(self, buf: D::Tx, tso: bool) {
        if buf.len() > self.max_frame && !tso {
            return self.stats.drop(DropReason::OverMtu);
        }
        self.stats.frames_out += 1;
        self.stats.bytes_out += buf.len() as u64;
        self.tx.push(buf);
        if self.tx.len() >= TX_BURST {
            self.dev.transmit(self.tx);
        }
    }
}

/// What a frame's TCP header is written from: a general [`TxSegment`], or the common
/// segment header prediction hands back ([`PredictedSegment`]), whose header has one
/// layout and is written without the general option logic.
trait SegmentHeader {
    /// Length of the TCP header, options included.
    fn header_len(&self) -> usize;
    /// Write the TCP header (exactly `header_len` bytes) with a zero checksum.
    fn write_header(&self, buf: &mut [u8], src_port: u16, dst_port: u16);
    /// `acc` plus that header, as written.
    #[inline]
    fn add_header(&self, acc: checksum::Wide, header: &[u8]) -> checksum::Wide {
        acc.add_bytes(header)
    }
    /// Where the payload starts in the send buffer (from its first unacknowledged
    /// byte), and its length.
    fn payload(&self) -> (usize, usize);
    /// For a TSO super-frame, the size of the segments the device cuts.
    fn tso_mss(&self) -> Option<u16>;
}

impl SegmentHeader for TxSegment {
    #[inline]
    fn header_len(&self) -> usize {
        TxSegment::header_len(self)
    }
    #[inline]
    fn write_header(&self, buf: &mut [u8], src_port: u16, dst_port: u16) {
        TxSegment::write_header(self, buf, src_port, dst_port);
    }
    #[inline]
    fn payload(&self) -> (usize, usize) {
        (self.payload_offset, self.payload_len)
    }
    #[inline]
    fn tso_mss(&self) -> Option<u16> {
        self.tso_mss
    }
}

impl SegmentHeader for PredictedSegment {
    #[inline]
    fn header_len(&self) -> usize {
        PredictedSegment::header_len(self)
    }
    #[inline]
    fn write_header(&self, buf: &mut [u8], src_port: u16, dst_port: u16) {
        PredictedSegment::write_header(self, buf, src_port, dst_port);
    }
    /// Its header is 32 bytes long (with timestamps) or 20: summed at a known length.
    #[inline]
    fn add_header(&self, acc: checksum::Wide, header: &[u8]) -> checksum::Wide {
        match <&[u8; 32]>::try_from(header) {
            Ok(h) => acc.add_bytes(h),
            Err(_) => acc.add_bytes(header),
        }
    }
    #[inline]
    fn payload(&self) -> (usize, usize) {
        (self.payload_offset as usize, self.payload_len as usize)
    }
    #[inline]
    fn tso_mss(&self) -> Option<u16> {
        None
    }
}

/// One TCP segment as an Ethernet frame: everything [`TcpFrame::write`] needs.
struct TcpFrame<'a, S> {
    src_mac: MacAddr,
    dst_mac: MacAddr,
    /// Our address, of the family of `key.remote_ip()`.
    src_ip: IpAddr,
    key: FlowKey,
    seg: &'a S,
    /// The connection's send buffer, which holds the segment's payload.
    payload: Option<&'a SendBuffer>,
    ident: u16,
}

impl<'a, S: SegmentHeader> TcpFrame<'a, S> {
    /// The frame of `seg` on the connection `block`, from us (`src_mac`, and the
    /// connection's own address) to `dst_mac`, its payload from the connection's send
    /// buffer.
    // Always inlined: see `TcpFrame::send`.
    #[inline(always)]
    fn of_conn(src_mac: MacAddr, block: &'a Block, seg: &'a S, dst_mac: MacAddr) -> Self {
        TcpFrame {
            src_mac,
            dst_mac,
            src_ip: block.tcb.local_ip(),
            key: block.key,
            seg,
            payload: Some(block.tcb.send_buffer()),
            ident: 0,
        }
    }

    /// Write the frame into a transmit buffer of the device and queue it on `out`,
    /// numbering its datagram from `ident`; counted as dropped when the device has no
    /// buffer free.
    // Always inlined, as the rest of the transmit path below (`push`, `of_conn`,
    // `write`): once per segment sent, each from one call site; out of line, the
    // segment's fields are spilled and reloaded around every call. The buffer goes
    // from the device to the queue here, so that it is not moved through return values.
    #[inline(always)]
    fn send<D: PacketIo>(
        &mut self,
        out: TxQueue<'_, D>,
        ident: &mut IdentCounter,
        offload: ChecksumOffload,
    ) {
        let header_len = self.seg.header_len();
        let Some(mut buf) = out.dev.alloc_tx(self.len(header_len)) else {
            return out.stats.drop(DropReason::NoTxBuffer);
        };
        self.ident = ident.next();
        let meta = self.write(&mut buf, header_len, offload);
        if meta != TxMeta::default() {
            buf.set_meta(meta);
        }
        out.stats.segments_out += 1;
        out.push(buf, meta.tso_mss.is_some());
    }

    /// The frame's length in bytes, with a TCP header of `header_len` bytes (the
    /// segment's [`TxSegment::header_len`], computed once per frame).
    #[inline]
    fn len(&self, header_len: usize) -> usize {
        self.transport_offset() + header_len + self.seg.payload().1
    }

    /// Where the TCP header starts in the frame: after the Ethernet and IP headers.
    #[inline]
    fn transport_offset(&self) -> usize {
        match self.src_ip {
            IpAddr::V4(_) => ipv4::TRANSPORT_OFFSET,
            IpAddr::V6(_) => ethernet::HEADER_LEN + crate::ipv6::HEADER_LEN,
        }
    }

    /// Build Ethernet + IP (IPv4 or IPv6) + TCP headers (the TCP header `hl` bytes
    /// long) and the payload into `buf` (exactly [`TcpFrame::len`] long). Returns the
    /// offload request for the driver, if any.
    // Always inlined: see `TcpFrame::send`.
    #[inline(always)]
    fn write(&self, buf: &mut [u8], hl: usize, offload: ChecksumOffload) -> TxMeta {
        let tcp_len = hl + self.seg.payload().1;
        let ip_start = ethernet::HEADER_LEN;
        let (tcp_start, pseudo) = match (self.src_ip, self.key.remote_v4()) {
            (IpAddr::V4(src), Some(dst)) => {
                let tcp_start = ipv4::TRANSPORT_OFFSET;
                ethernet::write_header(
                    &mut buf[..ip_start],
                    self.src_mac,
                    self.dst_mac,
                    EthernetProtocol::Ipv4,
                );
                ipv4::write_header(
                    &mut buf[ip_start..tcp_start],
                    src,
                    dst,
                    IpProtocol::Tcp,
                    tcp_len,
                    ipv4::DEFAULT_TTL,
                    self.ident,
                    true,
                    !offload.ipv4,
                );
                let pseudo = checksum::Wide::pseudo_v4(
                    src.octets(),
                    dst.octets(),
                    IpProtocol::Tcp.into(),
                    tcp_len as u16,
                );
                (tcp_start, pseudo)
            }
            _ => (
                ip_start + crate::ipv6::HEADER_LEN,
                self.write_v6_headers(buf, tcp_len),
            ),
        };
        self.write_tcp(buf, tcp_start, hl, offload, pseudo)
    }

    /// The Ethernet and IPv6 headers of the frame, whose TCP segment is `tcp_len` bytes
    /// long; with them, the segment's pseudo-header sum. Out of line: the IPv4 path it
    /// sits beside stays as small where it is inlined as it was before IPv6, and the TCP
    /// segment is written by the one copy of `write_tcp` both families share.
    #[inline(never)]
    fn write_v6_headers(&self, buf: &mut [u8], tcp_len: usize) -> checksum::Wide {
        let ip_start = ethernet::HEADER_LEN;
        let tcp_start = ip_start + crate::ipv6::HEADER_LEN;
        // By reference: matched by value, the two addresses are taken apart into bytes.
        let (src, dst) = match (&self.src_ip, self.key.remote()) {
            (IpAddr::V6(src), IpAddr::V6(dst)) => (*src, *dst),
            (&src, &dst) => (crate::ipv6::as_v6(src), crate::ipv6::as_v6(dst)),
        };
        ethernet::write_header(
            &mut buf[..ip_start],
            self.src_mac,
            self.dst_mac,
            EthernetProtocol::Ipv6,
        );
        let tcp = IpProtocol::Tcp.into();
        let header: &mut [u8; crate::ipv6::HEADER_LEN] = (&mut buf[ip_start..tcp_start])
            .try_into()
            .expect("the IPv6 header's bytes");
        // A TSO super-frame may be above 64 KiB: its length is the device's to write.
        let len = u16::try_from(tcp_len).unwrap_or(0);
        let hops = crate::ipv6::DEFAULT_HOP_LIMIT;
        crate::ipv6::write_header(header, &src, &dst, tcp, len, hops);
        // Summed where the header holds them: the addresses are not taken apart again.
        let addresses = header[8..].first_chunk::<32>().expect("both addresses");
        checksum::Wide::pseudo_v6_at(addresses, tcp, tcp_len as u32)
    }

    /// The TCP header and payload of the frame, at `tcp_start`, the IP header's sum
    /// being `pseudo`: checksummed here, or left to the device.
    // Always inlined: see `TcpFrame::send`.
    #[inline(always)]
    fn write_tcp(
        &self,
        buf: &mut [u8],
        tcp_start: usize,
        hl: usize,
        offload: ChecksumOffload,
        pseudo: checksum::Wide,
    ) -> TxMeta {
        let seg = self.seg;
        let key = self.key;
        let (payload_offset, payload_len) = seg.payload();
        let tcp_len = hl + payload_len;
        seg.write_header(
            &mut buf[tcp_start..tcp_start + hl],
            key.local_port,
            key.remote_port,
        );
        let payload = tcp_start + hl..tcp_start + tcp_len;
        let csum_at = tcp_start + segment::CHECKSUM_OFFSET;
        let body = self.payload.filter(|_| payload_len > 0);
        let mut meta = TxMeta::default();
        if offload.tcp {
            if let Some(sb) = body {
                sb.copy_out(payload_offset, &mut buf[payload]);
            }
            // CHECKSUM_PARTIAL: the device adds the segment's sum to the pseudo-header sum.
            buf[csum_at..csum_at + 2].copy_from_slice(&pseudo.folded_bytes());
            meta.checksum = Some(ChecksumRequest {
                start: tcp_start as u16,
                offset: segment::CHECKSUM_OFFSET as u16,
            });
            meta.tso_mss = seg.tso_mss();
        } else {
            // Pseudo-header, header and payload summed into one accumulator, folded
            // once. The payload's sum comes with the copy (from precomputed prefix sums
            // for summed bodies), so the body is never read a second time.
            let acc = seg.add_header(pseudo, &buf[tcp_start..tcp_start + hl]);
            // The header is a multiple of four bytes long, so the payload starts even.
            let acc = match body {
                Some(sb) => sb.copy_out_summed(payload_offset, &mut buf[payload], acc),
                None => acc,
            };
            buf[csum_at..csum_at + 2].copy_from_slice(&acc.checksum_bytes());
        }
        meta
    }
}

/// Puts the wheel entry that wakes connection `id` at `at` (its TCB's new wake-up).
///
/// The wheel has no cancel: an entry whose wake-up moved is left to fire, found stale and
/// ignored. For near wake-ups that costs little, as they fire soon. A far one would stay
/// for up to its whole lead: a keep-alive connection whose idle timeout lies 15 s ahead
/// would leave one such entry per request (its loss-probe entry fires between requests
/// and the next wake-up is then the idle timeout), a server with many requests a second
/// millions of them. So a connection keeps at most one far entry (more than
/// [`FAR_WAKE`] ahead), in `block.far_wake`: a far wake-up at or after it needs no
/// entry of its own, as that entry fires first and, coming early, schedules the wake-up
/// then (see `run_timers`).
pub(super) fn schedule_wake(
    timers: &mut TimerWheel<TimerItem>,
    now: Instant,
    block: &mut Block,
    id: ConnId,
    at: Instant,
) {
    if at.saturating_duration_since(now) >= FAR_WAKE {
        if block.far_wake <= at {
            return;
        }
        block.far_wake = at;
    }
    timers.schedule(at, TimerItem::Conn { id, at });
}
