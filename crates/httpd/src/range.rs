//! The `Range` request header for byte ranges (RFC 9110 §14.1–14.2), single range only.
//!
//! A header we do not parse (another unit, bad syntax) is ignored, as §14.2 allows: the
//! full 200 is sent. Several ranges (`bytes=0-1,5-6`) are also answered with the full
//! 200 rather than `multipart/byteranges` — allowed, and it keeps every response a
//! slice of one cached buffer.

/// What a `Range` header asks of a representation of `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RangeRequest {
    /// Serve the whole representation (no usable range).
    Full,
    /// Serve bytes `start..end` (end exclusive) with 206.
    Partial {
        /// Offset of the first byte to serve.
        start: u64,
        /// Offset just past the last byte to serve (at most the length).
        end: u64,
    },
    /// No byte of the representation is in the range: 416.
    Unsatisfiable,
}

fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // Overflowing positions are still valid syntax: they lie past any length.
    Some(s.parse().unwrap_or(u64::MAX))
}

/// Evaluate `header` (the field value) against a representation of `len` bytes.
pub fn parse_range(header: &str, len: u64) -> RangeRequest {
    let header = header.trim();
    let Some((unit, set)) = header.split_once('=') else {
        return RangeRequest::Full;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return RangeRequest::Full;
    }
    let set = set.trim();
    if set.contains(',') {
        return RangeRequest::Full;
    }
    let Some((first, last)) = set.split_once('-') else {
        return RangeRequest::Full;
    };
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        // Suffix range `-n`: the last n bytes.
        let Some(n) = number(last) else {
            return RangeRequest::Full;
        };
        if n == 0 || len == 0 {
            return RangeRequest::Unsatisfiable;
        }
        return RangeRequest::Partial {
            start: len - n.min(len),
            end: len,
        };
    }
    let Some(start) = number(first) else {
        return RangeRequest::Full;
    };
    let end = if last.is_empty() {
        len
    } else {
        match number(last) {
            // `a-b` with b < a is invalid syntax (§14.1.1): ignore the header.
            Some(l) if l < start => return RangeRequest::Full,
            Some(l) => l.saturating_add(1).min(len),
            None => return RangeRequest::Full,
        }
    };
    if start >= len {
        return RangeRequest::Unsatisfiable;
    }
    RangeRequest::Partial { start, end }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RangeRequest::*;

    #[test]
    fn single_ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Partial { start: 0, end: 10 });
        assert_eq!(
            parse_range("bytes=90-", 100),
            Partial {
                start: 90,
                end: 100
            }
        );
        assert_eq!(
            parse_range("bytes=-10", 100),
            Partial {
                start: 90,
                end: 100
            }
        );
        assert_eq!(
            parse_range("bytes=-1000", 100),
            Partial { start: 0, end: 100 }
        );
        assert_eq!(
            parse_range("bytes=50-5000", 100),
            Partial {
                start: 50,
                end: 100
            }
        );
        assert_eq!(
            parse_range("Bytes = 1-1", 100),
            Partial { start: 1, end: 2 }
        );
        assert_eq!(
            parse_range("bytes=0-99999999999999999999999", 10),
            Partial { start: 0, end: 10 }
        );
    }

    #[test]
    fn unsatisfiable_ranges() {
        assert_eq!(parse_range("bytes=100-", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=100-200", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=0-", 0), Unsatisfiable);
        assert_eq!(parse_range("bytes=-5", 0), Unsatisfiable);
        assert_eq!(
            parse_range("bytes=99999999999999999999999-", 10),
            Unsatisfiable
        );
    }

    #[test]
    fn ignored_ranges_serve_everything() {
        for h in [
            "items=0-5",
            "bytes",
            "bytes=",
            "bytes=abc",
            "bytes=5-2",
            "bytes=0-1,5-6",
            "bytes=--1",
            "bytes=1-x",
            "bytes=-x",
        ] {
            assert_eq!(parse_range(h, 100), Full, "{h}");
        }
    }
}
