//! The transmit path (§7.2): on a tail write the device fetches descriptors from the
//! head, keeps offload contexts from context descriptors (§7.2.3.2.3), gathers data
//! descriptors' buffers up to EOP (§7.2.3.2.4), applies checksum offload (§7.2.5) and
//! TCP segmentation (§7.2.4), puts the frame(s) on the wire and writes DD back where
//! RS asks. Everything runs synchronously inside the tail write.
//!
//! A descriptor the hardware could not make sense of (legacy format, unknown type, a
//! buffer outside DMA memory, a tail past the ring) is logged as a misuse and the
//! queue stops, as a real 82599 would hang; it stays stopped until it is disabled and
//! enabled again, or the device is reset.

use super::frame::{self, be16, fold, put16, sum};
use super::nic::{txq, Nic};
use super::regs::{self, Dir};
use super::Misuse;

/// Shortest frame on the wire without its CRC; HLREG0.TXPADEN pads up to it.
const MIN_FRAME: usize = 60;

/// A transmit queue's state beyond its registers.
#[derive(Default)]
pub(crate) struct TxQueue {
    /// Stopped after a misuse.
    hung: bool,
    /// The two offload contexts a queue holds (context descriptor IDX 0 and 1).
    contexts: [Option<Context>; 2],
    /// A packet whose EOP descriptor has not been fetched yet.
    pending: Option<Pending>,
}

/// An offload context (§7.2.3.2.3).
#[derive(Debug, Clone, Copy)]
struct Context {
    maclen: usize,
    iplen: usize,
    l4len: usize,
    mss: usize,
    ipv4: bool,
    /// TUCMD.L4T: 0 UDP, 1 TCP, 2 SCTP.
    l4t: u32,
}

/// A packet being gathered: its bytes so far and its first data descriptor's
/// command and offload fields (the ones that count, §7.2.3.2.4).
struct Pending {
    bytes: Vec<u8>,
    cmd: u32,
    olinfo: u32,
}

/// L4T values of TUCMD.
const L4T_UDP: u32 = 0;
const L4T_TCP: u32 = 1;

impl Nic {
    /// Process queue `q`'s descriptors from head to tail.
    pub(crate) fn transmit(&mut self, q: usize) {
        while self.transmit_one(q) {}
    }

    /// Process the descriptor at the head; false when there is nothing (more) to do.
    fn transmit_one(&mut self, queue: usize) -> bool {
        if queue >= self.txq.len() || self.txq[queue].hung {
            return false;
        }
        let (_, entries) = self.ring(Dir::Tx, queue);
        let head = self.reg(txq(queue, regs::TDH));
        let tail = self.reg(txq(queue, regs::TDT));
        if head == tail {
            return false;
        }
        if !self.queue_enabled(Dir::Tx, queue) || self.reg(regs::DMATXCTL) & regs::DMATXCTL_TE == 0
        {
            self.misuse(Misuse::TxQueueNotEnabled { queue });
            return false;
        }
        if tail >= entries || head >= entries {
            self.misuse(Misuse::TailPastRing {
                dir: Dir::Tx,
                queue,
                tail,
                entries,
            });
            return self.hang(queue);
        }
        let Some((at, [addr, hi])) = self.fetch_desc(Dir::Tx, queue, head) else {
            return self.hang(queue);
        };
        let (dword2, dword3) = (hi as u32, (hi >> 32) as u32);
        let index = head as usize;
        if dword2 & regs::TXD_DEXT == 0 {
            self.misuse(Misuse::TxLegacyDescriptor { queue, index });
            return self.hang(queue);
        }
        match (dword2 >> regs::TXD_DTYP_SHIFT) & 0xF {
            regs::TXD_DTYP_CONTEXT => {
                let slot = ((dword3 >> regs::TXD_IDX_SHIFT) & 0x7) as usize;
                if slot >= 2 {
                    self.misuse(Misuse::TxContextIndex { queue, index, slot });
                    return self.hang(queue);
                }
                let dword0 = addr as u32;
                self.txq[queue].contexts[slot] = Some(Context {
                    iplen: (dword0 & 0x1FF) as usize,
                    maclen: ((dword0 >> regs::CTX_MACLEN_SHIFT) & 0x7F) as usize,
                    l4len: ((dword3 >> regs::CTX_L4LEN_SHIFT) & 0xFF) as usize,
                    mss: (dword3 >> regs::CTX_MSS_SHIFT) as usize,
                    ipv4: dword2 & regs::CTX_TUCMD_IPV4 != 0,
                    l4t: (dword2 >> regs::CTX_TUCMD_L4T_SHIFT) & 0x3,
                });
            }
            regs::TXD_DTYP_DATA => {
                let len = (dword2 & regs::TXD_DTALEN_MASK) as usize;
                let mut buf = vec![0u8; len];
                if !self.arena.read(addr, &mut buf) {
                    self.misuse(Misuse::TxBufferUnmapped {
                        queue,
                        index,
                        addr,
                        len,
                    });
                    return self.hang(queue);
                }
                let pending = self.txq[queue].pending.get_or_insert_with(|| Pending {
                    bytes: Vec::new(),
                    cmd: dword2,
                    olinfo: dword3,
                });
                pending.bytes.extend_from_slice(&buf);
                if dword2 & regs::TXD_EOP != 0 {
                    if let Some(p) = self.txq[queue].pending.take() {
                        self.send(queue, p);
                    }
                }
                if dword2 & regs::TXD_RS != 0 {
                    // Write-back (§7.2.3.2.4): DD in STA; the model keeps the rest.
                    let done = hi | u64::from(regs::TXD_STA_DD) << 32;
                    self.arena.write_desc(at, [addr, done]);
                }
            }
            dtyp => {
                self.misuse(Misuse::TxUnknownDescriptorType { queue, index, dtyp });
                return self.hang(queue);
            }
        }
        self.store(txq(queue, regs::TDH), (head + 1) % entries);
        true
    }

    fn hang(&mut self, queue: usize) -> bool {
        self.txq[queue].hung = true;
        false
    }

    /// Put a gathered packet on the wire, segmented and checksummed as asked.
    fn send(&mut self, queue: usize, p: Pending) {
        let wants_ctx = p.olinfo & (regs::TXD_POPTS_IXSM | regs::TXD_POPTS_TXSM) != 0
            || p.cmd & regs::TXD_TSE != 0;
        let slot = ((p.olinfo >> regs::TXD_IDX_SHIFT) & 0x7) as usize;
        let ctx = match self.txq[queue].contexts.get(slot).copied().flatten() {
            Some(c) if wants_ctx => Some(c),
            None if wants_ctx => {
                self.misuse(Misuse::TxContextMissing { queue, slot });
                None
            }
            _ => None,
        };
        if p.cmd & regs::TXD_VLE != 0 {
            self.misuse(Misuse::TxUnsupported {
                queue,
                what: "VLAN tag insertion",
            });
        }
        let paylen = (p.olinfo >> regs::TXD_PAYLEN_SHIFT) as usize;
        let ixsm = p.olinfo & regs::TXD_POPTS_IXSM != 0;
        let txsm = p.olinfo & regs::TXD_POPTS_TXSM != 0;
        let frames = match ctx {
            Some(c) if p.cmd & regs::TXD_TSE != 0 => {
                self.segment(queue, c, &p.bytes, paylen, ixsm, txsm)
            }
            _ if p.cmd & regs::TXD_TSE != 0 => Vec::new(),
            _ => {
                if paylen != p.bytes.len() {
                    self.misuse(Misuse::TxPaylen {
                        queue,
                        paylen,
                        bytes: p.bytes.len(),
                    });
                }
                let mut f = p.bytes;
                if let Some(c) = ctx {
                    if let Err(what) = checksums(&c, &mut f, ixsm, txsm, None) {
                        self.misuse(Misuse::TxUnsupported { queue, what });
                    }
                }
                vec![f]
            }
        };
        for f in frames {
            self.put_on_wire(queue, f, p.cmd & regs::TXD_IFCS != 0);
        }
    }

    fn put_on_wire(&mut self, queue: usize, mut f: Vec<u8>, ifcs: bool) {
        if !ifcs {
            // Without IFCS the buffer ends with the software's own FCS; a wrong one
            // makes the frame worthless to every receiver.
            let ok = f.len() >= frame::ETH_HEADER + 4 && {
                let (body, fcs) = f.split_at(f.len() - 4);
                frame::fcs(body) == fcs
            };
            if !ok {
                self.misuse(Misuse::TxBadFcs { queue });
                return;
            }
            f.truncate(f.len() - 4);
        }
        if self.reg(regs::HLREG0) & regs::HLREG0_TXPADEN != 0 && f.len() < MIN_FRAME {
            f.resize(MIN_FRAME, 0);
        }
        let set = self.stat_set(Dir::Tx, queue);
        self.count(regs::TPT, 1);
        self.count(regs::GPTC, 1);
        self.count(regs::GOTCL, (f.len() + 4) as u64);
        self.count(regs::QPTC + 4 * set, 1);
        self.count(regs::QBTC_L + 8 * set, f.len() as u64);
        self.wire.push(f);
    }

    /// TCP segmentation (§7.2.4): the header (MACLEN + IPLEN + L4LEN bytes) is
    /// repeated in front of every MSS bytes of payload, with the IPv4 total length,
    /// identification and checksum, the TCP sequence number, flags and checksum
    /// fixed up per segment.
    fn segment(
        &mut self,
        queue: usize,
        c: Context,
        bytes: &[u8],
        paylen: usize,
        ixsm: bool,
        txsm: bool,
    ) -> Vec<Vec<u8>> {
        let hdr = c.maclen + c.iplen + c.l4len;
        let reason = if !c.ipv4 {
            Some("TSO over IPv6")
        } else if c.l4t != L4T_TCP {
            Some("TSO of anything but TCP")
        } else if c.mss == 0 || c.l4len < 20 || c.iplen < 20 || bytes.len() < hdr {
            Some("TSO context that does not describe the packet")
        } else {
            None
        };
        if let Some(what) = reason {
            self.misuse(Misuse::TxUnsupported { queue, what });
            return Vec::new();
        }
        if paylen != bytes.len() - hdr {
            self.misuse(Misuse::TxPaylen {
                queue,
                paylen,
                bytes: bytes.len() - hdr,
            });
        }
        let (ip, tcp) = (c.maclen, c.maclen + c.iplen);
        let id = be16(bytes, ip + 4);
        let seq = u32::from_be_bytes([
            bytes[tcp + 4],
            bytes[tcp + 5],
            bytes[tcp + 6],
            bytes[tcp + 7],
        ]);
        let flags = be16(bytes, tcp + 12);
        let low = self.reg(regs::DTXTCPFLGL);
        let (first, middle) = (low & 0xFFF, (low >> 16) & 0xFFF);
        let last = self.reg(regs::DTXTCPFLGH) & 0xFFF;
        let payload = &bytes[hdr..];
        let count = payload.len().div_ceil(c.mss).max(1);
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let chunk =
                &payload[(i * c.mss).min(payload.len())..((i + 1) * c.mss).min(payload.len())];
            let mut f = Vec::with_capacity(hdr + chunk.len());
            f.extend_from_slice(&bytes[..hdr]);
            f.extend_from_slice(chunk);
            put16(&mut f, ip + 2, (c.iplen + c.l4len + chunk.len()) as u16);
            put16(&mut f, ip + 4, id.wrapping_add(i as u16));
            let s = seq.wrapping_add((i * c.mss) as u32);
            f[tcp + 4..tcp + 8].copy_from_slice(&s.to_be_bytes());
            let mask = match (i == 0, i + 1 == count) {
                (true, true) => first | last,
                (true, false) => first,
                (false, true) => last,
                (false, false) => middle,
            };
            put16(
                &mut f,
                tcp + 12,
                (flags & 0xF000) | (flags & mask as u16 & 0x0FFF),
            );
            let l4_len = c.l4len + chunk.len();
            if let Err(what) = checksums(&c, &mut f, ixsm, txsm, Some(l4_len)) {
                self.misuse(Misuse::TxUnsupported { queue, what });
            }
            out.push(f);
        }
        out
    }
}

/// Insert the IPv4 header checksum (IXSM) and the TCP/UDP checksum (TXSM) the way
/// the hardware computes them (§7.2.5): the one's complement of the sum over the
/// header or segment as the driver left it, so the driver must leave 0 in the IPv4
/// checksum field and the pseudo-header sum in the TCP/UDP one. With TSO the
/// pseudo-header sum leaves the length out and the device adds each segment's
/// `tso_l4_len`.
fn checksums(
    c: &Context,
    f: &mut [u8],
    ixsm: bool,
    txsm: bool,
    tso_l4_len: Option<usize>,
) -> Result<(), &'static str> {
    let (ip, l4) = (c.maclen, c.maclen + c.iplen);
    if ixsm {
        if !c.ipv4 || f.len() < l4 || c.iplen < 20 {
            return Err("IPv4 checksum for a packet the context says is not IPv4");
        }
        let s = !fold(sum(&f[ip..l4]));
        put16(f, ip + 10, s);
    }
    if txsm {
        let at = match c.l4t {
            L4T_UDP => 6,
            L4T_TCP => 16,
            _ => return Err("SCTP checksum offload"),
        };
        if f.len() < l4 + at + 2 {
            return Err("L4 checksum past the end of the packet");
        }
        let extra = tso_l4_len.map_or(0, |n| n as u32);
        let mut s = !fold(sum(&f[l4..]) + extra);
        if c.l4t == L4T_UDP && s == 0 {
            s = 0xFFFF;
        }
        put16(f, l4 + at, s);
    }
    Ok(())
}
