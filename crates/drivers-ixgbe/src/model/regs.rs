//! The 82599's register map as the model implements it, written from the datasheet
//! (rev. 3.3, chapter 8.2.3) and independent of the driver's own `regs` module, so
//! that a wrong offset or bit on either side shows up as a failing test.
//!
//! Offsets are byte offsets into BAR0. Where the 82599 keeps an 82598-compatible
//! alias of a register (RSS, receive address, the first 16 queues' SRRCTL), both
//! addresses are accepted and name the same storage.

// §8.2.3.1 General control.
/// Device Control (§8.2.3.1.1).
pub(crate) const CTRL: u32 = 0x0_0000;
/// CTRL: PCIe master disable (§8.2.3.1.1, bit 2).
pub(crate) const CTRL_MASTER_DISABLE: u32 = 1 << 2;
/// CTRL: link reset (bit 3), self-clearing.
pub(crate) const CTRL_LRST: u32 = 1 << 3;
/// CTRL: device reset (bit 26), self-clearing (§4.6.3.2).
pub(crate) const CTRL_RST: u32 = 1 << 26;
/// Device Status (§8.2.3.1.2), read-only.
pub(crate) const STATUS: u32 = 0x0_0008;
/// STATUS: link up (bit 7).
pub(crate) const STATUS_LINK_UP: u32 = 1 << 7;
/// STATUS: PCIe master enable status (bit 19), clears once CTRL's master disable holds.
pub(crate) const STATUS_MASTER_ENABLE: u32 = 1 << 19;
/// Extended Device Control (§8.2.3.1.3).
pub(crate) const CTRL_EXT: u32 = 0x0_0018;

// §8.2.3.2 EEPROM.
/// EEPROM/Flash Control (§8.2.3.2.1).
pub(crate) const EEC: u32 = 0x1_0010;
/// EEC: EEPROM present (bit 8).
pub(crate) const EEC_PRES: u32 = 1 << 8;
/// EEC: auto-read done (bit 9), set once the EEPROM has been read after a reset.
pub(crate) const EEC_ARD: u32 = 1 << 9;

// §8.2.3.5 Interrupts.
/// Extended Interrupt Cause (§8.2.3.5.1), clear on read, write 1 to clear.
pub(crate) const EICR: u32 = 0x0_0800;
/// Extended Interrupt Cause Set (§8.2.3.5.3).
pub(crate) const EICS: u32 = 0x0_0808;
/// Extended Interrupt Mask Set/Read (§8.2.3.5.4).
pub(crate) const EIMS: u32 = 0x0_0880;
/// Extended Interrupt Mask Clear (§8.2.3.5.5).
pub(crate) const EIMC: u32 = 0x0_0888;

// §8.2.3.8 Receive DMA.
/// Receive DMA Control (§8.2.3.8.8).
pub(crate) const RDRXCTL: u32 = 0x0_2F00;
/// RDRXCTL: strip the CRC (bit 1); must match HLREG0.RXCRCSTRP (§4.6.7).
pub(crate) const RDRXCTL_CRCSTRIP: u32 = 1 << 1;
/// RDRXCTL: DMA initialisation done (bit 3), set some time after a reset.
pub(crate) const RDRXCTL_DMAIDONE: u32 = 1 << 3;
/// Receive Control (§8.2.3.8.10).
pub(crate) const RXCTRL: u32 = 0x0_3000;
/// RXCTRL: receive enable (bit 0).
pub(crate) const RXCTRL_RXEN: u32 = 1 << 0;

/// Receive queue `n`'s register block, `n` < 64 (§8.2.3.8.1-7): base 0x1000 + 0x40 n.
pub(crate) const RXQ_BASE: u32 = 0x0_1000;
/// Register stride between queues, receive and transmit.
pub(crate) const QUEUE_STRIDE: u32 = 0x40;
/// Offsets inside a receive queue's block.
pub(crate) const RDBAL: u32 = 0x00;
/// Descriptor base, high 32 bits.
pub(crate) const RDBAH: u32 = 0x04;
/// Ring length in bytes, a multiple of 128.
pub(crate) const RDLEN: u32 = 0x08;
/// Rx DCA control (DCA_RXCTRL, §8.2.3.11.1).
pub(crate) const DCA_RXCTRL: u32 = 0x0C;
/// Head, owned by the device.
pub(crate) const RDH: u32 = 0x10;
/// Split and replication control (SRRCTL, §8.2.3.8.7).
pub(crate) const SRRCTL: u32 = 0x14;
/// Tail, written by the driver.
pub(crate) const RDT: u32 = 0x18;
/// Receive descriptor control (§8.2.3.8.6).
pub(crate) const RXDCTL: u32 = 0x28;
/// RSC control (§8.2.3.8.13); RSC is not modelled, the register only stores.
pub(crate) const RSCCTL: u32 = 0x2C;
/// Queue packets received count, queues' statistics sets 0..16 (§8.2.3.23.71).
pub(crate) const QPRC: u32 = 0x30;
/// Queue bytes received, low (§8.2.3.23.73).
pub(crate) const QBRC_L: u32 = 0x34;
/// Queue bytes received, high.
pub(crate) const QBRC_H: u32 = 0x38;
/// Queue packets received drop count: 0x1430 + 0x40 n (§8.2.3.23.72).
pub(crate) const QPRDC_BASE: u32 = 0x0_1430;
/// The 82598-compatible SRRCTL alias for queues 0..16: 0x2100 + 4 n.
pub(crate) const SRRCTL_ALIAS: u32 = 0x0_2100;
/// The DCA_RXCTRL alias for queues 0..16: 0x2200 + 4 n.
pub(crate) const DCA_RXCTRL_ALIAS: u32 = 0x0_2200;
/// SRRCTL: receive buffer size in 1 KiB units (bits 4:0).
pub(crate) const SRRCTL_BSIZEPACKET_MASK: u32 = 0x1F;
/// SRRCTL: descriptor type (bits 27:25).
pub(crate) const SRRCTL_DESCTYPE_MASK: u32 = 0x7 << 25;
/// SRRCTL: descriptor type 001, advanced one buffer.
pub(crate) const SRRCTL_DESCTYPE_ADV_ONEBUF: u32 = 0x1 << 25;
/// SRRCTL: drop packets when no descriptor is free (bit 28).
pub(crate) const SRRCTL_DROP_EN: u32 = 1 << 28;
/// SRRCTL value after reset: 2 KiB packet buffers, 256-byte header buffers, legacy
/// descriptors.
pub(crate) const SRRCTL_DEFAULT: u32 = 0x0000_0402;
/// RXDCTL and TXDCTL: queue enable (bit 25).
pub(crate) const QUEUE_ENABLE: u32 = 1 << 25;
/// Receive queue statistic mapping (§8.2.3.23.70): 0x2300 + 4 n, 4 queues each.
pub(crate) const RQSMR: u32 = 0x0_2300;

// §8.2.3.7 Receive filtering and RSS.
/// Receive Checksum Control (§8.2.3.7.5).
pub(crate) const RXCSUM: u32 = 0x0_5000;
/// RXCSUM: packet checksum disable (bit 13): report the RSS hash instead of the
/// fragment checksum in the descriptor.
pub(crate) const RXCSUM_PCSD: u32 = 1 << 13;
/// Filter Control (§8.2.3.7.1).
pub(crate) const FCTRL: u32 = 0x0_5080;
/// FCTRL: multicast promiscuous (bit 8).
pub(crate) const FCTRL_MPE: u32 = 1 << 8;
/// FCTRL: unicast promiscuous (bit 9).
pub(crate) const FCTRL_UPE: u32 = 1 << 9;
/// FCTRL: accept broadcast (bit 10).
pub(crate) const FCTRL_BAM: u32 = 1 << 10;
/// Receive Address Low/High, entries 0..128: 0xA200 + 8 n (§8.2.3.7.9-10).
pub(crate) const RAL: u32 = 0x0_A200;
/// The 82598-compatible alias for entries 0..16: 0x5400 + 8 n.
pub(crate) const RAL_ALIAS: u32 = 0x0_5400;
/// RAH: address valid (bit 31).
pub(crate) const RAH_AV: u32 = 1 << 31;
/// Multiple Receive Queues Command (§8.2.3.7.12), with its 82598 alias.
pub(crate) const MRQC: u32 = 0x0_EC80;
/// MRQC alias.
pub(crate) const MRQC_ALIAS: u32 = 0x0_5818;
/// MRQC: multiple receive queues enable (bits 3:0); 0001 is RSS only.
pub(crate) const MRQC_MRQE_MASK: u32 = 0xF;
/// MRQE value for RSS without DCB or virtualisation.
pub(crate) const MRQC_MRQE_RSS: u32 = 0x1;
/// MRQC: hash TCP/IPv4 (bit 16).
pub(crate) const MRQC_TCPIPV4: u32 = 1 << 16;
/// MRQC: hash IPv4 (bit 17).
pub(crate) const MRQC_IPV4: u32 = 1 << 17;
/// MRQC: hash UDP/IPv4 (bit 22).
pub(crate) const MRQC_UDPIPV4: u32 = 1 << 22;
/// Redirection table, 32 registers of four 8-bit entries (§8.2.3.7.13), with alias.
pub(crate) const RETA: u32 = 0x0_EB00;
/// RETA alias.
pub(crate) const RETA_ALIAS: u32 = 0x0_5C00;
/// RSS random key, 10 registers (§8.2.3.7.14), with alias.
pub(crate) const RSSRK: u32 = 0x0_EB80;
/// RSSRK alias.
pub(crate) const RSSRK_ALIAS: u32 = 0x0_5C80;

// §8.2.3.22 MAC.
/// MAC Core Control 0 (§8.2.3.22.8).
pub(crate) const HLREG0: u32 = 0x0_4240;
/// HLREG0: append CRC on transmit (bit 0).
pub(crate) const HLREG0_TXCRCEN: u32 = 1 << 0;
/// HLREG0: strip CRC on receive (bit 1).
pub(crate) const HLREG0_RXCRCSTRP: u32 = 1 << 1;
/// HLREG0: jumbo frames (bit 2): MAXFRS sets the largest frame received.
pub(crate) const HLREG0_JUMBOEN: u32 = 1 << 2;
/// HLREG0: pad short frames on transmit (bit 10).
pub(crate) const HLREG0_TXPADEN: u32 = 1 << 10;
/// Max Frame Size (§8.2.3.22.13): MFS in bits 31:16.
pub(crate) const MAXFRS: u32 = 0x0_4268;
/// Auto-Negotiation Control (§8.2.3.22.19).
pub(crate) const AUTOC: u32 = 0x0_42A0;
/// AUTOC: restart auto-negotiation (bit 12), self-clearing.
pub(crate) const AUTOC_RESTART_AN: u32 = 1 << 12;
/// Link Status (§8.2.3.22.20), read-only.
pub(crate) const LINKS: u32 = 0x0_42A4;
/// LINKS: link status (bit 7).
pub(crate) const LINKS_STATUS: u32 = 1 << 7;
/// LINKS: speed (bits 29:28), 11 = 10 Gb/s.
pub(crate) const LINKS_SPEED_10G: u32 = 0x3 << 28;
/// LINKS: link up (bit 30).
pub(crate) const LINKS_UP: u32 = 1 << 30;

// §8.2.3.9 Transmit DMA.
/// DMA Tx Control (§8.2.3.9.2).
pub(crate) const DMATXCTL: u32 = 0x0_4A80;
/// DMATXCTL: transmit enable (bit 0).
pub(crate) const DMATXCTL_TE: u32 = 1 << 0;
/// TCP flags masks for TSO segments, first (bits 11:0) and middle (bits 27:16)
/// (§8.2.3.9.3).
pub(crate) const DTXTCPFLGL: u32 = 0x0_4A88;
/// TCP flags mask for the last TSO segment, bits 11:0 (§8.2.3.9.4).
pub(crate) const DTXTCPFLGH: u32 = 0x0_4A8C;
/// DTXTCPFLGL after reset: first segment loses FIN and PSH, middle ones also CWR.
pub(crate) const DTXTCPFLGL_DEFAULT: u32 = 0x0F76_0FF6;
/// DTXTCPFLGH after reset: the last segment loses CWR.
pub(crate) const DTXTCPFLGH_DEFAULT: u32 = 0x0000_0F7F;
/// DCB Transmit Descriptor Plane Control (§8.2.3.10.2).
pub(crate) const RTTDCS: u32 = 0x0_4900;
/// Transmit queue `n`'s register block, `n` < 128 (§8.2.3.9.5-10): 0x6000 + 0x40 n.
pub(crate) const TXQ_BASE: u32 = 0x0_6000;
/// Offsets inside a transmit queue's block.
pub(crate) const TDBAL: u32 = 0x00;
/// Descriptor base, high 32 bits.
pub(crate) const TDBAH: u32 = 0x04;
/// Ring length in bytes, a multiple of 128.
pub(crate) const TDLEN: u32 = 0x08;
/// Tx DCA control.
pub(crate) const DCA_TXCTRL: u32 = 0x0C;
/// Head, owned by the device.
pub(crate) const TDH: u32 = 0x10;
/// Tail, written by the driver.
pub(crate) const TDT: u32 = 0x18;
/// Transmit descriptor control (§8.2.3.9.10).
pub(crate) const TXDCTL: u32 = 0x28;
/// The 82598-compatible alias of QPTC: 0x6030 + 0x40 n.
pub(crate) const QPTC_ALIAS: u32 = 0x30;
/// Head write-back address, low (§8.2.3.9.11); head write-back is not modelled.
pub(crate) const TDWBAL: u32 = 0x38;
/// Head write-back address, high.
pub(crate) const TDWBAH: u32 = 0x3C;
/// Transmit queue statistic mapping (§8.2.3.23.75): 0x8600 + 4 n.
pub(crate) const TQSM: u32 = 0x0_8600;
/// Queue packets transmitted count (§8.2.3.23.76): 0x8680 + 4 n, n < 16.
pub(crate) const QPTC: u32 = 0x0_8680;
/// Queue bytes transmitted, low (§8.2.3.23.77): 0x8700 + 8 n; high at + 4.
pub(crate) const QBTC_L: u32 = 0x0_8700;

// §8.2.3.23 Statistics (clear on read).
/// Start of the general statistics block (CRCERRS).
pub(crate) const STATS_START: u32 = 0x0_4000;
/// End (exclusive) of the general statistics block.
pub(crate) const STATS_END: u32 = 0x0_4200;
/// Missed packets count, 8 packet buffers: 0x3FA0 + 4 n (§8.2.3.23.4).
pub(crate) const MPC: u32 = 0x0_3FA0;
/// Good packets received (§8.2.3.23.18).
pub(crate) const GPRC: u32 = 0x0_4074;
/// Broadcast packets received.
pub(crate) const BPRC: u32 = 0x0_4078;
/// Multicast packets received.
pub(crate) const MPRC: u32 = 0x0_407C;
/// Good packets transmitted.
pub(crate) const GPTC: u32 = 0x0_4080;
/// Good octets received, low; the high half (GORCH) at + 4 clears both.
pub(crate) const GORCL: u32 = 0x0_4088;
/// Good octets received, high.
pub(crate) const GORCH: u32 = 0x0_408C;
/// Good octets transmitted, low.
pub(crate) const GOTCL: u32 = 0x0_4090;
/// Good octets transmitted, high.
pub(crate) const GOTCH: u32 = 0x0_4094;
/// Receive undersize count.
pub(crate) const RUC: u32 = 0x0_40A4;
/// Receive oversize count.
pub(crate) const ROC: u32 = 0x0_40AC;
/// Total packets received.
pub(crate) const TPR: u32 = 0x0_40D0;
/// Total packets transmitted.
pub(crate) const TPT: u32 = 0x0_40D4;

// Advanced receive descriptor (§7.1.6). Read format: packet buffer address (qword 0),
// header buffer address (qword 1). Write-back format, dword by dword:
//   0: RSS type 3:0, packet type 16:4, RSC count 20:17, header length 30:21, SPH 31
//   1: RSS hash (RXCSUM.PCSD set) or fragment checksum and IP identification
//   2: extended status 19:0, extended errors 31:20
//   3: packet length 15:0, VLAN tag 31:16
/// Status: descriptor done.
pub(crate) const RXD_STAT_DD: u32 = 1 << 0;
/// Status: end of packet.
pub(crate) const RXD_STAT_EOP: u32 = 1 << 1;
/// Status: UDP checksum computed.
pub(crate) const RXD_STAT_UDPCS: u32 = 1 << 4;
/// Status: L4 (TCP/UDP) integrity checked (L4I, "L4CS").
pub(crate) const RXD_STAT_L4CS: u32 = 1 << 5;
/// Status: IPv4 header checksum computed.
pub(crate) const RXD_STAT_IPCS: u32 = 1 << 6;
/// Error: TCP/UDP checksum wrong (L4E, "TCPE").
pub(crate) const RXD_ERR_TCPE: u32 = 1 << 30;
/// Error: IPv4 header checksum wrong.
pub(crate) const RXD_ERR_IPE: u32 = 1 << 31;
/// Packet type bits (the 13-bit field at dword 0 bits 16:4): IPv4 header present.
pub(crate) const PTYPE_IPV4: u32 = 1 << 0;
/// Packet type: IPv4 with options.
pub(crate) const PTYPE_IPV4E: u32 = 1 << 1;
/// Packet type: TCP.
pub(crate) const PTYPE_TCP: u32 = 1 << 4;
/// Packet type: UDP.
pub(crate) const PTYPE_UDP: u32 = 1 << 5;
/// RSS type: TCP/IPv4 hash.
pub(crate) const RSS_TYPE_TCPIPV4: u32 = 1;
/// RSS type: IPv4 hash.
pub(crate) const RSS_TYPE_IPV4: u32 = 2;
/// RSS type: UDP/IPv4 hash.
pub(crate) const RSS_TYPE_UDPIPV4: u32 = 7;

// Advanced transmit descriptors (§7.2.3.2). Both kinds carry DTYP in bits 23:20 and
// DEXT in bit 29 of dword 2.
/// DTYP field of dword 2.
pub(crate) const TXD_DTYP_SHIFT: u32 = 20;
/// DTYP: context descriptor (§7.2.3.2.3).
pub(crate) const TXD_DTYP_CONTEXT: u32 = 0x2;
/// DTYP: data descriptor (§7.2.3.2.4).
pub(crate) const TXD_DTYP_DATA: u32 = 0x3;
/// Dword 2: extended (advanced) descriptor.
pub(crate) const TXD_DEXT: u32 = 1 << 29;
/// Data dword 2: end of packet (DCMD bit 0).
pub(crate) const TXD_EOP: u32 = 1 << 24;
/// Data dword 2: insert the FCS (DCMD bit 1).
pub(crate) const TXD_IFCS: u32 = 1 << 25;
/// Data dword 2: report status (DCMD bit 3).
pub(crate) const TXD_RS: u32 = 1 << 27;
/// Data dword 2: VLAN insertion (DCMD bit 6); not modelled.
pub(crate) const TXD_VLE: u32 = 1 << 30;
/// Data dword 2: TCP segmentation (DCMD bit 7).
pub(crate) const TXD_TSE: u32 = 1 << 31;
/// Data dword 2: buffer length (bits 15:0).
pub(crate) const TXD_DTALEN_MASK: u32 = 0xFFFF;
/// Data dword 3: descriptor done (STA bit 0), written back when RS is set.
pub(crate) const TXD_STA_DD: u32 = 1 << 0;
/// Data dword 3: context index (bits 6:4); also the context descriptor's IDX.
pub(crate) const TXD_IDX_SHIFT: u32 = 4;
/// Data dword 3: POPTS.IXSM, insert the IPv4 header checksum (bit 8).
pub(crate) const TXD_POPTS_IXSM: u32 = 1 << 8;
/// Data dword 3: POPTS.TXSM, insert the TCP/UDP checksum (bit 9).
pub(crate) const TXD_POPTS_TXSM: u32 = 1 << 9;
/// Data dword 3: PAYLEN (bits 31:14).
pub(crate) const TXD_PAYLEN_SHIFT: u32 = 14;
/// Context dword 0: IPLEN bits 8:0, MACLEN bits 15:9.
pub(crate) const CTX_MACLEN_SHIFT: u32 = 9;
/// Context dword 2: TUCMD.IPV4 (bit 10).
pub(crate) const CTX_TUCMD_IPV4: u32 = 1 << 10;
/// Context dword 2: TUCMD.L4T (bits 12:11): 00 UDP, 01 TCP, 10 SCTP.
pub(crate) const CTX_TUCMD_L4T_SHIFT: u32 = 11;
/// Context dword 3: L4LEN bits 15:8.
pub(crate) const CTX_L4LEN_SHIFT: u32 = 8;
/// Context dword 3: MSS bits 31:16.
pub(crate) const CTX_MSS_SHIFT: u32 = 16;

/// Queues per direction the model implements (the 82599 has 128; the driver uses up
/// to 16).
pub(crate) const QUEUES: usize = 64;

/// Whether `reg` is a register of the 82599 the model knows about (plain storage for
/// the many the model has no behaviour for, such as flow control and DCB).
pub(crate) fn known(reg: u32) -> bool {
    const SINGLE: &[u32] = &[
        CTRL, STATUS, CTRL_EXT, 0x20, 0x28, 0x200, EEC, 0x1_0014, 0x1_0140, 0x1_0148, 0x1_0160,
        0x1_1070, 0x1_1074, EICR, EICS, 0x810, EIMS, EIMC, 0x890, 0x898, 0xA00, RDRXCTL, 0x2F04,
        0x2F40, 0x2430, RXCTRL, 0x3020, 0x32A0, 0x3D00, HLREG0, MAXFRS, 0x4294, AUTOC, LINKS,
        0x42A8, 0x4324, RTTDCS, 0x4904, 0x4908, 0x4984, DMATXCTL, DTXTCPFLGL, DTXTCPFLGH, RXCSUM,
        0x5008, FCTRL, 0x5088, 0x5090, 0x51B0, MRQC, MRQC_ALIAS, 0x581C, 0x8100, 0x8120, 0x8220,
        0x8800, 0x8804, 0x8808, 0x8810, 0x8D00, 0x8D04, 0xC800, 0xCD00, 0xCD10, 0xEC30, 0xEC70,
        0xEE00,
    ];
    // (start, count, stride)
    const ARRAYS: &[(u32, u32, u32)] = &[
        (0x820, 24, 4),         // EITR
        (0x1_2300, 104, 4),     // EITR 24..128
        (0x900, 64, 4),         // IVAR
        (0xA90, 2, 4),          // EICS_EX
        (0xAA0, 2, 4),          // EIMS_EX
        (0xAB0, 2, 4),          // EIMC_EX
        (0xAD0, 2, 4),          // EIAM_EX
        (QPRDC_BASE, 16, 0x40), // QPRDC
        (SRRCTL_ALIAS, 16, 4),
        (DCA_RXCTRL_ALIAS, 16, 4),
        (0x2140, 8, 4), // RTRPT4C
        (RQSMR, 32, 4),
        (0x3200, 4, 4), // FCTTV
        (0x3220, 8, 4), // FCRTL
        (0x3260, 8, 4), // FCRTH
        (0x3C00, 8, 4), // RXPBSIZE
        (MPC, 8, 4),
        (0x4910, 8, 4),     // RTTDT2C
        (0x4950, 8, 4),     // TXPBTHRESH
        (0x5128, 8, 4),     // ETQF
        (0x51E0, 2, 4),     // PFVFRE
        (0x5200, 128, 4),   // MTA
        (RAL_ALIAS, 32, 4), // RAL/RAH 0..16
        (RETA_ALIAS, 32, 4),
        (RSSRK_ALIAS, 10, 4),
        (0x8110, 2, 4), // PFVFTE
        (0x8200, 8, 4), // PFVFSPOOF
        (TQSM, 32, 4),
        (QPTC, 16, 4),
        (QBTC_L, 32, 4),  // QBTC_L/H
        (0xA000, 128, 4), // VFTA
        (RAL, 256, 4),    // RAL/RAH 0..128
        (0xA600, 256, 4), // MPSAR
        (0xC800, 1, 4),
        (0xCC00, 8, 4),   // TXPBSIZE
        (0xCD20, 8, 4),   // RTTPT2C
        (0xE000, 512, 4), // SAQF, DAQF, SDPQF, FTQF
        (0xEA00, 64, 4),  // PSRTYPE
        (RETA, 32, 4),
        (RSSRK, 10, 4),
        (0xEC00, 8, 4), // ETQS
    ];
    if SINGLE.contains(&reg) || (STATS_START..STATS_END).contains(&reg) {
        return true;
    }
    if ARRAYS
        .iter()
        .any(|&(start, count, stride)| array_index(reg, start, count, stride).is_some())
    {
        return true;
    }
    queue_reg(reg).is_some()
}

/// Which element of the register array `start + stride * n`, `n < count`, `reg` is.
pub(crate) fn array_index(reg: u32, start: u32, count: u32, stride: u32) -> Option<u32> {
    let off = reg.checked_sub(start)?;
    (off.is_multiple_of(stride) && off / stride < count).then_some(off / stride)
}

/// Which queue block `reg` falls in: receive (0x1000..0x2000) or transmit
/// (0x6000..0x8000), with the queue number and the offset inside the block.
pub(crate) fn queue_reg(reg: u32) -> Option<(Dir, usize, u32)> {
    let (dir, base, queues) = match reg {
        0x1000..=0x1FFF => (Dir::Rx, RXQ_BASE, QUEUES as u32),
        0x6000..=0x7FFF => (Dir::Tx, TXQ_BASE, 128),
        _ => return None,
    };
    let q = (reg - base) / QUEUE_STRIDE;
    let off = (reg - base) % QUEUE_STRIDE;
    if q >= queues || !off.is_multiple_of(4) {
        return None;
    }
    let valid = match dir {
        Dir::Rx => {
            matches!(
                off,
                RDBAL | RDBAH | RDLEN | DCA_RXCTRL | RDH | SRRCTL | RDT | RXDCTL | RSCCTL
            ) || (q < 16 && matches!(off, QPRC | QBRC_L | QBRC_H))
        }
        Dir::Tx => {
            matches!(
                off,
                TDBAL | TDBAH | TDLEN | DCA_TXCTRL | TDH | TDT | TXDCTL | TDWBAL | TDWBAH
            ) || (q < 16 && off == QPTC_ALIAS)
        }
    };
    valid.then_some((dir, q as usize, off))
}

/// A direction: receive or transmit.
// Exhaustive: a queue receives or transmits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Receive.
    Rx,
    /// Transmit.
    Tx,
}
