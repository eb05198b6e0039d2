//! The base framing protocol (RFC 6455 §5.2): opcodes, the frame header and its
//! encoding, and masking (§5.3).

/// A frame's opcode (§5.2, §11.8).
// Exhaustive: RFC 6455 fixes the opcodes; the others are reserved and fail the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpCode {
    /// 0x0: continues a fragmented message.
    Continuation,
    /// 0x1: the first frame of a text message.
    Text,
    /// 0x2: the first frame of a binary message.
    Binary,
    /// 0x8: close.
    Close,
    /// 0x9: ping.
    Ping,
    /// 0xA: pong.
    Pong,
}

impl OpCode {
    /// The opcode of a 4-bit value; `None` for the reserved ones.
    pub fn from_bits(bits: u8) -> Option<OpCode> {
        Some(match bits {
            0x0 => OpCode::Continuation,
            0x1 => OpCode::Text,
            0x2 => OpCode::Binary,
            0x8 => OpCode::Close,
            0x9 => OpCode::Ping,
            0xA => OpCode::Pong,
            _ => return None,
        })
    }

    /// The 4-bit value on the wire.
    pub fn bits(self) -> u8 {
        match self {
            OpCode::Continuation => 0x0,
            OpCode::Text => 0x1,
            OpCode::Binary => 0x2,
            OpCode::Close => 0x8,
            OpCode::Ping => 0x9,
            OpCode::Pong => 0xA,
        }
    }

    /// Close, ping and pong: at most 125 bytes, never fragmented (§5.5).
    pub fn is_control(self) -> bool {
        self.bits() & 0x8 != 0
    }
}

/// RSV1, the bit permessage-deflate claims (RFC 7692 §6).
pub const RSV1: u8 = 0b100;

/// The most bytes a frame header takes: 2, 8 of extended length, 4 of mask.
pub const MAX_HEADER: usize = 14;

/// The most payload a control frame carries (§5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// A frame header, parsed or to be written.
// Exhaustive: the fields are the header of §5.2, which does not grow; writers build it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// The final fragment of a message.
    pub fin: bool,
    /// RSV1-3 as the three low bits (RSV1 = 0b100).
    pub rsv: u8,
    /// The opcode.
    pub opcode: OpCode,
    /// The masking key, if the payload is masked.
    pub mask: Option<[u8; 4]>,
    /// The payload length.
    pub len: u64,
}

impl FrameHeader {
    /// Write the header into `buf` with the shortest length encoding (§5.2 requires
    /// the minimal one); returns how many bytes it took.
    pub fn encode(&self, buf: &mut [u8; MAX_HEADER]) -> usize {
        buf[0] = u8::from(self.fin) << 7 | (self.rsv & 0b111) << 4 | self.opcode.bits();
        let mask_bit = if self.mask.is_some() { 0x80 } else { 0 };
        let mut n = match self.len {
            0..=125 => {
                buf[1] = mask_bit | self.len as u8;
                2
            }
            126..=0xFFFF => {
                buf[1] = mask_bit | 126;
                buf[2..4].copy_from_slice(&(self.len as u16).to_be_bytes());
                4
            }
            _ => {
                buf[1] = mask_bit | 127;
                buf[2..10].copy_from_slice(&self.len.to_be_bytes());
                10
            }
        };
        if let Some(key) = self.mask {
            buf[n..n + 4].copy_from_slice(&key);
            n += 4;
        }
        n
    }
}

/// XOR `data` with `key` (§5.3), where `data` starts `offset` bytes into the payload,
/// so a payload can be (un)masked in pieces.
pub fn apply_mask(data: &mut [u8], key: [u8; 4], offset: usize) {
    let mut key = key;
    key.rotate_left(offset % 4);
    let wide = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(w) ^ wide).to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= key[i % 4];
    }
}

/// Append `src`, masked with `key` from payload position `offset`, to `out`.
pub fn extend_masked(out: &mut Vec<u8>, src: &[u8], key: Option<[u8; 4]>, offset: usize) {
    let start = out.len();
    out.extend_from_slice(src);
    if let Some(key) = key {
        apply_mask(&mut out[start..], key, offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc_examples() {
        // §5.7: a single-frame unmasked text message "Hello" ...
        let mut buf = [0u8; MAX_HEADER];
        let h = FrameHeader {
            fin: true,
            rsv: 0,
            opcode: OpCode::Text,
            mask: None,
            len: 5,
        };
        let n = h.encode(&mut buf);
        assert_eq!(&buf[..n], &[0x81, 0x05]);
        // ... and masked with 37 fa 21 3d.
        let key = [0x37, 0xfa, 0x21, 0x3d];
        let h = FrameHeader {
            mask: Some(key),
            ..h
        };
        let n = h.encode(&mut buf);
        assert_eq!(&buf[..n], &[0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d]);
        let mut p = *b"Hello";
        apply_mask(&mut p, key, 0);
        assert_eq!(p, [0x7f, 0x9f, 0x4d, 0x51, 0x58]);
        // 256 bytes binary, 16-bit length; 64 KiB, 64-bit length.
        let h = FrameHeader {
            fin: true,
            rsv: 0,
            opcode: OpCode::Binary,
            mask: None,
            len: 256,
        };
        let n = h.encode(&mut buf);
        assert_eq!(&buf[..n], &[0x82, 0x7E, 0x01, 0x00]);
        let h = FrameHeader { len: 65536, ..h };
        let n = h.encode(&mut buf);
        assert_eq!(&buf[..n], &[0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0]);
    }

    proptest! {
        #[test]
        fn masking_in_pieces_equals_masking_whole(
            data in proptest::collection::vec(any::<u8>(), 0..100),
            key in any::<[u8; 4]>(),
            cut in 0usize..100,
        ) {
            let cut = cut.min(data.len());
            let mut whole = data.clone();
            apply_mask(&mut whole, key, 0);
            let mut pieces = Vec::new();
            extend_masked(&mut pieces, &data[..cut], Some(key), 0);
            extend_masked(&mut pieces, &data[cut..], Some(key), cut);
            prop_assert_eq!(&whole, &pieces);
            for (i, b) in whole.iter().enumerate() {
                prop_assert_eq!(*b, data[i] ^ key[i % 4]);
            }
            apply_mask(&mut whole, key, 0);
            prop_assert_eq!(whole, data);
        }
    }
}
