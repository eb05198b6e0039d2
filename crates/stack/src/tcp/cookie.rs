//! SYN cookies: when a listener's SYN backlog is full, the server answers a SYN without
//! keeping any state and rebuilds the connection from the ACK that completes the handshake
//! (RFC 4987 §3.6). Everything the server must remember is packed into its ISN.
//!
//! # Cookie layout (the server's ISN, 32 bits)
//!
//! ```text
//!  31      27 26  24 23                                     0
//! +----------+------+----------------------------------------+
//! | counter  | mss  |                 MAC                    |
//! |  5 bits  |3 bits|               24 bits                  |
//! +----------+------+----------------------------------------+
//! ```
//!
//! - `counter`: the low 5 bits of `now / 64 s`. A cookie is accepted while at most
//!   [`MAX_AGE`] periods old, i.e. for 128 to 192 s after it was sent, which covers any
//!   sane handshake RTT and SYN-ACK retransmissions.
//! - `mss`: an index into [`MSS_TABLE`]; the cookie carries the largest entry not above
//!   the client's MSS.
//! - `MAC`: the low 24 bits of SipHash-2-4, keyed with the listener's secret, over the
//!   4-tuple, the client's ISN, the *full* counter and the MSS index. Covering the full
//!   counter means a cookie 32 periods old, whose 5-bit counter looks fresh again, still
//!   fails; covering the index means the MSS cannot be changed.
//!
//! A blind attacker has to guess the 24-bit MAC for the one (counter, MSS) pair the cookie
//! names: one chance in 2^24 per forged ACK, the same order as Linux.
//!
//! On the returning ACK, `cookie = SEG.ACK - 1` and `client_isn = SEG.SEQ - 1`.
//!
//! # Window scale and SACK-permitted
//!
//! They do not fit in the ISN. When (and only when) the client's SYN carried the
//! timestamp option (RFC 7323), the server's SYN-ACK TSval gives up its low 5 bits to
//! them, as Linux does; the client echoes TSval in the TSecr of its ACK, from which
//! [`decode_ts_options`] recovers them:
//!
//! - bits 0..=3: the client's window-scale shift (0..=14, RFC 7323 §2.3), or 15 for "no
//!   window scale option";
//! - bit 4: the client sent SACK-permitted (RFC 2018).
//!
//! [`tsval_with_options`] rounds the TSval *down* to carry them, so the timestamp clock
//! never appears to run ahead of itself (PAWS, RFC 7323 §5). Without timestamps, a
//! cookie connection runs without window scaling and without SACK.

use std::net::SocketAddr;

use siphasher::sip::SipHasher24;

use crate::tcp::isn::{tuple_into, MAX_TUPLE_LEN};
use crate::tcp::seq::SeqNum;
use crate::time::Instant;

/// MSS values a cookie can carry, ascending. 88 is the smallest MSS worth using (as
/// Linux's `TCP_MIN_MSS`); 536 is the RFC 9293 default; 1220/1360/1440 cover tunnels and
/// IPv6-derived paths; 1452 is PPPoE; 1460 Ethernet; 8960 jumbo frames.
pub(crate) const MSS_TABLE: [u16; 8] = [88, 536, 1220, 1360, 1440, 1452, 1460, 8960];

/// Length of one counter period, in microseconds (64 s).
pub(crate) const PERIOD_US: u64 = 64_000_000;

/// Oldest accepted cookie, in counter periods.
pub(crate) const MAX_AGE: u64 = 2;

const COUNTER_BITS: u32 = 5;
const COUNTER_MASK: u64 = (1 << COUNTER_BITS) - 1;
const MSS_SHIFT: u32 = 24;
const MAC_MASK: u32 = (1 << MSS_SHIFT) - 1;
/// Domain separation, in case the same secret is also used for ISNs.
const DOMAIN: u8 = b'C';

/// Low TSval bits given up to carry window scale and SACK-permitted.
pub(crate) const TS_OPTION_BITS: u32 = 5;
const TS_OPTION_MASK: u32 = (1 << TS_OPTION_BITS) - 1;
const TS_NO_WSCALE: u32 = 0xf;
const TS_SACK: u32 = 0x10;
/// Largest window-scale shift allowed (RFC 7323 §2.3).
const MAX_WSCALE: u8 = 14;

/// The SYN-cookie codec of one listener (or one worker): a keyed MAC. See the module docs
/// for the layout.
#[derive(Debug, Clone)]
pub(crate) struct SynCookies {
    hasher: SipHasher24,
    /// The period (`now / PERIOD_US`) of the last cookie encoded, if any: an ACK is
    /// checked as a cookie only while one sent could still come back
    /// ([`SynCookies::outstanding`]).
    last_sent: Option<u64>,
}

impl SynCookies {
    /// Cookies keyed with `secret` (deterministic; for tests and simulation).
    pub(crate) fn new(secret: [u8; 16]) -> Self {
        SynCookies {
            hasher: SipHasher24::new_with_key(&secret),
            last_sent: None,
        }
    }

    /// Cookies keyed with a fresh random secret (see [`random_secret`] for its fallback).
    #[cfg(test)]
    pub(crate) fn random() -> Self {
        SynCookies::new(crate::tcp::isn::random_secret())
    }

    fn mac(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        client_isn: SeqNum,
        counter: u64,
        mss_index: u8,
    ) -> u32 {
        let mut tuple = [0u8; MAX_TUPLE_LEN];
        let n = tuple_into(local, remote, &mut tuple);
        let mut msg = [0u8; 1 + MAX_TUPLE_LEN + 13];
        msg[0] = DOMAIN;
        msg[1..1 + n].copy_from_slice(&tuple[..n]);
        let rest = &mut msg[1 + n..];
        rest[..4].copy_from_slice(&client_isn.0.to_be_bytes());
        rest[4..12].copy_from_slice(&counter.to_be_bytes());
        rest[12] = mss_index;
        // Truncation to the MAC's 24 bits is intended.
        (self.hasher.hash(&msg[..1 + n + 13]) as u32) & MAC_MASK
    }

    /// The server ISN for a SYN-ACK answering a SYN from `remote` to `local` with
    /// sequence number `client_isn` and MSS option `mss` (536 when the SYN had none,
    /// RFC 9293 §3.7.1), sent at `now`. The MSS is rounded down to [`MSS_TABLE`]; below
    /// the smallest entry the smallest entry is used.
    pub(crate) fn encode(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        client_isn: SeqNum,
        mss: u16,
        now: Instant,
    ) -> SeqNum {
        let index = MSS_TABLE.iter().rposition(|&m| m <= mss).unwrap_or(0);
        // The table has 8 entries, so the index fits the 3-bit field.
        let index = index as u8;
        let counter = now.as_micros() / PERIOD_US;
        let mac = self.mac(local, remote, client_isn, counter, index);
        // Truncating the counter to its 5-bit field is the encoding.
        let c = (counter & COUNTER_MASK) as u32;
        SeqNum(c << (32 - COUNTER_BITS) | u32::from(index) << MSS_SHIFT | mac)
    }

    /// A cookie went out at `now` ([`SynCookies::outstanding`]).
    pub(crate) fn sent(&mut self, now: Instant) {
        self.last_sent = Some(now.as_micros() / PERIOD_US);
    }

    /// Whether a cookie sent so far could still be valid at `now`: one was sent at most
    /// [`MAX_AGE`] periods ago. When none could, an ACK for no connection is not a
    /// returning cookie and is not checked as one (Linux likewise checks cookies only
    /// after a recent overflow): it costs no MAC, and a late segment of a connection
    /// that has gone does not count as a rejected cookie.
    pub(crate) fn outstanding(&self, now: Instant) -> bool {
        let counter = now.as_micros() / PERIOD_US;
        self.last_sent
            .is_some_and(|sent| counter.saturating_sub(sent) <= MAX_AGE)
    }

    /// Validates the cookie of a returning ACK (`cookie = SEG.ACK - 1`, `client_isn =
    /// SEG.SEQ - 1`) at `now` and returns the MSS it carries, or `None` when the MAC does
    /// not match (wrong tuple, wrong client ISN, forged or corrupted) or the cookie is more
    /// than [`MAX_AGE`] periods old (or from the future).
    pub(crate) fn decode(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        client_isn: SeqNum,
        cookie: SeqNum,
        now: Instant,
    ) -> Option<u16> {
        let now_counter = now.as_micros() / PERIOD_US;
        let c = u64::from(cookie.0 >> (32 - COUNTER_BITS));
        let age = now_counter.wrapping_sub(c) & COUNTER_MASK;
        if age > MAX_AGE {
            return None;
        }
        let counter = now_counter.checked_sub(age)?;
        let index = ((cookie.0 >> MSS_SHIFT) & 0x7) as u8;
        let mss = *MSS_TABLE.get(usize::from(index))?;
        if self.mac(local, remote, client_isn, counter, index) != cookie.0 & MAC_MASK {
            return None;
        }
        Some(mss)
    }
}

/// Packs the client's window-scale shift and SACK-permitted into the low
/// [`TS_OPTION_BITS`] bits (see the module docs). A shift above 14 is clamped to 14, as
/// RFC 7323 §2.3 tells a receiver to do.
pub(crate) fn encode_ts_options(wscale: Option<u8>, sack: bool) -> u32 {
    let w = wscale.map_or(TS_NO_WSCALE, |w| u32::from(w.min(MAX_WSCALE)));
    w | if sack { TS_SACK } else { 0 }
}

/// Unpacks what `encode_ts_options` packed, from the TSecr of the returning ACK.
pub fn decode_ts_options(tsval: u32) -> (Option<u8>, bool) {
    let w = tsval & TS_NO_WSCALE;
    // `w <= 15` fits in a u8.
    let wscale = (w != TS_NO_WSCALE).then_some(w as u8);
    (wscale, tsval & TS_SACK != 0)
}

/// The SYN-ACK TSval to send instead of `tsval`: at most 31 below it (modulo 2^32), never
/// above, with the options in its low bits.
pub(crate) fn tsval_with_options(tsval: u32, wscale: Option<u8>, sack: bool) -> u32 {
    let v = (tsval & !TS_OPTION_MASK) | encode_ts_options(wscale, sack);
    if v > tsval {
        v.wrapping_sub(TS_OPTION_MASK + 1)
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    const KEY: [u8; 16] = *b"cookie-secret-16";

    fn sa(a: [u8; 4], p: u16) -> SocketAddr {
        SocketAddr::new(Ipv4Addr::from(a).into(), p)
    }

    fn addr() -> impl Strategy<Value = SocketAddr> {
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(a, p)| sa(a, p))
    }

    fn period(n: u64) -> Instant {
        Instant::from_micros(n * PERIOD_US)
    }

    #[test]
    fn mss_rounds_down() {
        let c = SynCookies::new(KEY);
        let (l, r) = (sa([10, 0, 0, 1], 80), sa([10, 0, 0, 2], 50000));
        let t = period(10);
        for (offered, expect) in [
            (1500, 1460),
            (1460, 1460),
            (1459, 1452),
            (1400, 1360),
            (9000, 8960),
            (8959, 1460),
            (536, 536),
            (535, 88),
            (0, 88),
            (u16::MAX, 8960),
        ] {
            let cookie = c.encode(l, r, SeqNum(7), offered, t);
            assert_eq!(
                c.decode(l, r, SeqNum(7), cookie, t),
                Some(expect),
                "{offered}"
            );
        }
    }

    #[test]
    fn age_limits() {
        let mut c = SynCookies::new(KEY);
        let (l, r) = (sa([10, 0, 0, 1], 80), sa([10, 0, 0, 2], 50000));
        let sent = period(100) + std::time::Duration::from_secs(63);
        assert!(!c.outstanding(sent), "no cookie sent yet");
        let cookie = c.encode(l, r, SeqNum(1), 1460, sent);
        c.sent(sent);
        let last_ok = period(103) - std::time::Duration::from_micros(1);
        // Outstanding exactly as long as the cookie decodes.
        assert!(c.outstanding(sent) && c.outstanding(last_ok));
        assert!(!c.outstanding(period(103)));
        assert_eq!(c.decode(l, r, SeqNum(1), cookie, sent), Some(1460));
        assert_eq!(c.decode(l, r, SeqNum(1), cookie, last_ok), Some(1460));
        assert_eq!(c.decode(l, r, SeqNum(1), cookie, period(103)), None);
        // From the future (clock went backwards / forged): rejected.
        assert_eq!(c.decode(l, r, SeqNum(1), cookie, period(99)), None);
        // 32 periods later the 5-bit counter matches again; the MAC's full counter does not.
        assert_eq!(c.decode(l, r, SeqNum(1), cookie, period(132)), None);
        // Before the clock's epoch plus the age: no underflow, just rejection.
        let early = c.encode(l, r, SeqNum(1), 1460, period(0));
        assert_eq!(c.decode(l, r, SeqNum(1), early, period(0)), Some(1460));
        assert_eq!(
            c.decode(l, r, SeqNum(1), SeqNum(0xf800_0000), period(1)),
            None
        );
    }

    #[test]
    fn different_secret_rejects() {
        let (l, r) = (sa([10, 0, 0, 1], 80), sa([10, 0, 0, 2], 50000));
        let t = period(5);
        let cookie = SynCookies::new(KEY).encode(l, r, SeqNum(9), 1460, t);
        let mut other = KEY;
        other[15] ^= 0x80;
        assert_eq!(
            SynCookies::new(other).decode(l, r, SeqNum(9), cookie, t),
            None
        );
        let a = SynCookies::random().encode(l, r, SeqNum(9), 1460, t);
        let b = SynCookies::random().encode(l, r, SeqNum(9), 1460, t);
        assert_ne!(a, b);
    }

    #[test]
    fn ts_options_round_trip() {
        for w in (0..=14).map(Some).chain([None]) {
            for sack in [false, true] {
                let bits = encode_ts_options(w, sack);
                assert!(bits < 32);
                assert_eq!(decode_ts_options(bits), (w, sack));
                assert_eq!(decode_ts_options(0xdead_be00 | bits), (w, sack));
            }
        }
        assert_eq!(
            decode_ts_options(encode_ts_options(Some(200), true)),
            (Some(14), true)
        );
    }

    proptest! {
        #[test]
        fn round_trip(
            l in addr(), r in addr(), isn in any::<u32>(), mss in any::<u16>(),
            sent in 0u64..(1 << 40), delay in 0u64..(2 * PERIOD_US),
        ) {
            let c = SynCookies::new(KEY);
            let t = Instant::from_micros(sent);
            let cookie = c.encode(l, r, SeqNum(isn), mss, t);
            let got = c.decode(l, r, SeqNum(isn), cookie, Instant::from_micros(sent + delay));
            let expect = MSS_TABLE.iter().rev().find(|&&m| m <= mss).copied().unwrap_or(88);
            prop_assert_eq!(got, Some(expect));
        }

        #[test]
        fn forgeries_rejected(
            l in addr(), r in addr(), l2 in addr(), r2 in addr(),
            isn in any::<u32>(), isn2 in any::<u32>(), bit in 0u32..32,
            sent in (3 * PERIOD_US)..(1 << 40), age in 3u64..1000,
        ) {
            let c = SynCookies::new(KEY);
            let t = Instant::from_micros(sent);
            let cookie = c.encode(l, r, SeqNum(isn), 1460, t);
            if (l2, r2) != (l, r) {
                prop_assert_eq!(c.decode(l2, r2, SeqNum(isn), cookie, t), None);
            }
            // Swapped ends are a different tuple too.
            if l != r {
                prop_assert_eq!(c.decode(r, l, SeqNum(isn), cookie, t), None);
            }
            if isn2 != isn {
                prop_assert_eq!(c.decode(l, r, SeqNum(isn2), cookie, t), None);
            }
            let tampered = SeqNum(cookie.0 ^ (1 << bit));
            prop_assert_eq!(c.decode(l, r, SeqNum(isn), tampered, t), None);
            let late = Instant::from_micros(sent + age * PERIOD_US);
            prop_assert_eq!(c.decode(l, r, SeqNum(isn), cookie, late), None);
        }

        #[test]
        fn tsval_rounds_down_and_carries_options(
            tsval in any::<u32>(), w in proptest::option::of(0u8..=14), sack in any::<bool>(),
        ) {
            let v = tsval_with_options(tsval, w, sack);
            prop_assert_eq!(decode_ts_options(v), (w, sack));
            prop_assert!(tsval.wrapping_sub(v) < 32);
        }
    }
}
