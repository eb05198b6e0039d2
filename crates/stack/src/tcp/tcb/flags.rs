//! One-bit states, packed in a byte: what output owes the peer ([`PendingOutput`]) and
//! the connection's flags ([`ConnFlags`]).

/// A set of one-bit flags in a byte: one byte where as many `bool`s would take one
/// each, in a block where every byte counts. Setting, clearing and testing a constant
/// flag costs what a `bool` costs, and several are tested at once.
macro_rules! bit_flags {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $flag:ident = $bit:expr,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Default)]
        pub(super) struct $name(u8);

        #[allow(dead_code)]
        impl $name {
            pub(super) const NONE: $name = $name(0);
            $($(#[$fdoc])* pub(super) const $flag: u8 = 1 << $bit;)*

            /// Whether `flag` (or any of several or-ed together) is set.
            #[inline]
            pub(super) fn has(self, flag: u8) -> bool {
                self.0 & flag != 0
            }
            #[inline]
            pub(super) fn set(&mut self, flag: u8) {
                self.0 |= flag;
            }
            #[inline]
            pub(super) fn clear(&mut self, flag: u8) {
                self.0 &= !flag;
            }
            #[inline]
            pub(super) fn put(&mut self, flag: u8, on: bool) {
                if on {
                    self.set(flag);
                } else {
                    self.clear(flag);
                }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let mut set = f.debug_set();
                $(if self.has(Self::$flag) {
                    set.entry(&stringify!($flag));
                })*
                set.finish()
            }
        }
    };
}

bit_flags! {
    /// Segments owed to the peer that `poll_transmit` has not sent yet.
    PendingOutput {
        /// Our SYN (or SYN-ACK), first or again.
        SYN = 0,
        /// An ACK, now rather than delayed.
        ACK_NOW = 1,
        /// A zero-window probe or the SWS override segment (§3.8.6.1, §3.8.6.2.1).
        PROBE = 2,
        /// A keepalive probe (RFC 1122 §4.2.3.6).
        KEEPALIVE_PROBE = 3,
        /// A tail loss probe (RFC 8985 §7.3).
        TLP = 4,
        /// A D-SACK, kept out of line (`RareState::dsack`); the flag is what the data
        /// path tests.
        DSACK = 5,
        /// A RST, kept out of line (`RareState::rst`).
        RST = 6,
    }
}

bit_flags! {
    /// The connection's one-bit states.
    ConnFlags {
        /// Our SYN is timed for an RTT sample (Karn's rule: not once a timeout resent
        /// it), from `snd.stall_from`: the time it was first sent, which is what that
        /// field holds for the SYN (nothing else reads it before the handshake is
        /// done).
        SYN_TIMED = 0,
        /// Both sides agreed on SACK: our ACKs carry SACK blocks (RFC 2018).
        SACK_OK = 1,
        /// Both sides agreed on window scaling.
        WS_OK = 2,
        /// The connection began with an active open (it came through SYN-SENT): a RST
        /// in SYN-RECEIVED then means "connection refused" (§3.10.7.4).
        ACTIVE_OPEN = 3,
        /// A timer was set to fire before the promised wake-up
        /// (`Tcb::take_wake`).
        WAKE_EARLIER = 4,
    }
}
