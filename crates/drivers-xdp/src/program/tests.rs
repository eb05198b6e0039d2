use super::*;

const XSKMAP: i32 = 7;
const IPV6_MAP: i32 = 9;
/// What `ld_imm64` of a map leaves in the interpreter's register: the fd, marked.
const MAP_MARK: u64 = 0xdead_0000;

/// Runs the subset of eBPF `assemble` uses, on one frame, as the kernel would: packet
/// loads and the map key are bounds-checked against the frame (the verifier proves they
/// are in range; a test would panic here if not), a register must be written before it
/// is read, and a call leaves r1–r5 unreadable. `set` is the content of the IPv6 map.
/// Returns the verdict and the queue/flags passed to `bpf_redirect_map`.
fn run(prog: &[u64], set: &[Ipv6Addr], frame: &[u8], queue: u32) -> (Verdict, Option<(u64, u64)>) {
    const DATA: u64 = 0x1000_0000;
    const CTX: u64 = 0x2000_0000;
    const VALUE: u64 = 0x3000_0000;
    let mut r = [None::<u64>; 11];
    r[1] = Some(CTX);
    let get = |r: &[Option<u64>; 11], i: usize| r[i].unwrap_or_else(|| panic!("r{i} read unset"));
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
        let k = imm as i64 as u64;
        match op {
            LDX_W => r[dst] = Some(load(get(&r, src).wrapping_add(off as u64), 4)),
            LDX_H => r[dst] = Some(load(get(&r, src).wrapping_add(off as u64), 2)),
            MOV64_X => r[dst] = Some(get(&r, src)),
            MOV64_K => r[dst] = Some(k),
            MOV32_K => r[dst] = Some(u64::from(imm as u32)),
            ADD64_K => r[dst] = Some(get(&r, dst).wrapping_add(k)),
            JA => pc = target,
            JGT_X if get(&r, dst) > get(&r, src) => pc = target,
            JEQ_K if get(&r, dst) == k => pc = target,
            JNE_K if get(&r, dst) != k => pc = target,
            JNE_X if get(&r, dst) != get(&r, src) => pc = target,
            JGT_X | JEQ_K | JNE_K | JNE_X => {}
            LD_IMM64 => {
                assert_eq!(src as u8, PSEUDO_MAP_FD);
                r[dst] = Some(MAP_MARK | imm as u64);
                pc += 1;
            }
            CALL => {
                r[0] = Some(match imm {
                    BPF_FUNC_MAP_LOOKUP_ELEM => {
                        assert_eq!(get(&r, 1), MAP_MARK | IPV6_MAP as u64, "the IPv6 map");
                        let key = get(&r, 2);
                        let off = (key - DATA) as usize;
                        assert!(off + 16 <= frame.len(), "map key out of bounds");
                        let key: [u8; 16] = frame[off..off + 16].try_into().unwrap();
                        if set.contains(&Ipv6Addr::from(key)) {
                            VALUE
                        } else {
                            0
                        }
                    }
                    BPF_FUNC_REDIRECT_MAP => {
                        assert_eq!(get(&r, 1), MAP_MARK | XSKMAP as u64, "the XSKMAP");
                        redirect = Some((get(&r, 2), get(&r, 3)));
                        4 // XDP_REDIRECT
                    }
                    f => panic!("helper {f}"),
                });
                r[1..=5].fill(None);
            }
            EXIT => {
                return match get(&r, 0) {
                    2 => (Verdict::Pass, redirect),
                    4 => (Verdict::Redirect, redirect),
                    v => panic!("returned {v}"),
                }
            }
            _ => panic!("opcode {op:#x}"),
        }
    }
}

/// The program and its map's content for a configuration, as `open` builds them.
fn build(ip: Ipv4Addr, ipv6: &[Ipv6Addr]) -> (Vec<u64>, Vec<Ipv6Addr>) {
    let set = ipv6_destinations(ipv6);
    let map = (!set.is_empty()).then_some(IPV6_MAP);
    (assemble(ip, XSKMAP, map), set)
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

/// An IPv6 frame to `dst` carrying `payload` bytes after the fixed header.
fn ipv6(dst: &str, payload: usize) -> Vec<u8> {
    let dst: Ipv6Addr = dst.parse().unwrap();
    let mut h = vec![0x60, 0, 0, 0, 0, payload as u8, 58, 255];
    h.extend_from_slice(&"fd00:78::1".parse::<Ipv6Addr>().unwrap().octets());
    h.extend_from_slice(&dst.octets());
    h.resize(40 + payload, 0);
    eth([0x86, 0xdd], &h)
}

/// Checks each frame against the reference and the instructions.
fn check(ip: Ipv4Addr, ipv6: &[Ipv6Addr], cases: &[(Vec<u8>, Verdict)]) {
    let (prog, set) = build(ip, ipv6);
    for (i, (frame, want)) in cases.iter().enumerate() {
        assert_eq!(filter(ip, ipv6, frame), *want, "reference, case {i}");
        let (got, redirect) = run(&prog, &set, frame, 3);
        assert_eq!(got, *want, "program for {ip} {ipv6:?}, case {i}");
        if got == Verdict::Redirect {
            assert_eq!(redirect, Some((3, XDP_PASS as u64)), "queue and fallback");
        }
    }
}

fn addrs(list: &[&str]) -> Vec<Ipv6Addr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

#[test]
fn ipv4_frames_decide_as_the_reference_does() {
    // Addresses whose high bit is set exercise the zero-extended 32-bit compare.
    for ip in [
        Ipv4Addr::new(10, 78, 3, 2),
        Ipv4Addr::new(192, 168, 200, 250),
        Ipv4Addr::new(255, 1, 2, 3),
    ] {
        let me = ip.octets();
        let mut other = me;
        other[3] ^= 1;
        let cases = [
            (ipv4(me, 40), Verdict::Redirect),
            (ipv4(me, 28), Verdict::Redirect), // 42 bytes exactly
            (ipv4(other, 40), Verdict::Pass),
            (arp(me), Verdict::Redirect),
            (arp(other), Verdict::Pass),
            (eth([0x81, 0x00], &[0; 60]), Verdict::Pass), // VLAN
            (ipv4(me, 40)[..41].to_vec(), Verdict::Pass), // too short
            (vec![], Verdict::Pass),
        ];
        // IPv4 alone, and IPv4 beside IPv6: the IPv4 decisions are the same.
        check(ip, &[], &cases);
        check(ip, &addrs(&["fd00:78::2", "fe80::2"]), &cases);
        // Without IPv6 addresses no IPv6 frame is Rusty's, all-nodes included.
        let v6 = [
            (ipv6("fd00:78::2", 20), Verdict::Pass),
            (ipv6("ff02::1", 20), Verdict::Pass),
            (eth([0x86, 0xdd], &[0; 60]), Verdict::Pass),
        ];
        check(ip, &[], &v6);
    }
}

#[test]
fn ipv6_frames_decide_as_the_reference_does() {
    let ours = addrs(&[
        "fd00:78:3::2",
        "2001:db8:ffff::9ab:cdef",
        "fe80::1c2b:3aff:fe4d:5e6f",
    ]);
    let redirect = |dst: &str| (ipv6(dst, 20), Verdict::Redirect);
    let pass = |dst: &str| (ipv6(dst, 20), Verdict::Pass);
    let mut vlan = ipv6("fd00:78:3::2", 24);
    vlan.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    let mut odd = ipv6("fd00:78:3::2", 20);
    odd[12..14].copy_from_slice(&[0xdd, 0x86]);
    let cases = [
        // Rusty's unicast addresses, link-local included.
        redirect("fd00:78:3::2"),
        redirect("2001:db8:ffff::9ab:cdef"),
        redirect("fe80::1c2b:3aff:fe4d:5e6f"),
        // Their solicited-node groups, and all-nodes.
        redirect("ff02::1:ff00:2"),
        redirect("ff02::1:ffab:cdef"),
        redirect("ff02::1:ff4d:5e6f"),
        redirect("ff02::1"),
        // A header and nothing after it: 54 bytes exactly.
        (ipv6("fd00:78:3::2", 0), Verdict::Redirect),
        // Another host, its group, and groups that are not Rusty's.
        pass("fd00:78:3::9"),
        pass("fd00:78:4::2"), // the low 24 bits of one of Rusty's
        pass("ff02::1:ff00:9"),
        pass("ff05::1:ff00:2"), // a solicited-node suffix in another scope
        pass("ff02::2"),
        pass("ff02::16"),
        pass("::"),
        // Cut short of the destination's last byte, and of the whole header.
        (ipv6("fd00:78:3::2", 0)[..53].to_vec(), Verdict::Pass),
        (ipv6("ff02::1", 0)[..46].to_vec(), Verdict::Pass),
        (ipv6("ff02::1", 0)[..41].to_vec(), Verdict::Pass),
        (ipv6("ff02::1", 0)[..14].to_vec(), Verdict::Pass),
        // VLAN-tagged, byte-swapped and other EtherTypes.
        (vlan, Verdict::Pass),
        (odd, Verdict::Pass),
        (eth([0x88, 0xa8], &[0; 60]), Verdict::Pass),
        (eth([0x86, 0xdc], &[0; 60]), Verdict::Pass),
    ];
    // Dual stack, and IPv6 alone.
    check(Ipv4Addr::new(10, 78, 3, 2), &ours, &cases);
    check(Ipv4Addr::UNSPECIFIED, &ours, &cases);
}

#[test]
fn without_an_ipv4_address_no_ipv4_or_arp_frame_is_rusty_s() {
    let ours = addrs(&["fd00:78::2"]);
    let cases = [
        (ipv4([0, 0, 0, 0], 40), Verdict::Pass),
        (arp([0, 0, 0, 0]), Verdict::Pass),
        (ipv4([10, 78, 3, 2], 40), Verdict::Pass),
        (arp([255, 255, 255, 255]), Verdict::Pass),
        (ipv6("fd00:78::2", 8), Verdict::Redirect),
    ];
    check(Ipv4Addr::UNSPECIFIED, &ours, &cases);
}

#[test]
fn the_destination_set_holds_each_address_its_group_and_all_nodes() {
    assert!(ipv6_destinations(&[]).is_empty());
    // Two addresses with the same low 24 bits share a group; repeats count once.
    let set = ipv6_destinations(&addrs(&[
        "fe80::aa:bb:cc",
        "fd00::cc:bb:cc",
        "fe80::aa:bb:cc",
    ]));
    assert_eq!(
        set,
        addrs(&[
            "fd00::cc:bb:cc",
            "fe80::aa:bb:cc",
            "ff02::1",
            "ff02::1:ffbb:cc"
        ])
    );
    assert_eq!(
        solicited_node("2001:db8::1234:5678".parse().unwrap()),
        "ff02::1:ff34:5678".parse::<Ipv6Addr>().unwrap()
    );
}

/// The instructions the verifier would walk from the first: it refuses a program with
/// any it cannot reach.
fn reachable(prog: &[u64]) -> Vec<bool> {
    let mut seen = vec![false; prog.len()];
    let mut todo = vec![0usize];
    while let Some(pc) = todo.pop() {
        if seen[pc] {
            continue;
        }
        seen[pc] = true;
        let b = prog[pc].to_ne_bytes();
        let off = i16::from_ne_bytes([b[2], b[3]]) as i64;
        let target = (pc as i64 + 1 + off) as usize;
        match b[0] {
            EXIT => {}
            JA => todo.push(target),
            JGT_X | JEQ_K | JNE_K | JNE_X => todo.extend([pc + 1, target]),
            LD_IMM64 => {
                seen[pc + 1] = true;
                todo.push(pc + 2);
            }
            _ => todo.push(pc + 1),
        }
    }
    seen
}

#[test]
fn every_instruction_is_reachable_and_every_jump_lands_inside() {
    let ip = Ipv4Addr::new(10, 0, 0, 2);
    let v6 = addrs(&["fd00::2"]);
    for (ip, ipv6) in [
        (ip, &[][..]),
        (ip, &v6[..]),
        (Ipv4Addr::UNSPECIFIED, &v6[..]),
    ] {
        let (prog, _) = build(ip, ipv6);
        assert!(reachable(&prog).iter().all(|&r| r), "{ip} {ipv6:?}");
        assert_eq!(prog.last().map(|i| i.to_ne_bytes()[0]), Some(EXIT));
    }
}

#[test]
fn random_frames_agree_with_the_reference() {
    let ip = Ipv4Addr::new(10, 1, 2, 3);
    let ours = addrs(&["fd00:1:2::3", "fe80::3"]);
    let configs = [
        (ip, Vec::new()),
        (ip, ours.clone()),
        (Ipv4Addr::UNSPECIFIED, ours.clone()),
    ];
    let set = ipv6_destinations(&ours);
    for (ip, ipv6) in &configs {
        let (prog, map) = build(*ip, ipv6);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 90) as usize;
            let mut frame: Vec<u8> = (0..len).map(|i| (x >> (i % 56)) as u8).collect();
            // Bias towards the interesting cases.
            if len >= 42 {
                match x % 5 {
                    0 => frame[12..14].copy_from_slice(&[8, 0]),
                    1 => frame[12..14].copy_from_slice(&[8, 6]),
                    2 | 3 => frame[12..14].copy_from_slice(&[0x86, 0xdd]),
                    _ => {}
                }
                if x.is_multiple_of(3) {
                    frame[30..34].copy_from_slice(&ip.octets());
                    frame[38..42].copy_from_slice(&ip.octets());
                }
            }
            if len >= 54 && x % 7 < 4 {
                // One of Rusty's destinations, or one with a byte changed.
                let mut dst = set[(x >> 8) as usize % set.len()].octets();
                if x.is_multiple_of(7) {
                    dst[(x >> 16) as usize % 16] ^= 1 << ((x >> 24) % 8);
                }
                frame[38..54].copy_from_slice(&dst);
            }
            let want = filter(*ip, ipv6, &frame);
            assert_eq!(
                run(&prog, &map, &frame, 0).0,
                want,
                "{ip} {ipv6:?} {frame:?}"
            );
        }
    }
}
