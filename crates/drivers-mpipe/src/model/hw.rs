//! The idesc and edesc as the model writes and reads them, from
//! `arch/tile/include/arch/mpipe_shm.h` (`MPIPE_PDESC_t`, `MPIPE_EDMA_DESC_t`),
//! written apart from the driver's `crate::desc` on purpose.

use crate::mem::Region;

pub(super) const IDESC_LEN: usize = 64;
pub(super) const EDESC_LEN: usize = 16;
/// `c`: one buffer holds the packet.
pub(super) const C_UNCHAINED: u8 = 0;
/// `c`: no buffer.
pub(super) const C_INVALID: u8 = 3;

/// What the model fills in an idesc.
#[derive(Debug, Default)]
pub(super) struct IdescFields {
    pub(super) notif_ring: u32,
    pub(super) channel: u32,
    pub(super) me: bool,
    pub(super) tr: bool,
    pub(super) ce: bool,
    pub(super) be: bool,
    pub(super) l2_size: usize,
    pub(super) bucket: u32,
    pub(super) cs: bool,
    pub(super) csum_start: u8,
    pub(super) csum_seed_val: u16,
    pub(super) flow_hash: u32,
    pub(super) ethertype: u16,
    /// L3 start, L4 start, protocol (the default classifier's bytes 0x14-0x16).
    pub(super) l3: Option<(u8, u8, u8)>,
    pub(super) packet_sqn: u64,
    pub(super) va: u64,
    pub(super) stack: u32,
    pub(super) size: u8,
    pub(super) c: u8,
}

/// Write `d` as entry `index` of the NotifRing in `mem`: words 1 to 7 first, word 0
/// (which the driver reads first) last.
pub(super) fn write_idesc(mem: &Region, index: usize, d: &IdescFields) {
    let f = |v: bool, bit: u32| u64::from(v) << bit;
    let w0 = u64::from(d.notif_ring & 0xFF)
        | u64::from(d.channel & 0x1F) << 8
        | f(d.me, 14)
        | f(d.tr, 15)
        | (d.l2_size as u64 & 0x3FFF) << 16
        | f(d.ce, 30)
        | u64::from(d.bucket & 0x1FFF) << 32
        | f(d.cs, 48)
        | 1 << 50 // dest: deliver packet and descriptor
        | 1 << 53 // ts
        | 1 << 54 // ps
        | f(d.be, 55);
    let w1 = u64::from(d.csum_start) << 8
        | u64::from(d.csum_seed_val) << 16
        | u64::from(d.flow_hash) << 32;
    let (l3, l4, proto) = d.l3.unwrap_or((0, 0, 0));
    let w2 = 0xFFFF // no VLAN
        | u64::from(d.ethertype) << 16
        | u64::from(l3) << 32
        | u64::from(l4) << 40
        | u64::from(proto) << 48;
    let w5 = (d.packet_sqn & ((1 << 48) - 1)) << 16;
    let w7 = (d.va & ((1 << 42) - 1))
        | u64::from(d.stack & 0x1F) << 48
        | 1 << 58 // hwb: always set by the iDMA
        | u64::from(d.size & 7) << 59
        | u64::from(d.c & 3) << 62;
    let base = index * IDESC_LEN;
    for (k, w) in [(1, w1), (2, w2), (3, 0), (4, 0), (5, w5), (6, 0), (7, w7)] {
        mem.store(base + k * 8, w);
    }
    crate::mem::release();
    mem.store(base, w0);
}

/// The fields of an edesc the model acts on.
#[derive(Debug)]
pub(super) struct EdescFields {
    pub(super) csum: bool,
    pub(super) ns: bool,
    pub(super) bound: bool,
    pub(super) xfer_size: u16,
    pub(super) csum_dest: u8,
    pub(super) csum_start: u8,
    pub(super) csum_seed: u16,
    pub(super) va: u64,
    pub(super) stack: u32,
    pub(super) hwb: bool,
}

pub(super) fn read_edesc(w0: u64, w1: u64) -> EdescFields {
    let bit = |w: u64, b: u32| (w >> b) & 1 == 1;
    let raw = w1 & ((1 << 42) - 1);
    let va = if raw >> 41 == 1 {
        raw | !((1 << 42) - 1)
    } else {
        raw
    };
    EdescFields {
        csum: bit(w0, 8),
        ns: bit(w0, 9),
        bound: bit(w0, 11),
        xfer_size: ((w0 >> 16) & 0x3FFF) as u16,
        csum_dest: (w0 >> 32) as u8,
        csum_start: (w0 >> 40) as u8,
        csum_seed: (w0 >> 48) as u16,
        va,
        stack: ((w1 >> 48) & 0x1F) as u32,
        hwb: bit(w1, 58),
    }
}
