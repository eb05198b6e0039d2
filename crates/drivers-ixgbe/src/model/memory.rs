//! The model's DMA memory: heap regions handed out at made-up bus addresses, and the
//! reverse map the device uses to turn a bus address from a register or a descriptor
//! back into memory. An address outside every region handed out is what an IOMMU
//! would fault on; the model reports it as a misuse instead of touching anything.

use std::collections::BTreeMap;

use crate::dma::DmaRegion;
use crate::hw::DmaError;

/// Where the first region goes in the device's address space: above 4 GiB, so that a
/// driver dropping the high half of an address (RDBAH, TDBAH, buffer addresses) is
/// caught.
const BUS_START: u64 = 0x1_0000_0000;
/// Unmapped space left after every region, so that running off the end of one region
/// does not land in the next.
const GUARD: u64 = 0x1000;

/// Regions handed out, by bus address.
pub(crate) struct Arena {
    regions: BTreeMap<u64, DmaRegion>,
    next: u64,
    used: usize,
    limit: usize,
}

impl Arena {
    /// An arena that hands out at most `limit` bytes.
    pub(crate) fn new(limit: usize) -> Arena {
        Arena {
            regions: BTreeMap::new(),
            next: BUS_START,
            used: 0,
            limit,
        }
    }

    /// `size` zeroed bytes aligned to `align` in bus space (and in memory).
    pub(crate) fn alloc(&mut self, size: usize, align: usize) -> Result<DmaRegion, DmaError> {
        if !align.is_power_of_two() || align > 4096 {
            return Err(DmaError::System(format!(
                "alignment {align} is not a power of two up to 4096"
            )));
        }
        if self.used.saturating_add(size) > self.limit {
            return Err(DmaError::Exhausted { size });
        }
        let bus = self.next.next_multiple_of(align as u64);
        let region = DmaRegion::heap(size, align, bus);
        self.regions.insert(bus, region.clone());
        self.used += size;
        self.next = (bus + size as u64 + GUARD).next_multiple_of(GUARD);
        Ok(region)
    }

    /// The region holding all of `bus..bus + len` and the offset of `bus` in it, or
    /// `None` when any of it is outside memory handed out.
    pub(crate) fn find(&self, bus: u64, len: usize) -> Option<(&DmaRegion, usize)> {
        let (&start, region) = self.regions.range(..=bus).next_back()?;
        let off = usize::try_from(bus - start).ok()?;
        (off.checked_add(len)? <= region.len()).then_some((region, off))
    }

    /// Read `out.len()` bytes at `bus`; false (nothing read) when unmapped.
    pub(crate) fn read(&self, bus: u64, out: &mut [u8]) -> bool {
        match self.find(bus, out.len()) {
            Some((r, off)) => {
                r.copy_to(off, out);
                true
            }
            None => false,
        }
    }

    /// Write `data` at `bus`; false (nothing written) when unmapped.
    pub(crate) fn write(&self, bus: u64, data: &[u8]) -> bool {
        match self.find(bus, data.len()) {
            Some((r, off)) => {
                r.copy_from(off, data);
                true
            }
            None => false,
        }
    }

    /// The 16-byte descriptor at `bus` as two little-endian qwords, read whole.
    pub(crate) fn read_desc(&self, bus: u64) -> Option<[u64; 2]> {
        let (r, off) = self.find(bus, 16)?;
        if off % 8 != 0 {
            return None;
        }
        Some([r.read_u64(off), r.read_u64(off + 8)])
    }

    /// Write the descriptor at `bus`: the first qword, then the second (which holds
    /// the DD bit on receive, so the driver sees it last).
    pub(crate) fn write_desc(&self, bus: u64, desc: [u64; 2]) -> bool {
        match self.find(bus, 16) {
            Some((r, off)) if off % 8 == 0 => {
                r.write_u64(off, desc[0]);
                r.write_u64(off + 8, desc[1]);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_aligned_apart_and_found_again() {
        let mut a = Arena::new(1 << 20);
        let r1 = a.alloc(100, 128).unwrap();
        let r2 = a.alloc(4096, 4096).unwrap();
        assert_eq!(r1.bus(0) % 128, 0);
        assert_eq!(r2.bus(0) % 4096, 0);
        assert!(r2.bus(0) >= r1.bus(100) + GUARD);
        assert!(a.write(r1.bus(90), &[1; 10]));
        assert!(!a.write(r1.bus(95), &[1; 10]), "runs past the region");
        assert!(!a.write(r1.bus(0) - 1, &[1]), "before the first region");
        let mut b = [0u8; 10];
        assert!(a.read(r1.bus(90), &mut b));
        assert_eq!(b, [1; 10]);
        assert_eq!(
            a.alloc(1 << 20, 8).err(),
            Some(DmaError::Exhausted { size: 1 << 20 })
        );
    }
}
