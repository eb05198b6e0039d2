//! The device's state and its register file: what a read returns and what a write
//! does (§8.2.3), the global reset (§4.6.3.2) and the bits that come up "some time"
//! after it. Time is counted in reads of the register a driver polls, so the model
//! stays deterministic: CTRL.RST reads set for [`RESET_READS`] reads of CTRL, EEC.ARD
//! and RDRXCTL.DMAIDONE come up after [`INIT_READS`] reads of their registers, and
//! the link after [`LINK_READS`] reads of LINKS or STATUS.

use std::collections::HashMap;

use super::memory::Arena;
use super::regs::{self, Dir};
use super::tx::TxQueue;
use super::{LinkMode, Misuse};

/// Reads of CTRL that still see RST set after a reset is started.
pub(crate) const RESET_READS: u32 = 2;
/// Reads of EEC (RDRXCTL) before ARD (DMAIDONE) is set after a reset.
pub(crate) const INIT_READS: u32 = 3;
/// Reads of LINKS or STATUS before the link is up after a reset or an AN restart.
pub(crate) const LINK_READS: u32 = 3;

/// The whole device: register file, queue state, DMA memory, the wire's output and
/// the misuse log. One lock guards it; every entry point runs to completion under it.
pub(crate) struct Nic {
    mac: [u8; 6],
    link: LinkMode,
    /// Plain register storage by canonical offset.
    regs: HashMap<u32, u32>,
    /// Statistics counters by canonical offset (the low half of 64-bit pairs).
    counters: HashMap<u32, u64>,
    eicr: u32,
    eims: u32,
    rst_reads: u32,
    ard_reads: u32,
    dmaidone_reads: u32,
    link_reads: u32,
    pub(crate) txq: Vec<TxQueue>,
    pub(crate) arena: Arena,
    pub(crate) wire: Vec<Vec<u8>>,
    pub(crate) misuse: Vec<Misuse>,
}

/// The canonical offset of `reg`: the 82599 address of registers that also have an
/// 82598-compatible alias.
fn canonical(reg: u32) -> u32 {
    let within = |start, count, stride| regs::array_index(reg, start, count, stride);
    if let Some(n) = within(regs::SRRCTL_ALIAS, 16, 4) {
        return rxq(n as usize, regs::SRRCTL);
    }
    if let Some(n) = within(regs::DCA_RXCTRL_ALIAS, 16, 4) {
        return rxq(n as usize, regs::DCA_RXCTRL);
    }
    if (regs::RAL_ALIAS..regs::RAL_ALIAS + 16 * 8).contains(&reg) {
        return regs::RAL + (reg - regs::RAL_ALIAS);
    }
    if reg == regs::MRQC_ALIAS {
        return regs::MRQC;
    }
    if let Some(n) = within(regs::RETA_ALIAS, 32, 4) {
        return regs::RETA + 4 * n;
    }
    if let Some(n) = within(regs::RSSRK_ALIAS, 10, 4) {
        return regs::RSSRK + 4 * n;
    }
    if let Some(n) = within(regs::TXQ_BASE + regs::QPTC_ALIAS, 16, regs::QUEUE_STRIDE) {
        return regs::QPTC + 4 * n;
    }
    reg
}

/// Receive queue `q`'s register at `off`.
pub(crate) fn rxq(q: usize, off: u32) -> u32 {
    regs::RXQ_BASE + regs::QUEUE_STRIDE * q as u32 + off
}

/// Transmit queue `q`'s register at `off`.
pub(crate) fn txq(q: usize, off: u32) -> u32 {
    regs::TXQ_BASE + regs::QUEUE_STRIDE * q as u32 + off
}

/// For the high half of a 64-bit statistics pair, the low half's offset.
fn high_half(reg: u32) -> Option<u32> {
    match reg {
        regs::GORCH | regs::GOTCH | 0x40C4 => return Some(reg - 4),
        _ => {}
    }
    if (regs::QBTC_L..regs::QBTC_L + 16 * 8).contains(&reg) && (reg - regs::QBTC_L) % 8 == 4 {
        return Some(reg - 4);
    }
    match regs::queue_reg(reg) {
        Some((Dir::Rx, _, regs::QBRC_H)) => Some(reg - 4),
        _ => None,
    }
}

/// Whether `reg` is a clear-on-read statistics counter (§8.2.3.23).
fn is_counter(reg: u32) -> bool {
    let in_array = |start, count, stride| regs::array_index(reg, start, count, stride).is_some();
    (regs::STATS_START..regs::STATS_END).contains(&reg)
        || in_array(regs::MPC, 8, 4)
        || in_array(regs::QPRDC_BASE, 16, regs::QUEUE_STRIDE)
        || in_array(regs::QPTC, 16, 4)
        || in_array(regs::QBTC_L, 32, 4)
        || matches!(
            regs::queue_reg(reg),
            Some((Dir::Rx, _, regs::QPRC | regs::QBRC_L | regs::QBRC_H))
        )
}

impl Nic {
    /// A device as after power-up: registers at their defaults, the EEPROM read, the
    /// link coming up once polled (unless configured down).
    pub(crate) fn new(mac: [u8; 6], link: LinkMode, arena: usize) -> Nic {
        let mut nic = Nic {
            mac,
            link,
            regs: HashMap::new(),
            counters: HashMap::new(),
            eicr: 0,
            eims: 0,
            rst_reads: 0,
            ard_reads: 0,
            dmaidone_reads: 0,
            link_reads: 0,
            txq: Vec::new(),
            arena: Arena::new(arena),
            wire: Vec::new(),
            misuse: Vec::new(),
        };
        nic.reset();
        nic.rst_reads = 0;
        nic.ard_reads = 0;
        nic.dmaidone_reads = 0;
        nic
    }

    /// Global reset (§4.6.3.2): every register back to its default, queues disabled,
    /// statistics cleared, the MAC address reloaded "from the EEPROM". DMA memory, the
    /// wire's output and the misuse log are the test's, not the device's: they stay.
    fn reset(&mut self) {
        self.regs.clear();
        self.counters.clear();
        self.eicr = 0;
        self.eims = 0;
        self.txq = (0..regs::QUEUES).map(|_| TxQueue::default()).collect();
        let m = self.mac;
        let defaults = [
            (
                regs::HLREG0,
                regs::HLREG0_TXCRCEN | regs::HLREG0_RXCRCSTRP | regs::HLREG0_TXPADEN,
            ),
            (regs::MAXFRS, 1518 << 16),
            (regs::DTXTCPFLGL, regs::DTXTCPFLGL_DEFAULT),
            (regs::DTXTCPFLGH, regs::DTXTCPFLGH_DEFAULT),
            (regs::EEC, regs::EEC_PRES),
            (regs::RAL, u32::from_le_bytes([m[0], m[1], m[2], m[3]])),
            (
                regs::RAL + 4,
                u32::from(u16::from_le_bytes([m[4], m[5]])) | regs::RAH_AV,
            ),
            (0x8804, 1), // SECTXSTAT.SECTX_RDY
            (0x8D04, 1), // SECRXSTAT.SECRX_RDY
        ];
        self.regs.extend(defaults);
        for q in 0..regs::QUEUES {
            self.regs.insert(rxq(q, regs::SRRCTL), regs::SRRCTL_DEFAULT);
        }
        self.rst_reads = RESET_READS;
        self.ard_reads = INIT_READS;
        self.dmaidone_reads = INIT_READS;
        self.link_reads = LINK_READS;
    }

    /// Record a misuse once (a driver looping on a mistake logs it once).
    pub(crate) fn misuse(&mut self, m: Misuse) {
        if !self.misuse.contains(&m) {
            log::debug!("ixgbe model: misuse: {m:?}");
            self.misuse.push(m);
        }
    }

    /// A register's stored value (no side effects, no computed bits).
    pub(crate) fn reg(&self, reg: u32) -> u32 {
        self.regs.get(&reg).copied().unwrap_or(0)
    }

    /// Store a register's value (also for registers the device owns, a queue's head).
    pub(crate) fn store(&mut self, reg: u32, value: u32) {
        self.regs.insert(reg, value);
    }

    /// Whether the link is up now.
    pub(crate) fn link_up(&self) -> bool {
        self.link == LinkMode::Up && self.link_reads == 0
    }

    /// Whether a reset is still in progress (CTRL.RST still reads set).
    pub(crate) fn in_reset(&self) -> bool {
        self.rst_reads > 0
    }

    /// Add `n` to a statistics counter.
    pub(crate) fn count(&mut self, reg: u32, n: u64) {
        let c = self.counters.entry(reg).or_insert(0);
        *c = c.saturating_add(n);
    }

    /// The statistics set queue `q` counts into (RQSMR/TQSM, §8.2.3.23.70 and .75):
    /// four queues a register, the set in bits 3:0 of each byte; all queues count into
    /// set 0 until mapped.
    pub(crate) fn stat_set(&self, dir: Dir, q: usize) -> u32 {
        let base = match dir {
            Dir::Rx => regs::RQSMR,
            Dir::Tx => regs::TQSM,
        };
        (self.reg(base + 4 * (q as u32 / 4)) >> (8 * (q % 4))) & 0xF
    }

    /// What a read of `reg` returns now, without its side effects.
    pub(crate) fn peek(&self, reg: u32) -> u32 {
        let reg = canonical(reg);
        let v = self.reg(reg);
        match reg {
            regs::CTRL if self.rst_reads > 0 => v | regs::CTRL_RST,
            regs::STATUS => {
                let mut s = 0;
                if self.link_up() {
                    s |= regs::STATUS_LINK_UP;
                }
                if self.reg(regs::CTRL) & regs::CTRL_MASTER_DISABLE == 0 {
                    s |= regs::STATUS_MASTER_ENABLE;
                }
                s
            }
            regs::EEC if self.ard_reads == 0 => v | regs::EEC_ARD,
            regs::RDRXCTL if self.dmaidone_reads == 0 => v | regs::RDRXCTL_DMAIDONE,
            regs::LINKS if self.link_up() => {
                regs::LINKS_UP | regs::LINKS_STATUS | regs::LINKS_SPEED_10G
            }
            regs::LINKS => 0,
            regs::EICR => self.eicr,
            regs::EIMS => self.eims,
            regs::EIMC | regs::EICS => 0,
            _ if is_counter(reg) => {
                let (low, shift) = match high_half(reg) {
                    Some(low) => (low, 32),
                    None => (reg, 0),
                };
                let c = self.counters.get(&low).copied().unwrap_or(0);
                if shift == 0 && high_half(reg + 4).is_some() {
                    c as u32
                } else if shift == 32 {
                    (c >> 32) as u32
                } else {
                    c.min(u64::from(u32::MAX)) as u32
                }
            }
            _ => v,
        }
    }

    /// A driver's read of `reg`: its value, then the read's side effects (countdowns,
    /// clear on read).
    pub(crate) fn read(&mut self, reg: u32) -> u32 {
        let reg = canonical(reg);
        if !regs::known(reg) {
            self.misuse(Misuse::UnknownRegisterRead { reg });
            return 0;
        }
        let v = self.peek(reg);
        match reg {
            regs::CTRL => self.rst_reads = self.rst_reads.saturating_sub(1),
            regs::EEC => self.ard_reads = self.ard_reads.saturating_sub(1),
            regs::RDRXCTL => self.dmaidone_reads = self.dmaidone_reads.saturating_sub(1),
            regs::LINKS | regs::STATUS => self.link_reads = self.link_reads.saturating_sub(1),
            regs::EICR => self.eicr = 0,
            _ if is_counter(reg) => {
                // A 64-bit pair clears when its high half is read; the low half of a
                // pair is latched until then.
                if let Some(low) = high_half(reg) {
                    self.counters.remove(&low);
                } else if high_half(reg + 4).is_none() {
                    self.counters.remove(&reg);
                }
            }
            _ => {}
        }
        v
    }

    /// A driver's write of `value` to `reg`.
    pub(crate) fn write(&mut self, reg: u32, value: u32) {
        let reg = canonical(reg);
        if self.in_reset() {
            self.misuse(Misuse::WriteDuringReset { reg, value });
            return;
        }
        if !regs::known(reg) {
            self.misuse(Misuse::UnknownRegisterWrite { reg, value });
            self.store(reg, value);
            return;
        }
        match reg {
            regs::CTRL if value & regs::CTRL_RST != 0 => self.reset(),
            regs::CTRL => {
                if value & regs::CTRL_LRST != 0 {
                    self.link_reads = LINK_READS;
                }
                self.store(reg, value & !regs::CTRL_LRST);
            }
            regs::AUTOC => {
                if value & regs::AUTOC_RESTART_AN != 0 {
                    self.link_reads = LINK_READS;
                }
                self.store(reg, value & !regs::AUTOC_RESTART_AN);
            }
            regs::EICR => self.eicr &= !value,
            regs::EICS => self.eicr |= value,
            regs::EIMS => self.eims |= value,
            regs::EIMC => self.eims &= !value,
            // Read-only: status, and the statistics (cleared by reading them).
            regs::STATUS | regs::LINKS => {}
            _ if is_counter(reg) => {}
            regs::DMATXCTL => {
                self.store(reg, value);
                if value & regs::DMATXCTL_TE != 0 {
                    for q in 0..regs::QUEUES {
                        self.transmit(q);
                    }
                }
            }
            _ => match regs::queue_reg(reg) {
                Some((dir, q, off)) if q < regs::QUEUES => self.write_queue(dir, q, off, value),
                _ => self.store(reg, value),
            },
        }
    }

    fn write_queue(&mut self, dir: Dir, q: usize, off: u32, value: u32) {
        let (ctl, head, tail) = match dir {
            Dir::Rx => (regs::RXDCTL, regs::RDH, regs::RDT),
            Dir::Tx => (regs::TXDCTL, regs::TDH, regs::TDT),
        };
        let reg = match dir {
            Dir::Rx => rxq(q, off),
            Dir::Tx => txq(q, off),
        };
        let was_enabled = self.queue_enabled(dir, q);
        if off == head && was_enabled {
            // §8.2.3.8.3 / §8.2.3.9.8: the head is the device's once the queue runs.
            self.misuse(Misuse::HeadWrittenWhileEnabled { dir, queue: q });
        }
        self.store(
            reg,
            if off == head || off == tail {
                value & 0xFFFF
            } else {
                value
            },
        );
        if off == tail && was_enabled {
            let (_, entries) = self.ring(dir, q);
            if value >= entries {
                self.misuse(Misuse::TailPastRing {
                    dir,
                    queue: q,
                    tail: value,
                    entries,
                });
            }
        }
        if off == ctl && !was_enabled && value & regs::QUEUE_ENABLE != 0 {
            self.check_ring(dir, q);
            if dir == Dir::Rx {
                self.check_srrctl(q);
            }
        }
        if dir == Dir::Tx {
            if off == ctl && value & regs::QUEUE_ENABLE == 0 {
                self.txq[q] = TxQueue::default();
            }
            if off == tail || off == ctl {
                self.transmit(q);
            }
        }
    }

    /// Whether queue `q` is enabled (RXDCTL/TXDCTL.ENABLE).
    pub(crate) fn queue_enabled(&self, dir: Dir, q: usize) -> bool {
        let reg = match dir {
            Dir::Rx => rxq(q, regs::RXDCTL),
            Dir::Tx => txq(q, regs::TXDCTL),
        };
        self.reg(reg) & regs::QUEUE_ENABLE != 0
    }

    /// Queue `q`'s ring: bus address and number of descriptors.
    pub(crate) fn ring(&self, dir: Dir, q: usize) -> (u64, u32) {
        let (bal, bah, len) = match dir {
            Dir::Rx => (
                rxq(q, regs::RDBAL),
                rxq(q, regs::RDBAH),
                rxq(q, regs::RDLEN),
            ),
            Dir::Tx => (
                txq(q, regs::TDBAL),
                txq(q, regs::TDBAH),
                txq(q, regs::TDLEN),
            ),
        };
        let base = u64::from(self.reg(bah)) << 32 | u64::from(self.reg(bal));
        (base, self.reg(len) / 16)
    }

    /// Descriptor `index` of queue `q`'s ring: its bus address and its two qwords;
    /// `None` (a misuse logged) when the ring is not in DMA memory.
    pub(crate) fn fetch_desc(
        &mut self,
        dir: Dir,
        queue: usize,
        index: u32,
    ) -> Option<(u64, [u64; 2])> {
        let (base, entries) = self.ring(dir, queue);
        let at = base + 16 * u64::from(index);
        let desc = self.arena.read_desc(at);
        if desc.is_none() {
            self.misuse(Misuse::RingUnmapped {
                dir,
                queue,
                base,
                len: entries as usize * 16,
            });
        }
        Some((at, desc?))
    }

    /// The checks of §7.1.9 / §7.2.3.3 a ring must pass when its queue is enabled:
    /// base 128-byte aligned, length a non-zero multiple of 128, all in DMA memory.
    fn check_ring(&mut self, dir: Dir, queue: usize) {
        let (base, entries) = self.ring(dir, queue);
        let len = entries as usize * 16;
        if base % 128 != 0 {
            self.misuse(Misuse::RingMisaligned { dir, queue, base });
        }
        let len_reg = match dir {
            Dir::Rx => self.reg(rxq(queue, regs::RDLEN)),
            Dir::Tx => self.reg(txq(queue, regs::TDLEN)),
        };
        if len_reg == 0 || len_reg % 128 != 0 {
            self.misuse(Misuse::RingLength {
                dir,
                queue,
                len: len_reg,
            });
        } else if self.arena.find(base, len).is_none() {
            self.misuse(Misuse::RingUnmapped {
                dir,
                queue,
                base,
                len,
            });
        }
    }

    /// SRRCTL must select advanced one-buffer descriptors and a non-zero buffer size
    /// before the queue receives (§4.6.7.1).
    pub(crate) fn check_srrctl(&mut self, queue: usize) -> bool {
        let srrctl = self.reg(rxq(queue, regs::SRRCTL));
        if srrctl & regs::SRRCTL_DESCTYPE_MASK != regs::SRRCTL_DESCTYPE_ADV_ONEBUF {
            self.misuse(Misuse::RxDescriptorType { queue, srrctl });
            return false;
        }
        if srrctl & regs::SRRCTL_BSIZEPACKET_MASK == 0 {
            self.misuse(Misuse::RxBufferSizeZero { queue });
            return false;
        }
        true
    }
}
