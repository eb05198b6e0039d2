//! IPv6 header validation and the extension-header walk
//! ([`rusty_stack::internals::ipv6::parse`]).
//!
//! The input is the packet from its fixed header on. Checked for whatever parses: the
//! upper-layer header starts after the fixed header and ends where the Payload Length
//! says, inside the input; the addresses and hop limit are the fixed header's bytes;
//! and the walk stayed within the bound on extension headers (each at most 2,048
//! bytes). An ICMPv6 payload is then read as it came and with its checksum repaired
//! (so that the message itself gets fuzzed, not only its checksum): an error's
//! invoking packet must lie inside the message, and neither read may panic.

use std::net::Ipv6Addr;

use rusty_stack::checksum;
use rusty_stack::internals::icmpv6::{self, Message, NEXT_HEADER};
use rusty_stack::internals::ipv6::{parse, HEADER_LEN, MAX_EXTENSION_HEADERS};

/// The longest extension header: 8-octet units in one length byte, plus one unit.
const LONGEST_EXTENSION: usize = 256 * 8;

/// Parse `data` as an IPv6 packet. Panics on a bug.
pub fn ipv6_header(data: &[u8]) {
    let Ok(h) = parse(data) else {
        return;
    };
    assert!(
        h.upper_offset >= HEADER_LEN,
        "upper layer inside the fixed header"
    );
    let end = h.upper_offset + h.upper.len();
    assert!(end <= data.len(), "upper layer past the input");
    let payload_len = usize::from(u16::from_be_bytes([data[4], data[5]]));
    assert_eq!(
        end,
        HEADER_LEN + payload_len,
        "not where the Payload Length ends"
    );
    let octets = |at: usize| -> [u8; 16] { data[at..at + 16].try_into().expect("16 bytes") };
    assert_eq!(h.src(), Ipv6Addr::from(octets(8)));
    assert_eq!(h.dst(), Ipv6Addr::from(octets(24)));
    assert_eq!(h.hop_limit(), data[7]);
    assert!(
        h.upper_offset - HEADER_LEN <= MAX_EXTENSION_HEADERS * LONGEST_EXTENSION,
        "walked further than the bound allows"
    );
    if h.protocol == NEXT_HEADER {
        let icmp = &data[h.upper_offset..end];
        let _ = icmpv6::parse(icmp, h.src(), h.dst(), h.hop_limit());
        if icmp.len() >= 8 {
            let mut sealed = icmp.to_vec();
            sealed[2..4].fill(0);
            let pseudo = checksum::pseudo_header_v6(
                h.src().octets(),
                h.dst().octets(),
                NEXT_HEADER,
                sealed.len() as u32,
            );
            let c = checksum::finish(checksum::combine(pseudo, checksum::sum(&sealed)));
            sealed[2..4].copy_from_slice(&c.to_be_bytes());
            match icmpv6::parse(&sealed, h.src(), h.dst(), h.hop_limit()) {
                Ok(Message::Error { invoking, .. }) => {
                    assert_eq!(invoking, &sealed[8..], "the invoking packet is the rest")
                }
                Ok(_) => {}
                Err(e) => assert_ne!(e, icmpv6::Icmpv6Error::Checksum, "a sealed message"),
            }
        }
    }
}
