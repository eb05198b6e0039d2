//! The two descriptors the driver shares with the mPIPE, from
//! `arch/tile/include/arch/mpipe_shm.h` (little-endian bit positions within 64-bit
//! words; the header also gives the big-endian order, which TILE-Gx Linux never runs).
//!
//! - The idesc (`MPIPE_PDESC_t`, 8 words = 64 bytes), written by the iDMA into a
//!   NotifRing. Word 0: `notif_ring` 0..8, `channel` 8..13, `me` 14, `tr` 15,
//!   `l2_size` 16..30, `ce` 30, `ct` 31, `bucket_id` 32..45, `cs` 48, `nr` 49, `dest`
//!   50..52, `sq` 52, `ts` 53, `ps` 54, `be` 55, `ctr0` 56..61. Word 1: `ctr1` 0..5,
//!   `csum_start` 8..16, `csum_seed_val` 16..32, `custom0` 32..64 (the default
//!   classifier's flow hash, idesc byte 0x0C). Words 2-4 `custom1..3`, word 5 `gp_sqn`
//!   0..16 and `packet_sqn` 16..64, word 6 the timestamp, word 7 the buffer descriptor:
//!   `va` 0..42 (sign-extended), `stack_idx` 48..53, `inst` 56..58, `hwb` 58, `size`
//!   59..62, `c` 62..64.
//! - The edesc (`MPIPE_EDMA_DESC_t`, 2 words = 16 bytes), written by software into an
//!   eDMA ring. Word 0: `gen` 0, `efifo_sel` 1..7, `csum` 8, `ns` 9, `notif` 10, `bound`
//!   11, `xfer_size` 16..30, `csum_dest` 32..40, `csum_start` 40..48, `csum_seed`
//!   48..64. Word 1: the buffer descriptor, as in idesc word 7.

/// Bytes per idesc.
pub const IDESC_LEN: usize = 64;
/// Bytes per edesc.
pub const EDESC_LEN: usize = 16;

/// The buffer descriptor's `c` field (`MPIPE_EDMA_DESC_WORD1__C_VAL_*`,
/// `arch/tile/include/arch/mpipe.h`): one buffer holds the whole packet.
pub const C_UNCHAINED: u8 = 0;
/// The packet continues in a further buffer.
pub const C_CHAINED: u8 = 1;
/// No buffer (an empty stack, the end of a chain).
pub const C_INVALID: u8 = 3;

fn bits(w: u64, lo: u32, n: u32) -> u64 {
    (w >> lo) & ((1u64 << n) - 1)
}

/// The fields of an idesc the driver reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Idesc {
    /// NotifRing it was written to.
    pub notif_ring: u8,
    /// Source channel.
    pub channel: u8,
    /// MAC error (receive FIFO overrun).
    pub me: bool,
    /// Truncated (the iPkt buffer filled).
    pub tr: bool,
    /// Bytes written to memory.
    pub l2_size: u16,
    /// CRC or other L2 error.
    pub ce: bool,
    /// Cut through: not completely received when classified.
    pub ct: bool,
    /// Load-balancer bucket the classifier chose.
    pub bucket_id: u16,
    /// The checksum engine ran: `csum_seed_val` is its result.
    pub cs: bool,
    /// Drop, deliver, or deliver only the descriptor.
    pub dest: u8,
    /// The iDMA ran out of buffers.
    pub be: bool,
    /// Where the checksum started (from the first byte received).
    pub csum_start: u8,
    /// The checksum result (`cs`), in packet byte order: 0xFFFF when the L4 checksum,
    /// seeded with the pseudo-header by the classifier, verifies.
    pub csum_seed_val: u16,
    /// The default classifier's flow hash.
    pub flow_hash: u32,
    /// The buffer's address.
    pub va: u64,
    /// Its buffer stack.
    pub stack_idx: u8,
    /// Its size class code.
    pub size: u8,
    /// Chaining.
    pub c: u8,
}

impl Idesc {
    /// The fields of the idesc whose first words are `w` (only words 0, 1 and 7 carry
    /// what the driver reads).
    pub fn decode(w0: u64, w1: u64, w7: u64) -> Idesc {
        let va = bits(w7, 0, 42);
        let va = if va & (1 << 41) != 0 {
            va | !((1u64 << 42) - 1)
        } else {
            va
        };
        Idesc {
            notif_ring: bits(w0, 0, 8) as u8,
            channel: bits(w0, 8, 5) as u8,
            me: bits(w0, 14, 1) != 0,
            tr: bits(w0, 15, 1) != 0,
            l2_size: bits(w0, 16, 14) as u16,
            ce: bits(w0, 30, 1) != 0,
            ct: bits(w0, 31, 1) != 0,
            bucket_id: bits(w0, 32, 13) as u16,
            cs: bits(w0, 48, 1) != 0,
            dest: bits(w0, 50, 2) as u8,
            be: bits(w0, 55, 1) != 0,
            csum_start: bits(w1, 8, 8) as u8,
            csum_seed_val: bits(w1, 16, 16) as u16,
            flow_hash: bits(w1, 32, 32) as u32,
            va,
            stack_idx: bits(w7, 48, 5) as u8,
            size: bits(w7, 59, 3) as u8,
            c: bits(w7, 62, 2) as u8,
        }
    }

    /// Whether the hardware flagged the packet (`gxio_mpipe_idesc_has_error`: buffer,
    /// MAC, truncation or CRC error).
    pub fn has_error(&self) -> bool {
        self.be || self.me || self.tr || self.ce
    }

    /// Whether the L4 checksum verified: the classifier asked for it and the result is
    /// all ones (what Linux's tilegx driver takes as `CHECKSUM_UNNECESSARY`).
    pub fn checksum_good(&self) -> bool {
        self.cs && self.csum_seed_val == 0xFFFF
    }
}

/// An edesc as the driver fills it (one per frame: `bound` set, `hwb` clear).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Edesc {
    /// Send nothing (return the buffer only).
    pub ns: bool,
    /// The last edesc of the packet.
    pub bound: bool,
    /// Bytes to send from `va`.
    pub xfer_size: u16,
    /// Fill in a checksum.
    pub csum: bool,
    /// Where summing starts, from the first byte of this edesc.
    pub csum_start: u8,
    /// Where the folded checksum goes, from the first byte of this edesc.
    pub csum_dest: u8,
    /// Initial sum, in packet byte order (bits 7:0 go with the byte at `csum_start`).
    pub csum_seed: u16,
    /// The buffer's address.
    pub va: u64,
    /// Its stack (also selects the IOTLB).
    pub stack_idx: u8,
    /// Push the buffer to `stack_idx` when sent.
    pub hwb: bool,
    /// Size class code (with `hwb` or chaining).
    pub size: u8,
}

impl Edesc {
    /// The two words, `gen` clear (the equeue sets it per slot).
    pub fn encode(&self) -> [u64; 2] {
        let w0 = u64::from(self.csum) << 8
            | u64::from(self.ns) << 9
            | u64::from(self.bound) << 11
            | (u64::from(self.xfer_size) & 0x3FFF) << 16
            | u64::from(self.csum_dest) << 32
            | u64::from(self.csum_start) << 40
            | u64::from(self.csum_seed) << 48;
        let w1 = (self.va & ((1 << 42) - 1))
            | (u64::from(self.stack_idx) & 0x1F) << 48
            | u64::from(self.hwb) << 58
            | (u64::from(self.size) & 7) << 59
            | u64::from(C_UNCHAINED) << 62;
        [w0, w1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idesc_fields_sit_where_mpipe_shm_h_puts_them() {
        let w0 = 7 | 3 << 8 | 1 << 15 | 1514 << 16 | 1 << 30 | 1000 << 32 | 1 << 48 | 1 << 55;
        let w1 = 34 << 8 | 0xFFFF << 16 | 0xDEAD_BEEF << 32;
        let w7 = 0x12_3456_7880 | 9 << 48 | 1 << 58 | 4 << 59 | 3 << 62;
        let d = Idesc::decode(w0, w1, w7);
        assert_eq!(
            (d.notif_ring, d.channel, d.l2_size, d.bucket_id),
            (7, 3, 1514, 1000)
        );
        assert!(d.tr && d.ce && d.be && d.cs && !d.me && !d.ct);
        assert_eq!(
            (d.csum_start, d.csum_seed_val, d.flow_hash),
            (34, 0xFFFF, 0xDEAD_BEEF)
        );
        assert_eq!((d.va, d.stack_idx, d.size, d.c), (0x12_3456_7880, 9, 4, 3));
        assert!(d.has_error() && d.checksum_good());
        let neg = Idesc::decode(0, 0, (1 << 42) - 128);
        assert_eq!(neg.va, (-128i64) as u64, "va is sign-extended from 42 bits");
    }

    #[test]
    fn edesc_fields_sit_where_mpipe_shm_h_puts_them() {
        let e = Edesc {
            bound: true,
            xfer_size: 60,
            csum: true,
            csum_start: 34,
            csum_dest: 50,
            va: 0x40_0080,
            stack_idx: 2,
            ..Edesc::default()
        };
        let [w0, w1] = e.encode();
        assert_eq!(w0, 1 << 8 | 1 << 11 | 60 << 16 | 50 << 32 | 34 << 40);
        assert_eq!(w1, 0x40_0080 | 2 << 48);
    }
}
