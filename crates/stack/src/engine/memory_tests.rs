//! What an idle established connection costs the server engine, part by part: the
//! inline sizes behind the README's "Memory per connection" table, pinned so that a
//! regression shows. (Heap bytes per connection, measured with a counting allocator,
//! are `tests/memory.rs`'s.)

use std::mem::size_of;

use super::*;
use crate::tcp::tcb;

#[test]
fn print_sizes() {
    for (name, size) in tcb::part_sizes() {
        println!("{name:32} {size:5}");
    }
    println!("{:32} {:5}", "Block", size_of::<Block>());
    println!(
        "{:32} {:5}",
        "slab entry (Slot<Block, ()>)",
        crate::app::slot_bytes::<Block, ()>()
    );
    println!(
        "{:32} {:5}",
        "flow-table bucket",
        size_of::<(FlowKey, u32)>()
    );
    println!("{:32} {:5}", "FlowKey", size_of::<FlowKey>());
    println!("{:32} {:5}", "TimerItem", size_of::<TimerItem>());
}
