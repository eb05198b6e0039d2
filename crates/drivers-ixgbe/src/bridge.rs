//! The model's wire carried to a real link: a thread moves frames between the
//! [`model::Wire`](crate::model::Wire) and any [`PacketIo`] (a TAP device in the tests
//! and for `ixgbe-model:TAP`), so a Linux peer talks to Rusty through driver + model.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusty_stack::io::PacketIo;

use crate::model::Wire;

/// A running bridge; it stops (and its thread ends) when this is dropped.
pub struct Bridge {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<BridgeStats>>,
}

/// Frames the bridge carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeStats {
    /// From the link to the model's wire.
    pub to_model: u64,
    /// From the model's wire to the link.
    pub to_link: u64,
    /// Frames for the link it had no buffer for (dropped, as on a full wire).
    pub link_busy: u64,
}

impl Bridge {
    /// Carry frames between `wire` and `port` until dropped (or [`Bridge::stop`]).
    pub fn spawn<P>(wire: Wire, mut port: P) -> std::io::Result<Bridge>
    where
        P: PacketIo + Send + 'static,
        P::Rx: Send,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("ixgbe-model-wire".into())
            .spawn(move || {
                let mut stats = BridgeStats::default();
                let mut rx = Vec::with_capacity(64);
                let mut sent = Vec::new();
                let mut tx = Vec::with_capacity(64);
                while !flag.load(Ordering::Relaxed) {
                    port.wait(Duration::from_micros(100));
                    port.receive(&mut rx, 64);
                    for f in rx.drain(..) {
                        wire.deliver(&f);
                        stats.to_model += 1;
                    }
                    wire.take_transmitted(&mut sent);
                    for f in sent.drain(..) {
                        match port.alloc_tx(f.len()) {
                            Some(mut b) => {
                                b.copy_from_slice(&f);
                                tx.push(b);
                                stats.to_link += 1;
                            }
                            None => stats.link_busy += 1,
                        }
                    }
                    port.transmit(&mut tx);
                    port.flush();
                }
                stats
            })?;
        Ok(Bridge {
            stop,
            thread: Some(thread),
        })
    }

    /// Stop carrying frames; returns what was carried.
    pub fn stop(mut self) -> BridgeStats {
        self.halt()
    }

    fn halt(&mut self) -> BridgeStats {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.halt();
    }
}
