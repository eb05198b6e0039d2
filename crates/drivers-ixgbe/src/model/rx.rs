//! The receive path (§7.1): a frame from the wire through the MAC's length checks and
//! L2 filters (§7.1.1), to a queue chosen by RSS (§7.1.2.8), into the packet buffers
//! of free advanced descriptors, which get written back (§7.1.6.2).
//!
//! A frame larger than one buffer spans several descriptors, EOP on the last. The
//! model has no packet buffer: a frame with too few free descriptors is missed at
//! once (MPC), as when the packet buffer has filled up.

use super::frame::{self, Ipv4Info};
use super::nic::{rxq, Nic};
use super::regs::{self, Dir};
use super::rss;
use super::{Misuse, RxVerdict};

/// Largest frame (with its CRC) without HLREG0.JUMBOEN.
const MAX_FRAME: usize = 1518;
/// Length of the CRC that follows a frame on the wire.
const CRC_LEN: usize = 4;

impl Nic {
    /// A frame (without its FCS) arrives from the network.
    pub(crate) fn receive(&mut self, frame: &[u8]) -> RxVerdict {
        if self.in_reset() {
            return RxVerdict::InReset;
        }
        if !self.link_up() {
            return RxVerdict::LinkDown;
        }
        if self.reg(regs::RXCTRL) & regs::RXCTRL_RXEN == 0 {
            return RxVerdict::ReceiverDisabled;
        }
        self.count(regs::TPR, 1);
        if frame.len() < frame::ETH_HEADER {
            self.count(regs::RUC, 1);
            return RxVerdict::Runt;
        }
        let hlreg0 = self.reg(regs::HLREG0);
        let max = if hlreg0 & regs::HLREG0_JUMBOEN != 0 {
            (self.reg(regs::MAXFRS) >> 16) as usize
        } else {
            MAX_FRAME
        };
        if frame.len() + CRC_LEN > max {
            self.count(regs::ROC, 1);
            return RxVerdict::Oversize;
        }
        let dst: [u8; 6] = frame[..6].try_into().unwrap_or_default();
        let broadcast = dst == [0xFF; 6];
        let multicast = !broadcast && dst[0] & 1 == 1;
        let fctrl = self.reg(regs::FCTRL);
        let accept = if broadcast {
            fctrl & regs::FCTRL_BAM != 0
        } else if multicast {
            // The multicast table (MTA) is not modelled: MPE or nothing.
            fctrl & regs::FCTRL_MPE != 0
        } else {
            fctrl & regs::FCTRL_UPE != 0 || self.unicast_match(dst)
        };
        if !accept {
            return RxVerdict::Filtered;
        }
        let ip = frame::parse_ipv4(frame);
        let (queue, rss) = self.choose_queue(frame, ip.as_ref());
        let verdict = self.deliver_to(queue, frame, ip.as_ref(), rss);
        if let RxVerdict::Delivered { .. } = verdict {
            self.count(regs::GPRC, 1);
            self.count(regs::GORCL, (frame.len() + CRC_LEN) as u64);
            if broadcast {
                self.count(regs::BPRC, 1);
            } else if multicast {
                self.count(regs::MPRC, 1);
            }
        }
        verdict
    }

    /// Whether `dst` is in a valid receive address entry (RAL/RAH, §8.2.3.7.9).
    fn unicast_match(&self, dst: [u8; 6]) -> bool {
        (0..128u32).any(|n| {
            let rah = self.reg(regs::RAL + 8 * n + 4);
            if rah & regs::RAH_AV == 0 {
                return false;
            }
            let ral = self.reg(regs::RAL + 8 * n).to_le_bytes();
            let high = (rah as u16).to_le_bytes();
            dst == [ral[0], ral[1], ral[2], ral[3], high[0], high[1]]
        })
    }

    /// The queue (and the RSS hash and type) for a frame: RSS when MRQC.MRQE says
    /// so, else queue 0. A frame no enabled hash type applies to goes to queue 0.
    fn choose_queue(&mut self, frame: &[u8], ip: Option<&Ipv4Info>) -> (usize, Option<(u32, u32)>) {
        let mrqc = self.reg(regs::MRQC);
        match mrqc & regs::MRQC_MRQE_MASK {
            0 => (0, None),
            regs::MRQC_MRQE_RSS => {
                let words: [u32; 10] =
                    std::array::from_fn(|i| self.reg(regs::RSSRK + 4 * i as u32));
                let key = rss::key_from_registers(&words);
                match rss::hash(&key, mrqc, frame, ip) {
                    Some((hash, kind)) => {
                        let reta: [u32; 32] =
                            std::array::from_fn(|i| self.reg(regs::RETA + 4 * i as u32));
                        (rss::queue(&reta, hash), Some((hash, kind)))
                    }
                    None => (0, None),
                }
            }
            _ => {
                // DCB and virtualisation modes are not modelled.
                self.misuse(Misuse::UnsupportedMrqc { mrqc });
                (0, None)
            }
        }
    }

    fn deliver_to(
        &mut self,
        queue: usize,
        frame: &[u8],
        ip: Option<&Ipv4Info>,
        rss: Option<(u32, u32)>,
    ) -> RxVerdict {
        if !self.queue_enabled(Dir::Rx, queue) {
            self.misuse(Misuse::RxQueueNotEnabled { queue });
            self.count(regs::MPC, 1);
            return RxVerdict::QueueDisabled { queue };
        }
        if !self.check_srrctl(queue) {
            return RxVerdict::Misconfigured { queue };
        }
        let srrctl = self.reg(rxq(queue, regs::SRRCTL));
        let bsize = (srrctl & regs::SRRCTL_BSIZEPACKET_MASK) as usize * 1024;
        let hl_strip = self.reg(regs::HLREG0) & regs::HLREG0_RXCRCSTRP != 0;
        let dma_strip = self.reg(regs::RDRXCTL) & regs::RDRXCTL_CRCSTRIP != 0;
        if hl_strip != dma_strip {
            self.misuse(Misuse::CrcStripMismatch {
                hlreg0: hl_strip,
                rdrxctl: dma_strip,
            });
        }
        let mut data = frame.to_vec();
        if !hl_strip {
            data.extend_from_slice(&frame::fcs(frame));
        }
        let (_, entries) = self.ring(Dir::Rx, queue);
        let head = self.reg(rxq(queue, regs::RDH));
        let tail = self.reg(rxq(queue, regs::RDT));
        if entries == 0 || head >= entries || tail >= entries {
            self.misuse(Misuse::TailPastRing {
                dir: Dir::Rx,
                queue,
                tail,
                entries,
            });
            return RxVerdict::Misconfigured { queue };
        }
        let free = ((tail + entries - head) % entries) as usize;
        let need = data.len().div_ceil(bsize).max(1);
        if free < need {
            self.count(regs::MPC, 1);
            if srrctl & regs::SRRCTL_DROP_EN != 0 {
                let set = self.stat_set(Dir::Rx, queue);
                self.count(regs::QPRDC_BASE + regs::QUEUE_STRIDE * set, 1);
            }
            return RxVerdict::NoDescriptor { queue };
        }
        // Fetch every descriptor and check every buffer before writing anything.
        let mut slots = Vec::with_capacity(need);
        for i in 0..need {
            let index = (head as usize + i) % entries as usize;
            let Some((at, [buffer, _header])) = self.fetch_desc(Dir::Rx, queue, index as u32)
            else {
                return RxVerdict::Misconfigured { queue };
            };
            let chunk = bsize.min(data.len() - i * bsize);
            if self.arena.find(buffer, chunk).is_none() {
                self.misuse(Misuse::RxBufferUnmapped {
                    queue,
                    index,
                    addr: buffer,
                    len: chunk,
                });
                return RxVerdict::Misconfigured { queue };
            }
            slots.push((at, buffer, chunk));
        }
        let (status, errors, ptype) = offload_results(frame, ip);
        let (hash, rss_type) = rss.unwrap_or((0, 0));
        let pcsd = self.reg(regs::RXCSUM) & regs::RXCSUM_PCSD != 0;
        let dword0 = rss_type | ptype << 4;
        let dword1 = if pcsd { hash } else { 0 };
        for (i, &(at, buffer, chunk)) in slots.iter().enumerate() {
            self.arena
                .write(buffer, &data[i * bsize..i * bsize + chunk]);
            let mut dword2 = regs::RXD_STAT_DD;
            if i + 1 == need {
                dword2 |= regs::RXD_STAT_EOP | status | errors;
            }
            let dword3 = chunk as u32 & 0xFFFF;
            let lo = u64::from(dword0) | u64::from(dword1) << 32;
            let hi = u64::from(dword2) | u64::from(dword3) << 32;
            self.arena.write_desc(at, [lo, hi]);
        }
        self.store(rxq(queue, regs::RDH), (head + need as u32) % entries);
        let set = self.stat_set(Dir::Rx, queue);
        self.count(rxq(set as usize, regs::QPRC), 1);
        self.count(rxq(set as usize, regs::QBRC_L), data.len() as u64);
        RxVerdict::Delivered {
            queue,
            descriptors: need,
        }
    }
}

/// The receive checksum offload results (§7.1.11): status bits, error bits and the
/// packet type. The 82599 checks the IPv4 header and TCP/UDP checksums of every
/// unfragmented IPv4 packet; RXCSUM only chooses what else the descriptor reports.
fn offload_results(frame: &[u8], ip: Option<&Ipv4Info>) -> (u32, u32, u32) {
    let Some(ip) = ip else {
        return (0, 0, 0);
    };
    let mut status = regs::RXD_STAT_IPCS;
    let mut errors = 0;
    let mut ptype = regs::PTYPE_IPV4;
    if ip.ihl > 20 {
        ptype |= regs::PTYPE_IPV4E;
    }
    if !frame::ipv4_header_ok(frame, ip) {
        errors |= regs::RXD_ERR_IPE;
    }
    if let Some(proto) = ip.l4_header(frame) {
        ptype |= if proto == frame::PROTO_TCP {
            regs::PTYPE_TCP
        } else {
            regs::PTYPE_UDP
        };
        if let Some(ok) = frame::l4_ok(frame, ip) {
            status |= regs::RXD_STAT_L4CS;
            if proto == frame::PROTO_UDP {
                status |= regs::RXD_STAT_UDPCS;
            }
            if !ok {
                errors |= regs::RXD_ERR_TCPE;
            }
        }
    }
    (status, errors, ptype)
}
