//! Rusty's driver for Intel 82599 (ixgbe) NICs in user space, and a model of the NIC
//! written from the datasheet ("Intel 82599 10 GbE Controller Datasheet", rev. 3.3;
//! sections are cited as §x.y).
//!
//! - [`hw`]: the seam. The driver talks to a device only through [`hw::Registers`]
//!   (BAR0) and [`hw::DmaAllocator`] (memory the device reaches by bus address).
//! - [`model`]: an 82599 in software behind the same seam: register file, descriptor
//!   rings in DMA memory, RSS, checksums, with a wire side that tests (or a TAP bridge)
//!   put frames on and take frames off.
//!
//! All `unsafe` code is in [`dma`] (memory shared with the device).

pub mod dma;
pub mod hw;
pub mod model;
