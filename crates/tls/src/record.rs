//! Record boundaries in the received byte stream (RFC 8446 §5.1, RFC 5246 §6.2.1), for
//! the one thing rustls does not report: a handshake record after a TLS 1.2 handshake
//! finished, which can only be a renegotiation attempt (TLS 1.3 has none; its
//! post-handshake messages travel as application data).

/// The content type of handshake records.
const HANDSHAKE: u8 = 22;
/// Type (1), legacy version (2), length (2).
const HEADER_LEN: usize = 5;

/// Follows record headers through the bytes handed to rustls, in order.
#[derive(Debug, Default)]
pub(crate) struct RecordScanner {
    header: [u8; HEADER_LEN],
    have: usize,
    /// Bytes of the current record's body still to come.
    left: usize,
}

impl RecordScanner {
    /// Scan the next `bytes` of the stream; whether a handshake record starts in them.
    pub(crate) fn handshake_record_in(&mut self, mut bytes: &[u8]) -> bool {
        let mut found = false;
        while !bytes.is_empty() {
            if self.left > 0 {
                let n = self.left.min(bytes.len());
                self.left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (HEADER_LEN - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == HEADER_LEN {
                self.have = 0;
                found |= self.header[0] == HANDSHAKE;
                self.left = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_handshake_records_across_splits() {
        let mut stream = vec![23, 3, 3, 0, 3, 1, 2, 3];
        stream.extend_from_slice(&[22, 3, 3, 0, 2, 9, 9]);
        for split in 0..stream.len() {
            let mut s = RecordScanner::default();
            let (a, b) = stream.split_at(split);
            let found = s.handshake_record_in(a) | s.handshake_record_in(b);
            assert!(found, "split at {split}");
        }
        let mut s = RecordScanner::default();
        assert!(!s.handshake_record_in(&stream[..8]));
    }
}
