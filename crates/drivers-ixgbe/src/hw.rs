//! The seam between the driver and a device: its register space and the memory it
//! reaches by DMA. The driver is written against these two traits only, so the same
//! code runs on a real 82599 (VFIO, or the sysfs BAR with hugepages) and on the model
//! of the NIC in [`crate::model`], which implements them from the datasheet.

use std::fmt;
use std::sync::Arc;

pub use crate::dma::DmaRegion;

/// A device's register space (the 82599's BAR0): 32-bit registers at byte offsets
/// (datasheet §8.2). Shared by every queue of the device, so `&self`; a real mapping
/// is plain memory-mapped IO, the model locks its register file.
pub trait Registers: Send + Sync {
    /// Read the register at byte offset `reg`. Some registers change on read
    /// (statistics clear on read, datasheet §8.2.3.23).
    fn read(&self, reg: u32) -> u32;
    /// Write `value` to the register at byte offset `reg`.
    fn write(&self, reg: u32, value: u32);
}

/// Where DMA memory comes from: hugepages with their physical addresses, a VFIO
/// container's IOMMU mappings, or the model's own arena.
pub trait DmaAllocator: Send {
    /// `size` bytes, zeroed, contiguous in the device's (bus) address space and aligned
    /// there to `align` (a power of two, at most 4096).
    fn alloc(&mut self, size: usize, align: usize) -> Result<DmaRegion, DmaError>;
}

/// Why DMA memory could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DmaError {
    /// No memory of that size left (hugepages, the IOMMU, the model's arena).
    Exhausted {
        /// Bytes asked for.
        size: usize,
    },
    /// The system said no (mapping, pinning, translating), with its words.
    System(String),
}

impl fmt::Display for DmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DmaError::Exhausted { size } => write!(f, "no DMA memory left for {size} bytes"),
            DmaError::System(e) => write!(f, "DMA memory: {e}"),
        }
    }
}

impl std::error::Error for DmaError {}

/// What keeps a [`DmaRegion`]'s memory alive and mapped (its owner decides how it is
/// released: unmapping hugepages, unmapping from the IOMMU, the model's arena).
pub trait DmaBacking: Send + Sync {}

impl<T: Send + Sync> DmaBacking for T {}

/// A device: its registers and its DMA memory, as the driver opens it.
pub struct Device {
    /// The register space.
    pub regs: Arc<dyn Registers>,
    /// Where rings and buffers come from.
    pub dma: Box<dyn DmaAllocator>,
    /// A name for messages: the PCI address, or `model`.
    pub name: String,
}
