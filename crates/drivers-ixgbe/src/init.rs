//! Bringing an 82599 up, in the datasheet's order: §4.6.3 (reset and its waits), §4.6.4
//! (link), §4.6.7 (receive), §4.6.8 (transmit), with RSS (§7.1.2.8) programmed from
//! what the stack will be told ([`Capabilities::rss`](rusty_stack::io::Capabilities)).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusty_stack::rss::RssConfig;

use crate::hw::{DmaError, Registers};
use crate::regs::*;

/// What went wrong while bringing the device up.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InitError {
    /// A bit the datasheet says becomes set (or clear) did not, in time.
    Timeout {
        /// What was waited for, in the datasheet's words.
        what: &'static str,
        /// How long.
        waited: Duration,
    },
    /// The link stayed down.
    LinkDown {
        /// How long we waited for it.
        waited: Duration,
    },
    /// More queues asked for than the driver programs RSS over (16, §7.1.2.8).
    TooManyQueues(usize),
    /// A ring size the device cannot take (a multiple of 8 descriptors, 32..=4096 here).
    RingSize(usize),
    /// DMA memory for rings or buffers.
    Dma(DmaError),
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::Timeout { what, waited } => {
                write!(f, "the 82599 did not report {what} within {waited:?}")
            }
            InitError::LinkDown { waited } => write!(
                f,
                "the link is down (no LINKS.LINK_UP within {waited:?}): check the cable or SFP+ module and the peer"
            ),
            InitError::TooManyQueues(n) => write!(
                f,
                "{n} workers asked for, but RSS spreads flows over at most 16 queues on an 82599"
            ),
            InitError::RingSize(n) => write!(
                f,
                "a ring of {n} descriptors: the 82599 takes a multiple of 8, here 32 to 4096"
            ),
            InitError::Dma(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for InitError {}

impl From<DmaError> for InitError {
    fn from(e: DmaError) -> Self {
        InitError::Dma(e)
    }
}

/// How long the waits of the bring-up may take. The datasheet's own figures are far
/// shorter (a reset completes within 1 ms, the EEPROM auto-read within 10 ms); these
/// bounds only keep a dead device from hanging the start.
pub(crate) const STEP_TIMEOUT: Duration = Duration::from_secs(1);

/// Read `reg` until `(value & mask) == want`, at most `timeout`.
pub(crate) fn wait_for(
    regs: &Arc<dyn Registers>,
    reg: u32,
    mask: u32,
    want: u32,
    what: &'static str,
    timeout: Duration,
) -> Result<u32, InitError> {
    let start = Instant::now();
    loop {
        let v = regs.read(reg);
        if v & mask == want {
            return Ok(v);
        }
        if start.elapsed() >= timeout {
            return Err(InitError::Timeout {
                what,
                waited: timeout,
            });
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn set_bits(regs: &Arc<dyn Registers>, reg: u32, bits: u32) {
    regs.write(reg, regs.read(reg) | bits);
}

fn clear_bits(regs: &Arc<dyn Registers>, reg: u32, bits: u32) {
    regs.write(reg, regs.read(reg) & !bits);
}

/// §4.6.3: mask interrupts, reset the device, mask again, wait for the EEPROM
/// auto-read and the DMA initialisation; then take the device from firmware and clear
/// the statistics (they clear on read).
pub(crate) fn reset(regs: &Arc<dyn Registers>) -> Result<(), InitError> {
    regs.write(EIMC, EIMC_ALL);
    set_bits(regs, CTRL, CTRL_RST | CTRL_LRST);
    wait_for(
        regs,
        CTRL,
        CTRL_RST,
        0,
        "CTRL.RST clear after reset",
        STEP_TIMEOUT,
    )?;
    // §4.6.3.2: wait at least 10 ms after a global reset before touching the device.
    std::thread::sleep(Duration::from_millis(10));
    regs.write(EIMC, EIMC_ALL);
    wait_for(
        regs,
        EEC,
        EEC_ARD,
        EEC_ARD,
        "EEC.ARD (EEPROM auto-read done)",
        STEP_TIMEOUT,
    )?;
    wait_for(
        regs,
        RDRXCTL,
        RDRXCTL_DMAIDONE,
        RDRXCTL_DMAIDONE,
        "RDRXCTL.DMAIDONE (DMA initialisation done)",
        STEP_TIMEOUT,
    )?;
    set_bits(regs, CTRL_EXT, CTRL_EXT_DRV_LOAD | CTRL_EXT_NS_DIS);
    for r in [GPRC, GPTC, GORCL, GORCH, GOTCL, GOTCH, MPC0] {
        regs.read(r);
    }
    Ok(())
}

/// §4.6.4: 10 GbE serial link with auto-negotiation, restarted.
pub(crate) fn start_link(regs: &Arc<dyn Registers>) {
    let autoc = regs.read(AUTOC);
    let autoc = (autoc & !(AUTOC_LMS_MASK | AUTOC_10G_PMA_PMD_MASK)) | AUTOC_LMS_10G_SERIAL;
    regs.write(AUTOC, autoc | AUTOC_AN_RESTART);
}

/// Wait for LINKS.LINK_UP; returns the speed in Mb/s.
pub(crate) fn wait_link(regs: &Arc<dyn Registers>, timeout: Duration) -> Result<u32, InitError> {
    let v = wait_for(regs, LINKS, LINKS_UP, LINKS_UP, "link up", timeout)
        .map_err(|_| InitError::LinkDown { waited: timeout })?;
    Ok(match (v >> LINKS_SPEED_SHIFT) & 0x3 {
        1 => 100,
        2 => 1_000,
        _ => 10_000,
    })
}

/// The MAC address the EEPROM loaded into receive address 0 (§8.2.3.7.9).
pub(crate) fn mac_address(regs: &Arc<dyn Registers>) -> [u8; 6] {
    let lo = regs.read(ral(0)).to_le_bytes();
    let hi = regs.read(rah(0)).to_le_bytes();
    [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1]]
}

/// §4.6.7 global part: receive off while configuring, CRC stripped (HLREG0 and
/// RDRXCTL agree), broadcasts accepted, no-snoop off; RSS (§7.1.2.8) from `rss`.
pub(crate) fn receive_global(regs: &Arc<dyn Registers>, rss: &RssConfig) {
    clear_bits(regs, RXCTRL, RXCTRL_RXEN);
    set_bits(
        regs,
        HLREG0,
        HLREG0_RXCRCSTRP | HLREG0_TXCRCEN | HLREG0_TXPADEN,
    );
    set_bits(regs, RDRXCTL, RDRXCTL_CRCSTRIP);
    set_bits(regs, FCTRL, FCTRL_BAM);
    // The RSS hash goes where the fragment checksum would (§7.1.6.2): PCSD on.
    set_bits(regs, RXCSUM, RXCSUM_PCSD);
    program_rss(regs, rss);
}

/// RSSRK, RETA and MRQC from `rss` (40-byte key, 128-entry table).
pub(crate) fn program_rss(regs: &Arc<dyn Registers>, rss: &RssConfig) {
    for (n, k) in rss.key.chunks(4).take(10).enumerate() {
        let mut word = [0u8; 4];
        word[..k.len()].copy_from_slice(k);
        regs.write(rssrk(n as u32), u32::from_le_bytes(word));
    }
    for n in 0..(RETA_ENTRIES / 4) {
        let mut word = [0u8; 4];
        for (k, b) in word.iter_mut().enumerate() {
            *b = (rss.queue_for((n * 4 + k) as u32) & 0xF) as u8;
        }
        regs.write(reta(n as u32), u32::from_le_bytes(word));
    }
    regs.write(MRQC, MRQC_RSS | MRQC_TCP_IPV4 | MRQC_IPV4);
}

/// §4.6.8 global part: the descriptor arbiter off while configuring, then on, and
/// transmit DMA enabled (queues are enabled afterwards, one by one).
pub(crate) fn transmit_global(regs: &Arc<dyn Registers>) {
    set_bits(regs, RTTDCS, RTTDCS_ARBDIS);
    clear_bits(regs, RTTDCS, RTTDCS_ARBDIS);
    set_bits(regs, DMATXCTL, DMATXCTL_TE);
}

/// Turn receive on once every queue is set up.
pub(crate) fn enable_receive(regs: &Arc<dyn Registers>) {
    set_bits(regs, RXCTRL, RXCTRL_RXEN);
}
