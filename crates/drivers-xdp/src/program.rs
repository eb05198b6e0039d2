//! The XDP program, assembled by hand: no C or BPF compiler at build time.
//!
//! It redirects to the AF_XDP socket of the receiving queue only what is Rusty's, and
//! passes everything else to the kernel, so the host keeps using the interface:
//!
//! ```text
//!     // ctx: struct xdp_md { u32 data, data_end, data_meta, ingress_ifindex, rx_queue_index }
//!  0  r2 = *(u32 *)(r1 + 0)             // data
//!  1  r3 = *(u32 *)(r1 + 4)             // data_end
//!  2  r4 = r2
//!  3  r4 += 42                          // Ethernet + ARP for IPv4 (also covers Ethernet + IPv4 header to the destination)
//!  4  if r4 > r3 goto pass              // too short to be ours
//!  5  r4 = *(u16 *)(r2 + 12)            // EtherType (network order, read little-endian)
//!  6  r5 = *(u32 *)(r2 + 30)            // IPv4 destination address
//!  7  if r4 == 0x0008 goto match        // IPv4 (0x0800)
//!  8  if r4 != 0x0608 goto pass         // not ARP (0x0806)
//!  9  r5 = *(u32 *)(r2 + 38)            // ARP target protocol address
//! 10  match: w4 = RUSTY_IPV4            // (32-bit move: zero-extended)
//! 11  if r5 != r4 goto pass
//! 12  r2 = *(u32 *)(r1 + 16)            // rx_queue_index
//! 13  r1 = XSKMAP ll                    // (two slots: a map-fd relocation)
//! 15  r3 = XDP_PASS                     // bpf_redirect_map's action when the queue has no socket
//! 16  call bpf_redirect_map
//! 17  exit
//! 18  pass: r0 = XDP_PASS
//! 19  exit
//! ```
//!
//! Frames for Rusty's address that are not IPv4 or ARP (VLAN-tagged, IPv6) go to the
//! kernel, as do ARP frames about other addresses (so the kernel answers for its own
//! addresses on the same interface) and every IPv4 frame for another destination.
//! Broadcast ARP requests for Rusty's address are Rusty's (their target address is).
//!
//! `filter` (in the tests) evaluates the same decisions in Rust, and the tests run the instructions
//! through a small interpreter of exactly this instruction subset to check they agree.

use std::net::Ipv4Addr;

/// `XDP_PASS`.
pub(crate) const XDP_PASS: i32 = 2;
/// `BPF_FUNC_redirect_map`.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `BPF_PSEUDO_MAP_FD`: the source register of an `ld_imm64` that loads a map.
const PSEUDO_MAP_FD: u8 = 1;

// Opcodes (class | size/op | source).
const LDX_W: u8 = 0x61;
const LDX_H: u8 = 0x69;
const MOV64_X: u8 = 0xbf;
const MOV64_K: u8 = 0xb7;
const MOV32_K: u8 = 0xb4;
const ADD64_K: u8 = 0x07;
const JGT_X: u8 = 0x2d;
const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
const JNE_X: u8 = 0x5d;
const LD_IMM64: u8 = 0x18;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;

/// Shortest frame the program looks into: Ethernet (14) + ARP for IPv4 (28).
pub(crate) const MIN_LOOKED_AT: usize = 42;

/// One instruction, in the layout of `struct bpf_insn` on this host.
fn insn(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let regs = if cfg!(target_endian = "big") {
        (dst << 4) | src
    } else {
        (src << 4) | dst
    };
    let mut b = [0u8; 8];
    b[0] = op;
    b[1] = regs;
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    u64::from_ne_bytes(b)
}

/// The program for `ip`, loading the XSKMAP whose descriptor is `map_fd`.
pub(crate) fn assemble(ip: Ipv4Addr, map_fd: i32) -> Vec<u64> {
    // The address as the 32-bit load at its offset reads it on this host.
    let ip_word = u32::from_ne_bytes(ip.octets()) as i32;
    let ipv4 = i32::from(u16::from_ne_bytes([0x08, 0x00]));
    let arp = i32::from(u16::from_ne_bytes([0x08, 0x06]));
    vec![
        insn(LDX_W, 2, 1, 0, 0),
        insn(LDX_W, 3, 1, 4, 0),
        insn(MOV64_X, 4, 2, 0, 0),
        insn(ADD64_K, 4, 0, 0, MIN_LOOKED_AT as i32),
        insn(JGT_X, 4, 3, 13, 0),
        insn(LDX_H, 4, 2, 12, 0),
        insn(LDX_W, 5, 2, 30, 0),
        insn(JEQ_K, 4, 0, 2, ipv4),
        insn(JNE_K, 4, 0, 9, arp),
        insn(LDX_W, 5, 2, 38, 0),
        insn(MOV32_K, 4, 0, 0, ip_word),
        insn(JNE_X, 5, 4, 6, 0),
        insn(LDX_W, 2, 1, 16, 0),
        insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        insn(MOV64_K, 3, 0, 0, XDP_PASS),
        insn(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        insn(EXIT, 0, 0, 0, 0),
        insn(MOV64_K, 0, 0, 0, XDP_PASS),
        insn(EXIT, 0, 0, 0, 0),
    ]
}

/// What the program does with a frame.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// To the kernel's own stack.
    Pass,
    /// To the XDP socket of the receiving queue (or the kernel if it has none).
    Redirect,
}

/// The program's decision, in Rust: the reference the instructions are tested against.
#[cfg(test)]
pub(crate) fn filter(ip: Ipv4Addr, frame: &[u8]) -> Verdict {
    if frame.len() < MIN_LOOKED_AT {
        return Verdict::Pass;
    }
    let target = match (frame[12], frame[13]) {
        (0x08, 0x00) => &frame[30..34],
        (0x08, 0x06) => &frame[38..42],
        _ => return Verdict::Pass,
    };
    if target == ip.octets() {
        Verdict::Redirect
    } else {
        Verdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the subset of eBPF `assemble` uses, on one frame, as the kernel would:
    /// packet loads are bounds-checked against the frame (the verifier proves they are
    /// in range; a test would panic here if not). Returns the verdict and the
    /// queue/flags passed to `bpf_redirect_map`.
    fn run(prog: &[u64], frame: &[u8], queue: u32) -> (Verdict, Option<(u64, u64)>) {
        const DATA: u64 = 0x1000_0000;
        const CTX: u64 = 0x2000_0000;
        let mut r = [0u64; 11];
        r[1] = CTX;
        let mut pc = 0;
        let mut redirect = None;
        let load = |addr: u64, size: usize| -> u64 {
            if (CTX..CTX + 20).contains(&addr) {
                assert_eq!(size, 4, "ctx loads are 32-bit");
                return match addr - CTX {
                    0 => DATA,
                    4 => DATA + frame.len() as u64,
                    16 => u64::from(queue),
                    o => panic!("ctx offset {o}"),
                };
            }
            let off = (addr - DATA) as usize;
            assert!(off + size <= frame.len(), "packet load out of bounds");
            let mut b = [0u8; 8];
            b[..size].copy_from_slice(&frame[off..off + size]);
            u64::from_le_bytes(b)
        };
        loop {
            let b = prog[pc].to_ne_bytes();
            let (op, dst, src) = (b[0], (b[1] & 0xf) as usize, (b[1] >> 4) as usize);
            let off = i16::from_ne_bytes([b[2], b[3]]) as i64;
            let imm = i32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
            let target = (pc as i64 + 1 + off) as usize;
            pc += 1;
            match op {
                LDX_W => r[dst] = load(r[src].wrapping_add(off as u64), 4),
                LDX_H => r[dst] = load(r[src].wrapping_add(off as u64), 2),
                MOV64_X => r[dst] = r[src],
                MOV64_K => r[dst] = imm as i64 as u64,
                MOV32_K => r[dst] = u64::from(imm as u32),
                ADD64_K => r[dst] = r[dst].wrapping_add(imm as i64 as u64),
                JGT_X if r[dst] > r[src] => pc = target,
                JEQ_K if r[dst] == imm as i64 as u64 => pc = target,
                JNE_K if r[dst] != imm as i64 as u64 => pc = target,
                JNE_X if r[dst] != r[src] => pc = target,
                JGT_X | JEQ_K | JNE_K | JNE_X => {}
                LD_IMM64 => {
                    assert_eq!(src as u8, PSEUDO_MAP_FD);
                    r[dst] = 0xdead;
                    pc += 1;
                }
                CALL => {
                    assert_eq!(imm, BPF_FUNC_REDIRECT_MAP);
                    assert_eq!(r[1], 0xdead, "the map");
                    redirect = Some((r[2], r[3]));
                    r[0] = 4; // XDP_REDIRECT
                }
                EXIT => {
                    return match r[0] {
                        2 => (Verdict::Pass, redirect),
                        4 => (Verdict::Redirect, redirect),
                        v => panic!("returned {v}"),
                    }
                }
                _ => panic!("opcode {op:#x}"),
            }
        }
    }

    fn eth(ethertype: [u8; 2], body: &[u8]) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&ethertype);
        f.extend_from_slice(body);
        f
    }

    fn ipv4(dst: [u8; 4], len: usize) -> Vec<u8> {
        let mut h = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1];
        h.extend_from_slice(&dst);
        h.resize(len, 0);
        eth([0x08, 0x00], &h)
    }

    fn arp(target: [u8; 4]) -> Vec<u8> {
        let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1];
        a.extend_from_slice(&[0; 6]);
        a.extend_from_slice(&target);
        eth([0x08, 0x06], &a)
    }

    #[test]
    fn the_instructions_decide_as_the_reference_does() {
        // Addresses whose high bit is set exercise the zero-extended 32-bit compare.
        for ip in [
            Ipv4Addr::new(10, 78, 3, 2),
            Ipv4Addr::new(192, 168, 200, 250),
            Ipv4Addr::new(255, 1, 2, 3),
        ] {
            let prog = assemble(ip, 7);
            let me = ip.octets();
            let mut other = me;
            other[3] ^= 1;
            let cases: Vec<(Vec<u8>, Verdict)> = vec![
                (ipv4(me, 40), Verdict::Redirect),
                (ipv4(me, 28), Verdict::Redirect), // 42 bytes exactly
                (ipv4(other, 40), Verdict::Pass),
                (arp(me), Verdict::Redirect),
                (arp(other), Verdict::Pass),
                (eth([0x86, 0xdd], &[0; 60]), Verdict::Pass), // IPv6
                (eth([0x81, 0x00], &[0; 60]), Verdict::Pass), // VLAN
                (ipv4(me, 40)[..41].to_vec(), Verdict::Pass), // too short
                (vec![], Verdict::Pass),
            ];
            for (i, (frame, want)) in cases.iter().enumerate() {
                assert_eq!(filter(ip, frame), *want, "reference, case {i}");
                let (got, redirect) = run(&prog, frame, 3);
                assert_eq!(got, *want, "program for {ip}, case {i}");
                if got == Verdict::Redirect {
                    assert_eq!(redirect, Some((3, XDP_PASS as u64)), "queue and fallback");
                }
            }
        }
    }

    #[test]
    fn random_frames_agree_with_the_reference() {
        let ip = Ipv4Addr::new(10, 1, 2, 3);
        let prog = assemble(ip, 3);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 80) as usize;
            let mut frame: Vec<u8> = (0..len).map(|i| (x >> (i % 56)) as u8).collect();
            // Bias towards the interesting cases.
            if len >= 42 {
                match x % 4 {
                    0 => frame[12..14].copy_from_slice(&[8, 0]),
                    1 => frame[12..14].copy_from_slice(&[8, 6]),
                    _ => {}
                }
                if x.is_multiple_of(3) {
                    frame[30..34].copy_from_slice(&ip.octets());
                    frame[38..42].copy_from_slice(&ip.octets());
                }
            }
            assert_eq!(run(&prog, &frame, 0).0, filter(ip, &frame), "{frame:?}");
        }
    }
}
