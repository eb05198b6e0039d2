//! Tests of the permessage-deflate module, one file a topic: negotiation (every offer
//! shape the Autobahn TestSuite's cases 12 and 13 make), the RFC 7692 §7.2.3 examples,
//! round trips and chunking, the window the compressor keeps to (checked with a DEFLATE
//! reader of our own), and the decompression limit and garbage input. The helpers they
//! share are here.

mod limits;
mod negotiation;
mod rfc_examples;
mod round_trips;
mod window;

use super::*;
use proptest::prelude::*;

const BIG: usize = 1 << 24;

/// Sample text with repetition near and far (so that windows and context matter).
fn sample(len: usize, seed: u32) -> Vec<u8> {
    let words: [&[u8]; 8] = [
        b"permessage ",
        b"deflate ",
        b"window ",
        b"{\"id\": ",
        b"context takeover ",
        b"Rusty ",
        b"0123456789 ",
        b"\n",
    ];
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    let mut out = Vec::with_capacity(len + 32);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        if x.is_multiple_of(7) {
            out.push((x >> 8) as u8);
        } else {
            out.extend_from_slice(words[(x % 8) as usize]);
        }
    }
    out.truncate(len);
    out
}

fn inflate_all(d: &mut PerMessageDeflate, data: &[u8]) -> Result<Vec<u8>, DeflateError> {
    let mut out = Vec::new();
    d.decompress(data, true, &mut out, BIG)?;
    Ok(out)
}

fn pair(neg: &Negotiated, cfg: &DeflateConfig) -> (PerMessageDeflate, PerMessageDeflate) {
    (
        PerMessageDeflate::new(neg, Role::Server, cfg),
        PerMessageDeflate::new(neg, Role::Client, cfg),
    )
}

/// "Hello" compressed in one fixed-Huffman block (RFC 7692 §7.2.3.1).
const HELLO_FIXED: [u8; 7] = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
