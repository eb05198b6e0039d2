//! Incremental UTF-8 validation (RFC 3629 §4) for text messages and close reasons that
//! arrive in pieces: it fails on the first byte after which no valid continuation
//! exists, as RFC 6455 §8.1 lets an endpoint fail fast (Autobahn's 6.x cases check it).

/// Validates a byte stream fed in chunks of any size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Utf8Validator {
    /// Continuation bytes still owed by the current sequence.
    need: u8,
    /// The range the next continuation byte must fall in (narrower after E0, ED, F0, F4).
    lo: u8,
    hi: u8,
}

/// The input is not UTF-8, and no continuation could make it so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utf8Error;

impl Utf8Validator {
    /// A validator at the start of a text.
    pub fn new() -> Utf8Validator {
        Utf8Validator::default()
    }

    /// Whether the bytes so far end on a character boundary.
    pub fn is_complete(&self) -> bool {
        self.need == 0
    }

    /// Check the next `data`.
    pub fn feed(&mut self, data: &[u8]) -> Result<(), Utf8Error> {
        let mut rest = data;
        loop {
            rest = self.continue_sequence(rest)?;
            if rest.is_empty() {
                return Ok(());
            }
            match std::str::from_utf8(rest) {
                Ok(_) => return Ok(()),
                // A byte that cannot appear where it does.
                Err(e) if e.error_len().is_some() => return Err(Utf8Error),
                // Valid up to a sequence cut short by the end of the chunk.
                Err(e) => {
                    let tail = &rest[e.valid_up_to()..];
                    self.start(tail[0])?;
                    rest = &tail[1..];
                }
            }
        }
    }

    /// The end of the text: fails if a sequence is left unfinished.
    pub fn finish(&self) -> Result<(), Utf8Error> {
        if self.is_complete() {
            Ok(())
        } else {
            Err(Utf8Error)
        }
    }

    fn start(&mut self, lead: u8) -> Result<(), Utf8Error> {
        let (need, lo, hi) = match lead {
            0xC2..=0xDF => (1, 0x80, 0xBF),
            0xE0 => (2, 0xA0, 0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
            0xED => (2, 0x80, 0x9F),
            0xF0 => (3, 0x90, 0xBF),
            0xF1..=0xF3 => (3, 0x80, 0xBF),
            0xF4 => (3, 0x80, 0x8F),
            _ => return Err(Utf8Error),
        };
        *self = Utf8Validator { need, lo, hi };
        Ok(())
    }

    /// Consume the continuation bytes the current sequence still needs.
    fn continue_sequence<'a>(&mut self, mut data: &'a [u8]) -> Result<&'a [u8], Utf8Error> {
        while self.need > 0 {
            let Some((&b, rest)) = data.split_first() else {
                break;
            };
            if b < self.lo || b > self.hi {
                return Err(Utf8Error);
            }
            self.need -= 1;
            self.lo = 0x80;
            self.hi = 0xBF;
            data = rest;
        }
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Validating `data` cut at `cuts` agrees with `std::str::from_utf8`, and fails no
    /// later than the byte where std's error says validity ended.
    fn check(data: &[u8], cuts: &[usize]) {
        let mut v = Utf8Validator::new();
        let mut pos = 0;
        let mut failed_at = None;
        let mut failed_from = 0;
        let mut bounds: Vec<usize> = cuts.iter().map(|&c| c.min(data.len())).collect();
        bounds.sort_unstable();
        bounds.push(data.len());
        for &end in &bounds {
            if end < pos {
                continue;
            }
            if v.feed(&data[pos..end]).is_err() {
                failed_at = Some(end);
                failed_from = pos;
                break;
            }
            pos = end;
        }
        let ours = failed_at.is_none() && v.finish().is_ok();
        let std = std::str::from_utf8(data);
        assert_eq!(ours, std.is_ok(), "{data:x?} cut at {cuts:?}");
        if let (Err(e), Some(at)) = (std, failed_at) {
            if let Some(len) = e.error_len() {
                // Fail fast: the invalid sequence is known as such at the byte after
                // it at the latest; we stop in the chunk holding that byte, and not
                // in a chunk before the first invalid sequence.
                let bad = e.valid_up_to() + len;
                assert!(
                    failed_from <= bad && at > e.valid_up_to(),
                    "{data:x?}: failed in {failed_from}..{at}"
                );
            }
        }
        if let Err(e) = std {
            if e.error_len().is_some() {
                // Byte by byte, the failure comes exactly at the first impossible byte.
                let mut v = Utf8Validator::new();
                let first_bad = (0..data.len()).find(|&i| v.feed(&data[i..=i]).is_err());
                let bad = e.valid_up_to() + e.error_len().unwrap_or(1);
                let ok = first_bad.is_some_and(|i| i >= e.valid_up_to() && i <= bad);
                assert!(ok, "{data:x?}: failed at {first_bad:?}");
            }
        }
    }

    #[test]
    fn adversarial_sequences() {
        let cases: &[&[u8]] = &[
            b"",
            b"hello",
            "κόσμε".as_bytes(),
            &[
                0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5, 0xED, 0xA0, 0x80,
            ],
            &[0xED, 0xA0, 0x80],       // surrogate
            &[0xED, 0x9F, 0xBF],       // last before surrogates
            &[0xF4, 0x90, 0x80, 0x80], // above U+10FFFF
            &[0xF4, 0x8F, 0xBF, 0xBF], // U+10FFFF
            &[0xC0, 0xAF],             // overlong
            &[0xE0, 0x80, 0xAF],       // overlong
            &[0xF0, 0x80, 0x80, 0xAF], // overlong
            &[0xF0, 0x90, 0x80],       // truncated
            &[0xFF],
            &[0xFE],
            &[0x80],
            &[0xC2],
            &[0xE0, 0xA0],
            &[0xF8, 0x88, 0x80, 0x80, 0x80], // 5-byte form
        ];
        for data in cases {
            for cut in 0..=data.len() {
                check(data, &[cut]);
            }
            let all: Vec<usize> = (0..=data.len()).collect();
            check(data, &all);
        }
    }

    proptest! {
        #[test]
        fn random_bytes_agree_with_std(
            data in proptest::collection::vec(any::<u8>(), 0..64),
            cuts in proptest::collection::vec(0usize..64, 0..6),
        ) {
            check(&data, &cuts);
        }

        #[test]
        fn random_text_agrees_with_std(
            s in "\\PC{0,40}",
            flip in proptest::option::of((0usize..200, any::<u8>())),
            cuts in proptest::collection::vec(0usize..200, 0..6),
        ) {
            let mut data = s.into_bytes();
            if let Some((i, b)) = flip {
                if !data.is_empty() {
                    let i = i % data.len();
                    data[i] = b;
                }
            }
            check(&data, &cuts);
        }
    }
}
