//! What an idle established connection costs the server engine, part by part: the
//! inline sizes behind the README's "Memory per connection" table, pinned so that a
//! regression shows (`cargo test -p rusty-stack --lib engine::tests --
//! --nocapture` prints the table). The heap an idle connection holds besides is measured by
//! `examples/million.rs`.

use std::mem::size_of;

use super::*;
use crate::tcp::tcb;

/// Upper bounds, in bytes on a 64-bit target, of the parts an idle connection keeps
/// inline. Raise one only knowingly: each byte is a megabyte per million connections.
const PINS: &[(&str, usize)] = &[
    ("Tcb", 400),
    ("SendSeq (incl. SendBuffer)", 104),
    ("RecvSeq (incl. RecvBuffer)", 80),
    ("Recovery", 16),
    ("PendingOutput", 1),
    ("RttEstimator", 13),
    ("Cc", 48),
    ("TimerTable", 56),
    ("RackKeep", 7),
    ("Block", 448),
    ("table entry (Slot<Block, ()>)", 456),
    ("flow-table bucket (IPv4)", 12),
    ("flow-table bucket (IPv6)", 32),
];

#[test]
#[cfg(target_pointer_width = "64")]
fn an_idle_connection_stays_within_its_sizes() {
    let mut parts = tcb::part_sizes();
    parts.extend([
        ("Block", size_of::<Block>()),
        (
            "table entry (Slot<Block, ()>)",
            crate::app::slot_bytes::<Block, ()>(),
        ),
        (
            "flow-table bucket (IPv4)",
            size_of::<(flow_key::V4Key, u32)>(),
        ),
        (
            "flow-table bucket (IPv6)",
            size_of::<(flow_key::V6Key, u32)>(),
        ),
        ("timer-wheel entry", size_of::<(u64, TimerItem)>()),
    ]);
    for (name, size) in &parts {
        println!("{name:32} {size:5}");
    }
    for &(name, pin) in PINS {
        let size = parts
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, s)| s)
            .unwrap_or_else(|| panic!("no part named {name}"));
        assert!(size <= pin, "{name} is {size} bytes, pinned at {pin}");
    }
}
