//! The advanced descriptor formats (datasheet §7.1.6 receive, §7.2.3.2 transmit), as
//! pure functions from and to the two little-endian 64-bit words of a 16-byte
//! descriptor, so they can be checked without a device.

/// Bytes per descriptor (receive and transmit alike).
pub(crate) const DESC_LEN: usize = 16;

// ----- Receive (§7.1.6) -----

/// The read format (§7.1.6.1): the packet buffer's bus address, and a header buffer
/// address of 0 (one-buffer mode; its bit 0 doubles as DD in the write-back format, so
/// it must be written as 0).
pub(crate) fn rx_read(buffer: u64) -> [u64; 2] {
    [buffer, 0]
}

/// Write-back status: descriptor done (§7.1.6.2).
pub(crate) const RX_STATUS_DD: u32 = 1 << 0;
/// Write-back status: end of packet.
pub(crate) const RX_STATUS_EOP: u32 = 1 << 1;
/// Write-back status: the L4 (TCP/UDP) checksum was checked.
pub(crate) const RX_STATUS_L4CS: u32 = 1 << 5;
/// Write-back status: the IPv4 header checksum was checked.
pub(crate) const RX_STATUS_IPCS: u32 = 1 << 6;
/// Write-back error: IPv4 header checksum error (bit 31 of the status/error word).
pub(crate) const RX_ERROR_IPE: u32 = 1 << 31;
/// Write-back error: TCP/UDP checksum error.
pub(crate) const RX_ERROR_L4E: u32 = 1 << 30;
/// Write-back error: an Ethernet error (CRC, length...).
pub(crate) const RX_ERROR_RXE: u32 = 1 << 29;

/// A receive descriptor the device has written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RxWriteBack {
    /// Extended status (bits 19:0) and errors (bits 31:20).
    pub(crate) status_error: u32,
    /// Bytes of the frame in this descriptor's buffer.
    pub(crate) len: u16,
    /// The RSS hash (with RSS on; §7.1.2.8).
    pub(crate) rss_hash: u32,
    /// RSS type, bits 3:0 of the first word (0: not hashed).
    pub(crate) rss_type: u8,
}

impl RxWriteBack {
    /// Decode the two words of a written-back descriptor.
    pub(crate) fn decode(words: [u64; 2]) -> RxWriteBack {
        RxWriteBack {
            rss_type: (words[0] & 0xF) as u8,
            rss_hash: (words[0] >> 32) as u32,
            status_error: words[1] as u32,
            len: (words[1] >> 32) as u16,
        }
    }

    /// The device has written this descriptor back.
    pub(crate) fn done(&self) -> bool {
        self.status_error & RX_STATUS_DD != 0
    }

    /// The frame ends in this descriptor.
    pub(crate) fn end_of_packet(&self) -> bool {
        self.status_error & RX_STATUS_EOP != 0
    }

    /// The device checked the IPv4 and the TCP/UDP checksums and found both good.
    pub(crate) fn checksums_good(&self) -> bool {
        let checked = RX_STATUS_IPCS | RX_STATUS_L4CS;
        self.status_error & checked == checked
            && self.status_error & (RX_ERROR_IPE | RX_ERROR_L4E) == 0
    }

    /// The device flagged the frame as broken (CRC or length error).
    pub(crate) fn frame_error(&self) -> bool {
        self.status_error & RX_ERROR_RXE != 0
    }
}

// ----- Transmit (§7.2.3.2) -----

/// DTYP of an advanced data descriptor (0011), bits 23:20 of the command word.
pub(crate) const TX_DTYP_DATA: u32 = 0x3 << 20;
/// DTYP of an advanced context descriptor (0010).
pub(crate) const TX_DTYP_CONTEXT: u32 = 0x2 << 20;
/// DCMD: end of packet.
pub(crate) const TX_CMD_EOP: u32 = 1 << 24;
/// DCMD: insert the Ethernet FCS.
pub(crate) const TX_CMD_IFCS: u32 = 1 << 25;
/// DCMD: report status (write DD back when done).
pub(crate) const TX_CMD_RS: u32 = 1 << 27;
/// DCMD: advanced (extended) descriptor.
pub(crate) const TX_CMD_DEXT: u32 = 1 << 29;
/// DCMD: TCP segmentation.
pub(crate) const TX_CMD_TSE: u32 = 1 << 31;
/// Written-back status: descriptor done (bit 0 of the second word).
pub(crate) const TX_STATUS_DD: u64 = 1;
/// POPTS: insert the IPv4 header checksum (bit 8 of the status word).
pub(crate) const TX_POPTS_IXSM: u32 = 1 << 8;
/// POPTS: insert the TCP/UDP checksum.
pub(crate) const TX_POPTS_TXSM: u32 = 1 << 9;
/// PAYLEN shift in the status word (bits 31:14): the frame's length, or for TSO the
/// payload after the headers.
pub(crate) const TX_PAYLEN_SHIFT: u32 = 14;
/// Context TUCMD: the packet is IPv4 (bit 10 of its type/command word).
pub(crate) const TX_TUCMD_IPV4: u32 = 1 << 10;
/// Context TUCMD: the L4 type is TCP (bits 12:11 = 01).
pub(crate) const TX_TUCMD_L4T_TCP: u32 = 1 << 11;

/// An advanced data descriptor for `len` bytes at `buffer`: `cmd` adds DCMD bits
/// (EOP, RS, TSE), `popts` the checksum insertions, `paylen` is the PAYLEN field.
pub(crate) fn tx_data(buffer: u64, len: u16, cmd: u32, popts: u32, paylen: u32) -> [u64; 2] {
    let cmd_type_len = u32::from(len) | TX_DTYP_DATA | TX_CMD_DEXT | TX_CMD_IFCS | cmd;
    let olinfo = popts | (paylen << TX_PAYLEN_SHIFT);
    [buffer, u64::from(cmd_type_len) | u64::from(olinfo) << 32]
}

/// What an offloaded frame's context descriptor describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TxContext {
    /// Ethernet header length (MACLEN, 7 bits).
    pub(crate) mac_len: u8,
    /// IP header length (IPLEN, 9 bits).
    pub(crate) ip_len: u16,
    /// TCP header length (L4LEN), for TSO.
    pub(crate) l4_len: u8,
    /// Segment payload size (MSS), for TSO.
    pub(crate) mss: u16,
}

/// The advanced context descriptor (§7.2.3.2.3) for an IPv4/TCP frame.
pub(crate) fn tx_context(c: TxContext) -> [u64; 2] {
    let vlan_macip_lens = u32::from(c.ip_len & 0x1FF) | u32::from(c.mac_len & 0x7F) << 9;
    let type_tucmd = TX_DTYP_CONTEXT | TX_CMD_DEXT | TX_TUCMD_IPV4 | TX_TUCMD_L4T_TCP;
    let mss_l4len_idx = u32::from(c.l4_len) << 8 | u32::from(c.mss) << 16;
    [
        u64::from(vlan_macip_lens),
        u64::from(type_tucmd) | u64::from(mss_l4len_idx) << 32,
    ]
}

/// The device has written a transmit descriptor back as done.
pub(crate) fn tx_done(words: [u64; 2]) -> bool {
    (words[1] >> 32) & TX_STATUS_DD != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receive_write_back_fields() {
        let w = RxWriteBack::decode([
            0x1234_5678_0000_0011,
            (1514u64 << 32)
                | u64::from(RX_STATUS_DD | RX_STATUS_EOP | RX_STATUS_IPCS | RX_STATUS_L4CS),
        ]);
        assert!(w.done() && w.end_of_packet() && w.checksums_good());
        assert_eq!((w.len, w.rss_hash, w.rss_type), (1514, 0x1234_5678, 1));
        let bad = RxWriteBack::decode([
            0,
            u64::from(RX_STATUS_DD | RX_STATUS_IPCS | RX_STATUS_L4CS | RX_ERROR_L4E),
        ]);
        assert!(!bad.checksums_good());
        assert!(
            !RxWriteBack::decode(rx_read(0x1000)).done(),
            "a fresh descriptor is not done"
        );
    }

    #[test]
    fn transmit_words() {
        let d = tx_data(0xABC0, 60, TX_CMD_EOP | TX_CMD_RS, TX_POPTS_TXSM, 60);
        assert_eq!(d[0], 0xABC0);
        let cmd = d[1] as u32;
        assert_eq!(cmd & 0xFFFF, 60);
        assert_eq!(cmd & (0xF << 20), TX_DTYP_DATA);
        assert_ne!(cmd & TX_CMD_EOP, 0);
        let olinfo = (d[1] >> 32) as u32;
        assert_eq!(olinfo >> TX_PAYLEN_SHIFT, 60);
        assert_ne!(olinfo & TX_POPTS_TXSM, 0);
        assert!(!tx_done(d));
        let c = tx_context(TxContext {
            mac_len: 14,
            ip_len: 20,
            l4_len: 32,
            mss: 1448,
        });
        assert_eq!(c[0] as u32, 20 | 14 << 9);
        assert_eq!((c[1] >> 48) as u16, 1448);
        assert_eq!(((c[1] >> 40) & 0xFF) as u8, 32);
    }
}
