//! The window the compressor keeps to, checked with an independent DEFLATE reader
//! (RFC 1951) that records how far back each match reaches.

use super::*;

/// Reads bits least-significant first (RFC 1951 §3.1.1).
struct BitReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl BitReader<'_> {
    fn bits(&mut self, n: u32) -> u32 {
        let mut v = 0;
        for i in 0..n {
            let byte = self.data[self.pos / 8];
            v |= u32::from((byte >> (self.pos % 8)) & 1) << i;
            self.pos += 1;
        }
        v
    }

    fn align(&mut self) {
        self.pos = self.pos.div_ceil(8) * 8;
    }
}

/// A canonical Huffman code: how many codes of each length, and the symbols in code order.
struct Code {
    count: [u16; 16],
    symbols: Vec<u16>,
}

impl Code {
    fn new(lengths: &[u8]) -> Code {
        let mut count = [0u16; 16];
        for &l in lengths {
            count[l as usize] += 1;
        }
        count[0] = 0;
        let mut symbols = Vec::new();
        for len in 1..16u8 {
            for (sym, &l) in lengths.iter().enumerate() {
                if l == len {
                    symbols.push(sym as u16);
                }
            }
        }
        Code { count, symbols }
    }

    /// Canonical codes of one length are consecutive and follow the shorter ones.
    fn decode(&self, r: &mut BitReader<'_>) -> u16 {
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for len in 1..16 {
            code |= r.bits(1) as i32;
            let n = i32::from(self.count[len]);
            if code - first < n {
                return self.symbols[(index + code - first) as usize];
            }
            index += n;
            first = (first + n) << 1;
            code <<= 1;
        }
        panic!("invalid Huffman code");
    }
}

const LEN_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEN_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DIST_BASE: [u32; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// Decodes one message's DEFLATE data (tail appended) onto `history` (the earlier
/// messages' output) and returns the largest back-reference distance it used.
fn read_deflate(data: &[u8], history: &mut Vec<u8>) -> usize {
    let mut r = BitReader { data, pos: 0 };
    let mut max_dist = 0;
    while r.pos.div_ceil(8) < data.len() {
        let last = r.bits(1) == 1;
        match r.bits(2) {
            0 => {
                r.align();
                let len = r.bits(16);
                assert_eq!(len ^ 0xffff, r.bits(16), "NLEN");
                for _ in 0..len {
                    history.push(r.bits(8) as u8);
                }
            }
            kind @ (1 | 2) => {
                let (lit, dist) = if kind == 1 {
                    let mut l = [8u8; 288];
                    l[144..256].fill(9);
                    l[256..280].fill(7);
                    (Code::new(&l), Code::new(&[5; 30]))
                } else {
                    let hlit = r.bits(5) as usize + 257;
                    let hdist = r.bits(5) as usize + 1;
                    let hclen = r.bits(4) as usize + 4;
                    let order = [
                        16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
                    ];
                    let mut cl = [0u8; 19];
                    for &i in &order[..hclen] {
                        cl[i] = r.bits(3) as u8;
                    }
                    let cl = Code::new(&cl);
                    let mut lengths = Vec::new();
                    while lengths.len() < hlit + hdist {
                        match cl.decode(&mut r) {
                            sym @ 0..=15 => lengths.push(sym as u8),
                            16 => {
                                let prev = *lengths.last().unwrap();
                                let n = 3 + r.bits(2);
                                lengths.extend((0..n).map(|_| prev));
                            }
                            17 => lengths.extend((0..3 + r.bits(3)).map(|_| 0)),
                            _ => lengths.extend((0..11 + r.bits(7)).map(|_| 0)),
                        }
                    }
                    (Code::new(&lengths[..hlit]), Code::new(&lengths[hlit..]))
                };
                loop {
                    let sym = lit.decode(&mut r) as usize;
                    if sym < 256 {
                        history.push(sym as u8);
                    } else if sym == 256 {
                        break;
                    } else {
                        let i = sym - 257;
                        let len = LEN_BASE[i] as usize + r.bits(u32::from(LEN_EXTRA[i])) as usize;
                        let d = dist.decode(&mut r) as usize;
                        let d = DIST_BASE[d] as usize + r.bits(u32::from(DIST_EXTRA[d])) as usize;
                        assert!(d <= history.len(), "distance before the start");
                        max_dist = max_dist.max(d);
                        for _ in 0..len {
                            history.push(history[history.len() - d]);
                        }
                    }
                }
            }
            _ => panic!("reserved block type"),
        }
        if last {
            break;
        }
    }
    max_dist
}

/// The compressor never refers further back than its window (checked with the reader
/// above: zlib-rs's inflater always keeps a 32 KiB window, so it cannot tell), in every
/// context-takeover mode, and the reader agrees on the content.
#[test]
fn compressor_respects_the_window() {
    for bits in 9..=15u8 {
        for reset in [false, true] {
            let neg = Negotiated {
                server_max_window_bits: bits,
                server_no_context_takeover: reset,
                ..Negotiated::default()
            };
            let (mut server, _) = pair(&neg, &DeflateConfig::enabled());
            // Text with near and far repetition, long enough to fill any window.
            let mut history = Vec::new();
            let mut max_dist = 0;
            for i in 0..3 {
                let msg = sample(40_000 + i * 1000, i as u32 % 2);
                let mut wire = Vec::new();
                server.compress(&msg, &mut wire).unwrap();
                wire.extend_from_slice(&TAIL);
                if reset {
                    history.clear();
                }
                let start = history.len();
                max_dist = max_dist.max(read_deflate(&wire, &mut history));
                assert!(history[start..] == msg[..], "bits {bits}");
            }
            assert!(max_dist <= 1 << bits, "bits {bits}: distance {max_dist}");
            // The window is used: zlib reaches up to the window less 262 bytes (its
            // MIN_LOOKAHEAD), far past half of it on this text.
            assert!(
                max_dist > (1 << bits) * 3 / 4 - 262,
                "bits {bits}: distance {max_dist}"
            );
        }
    }
}

/// The reader above reads what zlib-rs writes, and catches a compressor with a larger
/// window than asked for.
#[test]
fn window_check_can_fail() {
    let mut c = Compress::new_with_window_bits(Compression::new(6), false, 15);
    let msg = sample(40_000, 0);
    let mut wire = Vec::with_capacity(50_000);
    c.compress_vec(&msg, &mut wire, FlushCompress::Sync)
        .unwrap();
    let mut history = Vec::new();
    assert!(read_deflate(&wire, &mut history) > 1 << 9);
    assert!(history == msg);
}
