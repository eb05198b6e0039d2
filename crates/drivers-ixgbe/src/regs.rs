//! The 82599 registers and bits the driver uses (datasheet §8.2.3), as byte offsets in
//! BAR0. Per-queue registers are functions of the queue index.

// ----- General control (§8.2.3.1) -----

/// Device Control (§8.2.3.1.1).
pub const CTRL: u32 = 0x00000;
/// CTRL: software reset of the whole device; self-clearing (§4.6.3.2).
pub const CTRL_RST: u32 = 1 << 26;
/// CTRL: link reset.
pub const CTRL_LRST: u32 = 1 << 3;
/// CTRL: master disable; with STATUS.GIO master enable status clear, DMA has stopped.
pub const CTRL_PCIE_MASTER_DISABLE: u32 = 1 << 2;
/// Device Status (§8.2.3.1.2).
pub const STATUS: u32 = 0x00008;
/// STATUS: PCIe master requests still pending.
pub const STATUS_MASTER_ENABLE: u32 = 1 << 19;
/// Extended Device Control (§8.2.3.1.3).
pub const CTRL_EXT: u32 = 0x00018;
/// CTRL_EXT: no snoop disable.
pub const CTRL_EXT_NS_DIS: u32 = 1 << 16;
/// CTRL_EXT: the driver has taken the device (so firmware keeps off).
pub const CTRL_EXT_DRV_LOAD: u32 = 1 << 28;

// ----- Interrupts (§8.2.3.5) -----

/// Extended Interrupt Mask Clear: writing ones masks those causes.
pub const EIMC: u32 = 0x00888;
/// Every interrupt cause the 82599 has (bits 30:0).
pub const EIMC_ALL: u32 = 0x7FFF_FFFF;

// ----- EEPROM (§8.2.3.2) and DMA init -----

/// EEPROM/Flash Control (§8.2.3.2.1).
pub const EEC: u32 = 0x10010;
/// EEC: EEPROM auto-read done.
pub const EEC_ARD: u32 = 1 << 9;
/// Receive DMA Control (§8.2.3.8.8).
pub const RDRXCTL: u32 = 0x02F00;
/// RDRXCTL: DMA initialisation done.
pub const RDRXCTL_DMAIDONE: u32 = 1 << 3;
/// RDRXCTL: strip the Ethernet CRC in the DMA unit (must match HLREG0.RXCRCSTRP).
pub const RDRXCTL_CRCSTRIP: u32 = 1 << 1;

// ----- Link (§8.2.3.22) -----

/// Auto-Negotiation Control (§8.2.3.22.19).
pub const AUTOC: u32 = 0x042A0;
/// AUTOC: link mode select, bits 15:13.
pub const AUTOC_LMS_MASK: u32 = 0x7 << 13;
/// AUTOC.LMS: 10 GbE serial link with KX4/KX/KR auto-negotiation (the mode ixgbe
/// uses for SFP+ fibre: 0b011).
pub const AUTOC_LMS_10G_SERIAL: u32 = 0x3 << 13;
/// AUTOC: 10 GbE PMA/PMD for parallel links, bits 8:7 (00: XAUI).
pub const AUTOC_10G_PMA_PMD_MASK: u32 = 0x3 << 7;
/// AUTOC: restart auto-negotiation (self-clearing).
pub const AUTOC_AN_RESTART: u32 = 1 << 12;
/// Link Status (§8.2.3.22.20).
pub const LINKS: u32 = 0x042A4;
/// LINKS: link up.
pub const LINKS_UP: u32 = 1 << 30;
/// LINKS: link speed, bits 29:28 (01 100 Mb/s, 10 1 Gb/s, 11 10 Gb/s).
pub const LINKS_SPEED_SHIFT: u32 = 28;
/// MAC Core Control 0 (§8.2.3.22.8).
pub const HLREG0: u32 = 0x04240;
/// HLREG0: append CRC on transmit.
pub const HLREG0_TXCRCEN: u32 = 1 << 0;
/// HLREG0: strip CRC on receive.
pub const HLREG0_RXCRCSTRP: u32 = 1 << 1;
/// HLREG0: pad short frames on transmit.
pub const HLREG0_TXPADEN: u32 = 1 << 10;

// ----- Receive (§8.2.3.7, §8.2.3.8) -----

/// Receive Control (§8.2.3.8.10).
pub const RXCTRL: u32 = 0x03000;
/// RXCTRL: receive enable.
pub const RXCTRL_RXEN: u32 = 1 << 0;
/// Filter Control (§8.2.3.7.1).
pub const FCTRL: u32 = 0x05080;
/// FCTRL: accept broadcast.
pub const FCTRL_BAM: u32 = 1 << 10;
/// FCTRL: multicast promiscuous.
pub const FCTRL_MPE: u32 = 1 << 8;
/// FCTRL: unicast promiscuous.
pub const FCTRL_UPE: u32 = 1 << 9;
/// Receive Checksum Control (§8.2.3.7.5).
pub const RXCSUM: u32 = 0x05000;
/// RXCSUM: IP payload checksum enable (must stay off with RSS: the field carries the
/// RSS hash, §7.1.2.8).
pub const RXCSUM_PCSD: u32 = 1 << 13;
/// RXCSUM: IP payload (fragment) checksum.
pub const RXCSUM_IPPCSE: u32 = 1 << 12;
/// Multiple Receive Queues Command (§8.2.3.7.12).
pub const MRQC: u32 = 0x05818;
/// MRQC.MRQE = 0001: RSS only.
pub const MRQC_RSS: u32 = 0x1;
/// MRQC: hash TCP/IPv4 (the 4-tuple).
pub const MRQC_TCP_IPV4: u32 = 1 << 16;
/// MRQC: hash IPv4 (addresses only).
pub const MRQC_IPV4: u32 = 1 << 17;
/// RSS Random Key, 10 registers (§8.2.3.7.14): key byte 4n + k is byte k (LSB first)
/// of register n.
pub const fn rssrk(n: u32) -> u32 {
    0x05C80 + 4 * n
}
/// Redirection Table, 32 registers of 4 one-byte entries (§8.2.3.7.13): entry 4n + k
/// is byte k of register n; the 82599 uses each entry's 4 low bits (16 queues).
pub const fn reta(n: u32) -> u32 {
    0x05C00 + 4 * n
}
/// Entries in the redirection table.
pub const RETA_ENTRIES: usize = 128;
/// Receive Address Low, entry n (§8.2.3.7.9).
pub const fn ral(n: u32) -> u32 {
    0x0A200 + 8 * n
}
/// Receive Address High, entry n (§8.2.3.7.10).
pub const fn rah(n: u32) -> u32 {
    0x0A204 + 8 * n
}
/// RAH: address valid.
pub const RAH_AV: u32 = 1 << 31;

/// Receive Descriptor Base Address Low, queue n < 64 (§8.2.3.8.1).
pub const fn rdbal(n: u32) -> u32 {
    0x01000 + 0x40 * n
}
/// Receive Descriptor Base Address High.
pub const fn rdbah(n: u32) -> u32 {
    0x01004 + 0x40 * n
}
/// Receive Descriptor Length, bytes (a multiple of 128).
pub const fn rdlen(n: u32) -> u32 {
    0x01008 + 0x40 * n
}
/// Receive Descriptor Head.
pub const fn rdh(n: u32) -> u32 {
    0x01010 + 0x40 * n
}
/// Receive Descriptor Tail.
pub const fn rdt(n: u32) -> u32 {
    0x01018 + 0x40 * n
}
/// Receive Descriptor Control (§8.2.3.8.6).
pub const fn rxdctl(n: u32) -> u32 {
    0x01028 + 0x40 * n
}
/// RXDCTL: queue enable (reads back set once the queue runs).
pub const RXDCTL_ENABLE: u32 = 1 << 25;
/// Split Receive Control, queue n < 64 (§8.2.3.8.7).
pub const fn srrctl(n: u32) -> u32 {
    0x01014 + 0x40 * n
}
/// SRRCTL: packet buffer size in 1 KiB units, bits 4:0.
pub const SRRCTL_BSIZEPACKET_MASK: u32 = 0x1F;
/// SRRCTL.DESCTYPE = 001: advanced descriptors, one buffer.
pub const SRRCTL_DESCTYPE_ADV_ONEBUF: u32 = 0x1 << 25;
/// SRRCTL.DESCTYPE field.
pub const SRRCTL_DESCTYPE_MASK: u32 = 0x7 << 25;
/// SRRCTL: drop frames for this queue when it has no descriptor (instead of stalling
/// every queue behind it).
pub const SRRCTL_DROP_EN: u32 = 1 << 28;

// ----- Transmit (§8.2.3.9) -----

/// DMA Tx Control (§8.2.3.9.10).
pub const DMATXCTL: u32 = 0x04A80;
/// DMATXCTL: transmit enable.
pub const DMATXCTL_TE: u32 = 1 << 0;
/// DCB Transmit Descriptor Plane Control and Status (§8.2.3.10.1).
pub const RTTDCS: u32 = 0x04900;
/// RTTDCS: descriptor arbiter disable (set while configuring, §4.6.11.3).
pub const RTTDCS_ARBDIS: u32 = 1 << 6;
/// Transmit Descriptor Base Address Low, queue n < 128 (§8.2.3.9.5).
pub const fn tdbal(n: u32) -> u32 {
    0x06000 + 0x40 * n
}
/// Transmit Descriptor Base Address High.
pub const fn tdbah(n: u32) -> u32 {
    0x06004 + 0x40 * n
}
/// Transmit Descriptor Length, bytes (a multiple of 128).
pub const fn tdlen(n: u32) -> u32 {
    0x06008 + 0x40 * n
}
/// Transmit Descriptor Head.
pub const fn tdh(n: u32) -> u32 {
    0x06010 + 0x40 * n
}
/// Transmit Descriptor Tail.
pub const fn tdt(n: u32) -> u32 {
    0x06018 + 0x40 * n
}
/// Transmit Descriptor Control (§8.2.3.9.10).
pub const fn txdctl(n: u32) -> u32 {
    0x06028 + 0x40 * n
}
/// TXDCTL: queue enable.
pub const TXDCTL_ENABLE: u32 = 1 << 25;
/// TXDCTL: prefetch threshold bits 6:0, host threshold 14:8, write-back threshold 22:16.
pub const fn txdctl_thresholds(pthresh: u32, hthresh: u32, wthresh: u32) -> u32 {
    (pthresh & 0x7F) | (hthresh & 0x7F) << 8 | (wthresh & 0x7F) << 16
}

// ----- Statistics (§8.2.3.23), clear on read -----

/// Good Packets Received Count.
pub const GPRC: u32 = 0x04074;
/// Good Packets Transmitted Count.
pub const GPTC: u32 = 0x04080;
/// Good Octets Received Count, low and high.
pub const GORCL: u32 = 0x04088;
/// Good Octets Received Count, high.
pub const GORCH: u32 = 0x0408C;
/// Good Octets Transmitted Count, low.
pub const GOTCL: u32 = 0x04090;
/// Good Octets Transmitted Count, high.
pub const GOTCH: u32 = 0x04094;
/// Missed Packets Count, packet buffer 0 (no descriptor). (RNBC, next to it, exists
/// on the 82598 only.)
pub const MPC0: u32 = 0x03FA0;
