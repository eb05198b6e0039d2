//! An Intel 82599 in software, written from the datasheet (rev. 3.3) on its own: it
//! shares no register or descriptor definitions with the driver, so a wrong offset or
//! bit on either side shows up as a failing test instead of agreeing with itself.
//!
//! [`Model::device`] gives the driver what it opens a real NIC as ([`hw::Device`]):
//! a register file ([`hw::Registers`]) and DMA memory ([`hw::DmaAllocator`]) that the
//! model reaches by bus address. [`Model::wire`] is the other side of the port: tests
//! put frames on it ([`Wire::deliver`], which runs the receive path at once) and take
//! off what the device sent ([`Wire::take_transmitted`]). Writing a transmit tail runs
//! the transmit path at once. Nothing runs on its own: no threads, no clock; what
//! "takes time" on the hardware (reset, EEPROM read, link) takes a few reads of the
//! register a driver polls.
//!
//! What a correct driver never does but a buggy one might (a ring in memory the
//! device was never given, a tail past the ring, a write during reset, a descriptor
//! type the model does not know) is logged as a [`Misuse`]; tests assert the log is
//! empty. The model never panics on what the driver or the wire give it.
//!
//! Modelled: reset and the init handshake (§4.6.3), link-up after auto-negotiation,
//! L2 filtering (RAL/RAH, BAM, MPE, UPE), RSS for TCP/IPv4, UDP/IPv4 and IPv4
//! (§7.1.2.8), advanced one-buffer receive descriptors with multi-descriptor frames
//! (§7.1.6), receive checksum checks (IPv4, TCP, UDP), CRC strip, advanced transmit
//! context and data descriptors (§7.2.3.2), IPv4/TCP/UDP checksum insertion and TSO
//! (§7.2.4-5), padding, statistics (clear on read, queue statistics mapping).
//! Not modelled: interrupts (causes are never raised; EIMS/EIMC/EICR only store),
//! VLANs, IPv6, the multicast table, DCB and virtualisation, RSC, header split,
//! flow control, head write-back, descriptor prefetch and write-back thresholds,
//! loopback, timestamps, security offloads.

mod frame;
mod memory;
mod nic;
mod regs;
mod rss;
mod rx;
mod tx;

use std::sync::{Arc, Mutex, MutexGuard};

use crate::dma::DmaRegion;
use crate::hw::{self, DmaError};

pub use regs::Dir;

/// How the model is built.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ModelConfig {
    /// The port's MAC address, as if read from the EEPROM into `RAL[0]`/`RAH[0]`.
    pub mac: [u8; 6],
    /// Bytes of DMA memory the device can hand out.
    pub arena: usize,
    /// Whether the link comes up.
    pub link: LinkMode,
}

impl ModelConfig {
    /// A port with `mac`, `arena` bytes of DMA memory and a link that comes up.
    pub fn new(mac: [u8; 6], arena: usize) -> ModelConfig {
        ModelConfig {
            mac,
            arena,
            link: LinkMode::Up,
        }
    }
}

/// The state of the cable.
// Exhaustive: a link is up or down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    /// The link comes up (LINKS.LINK_UP) a few reads after a reset or an AN restart.
    Up,
    /// No link partner: the link never comes up.
    Down,
}

/// Something the driver did that a real 82599 would misbehave on (hang, fault, drop
/// or corrupt traffic), which a correct driver never does.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Misuse {
    /// A register write while CTRL.RST still reads set (§4.6.3.2).
    WriteDuringReset {
        /// Register offset.
        reg: u32,
        /// Value written.
        value: u32,
    },
    /// A write to an offset that is no 82599 register the model knows.
    UnknownRegisterWrite {
        /// Register offset.
        reg: u32,
        /// Value written.
        value: u32,
    },
    /// A read of an offset that is no 82599 register the model knows.
    UnknownRegisterRead {
        /// Register offset.
        reg: u32,
    },
    /// A ring whose base is not 128-byte aligned.
    RingMisaligned {
        /// Receive or transmit.
        dir: Dir,
        /// Queue.
        queue: usize,
        /// RDBA/TDBA.
        base: u64,
    },
    /// A ring length (RDLEN/TDLEN) of zero or not a multiple of 128.
    RingLength {
        /// Receive or transmit.
        dir: Dir,
        /// Queue.
        queue: usize,
        /// The length register.
        len: u32,
    },
    /// A ring not inside DMA memory the device handed out.
    RingUnmapped {
        /// Receive or transmit.
        dir: Dir,
        /// Queue.
        queue: usize,
        /// Bus address.
        base: u64,
        /// Bytes.
        len: usize,
    },
    /// A tail (or head) at or past the ring's end.
    TailPastRing {
        /// Receive or transmit.
        dir: Dir,
        /// Queue.
        queue: usize,
        /// The tail written.
        tail: u32,
        /// Descriptors in the ring.
        entries: u32,
    },
    /// RDH or TDH written while the queue is enabled.
    HeadWrittenWhileEnabled {
        /// Receive or transmit.
        dir: Dir,
        /// Queue.
        queue: usize,
    },
    /// A frame was steered (queue 0, or RSS through RETA) to a queue never enabled.
    RxQueueNotEnabled {
        /// Queue.
        queue: usize,
    },
    /// A receive queue runs without SRRCTL selecting advanced one-buffer descriptors.
    RxDescriptorType {
        /// Queue.
        queue: usize,
        /// Its SRRCTL.
        srrctl: u32,
    },
    /// SRRCTL.BSIZEPACKET is zero.
    RxBufferSizeZero {
        /// Queue.
        queue: usize,
    },
    /// A receive descriptor's buffer is not inside DMA memory handed out.
    RxBufferUnmapped {
        /// Queue.
        queue: usize,
        /// Descriptor index.
        index: usize,
        /// Buffer address in the descriptor.
        addr: u64,
        /// Bytes the device needed to write there.
        len: usize,
    },
    /// HLREG0.RXCRCSTRP and RDRXCTL.CRCSTRIP disagree (§4.6.7 wants them equal).
    CrcStripMismatch {
        /// HLREG0.RXCRCSTRP.
        hlreg0: bool,
        /// RDRXCTL.CRCSTRIP.
        rdrxctl: bool,
    },
    /// MRQC selects a mode other than none or RSS (DCB, virtualisation).
    UnsupportedMrqc {
        /// The register.
        mrqc: u32,
    },
    /// Descriptors handed to a transmit queue that is not enabled, or with
    /// DMATXCTL.TE clear.
    TxQueueNotEnabled {
        /// Queue.
        queue: usize,
    },
    /// A legacy transmit descriptor (DEXT clear); the model knows only advanced ones.
    TxLegacyDescriptor {
        /// Queue.
        queue: usize,
        /// Descriptor index.
        index: usize,
    },
    /// An advanced transmit descriptor whose DTYP is neither context nor data.
    TxUnknownDescriptorType {
        /// Queue.
        queue: usize,
        /// Descriptor index.
        index: usize,
        /// DTYP.
        dtyp: u32,
    },
    /// A context descriptor with an index other than 0 or 1.
    TxContextIndex {
        /// Queue.
        queue: usize,
        /// Descriptor index.
        index: usize,
        /// IDX.
        slot: usize,
    },
    /// Offloads asked of a context slot no context descriptor has filled.
    TxContextMissing {
        /// Queue.
        queue: usize,
        /// IDX.
        slot: usize,
    },
    /// A data buffer not inside DMA memory handed out.
    TxBufferUnmapped {
        /// Queue.
        queue: usize,
        /// Descriptor index.
        index: usize,
        /// Buffer address.
        addr: u64,
        /// Bytes.
        len: usize,
    },
    /// PAYLEN is not what the packet holds: its whole length, or with TSO the bytes
    /// after the headers.
    TxPaylen {
        /// Queue.
        queue: usize,
        /// PAYLEN.
        paylen: usize,
        /// What it should have been.
        bytes: usize,
    },
    /// IFCS clear and the buffer does not end with a correct FCS: the frame would be
    /// dropped by every receiver; the model does not put it on the wire.
    TxBadFcs {
        /// Queue.
        queue: usize,
    },
    /// An offload the model does not implement, or one the context cannot describe.
    TxUnsupported {
        /// Queue.
        queue: usize,
        /// What.
        what: &'static str,
    },
}

/// What became of a frame put on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RxVerdict {
    /// Written to a queue's buffers and descriptors written back.
    Delivered {
        /// The queue.
        queue: usize,
        /// Descriptors it took (more than one when it is larger than a buffer).
        descriptors: usize,
    },
    /// The device is in reset.
    InReset,
    /// The link is down.
    LinkDown,
    /// RXCTRL.RXEN is clear.
    ReceiverDisabled,
    /// Shorter than an Ethernet header (counted in RUC).
    Runt,
    /// Longer than the largest frame allowed (counted in ROC).
    Oversize,
    /// Not for this port (L2 filters).
    Filtered,
    /// Steered to a queue that is not enabled (a misuse, counted in MPC).
    QueueDisabled {
        /// The queue.
        queue: usize,
    },
    /// Not enough free descriptors (counted in MPC): normal back-pressure.
    NoDescriptor {
        /// The queue.
        queue: usize,
    },
    /// The queue is set up wrong (a misuse was logged).
    Misconfigured {
        /// The queue.
        queue: usize,
    },
}

/// A model 82599: create it, hand [`Model::device`] to the driver, drive the wire
/// with [`Model::wire`], and check [`Model::misuse`].
pub struct Model {
    nic: Arc<Mutex<nic::Nic>>,
}

/// Lock the device; a panic elsewhere while holding the lock leaves the state usable
/// for a test's post-mortem.
fn lock(nic: &Mutex<nic::Nic>) -> MutexGuard<'_, nic::Nic> {
    nic.lock().unwrap_or_else(|e| e.into_inner())
}

impl Model {
    /// A device as after power-up.
    pub fn new(config: ModelConfig) -> Model {
        Model {
            nic: Arc::new(Mutex::new(nic::Nic::new(
                config.mac,
                config.link,
                config.arena,
            ))),
        }
    }

    /// The device as a driver opens it: registers and DMA memory, named `model`.
    pub fn device(&self) -> hw::Device {
        hw::Device {
            regs: Arc::new(ModelRegisters {
                nic: Arc::clone(&self.nic),
            }),
            dma: Box::new(ModelDma {
                nic: Arc::clone(&self.nic),
            }),
            name: "model".to_string(),
        }
    }

    /// The network side of the port.
    pub fn wire(&self) -> Wire {
        Wire {
            nic: Arc::clone(&self.nic),
        }
    }

    /// Every misuse seen so far, in order, each once.
    pub fn misuse(&self) -> Vec<Misuse> {
        lock(&self.nic).misuse.clone()
    }

    /// What a read of register `reg` would return now, without the read's side
    /// effects (clear on read, the reset and link countdowns).
    pub fn peek(&self, reg: u32) -> u32 {
        lock(&self.nic).peek(reg)
    }
}

/// The network side of the port: frames in, frames out. Cheap to clone.
#[derive(Clone)]
pub struct Wire {
    nic: Arc<Mutex<nic::Nic>>,
}

impl Wire {
    /// A frame (Ethernet header to payload, no FCS) arrives; the receive path runs
    /// now.
    pub fn deliver(&self, frame: &[u8]) -> RxVerdict {
        lock(&self.nic).receive(frame)
    }

    /// Move the frames the device has sent (no FCS), oldest first, into `out`.
    pub fn take_transmitted(&self, out: &mut Vec<Vec<u8>>) {
        out.append(&mut lock(&self.nic).wire);
    }
}

impl rusty_stack::io::FrameWire for Wire {
    fn deliver(&self, frame: &[u8]) {
        // Dropped frames are the model's business (its counters and misuse log).
        let _ = Wire::deliver(self, frame);
    }
    fn take_transmitted(&self, out: &mut Vec<Vec<u8>>) {
        Wire::take_transmitted(self, out);
    }
}

/// The register file as [`hw::Registers`].
struct ModelRegisters {
    nic: Arc<Mutex<nic::Nic>>,
}

impl hw::Registers for ModelRegisters {
    fn read(&self, reg: u32) -> u32 {
        lock(&self.nic).read(reg)
    }

    fn write(&self, reg: u32, value: u32) {
        lock(&self.nic).write(reg, value);
    }
}

/// The model's DMA memory as [`hw::DmaAllocator`].
struct ModelDma {
    nic: Arc<Mutex<nic::Nic>>,
}

impl hw::DmaAllocator for ModelDma {
    fn alloc(&mut self, size: usize, align: usize) -> Result<DmaRegion, DmaError> {
        lock(&self.nic).arena.alloc(size, align)
    }
}

#[cfg(test)]
mod tests;
