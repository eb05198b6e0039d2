//! TCP sequence numbers: 32-bit values compared modulo 2^32 (RFC 9293 §3.4).
//!
//! `a < b` means `b` lies less than 2^31 ahead of `a`. Every comparison in the state
//! machine goes through this type so that wrap-around is never an accident.

use std::cmp::Ordering;
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A 32-bit TCP sequence number, compared in sequence space (RFC 9293 §3.4: modulo 2^32,
/// `a < b` when `b` is less than 2^31 ahead of `a`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNum(pub u32);

impl SeqNum {
    /// `self <= x < self + len`, in sequence space.
    pub fn contains(self, len: usize, x: SeqNum) -> bool {
        let off = x.0.wrapping_sub(self.0);
        (off as usize) < len && off < (1 << 31)
    }
    /// The larger of two sequence numbers (the one further ahead).
    pub fn max(self, other: SeqNum) -> SeqNum {
        if self >= other {
            self
        } else {
            other
        }
    }
    /// The smaller of two sequence numbers (the one further behind).
    pub fn min(self, other: SeqNum) -> SeqNum {
        if self <= other {
            self
        } else {
            other
        }
    }
    /// Distance from `earlier` to `self`; zero when `self` is not after `earlier`.
    pub fn since(self, earlier: SeqNum) -> usize {
        let d = self - earlier;
        if d > 0 {
            d as usize
        } else {
            0
        }
    }
}

impl fmt::Debug for SeqNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for SeqNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Add<usize> for SeqNum {
    type Output = SeqNum;
    fn add(self, n: usize) -> SeqNum {
        // Truncation is the point: sequence space is modulo 2^32.
        SeqNum(self.0.wrapping_add(n as u32))
    }
}

impl AddAssign<usize> for SeqNum {
    fn add_assign(&mut self, n: usize) {
        *self = *self + n;
    }
}

impl Sub<usize> for SeqNum {
    type Output = SeqNum;
    fn sub(self, n: usize) -> SeqNum {
        SeqNum(self.0.wrapping_sub(n as u32))
    }
}

/// Signed distance `self - other` in sequence space.
impl Sub<SeqNum> for SeqNum {
    type Output = i32;
    fn sub(self, other: SeqNum) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
}

impl PartialOrd for SeqNum {
    fn partial_cmp(&self, other: &SeqNum) -> Option<Ordering> {
        Some((*self - *other).cmp(&0))
    }
}

impl From<smoltcp::wire::TcpSeqNumber> for SeqNum {
    fn from(s: smoltcp::wire::TcpSeqNumber) -> SeqNum {
        SeqNum(s.0 as u32)
    }
}

impl From<SeqNum> for smoltcp::wire::TcpSeqNumber {
    fn from(s: SeqNum) -> smoltcp::wire::TcpSeqNumber {
        smoltcp::wire::TcpSeqNumber(s.0 as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps() {
        let a = SeqNum(u32::MAX - 1);
        let b = a + 4;
        assert_eq!(b, SeqNum(2));
        assert!(a < b);
        assert_eq!(b - a, 4);
        assert_eq!(a - b, -4);
        assert!(a.contains(4, SeqNum(1)));
        assert!(!a.contains(4, SeqNum(2)));
        assert_eq!(b.since(a), 4);
        assert_eq!(a.since(b), 0);
    }

    proptest! {
        #[test]
        fn order_is_consistent_across_wrap(x in any::<u32>(), d in 1u32..(1 << 31)) {
            let a = SeqNum(x);
            let b = SeqNum(x.wrapping_add(d));
            prop_assert!(a < b);
            prop_assert!(b > a);
            prop_assert_eq!(b - a, d as i32);
            prop_assert_eq!(a.max(b), b);
            prop_assert_eq!(a.min(b), a);
            prop_assert!(a.contains(d as usize + 1, b));
            prop_assert!(!a.contains(d as usize, b));
        }
    }
}
