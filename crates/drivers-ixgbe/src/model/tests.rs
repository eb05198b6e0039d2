//! The model driven by hand through raw register writes and descriptors, the way the
//! datasheet's init sequences (§4.6.3, §4.6.7, §4.6.8) describe it, without the
//! driver.

use super::frame::{self, fold, pseudo_sum, put16, sum};
use super::regs::*;
use super::*;
use crate::hw::Device;

const MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
const PEER: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];

struct Bench {
    model: Model,
    dev: Device,
    wire: Wire,
}

fn rxq_reg(q: usize, off: u32) -> u32 {
    RXQ_BASE + QUEUE_STRIDE * q as u32 + off
}

fn txq_reg(q: usize, off: u32) -> u32 {
    TXQ_BASE + QUEUE_STRIDE * q as u32 + off
}

/// A receive ring and its buffers.
struct RxRing {
    ring: DmaRegion,
    bufs: Vec<DmaRegion>,
}

impl RxRing {
    /// Write-back dwords of descriptor `i`.
    fn wb(&self, i: usize) -> [u32; 4] {
        std::array::from_fn(|k| self.ring.read_u32(16 * i + 4 * k))
    }

    /// Give descriptor `i` its buffer back (read format).
    fn rearm(&self, i: usize) {
        self.ring.write_u64(16 * i, self.bufs[i].bus(0));
        self.ring.write_u64(16 * i + 8, 0);
    }
}

impl Bench {
    fn new() -> Bench {
        Bench::with(ModelConfig::new(MAC, 4 << 20))
    }

    /// A bench whose device has been through [`Bench::bring_up`].
    fn up() -> Bench {
        let b = Bench::new();
        b.bring_up();
        b
    }

    fn with(config: ModelConfig) -> Bench {
        let model = Model::new(config);
        let dev = model.device();
        let wire = model.wire();
        Bench { model, dev, wire }
    }

    fn r(&self, reg: u32) -> u32 {
        self.dev.regs.read(reg)
    }

    fn w(&self, reg: u32, v: u32) {
        self.dev.regs.write(reg, v);
    }

    /// Poll `reg` until `bit` is set (or clear), at most 100 reads.
    fn wait(&self, reg: u32, bit: u32, set: bool) -> bool {
        (0..100).any(|_| (self.r(reg) & bit != 0) == set)
    }

    /// §4.6.3: mask interrupts, reset, wait for the EEPROM and DMA init, bring the
    /// link up.
    fn bring_up(&self) {
        self.w(EIMC, 0x7FFF_FFFF);
        self.w(CTRL, CTRL_RST);
        assert!(self.wait(CTRL, CTRL_RST, false));
        self.w(EIMC, 0x7FFF_FFFF);
        assert!(self.wait(EEC, EEC_ARD, true));
        assert!(self.wait(RDRXCTL, RDRXCTL_DMAIDONE, true));
        self.w(AUTOC, self.r(AUTOC) | AUTOC_RESTART_AN);
        assert!(self.wait(LINKS, LINKS_UP, true));
        self.w(HLREG0, self.r(HLREG0) | HLREG0_RXCRCSTRP | HLREG0_TXPADEN);
        self.w(RDRXCTL, self.r(RDRXCTL) | RDRXCTL_CRCSTRIP);
        self.w(FCTRL, FCTRL_BAM);
        self.w(DMATXCTL, DMATXCTL_TE);
    }

    /// §4.6.7: one receive queue with `n` descriptors of `kib` KiB buffers, all
    /// handed to the device.
    fn rx_queue(&mut self, q: usize, n: usize, kib: usize) -> RxRing {
        let ring = self.dev.dma.alloc(16 * n, 128).unwrap();
        let bufs: Vec<_> = (0..n)
            .map(|_| self.dev.dma.alloc(kib * 1024, 128).unwrap())
            .collect();
        let rx = RxRing { ring, bufs };
        for i in 0..n {
            rx.rearm(i);
        }
        let bus = rx.ring.bus(0);
        self.w(rxq_reg(q, RDBAL), bus as u32);
        self.w(rxq_reg(q, RDBAH), (bus >> 32) as u32);
        self.w(rxq_reg(q, RDLEN), 16 * n as u32);
        self.w(rxq_reg(q, SRRCTL), SRRCTL_DESCTYPE_ADV_ONEBUF | kib as u32);
        self.w(rxq_reg(q, RDH), 0);
        self.w(rxq_reg(q, RDT), 0);
        self.w(rxq_reg(q, RXDCTL), QUEUE_ENABLE);
        assert!(self.wait(rxq_reg(q, RXDCTL), QUEUE_ENABLE, true));
        self.w(rxq_reg(q, RDT), n as u32 - 1);
        self.w(RXCTRL, RXCTRL_RXEN);
        rx
    }

    /// §4.6.8: one transmit queue with `n` descriptors.
    fn tx_queue(&mut self, q: usize, n: usize) -> DmaRegion {
        let ring = self.dev.dma.alloc(16 * n, 128).unwrap();
        let bus = ring.bus(0);
        self.w(txq_reg(q, TDBAL), bus as u32);
        self.w(txq_reg(q, TDBAH), (bus >> 32) as u32);
        self.w(txq_reg(q, TDLEN), 16 * n as u32);
        self.w(txq_reg(q, TDH), 0);
        self.w(txq_reg(q, TDT), 0);
        self.w(txq_reg(q, TXDCTL), QUEUE_ENABLE);
        ring
    }

    fn sent(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.wire.take_transmitted(&mut out);
        out
    }
}

/// An advanced data descriptor.
fn data_desc(addr: u64, len: usize, cmd: u32, olinfo: u32) -> [u64; 2] {
    let dword2 = len as u32 | TXD_DTYP_DATA << TXD_DTYP_SHIFT | TXD_DEXT | TXD_IFCS | cmd;
    [addr, u64::from(dword2) | u64::from(olinfo) << 32]
}

/// A data descriptor for a whole `len`-byte packet in one buffer, reporting status.
fn packet_desc(addr: u64, len: usize) -> [u64; 2] {
    data_desc(
        addr,
        len,
        TXD_EOP | TXD_RS,
        (len as u32) << TXD_PAYLEN_SHIFT,
    )
}

/// An advanced context descriptor for slot 0.
fn context_desc(maclen: u32, iplen: u32, l4len: u32, mss: u32, tcp: bool) -> [u64; 2] {
    let dword0 = iplen | maclen << CTX_MACLEN_SHIFT;
    let l4t = if tcp { 1 } else { 0 };
    let dword2 =
        CTX_TUCMD_IPV4 | l4t << CTX_TUCMD_L4T_SHIFT | TXD_DTYP_CONTEXT << TXD_DTYP_SHIFT | TXD_DEXT;
    let dword3 = l4len << CTX_L4LEN_SHIFT | mss << CTX_MSS_SHIFT;
    [
        u64::from(dword0),
        u64::from(dword2) | u64::from(dword3) << 32,
    ]
}

fn put_desc(ring: &DmaRegion, i: usize, d: [u64; 2]) {
    ring.write_u64(16 * i, d[0]);
    ring.write_u64(16 * i + 8, d[1]);
}

/// An Ethernet + IPv4 frame around `l4` with a correct header checksum.
fn ipv4_frame(dst: [u8; 6], src: [u8; 4], to: [u8; 4], proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&PEER);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + l4.len()) as u16;
    f.extend_from_slice(&[0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0]);
    put16(&mut f, 16, total);
    f.extend_from_slice(&src);
    f.extend_from_slice(&to);
    let c = !fold(sum(&f[14..34]));
    put16(&mut f, 24, c);
    f.extend_from_slice(l4);
    f
}

/// A TCP segment with a correct checksum.
fn tcp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    put16(&mut t, 0, sport);
    put16(&mut t, 2, dport);
    t[4..8].copy_from_slice(&1000u32.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = flags;
    put16(&mut t, 14, 65535);
    t.extend_from_slice(payload);
    let c = !fold(pseudo_sum(src, dst, frame::PROTO_TCP, t.len()) + sum(&t));
    put16(&mut t, 16, c);
    t
}

/// A UDP datagram with a correct checksum.
fn udp(src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    put16(&mut u, 0, 5000);
    put16(&mut u, 2, 53);
    put16(&mut u, 4, (8 + payload.len()) as u16);
    u.extend_from_slice(payload);
    let c = !fold(pseudo_sum(src, dst, frame::PROTO_UDP, u.len()) + sum(&u));
    put16(&mut u, 6, c);
    u
}

/// Assert that every misuse in `want` was logged.
fn assert_logged(model: &Model, want: &[Misuse]) {
    let log = model.misuse();
    for m in want {
        assert!(log.contains(m), "{m:?} not in {log:?}");
    }
}

fn checksums_ok(f: &[u8]) -> bool {
    let ip = frame::parse_ipv4(f).expect("an IPv4 frame");
    frame::ipv4_header_ok(f, &ip) && frame::l4_ok(f, &ip) == Some(true)
}

#[test]
fn bring_up_receive_and_transmit_with_checksum_offload() {
    let mut b = Bench::up();
    let rx = b.rx_queue(0, 8, 2);
    let tx = b.tx_queue(0, 8);

    // Receive: a good UDP datagram, then one with a broken IPv4 header checksum.
    let good = ipv4_frame(MAC, B, A, frame::PROTO_UDP, &udp(B, A, b"hello"));
    assert_eq!(
        b.wire.deliver(&good),
        RxVerdict::Delivered {
            queue: 0,
            descriptors: 1
        }
    );
    let wb = rx.wb(0);
    assert_eq!(
        wb[2] & 0xFFFFF,
        RXD_STAT_DD | RXD_STAT_EOP | RXD_STAT_IPCS | RXD_STAT_L4CS | RXD_STAT_UDPCS
    );
    assert_eq!(wb[2] & 0xFFF0_0000, 0, "no errors");
    assert_eq!(wb[3] & 0xFFFF, good.len() as u32);
    assert_eq!((wb[0] >> 4) & 0x1FFF, PTYPE_IPV4 | PTYPE_UDP);
    let mut got = vec![0; good.len()];
    rx.bufs[0].copy_to(0, &mut got);
    assert_eq!(got, good);
    assert_eq!(b.r(rxq_reg(0, RDH)), 1);

    let mut bad = good.clone();
    bad[24] ^= 0xFF;
    assert!(matches!(b.wire.deliver(&bad), RxVerdict::Delivered { .. }));
    assert_ne!(rx.wb(1)[2] & RXD_ERR_IPE, 0, "IPE on a bad header checksum");
    let mut bad_udp = good.clone();
    *bad_udp.last_mut().unwrap() ^= 1;
    b.wire.deliver(&bad_udp);
    assert_eq!(rx.wb(2)[2] & (RXD_ERR_IPE | RXD_ERR_TCPE), RXD_ERR_TCPE);

    // Transmit with IXSM and TXSM: the IPv4 checksum field left 0, the TCP one
    // seeded with the pseudo-header sum (§7.2.5).
    let seg = tcp(A, B, 80, 40000, 0x18, b"response");
    let mut f = ipv4_frame(PEER, A, B, frame::PROTO_TCP, &seg);
    put16(&mut f, 24, 0);
    put16(
        &mut f,
        34 + 16,
        fold(pseudo_sum(A, B, frame::PROTO_TCP, seg.len())),
    );
    let buf = b.dev.dma.alloc(2048, 128).unwrap();
    buf.copy_from(0, &f);
    put_desc(&tx, 0, context_desc(14, 20, 20, 0, true));
    let olinfo = TXD_POPTS_IXSM | TXD_POPTS_TXSM | (f.len() as u32) << TXD_PAYLEN_SHIFT;
    put_desc(
        &tx,
        1,
        data_desc(buf.bus(0), f.len(), TXD_EOP | TXD_RS, olinfo),
    );
    b.w(txq_reg(0, TDT), 2);
    let out = b.sent();
    assert_eq!(out.len(), 1);
    assert!(checksums_ok(&out[0]), "checksums inserted");
    assert_eq!(out[0][..34 + 16], {
        let mut want = f.clone();
        let ip = !fold(sum(&f[14..34]));
        put16(&mut want, 24, ip);
        want[..50].to_vec()
    });
    assert_eq!(b.r(txq_reg(0, TDH)), 2);
    assert_ne!(
        tx.read_u32(16 + 12) & TXD_STA_DD,
        0,
        "DD written back where RS was set"
    );

    // Statistics clear on read; queue counters go to set 0 until mapped.
    assert_eq!(b.r(GPRC), 3);
    assert_eq!(b.r(GPRC), 0);
    assert_eq!(b.r(GPTC), 1);
    assert_eq!(b.r(GORCL), 3 * (good.len() as u32 + 4));
    assert_eq!(b.r(GORCH), 0);
    assert_eq!(b.r(GORCL), 0, "reading GORCH cleared the pair");
    assert_eq!(b.r(rxq_reg(0, QPRC)), 3);
    assert_eq!(b.r(QPTC), 1);
    assert_eq!(b.model.misuse(), vec![]);
}

#[test]
fn reset_self_clears_and_restores_defaults() {
    let b = Bench::new();
    b.w(FCTRL, FCTRL_UPE);
    b.w(RAL, 0);
    b.w(CTRL, CTRL_RST);
    assert_ne!(b.r(CTRL) & CTRL_RST, 0, "still in reset");
    b.w(FCTRL, FCTRL_BAM);
    assert_eq!(
        b.model.misuse(),
        vec![Misuse::WriteDuringReset {
            reg: FCTRL,
            value: FCTRL_BAM
        }]
    );
    assert!(b.wait(CTRL, CTRL_RST, false));
    assert_eq!(b.r(FCTRL), 0);
    assert_eq!(b.r(RAL), u32::from_le_bytes([2, 0, 0, 0]), "MAC reloaded");
    assert_eq!(
        b.r(RAL_ALIAS + 4),
        0x0100 | RAH_AV,
        "through the 82598 alias too"
    );
    assert_eq!(b.r(EEC) & EEC_ARD, 0, "EEPROM read takes a few reads");
    assert!(b.wait(EEC, EEC_ARD, true));
}

#[test]
fn link_down_stays_down() {
    let b = Bench::with(ModelConfig {
        link: LinkMode::Down,
        ..ModelConfig::new(MAC, 1 << 20)
    });
    b.w(AUTOC, AUTOC_RESTART_AN);
    assert!(!b.wait(LINKS, LINKS_UP, true));
    assert_eq!(b.r(STATUS) & STATUS_LINK_UP, 0);
    assert_eq!(b.wire.deliver(&[0xFF; 60]), RxVerdict::LinkDown);
}

#[test]
fn rss_hashes_with_the_key_and_steers_through_reta() {
    let mut b = Bench::up();
    let rings: Vec<_> = (0..4).map(|q| b.rx_queue(q, 8, 2)).collect();
    let key: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];
    for (i, c) in key.chunks_exact(4).enumerate() {
        b.w(
            RSSRK + 4 * i as u32,
            u32::from_le_bytes(c.try_into().unwrap()),
        );
    }
    // Every entry to queue 1, entry 0x78 (= 0x51ccc178 & 0x7F) to queue 3, through
    // the 82598 alias for half the table.
    for i in 0..32u32 {
        let v = if i == 0x78 / 4 {
            0x0101_0103
        } else {
            0x0101_0101
        };
        b.w(
            if i < 16 {
                RETA + 4 * i
            } else {
                RETA_ALIAS + 4 * i
            },
            v,
        );
    }
    b.w(RXCSUM, RXCSUM_PCSD);
    b.w(MRQC, MRQC_MRQE_RSS | MRQC_TCPIPV4 | MRQC_IPV4);
    let src = [66, 9, 149, 187];
    let dst = [161, 142, 100, 80];
    let f = ipv4_frame(
        MAC,
        src,
        dst,
        frame::PROTO_TCP,
        &tcp(src, dst, 2794, 1766, 0x10, b""),
    );
    assert_eq!(
        b.wire.deliver(&f),
        RxVerdict::Delivered {
            queue: 3,
            descriptors: 1
        }
    );
    let wb = rings[3].wb(0);
    assert_eq!(wb[1], 0x51cc_c178, "the hash, reported because of PCSD");
    assert_eq!(wb[0] & 0xF, RSS_TYPE_TCPIPV4);
    // IPv4 without a TCP header: the 2-tuple hash 0x323e8fc2, entry 0x42 -> queue 1.
    let f = ipv4_frame(MAC, src, dst, 1, &[8, 0, 0, 0]);
    assert!(matches!(
        b.wire.deliver(&f),
        RxVerdict::Delivered { queue: 1, .. }
    ));
    assert_eq!(rings[1].wb(0)[1], 0x323e_8fc2);
    // Not IP (ARP): queue 0.
    let mut arp = vec![0xFF; 6];
    arp.extend_from_slice(&PEER);
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.resize(60, 0);
    assert!(matches!(
        b.wire.deliver(&arp),
        RxVerdict::Delivered { queue: 0, .. }
    ));
    assert_eq!(b.model.misuse(), vec![]);
}

#[test]
fn tso_cuts_a_super_frame_into_mss_segments() {
    let mut b = Bench::up();
    let tx = b.tx_queue(0, 16);
    let payload: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
    // Headers as a driver leaves them for TSO: IPv4 checksum 0, the TCP checksum the
    // pseudo-header sum without the length; PSH and FIN set on the super-frame.
    let mut hdr = ipv4_frame(
        PEER,
        A,
        B,
        frame::PROTO_TCP,
        &tcp(A, B, 80, 40000, 0x19, b""),
    );
    put16(&mut hdr, 24, 0);
    put16(&mut hdr, 50, fold(pseudo_sum(A, B, frame::PROTO_TCP, 0)));
    let hbuf = b.dev.dma.alloc(128, 128).unwrap();
    hbuf.copy_from(0, &hdr);
    let pbuf = b.dev.dma.alloc(payload.len(), 4096).unwrap();
    pbuf.copy_from(0, &payload);
    let mss = 1448;
    put_desc(&tx, 0, context_desc(14, 20, 20, mss, true));
    let olinfo = TXD_POPTS_IXSM | TXD_POPTS_TXSM | (payload.len() as u32) << TXD_PAYLEN_SHIFT;
    // Gathered from three buffers: the headers and the payload in two pieces.
    put_desc(&tx, 1, data_desc(hbuf.bus(0), hdr.len(), TXD_TSE, olinfo));
    put_desc(&tx, 2, data_desc(pbuf.bus(0), 4000, TXD_TSE, 0));
    put_desc(
        &tx,
        3,
        data_desc(pbuf.bus(4000), 6000, TXD_TSE | TXD_EOP | TXD_RS, 0),
    );
    b.w(txq_reg(0, TDT), 4);
    let out = b.sent();
    assert_eq!(out.len(), 10_000usize.div_ceil(mss as usize));
    let mut joined = Vec::new();
    for (i, s) in out.iter().enumerate() {
        assert!(checksums_ok(s), "segment {i} checksums");
        let len = s.len() - 54;
        assert!(len <= mss as usize);
        assert_eq!(frame::be16(s, 16) as usize, 40 + len, "total length");
        assert_eq!(frame::be16(s, 18), 0x1234 + i as u16, "IP ID");
        let seq = u32::from_be_bytes(s[38..42].try_into().unwrap());
        assert_eq!(seq, 1000 + i as u32 * mss);
        let last = i + 1 == out.len();
        assert_eq!(
            s[47] & 0x09,
            if last { 0x09 } else { 0 },
            "PSH and FIN on the last only"
        );
        assert_ne!(s[47] & 0x10, 0, "ACK kept");
        joined.extend_from_slice(&s[54..]);
    }
    assert_eq!(joined, payload);
    assert_ne!(tx.read_u32(3 * 16 + 12) & TXD_STA_DD, 0);
    assert_eq!(b.r(GPTC), out.len() as u32);
    assert_eq!(b.model.misuse(), vec![]);
}

#[test]
fn rings_wrap() {
    let mut b = Bench::up();
    let rx = b.rx_queue(0, 8, 2);
    let tx = b.tx_queue(0, 8);
    let buf = b.dev.dma.alloc(2048, 128).unwrap();
    let f = ipv4_frame(MAC, B, A, frame::PROTO_UDP, &udp(B, A, b"x"));
    buf.copy_from(0, &f);
    let mut rdt = 7;
    for n in 0..20usize {
        let i = n % 8;
        assert!(
            matches!(b.wire.deliver(&f), RxVerdict::Delivered { .. }),
            "frame {n}"
        );
        assert_ne!(rx.wb(i)[2] & RXD_STAT_DD, 0);
        // The driver takes the frame and hands the descriptor back.
        rx.rearm(i);
        rdt = (rdt + 1) % 8;
        b.w(rxq_reg(0, RDT), rdt);
        put_desc(&tx, i, packet_desc(buf.bus(0), f.len()));
        b.w(txq_reg(0, TDT), ((i + 1) % 8) as u32);
    }
    assert_eq!(b.r(rxq_reg(0, RDH)), 20 % 8);
    assert_eq!(b.r(txq_reg(0, TDH)), 20 % 8);
    assert_eq!(b.sent().len(), 20);
    assert_eq!(b.model.misuse(), vec![]);
}

#[test]
fn frames_span_buffers_and_run_out_of_descriptors() {
    let mut b = Bench::up();
    let rx = b.rx_queue(0, 8, 1);
    let f = ipv4_frame(MAC, B, A, frame::PROTO_UDP, &udp(B, A, &[7; 1400]));
    assert_eq!(
        b.wire.deliver(&f),
        RxVerdict::Delivered {
            queue: 0,
            descriptors: 2
        }
    );
    assert_eq!(rx.wb(0)[2] & RXD_STAT_EOP, 0);
    assert_eq!(rx.wb(0)[3] & 0xFFFF, 1024);
    assert_ne!(rx.wb(1)[2] & RXD_STAT_EOP, 0);
    assert_eq!(rx.wb(1)[3] & 0xFFFF, f.len() as u32 - 1024);
    // One free descriptor left, the frame needs two.
    b.w(rxq_reg(0, RDT), 3);
    assert_eq!(b.wire.deliver(&f), RxVerdict::NoDescriptor { queue: 0 });
    assert_eq!(b.r(MPC), 1);
    assert_eq!(b.model.misuse(), vec![]);
}

#[test]
fn crc_kept_when_not_stripped() {
    let mut b = Bench::up();
    b.w(HLREG0, b.r(HLREG0) & !HLREG0_RXCRCSTRP);
    b.w(RDRXCTL, b.r(RDRXCTL) & !RDRXCTL_CRCSTRIP);
    let rx = b.rx_queue(0, 8, 2);
    let f = ipv4_frame(MAC, B, A, frame::PROTO_UDP, &udp(B, A, b"crc"));
    b.wire.deliver(&f);
    assert_eq!(rx.wb(0)[3] & 0xFFFF, f.len() as u32 + 4);
    let mut got = vec![0; f.len() + 4];
    rx.bufs[0].copy_to(0, &mut got);
    assert_eq!(got[f.len()..], frame::fcs(&f));
}

#[test]
fn address_filters() {
    let mut b = Bench::up();
    b.rx_queue(0, 8, 2);
    let mut other = ipv4_frame(PEER, B, A, frame::PROTO_UDP, &udp(B, A, b"x"));
    assert_eq!(b.wire.deliver(&other), RxVerdict::Filtered);
    other[..6].copy_from_slice(&[0x01, 0, 0x5e, 0, 0, 1]);
    assert_eq!(
        b.wire.deliver(&other),
        RxVerdict::Filtered,
        "multicast without MPE"
    );
    b.w(FCTRL, FCTRL_MPE);
    assert!(matches!(
        b.wire.deliver(&other),
        RxVerdict::Delivered { .. }
    ));
    other[..6].copy_from_slice(&[0xFF; 6]);
    assert_eq!(
        b.wire.deliver(&other),
        RxVerdict::Filtered,
        "broadcast without BAM"
    );
    other[..6].copy_from_slice(&PEER);
    b.w(FCTRL, FCTRL_UPE);
    assert!(matches!(
        b.wire.deliver(&other),
        RxVerdict::Delivered { .. }
    ));
    b.w(RXCTRL, 0);
    assert_eq!(b.wire.deliver(&other), RxVerdict::ReceiverDisabled);
}

#[test]
fn receive_misuse_is_logged() {
    let mut b = Bench::up();
    // A ring 64 bytes into its memory: not 128-byte aligned.
    let mem = b.dev.dma.alloc(4096, 4096).unwrap();
    b.w(rxq_reg(1, RDBAL), mem.bus(64) as u32);
    b.w(rxq_reg(1, RDBAH), (mem.bus(64) >> 32) as u32);
    b.w(rxq_reg(1, RDLEN), 128);
    b.w(rxq_reg(1, RXDCTL), QUEUE_ENABLE);
    let rx = b.rx_queue(0, 8, 2);
    // A buffer address nobody handed out.
    rx.ring.write_u64(0, 0xdead_0000);
    let f = ipv4_frame(MAC, B, A, frame::PROTO_UDP, &udp(B, A, b"x"));
    assert_eq!(b.wire.deliver(&f), RxVerdict::Misconfigured { queue: 0 });
    // RSS to queue 5, never enabled: with an all-zero key every hash is 0, entry 0.
    b.w(RETA, 5);
    b.w(MRQC, MRQC_MRQE_RSS | MRQC_IPV4);
    assert_eq!(b.wire.deliver(&f), RxVerdict::QueueDisabled { queue: 5 });
    b.w(rxq_reg(0, RDT), 9);
    b.w(0x0_0004, 1);
    assert_logged(
        &b.model,
        &[
            Misuse::RingMisaligned {
                dir: Dir::Rx,
                queue: 1,
                base: mem.bus(64),
            },
            Misuse::RxDescriptorType {
                queue: 1,
                srrctl: SRRCTL_DEFAULT,
            },
            Misuse::RxBufferUnmapped {
                queue: 0,
                index: 0,
                addr: 0xdead_0000,
                len: f.len(),
            },
            Misuse::RxQueueNotEnabled { queue: 5 },
            Misuse::TailPastRing {
                dir: Dir::Rx,
                queue: 0,
                tail: 9,
                entries: 8,
            },
            Misuse::UnknownRegisterWrite { reg: 4, value: 1 },
        ],
    );
}

#[test]
fn transmit_misuse_stops_the_queue() {
    let mut b = Bench::up();
    let tx = b.tx_queue(0, 8);
    let buf = b.dev.dma.alloc(2048, 128).unwrap();
    let f = ipv4_frame(PEER, A, B, frame::PROTO_UDP, &udp(A, B, b"x"));
    buf.copy_from(0, &f);
    let ok = packet_desc(buf.bus(0), f.len());
    // A buffer outside DMA memory hangs the queue, even for the good one after it.
    put_desc(&tx, 0, data_desc(0x10, 64, TXD_EOP, 64 << TXD_PAYLEN_SHIFT));
    put_desc(&tx, 1, ok);
    b.w(txq_reg(0, TDT), 2);
    assert!(b.sent().is_empty());
    assert_eq!(b.r(txq_reg(0, TDH)), 0);
    assert!(b.model.misuse().contains(&Misuse::TxBufferUnmapped {
        queue: 0,
        index: 0,
        addr: 0x10,
        len: 64
    }));

    // Queue 1: a legacy descriptor; queue 2: a tail past the ring; queue 3: DTYP 0001.
    let tx1 = b.tx_queue(1, 8);
    put_desc(&tx1, 0, [buf.bus(0), f.len() as u64 | u64::from(TXD_EOP)]);
    b.w(txq_reg(1, TDT), 1);
    b.tx_queue(2, 8);
    b.w(txq_reg(2, TDT), 8);
    let tx3 = b.tx_queue(3, 8);
    put_desc(
        &tx3,
        0,
        [buf.bus(0), u64::from(1 << TXD_DTYP_SHIFT | TXD_DEXT)],
    );
    b.w(txq_reg(3, TDT), 1);
    // Queue 4 never enabled.
    b.w(txq_reg(4, TDT), 1);
    assert!(b.sent().is_empty());
    assert_logged(
        &b.model,
        &[
            Misuse::TxLegacyDescriptor { queue: 1, index: 0 },
            Misuse::TailPastRing {
                dir: Dir::Tx,
                queue: 2,
                tail: 8,
                entries: 8,
            },
            Misuse::TxUnknownDescriptorType {
                queue: 3,
                index: 0,
                dtyp: 1,
            },
            Misuse::TxQueueNotEnabled { queue: 4 },
        ],
    );

    // Disabling and re-enabling a queue clears the hang.
    b.w(txq_reg(0, TXDCTL), 0);
    let tx = b.tx_queue(0, 8);
    put_desc(&tx, 0, ok);
    b.w(txq_reg(0, TDT), 1);
    assert_eq!(b.sent().len(), 1);
}
