//! What the TCP options default to and cost on the wire, and the timestamp clock: one home
//! for the connection block ([`super::tcb`]) and the engine's stateless SYN-cookie path,
//! which must agree on them.

use crate::time::Instant;

/// MSS assumed when the peer's SYN carries none (RFC 9293 §3.7.1).
pub(crate) const DEFAULT_MSS: u16 = 536;

/// Bytes of the timestamp option as we send it: two NOPs and the 10-byte option
/// (RFC 7323 appendix A), on every segment once timestamps are agreed.
pub(crate) const TS_OPTION_LEN: usize = 12;

/// Our TSval at `now`: the timestamp clock of RFC 7323 §5.4 ticking in milliseconds, plus
/// the connection's `offset` so that TSvals do not reveal uptime. Wraps modulo 2^32.
#[inline]
pub(crate) fn ts_clock(now: Instant, offset: u32) -> u32 {
    (now.as_millis() as u32).wrapping_add(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ts_clock_counts_milliseconds_from_the_offset_and_wraps() {
        assert_eq!(ts_clock(Instant::from_millis(1500), 7), 1507);
        assert_eq!(ts_clock(Instant::from_micros(1999), 0), 1);
        assert_eq!(ts_clock(Instant::from_millis(10), u32::MAX), 9);
    }
}
