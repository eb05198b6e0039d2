//! The XDP program, assembled by hand: no C or BPF compiler at build time.
//!
//! It redirects to the AF_XDP socket of the receiving queue only what is Rusty's, and
//! passes everything else to the kernel, so the host keeps using the interface:
//!
//! ```text
//!        // ctx: struct xdp_md { u32 data, data_end, data_meta, ingress_ifindex, rx_queue_index }
//!        r6 = r1                          // ctx, kept across the map lookup's call
//!        r2 = *(u32 *)(r1 + 0)            // data
//!        r3 = *(u32 *)(r1 + 4)            // data_end
//!        r4 = r2
//!        r4 += 42                         // Ethernet + ARP for IPv4 (also covers Ethernet + IPv4 header to the destination)
//!        if r4 > r3 goto pass             // too short to be ours
//!        r4 = *(u16 *)(r2 + 12)           // EtherType (network order, read little-endian)
//!   v4   r5 = *(u32 *)(r2 + 30)           // IPv4 destination address
//!   v4   if r4 == 0x0008 goto ipv4        // IPv4 (0x0800)
//!   v4   if r4 == 0x0608 goto arp         // ARP (0x0806)
//!   v6   if r4 != 0xdd86 goto pass        // not IPv6 (0x86DD)
//!   v6   r4 = r2
//!   v6   r4 += 54                         // Ethernet + IPv6 header
//!   v6   if r4 > r3 goto pass
//!   v6   r2 += 38                         // IPv6 destination address: the key, read in place
//!   v6   r1 = RUSTY_IPV6 ll               // the destination set (a map-fd relocation)
//!   v6   call bpf_map_lookup_elem
//!   v6   if r0 == 0 goto pass
//!   v46  goto redirect
//!   !v6  goto pass                        // neither IPv4 nor ARP
//!   v4   arp: r5 = *(u32 *)(r2 + 38)      // ARP target protocol address
//!   v4   ipv4: w4 = RUSTY_IPV4            // (32-bit move: zero-extended)
//!   v4   if r5 != r4 goto pass
//!        redirect: r2 = *(u32 *)(r6 + 16) // rx_queue_index
//!        r1 = XSKMAP ll                   // (two slots: a map-fd relocation)
//!        r3 = XDP_PASS                    // bpf_redirect_map's action when the queue has no socket
//!        call bpf_redirect_map
//!        exit
//!        pass: r0 = XDP_PASS
//!        exit
//! ```
//!
//! Lines marked `v4` are there when Rusty has an IPv4 address, `v6` when it has IPv6
//! addresses, `v46` with both and `!v6` without IPv6; every jump is forward.
//!
//! IPv4 frames for Rusty's address and ARP frames whose target is Rusty's address are
//! Rusty's (broadcast ARP requests for its address too); ARP about other addresses goes
//! to the kernel, which answers for its own addresses on the same interface.
//!
//! An IPv6 frame is Rusty's when its destination is in the set `RUSTY_IPV6`, a hash map
//! filled from [`ipv6_destinations`]: Rusty's unicast addresses (link-local included),
//! their solicited-node groups and all-nodes. Everything else, NDP for the kernel's own
//! addresses included, goes to the kernel. The set is a map rather than inline compares
//! because its length varies with the configuration (each address brings its group):
//! one lookup keeps the program the same few instructions, and its verification the same
//! few paths, however many addresses there are, and a 16-byte key needs no byte order
//! thought. The lookup reads the key straight from the frame, once the bounds check has
//! shown the verifier the 16 bytes are there.
//!
//! Frames of other EtherTypes (VLAN-tagged ones among them) go to the kernel.
//!
//! `filter` (in the tests) evaluates the same decisions in Rust, and the tests run the
//! instructions through a small interpreter of exactly this instruction subset to check
//! they agree.

use std::net::{Ipv4Addr, Ipv6Addr};

/// `XDP_PASS`.
pub(crate) const XDP_PASS: i32 = 2;
/// `BPF_FUNC_map_lookup_elem`.
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
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
const JA: u8 = 0x05;
const JGT_X: u8 = 0x2d;
const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
const JNE_X: u8 = 0x5d;
const LD_IMM64: u8 = 0x18;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;

/// Shortest frame the program looks into: Ethernet (14) + ARP for IPv4 (28).
pub(crate) const MIN_LOOKED_AT: usize = 42;
/// Ethernet (14) + the fixed IPv6 header (40, RFC 8200 §3).
const IPV6_LOOKED_AT: usize = 54;
/// Where the IPv6 destination address starts in the frame.
const IPV6_DST: i16 = 38;

/// All-nodes (RFC 4291 §2.7.1).
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

pub(crate) use rusty_stack::io::solicited_node;

/// The IPv6 destinations that are Rusty's when its addresses are `addrs`: each address,
/// each one's solicited-node group and, if there is any, all-nodes; sorted, without
/// repeats. These are the keys of the program's `RUSTY_IPV6` map.
pub(crate) fn ipv6_destinations(addrs: &[Ipv6Addr]) -> Vec<Ipv6Addr> {
    let mut set: Vec<Ipv6Addr> = addrs.iter().flat_map(|&a| [a, solicited_node(a)]).collect();
    if !set.is_empty() {
        set.push(ALL_NODES);
    }
    set.sort_unstable();
    set.dedup();
    set
}

/// One instruction.
#[derive(Clone, Copy)]
struct Insn {
    op: u8,
    dst: u8,
    src: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    /// In the layout of `struct bpf_insn` on this host.
    fn encode(self) -> u64 {
        let regs = if cfg!(target_endian = "big") {
            (self.dst << 4) | self.src
        } else {
            (self.src << 4) | self.dst
        };
        let mut b = [0u8; 8];
        b[0] = self.op;
        b[1] = regs;
        b[2..4].copy_from_slice(&self.off.to_ne_bytes());
        b[4..8].copy_from_slice(&self.imm.to_ne_bytes());
        u64::from_ne_bytes(b)
    }
}

/// Where a jump lands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Label {
    Ipv4,
    Arp,
    Redirect,
    Pass,
}

/// Instructions with forward jumps to labels, resolved at the end.
#[derive(Default)]
struct Asm {
    insns: Vec<Insn>,
    labels: Vec<(Label, usize)>,
    jumps: Vec<(usize, Label)>,
}

impl Asm {
    fn op(&mut self, op: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(Insn {
            op,
            dst,
            src,
            off,
            imm,
        });
    }

    fn jump(&mut self, op: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.op(op, dst, src, 0, imm);
    }

    fn label(&mut self, l: Label) {
        self.labels.push((l, self.insns.len()));
    }

    /// `ld_imm64` of the map `fd` into `dst` (two slots).
    fn load_map(&mut self, dst: u8, fd: i32) {
        self.op(LD_IMM64, dst, PSEUDO_MAP_FD, 0, fd);
        self.op(0, 0, 0, 0, 0);
    }

    fn finish(mut self) -> Vec<u64> {
        for &(at, to) in &self.jumps {
            let target = self
                .labels
                .iter()
                .find(|(l, _)| *l == to)
                .map(|&(_, i)| i)
                .expect("every label jumped to is placed");
            assert!(target > at, "jumps go forward");
            self.insns[at].off = i16::try_from(target - at - 1).expect("short program");
        }
        self.insns.into_iter().map(Insn::encode).collect()
    }
}

/// The program: redirect IPv4 and ARP for `ip` unless it is `0.0.0.0`, and IPv6 for
/// the set in the hash map `ipv6_map` if there is one; the sockets are in the XSKMAP
/// `xskmap`. Descriptors are the maps' in this process.
pub(crate) fn assemble(ip: Ipv4Addr, xskmap: i32, ipv6_map: Option<i32>) -> Vec<u64> {
    let ipv4 = (!ip.is_unspecified()).then_some(ip);
    // EtherTypes and the address as the loads at their offsets read them on this host.
    let ethertype = |t: u16| i32::from(u16::from_ne_bytes(t.to_be_bytes()));
    let mut a = Asm::default();
    a.op(MOV64_X, 6, 1, 0, 0);
    a.op(LDX_W, 2, 1, 0, 0);
    a.op(LDX_W, 3, 1, 4, 0);
    a.op(MOV64_X, 4, 2, 0, 0);
    a.op(ADD64_K, 4, 0, 0, MIN_LOOKED_AT as i32);
    a.jump(JGT_X, 4, 3, 0, Label::Pass);
    a.op(LDX_H, 4, 2, 12, 0);
    if ipv4.is_some() {
        a.op(LDX_W, 5, 2, 30, 0);
        a.jump(JEQ_K, 4, 0, ethertype(0x0800), Label::Ipv4);
        a.jump(JEQ_K, 4, 0, ethertype(0x0806), Label::Arp);
    }
    match ipv6_map {
        Some(map) => {
            a.jump(JNE_K, 4, 0, ethertype(0x86dd), Label::Pass);
            a.op(MOV64_X, 4, 2, 0, 0);
            a.op(ADD64_K, 4, 0, 0, IPV6_LOOKED_AT as i32);
            a.jump(JGT_X, 4, 3, 0, Label::Pass);
            a.op(ADD64_K, 2, 0, 0, i32::from(IPV6_DST));
            a.load_map(1, map);
            a.op(CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM);
            a.jump(JEQ_K, 0, 0, 0, Label::Pass);
            if ipv4.is_some() {
                a.jump(JA, 0, 0, 0, Label::Redirect);
            }
        }
        None => a.jump(JA, 0, 0, 0, Label::Pass),
    }
    if let Some(ip) = ipv4 {
        a.label(Label::Arp);
        a.op(LDX_W, 5, 2, 38, 0);
        a.label(Label::Ipv4);
        a.op(MOV32_K, 4, 0, 0, u32::from_ne_bytes(ip.octets()) as i32);
        a.jump(JNE_X, 5, 4, 0, Label::Pass);
    }
    a.label(Label::Redirect);
    a.op(LDX_W, 2, 6, 16, 0);
    a.load_map(1, xskmap);
    a.op(MOV64_K, 3, 0, 0, XDP_PASS);
    a.op(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP);
    a.op(EXIT, 0, 0, 0, 0);
    a.label(Label::Pass);
    a.op(MOV64_K, 0, 0, 0, XDP_PASS);
    a.op(EXIT, 0, 0, 0, 0);
    a.finish()
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

/// The program's decision, in Rust, for Rusty's IPv4 address `ip` (`0.0.0.0`: none) and
/// IPv6 addresses `ipv6`: the reference the instructions are tested against. It reads
/// the rules of RFC 4291 §2.7.1 directly rather than through [`ipv6_destinations`], so
/// that the set the map is filled with is checked too.
#[cfg(test)]
pub(crate) fn filter(ip: Ipv4Addr, ipv6: &[Ipv6Addr], frame: &[u8]) -> Verdict {
    if frame.len() < MIN_LOOKED_AT {
        return Verdict::Pass;
    }
    let ours = match (frame[12], frame[13]) {
        (0x08, 0x00) => !ip.is_unspecified() && frame[30..34] == ip.octets(),
        (0x08, 0x06) => !ip.is_unspecified() && frame[38..42] == ip.octets(),
        (0x86, 0xdd) if frame.len() >= IPV6_LOOKED_AT => {
            let dst = &frame[38..54];
            let all_nodes = dst == [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
            let solicited = dst[..13] == [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff];
            let group_of = |a: &Ipv6Addr| solicited && dst[13..] == a.octets()[13..];
            ipv6.iter()
                .any(|a| dst == a.octets() || group_of(a) || all_nodes)
        }
        _ => false,
    };
    if ours {
        Verdict::Redirect
    } else {
        Verdict::Pass
    }
}

#[cfg(test)]
mod tests;
