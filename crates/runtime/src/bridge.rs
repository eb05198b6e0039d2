//! A model device's wire carried to a real link: a thread moves frames between a
//! [`FrameWire`] (the wire side of a software model of a NIC: the 82599 model of
//! `rusty-drivers-ixgbe`, the gxio model of `rusty-drivers-mpipe`) and any [`PacketIo`]
//! (a TAP device for `ixgbe-model:TAP`), so a Linux peer talks to Rusty through a
//! driver and the model of its device.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusty_stack::io::{FrameWire, PacketIo};

/// A running bridge; it stops (and its thread ends) when this is dropped.
pub struct Bridge {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<BridgeStats>>,
}

/// Frames the bridge carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
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
    pub fn spawn<W, P>(wire: W, mut port: P) -> std::io::Result<Bridge>
    where
        W: FrameWire,
        P: PacketIo + Send + 'static,
        P::Rx: Send,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("model-wire".into())
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

#[cfg(test)]
mod tests {
    use super::*;
    use rusty_stack::io::{Capabilities, MacAddr, OwnedFrame};
    use std::collections::VecDeque;
    use std::sync::Mutex;

    /// A device that sends back every frame it receives.
    #[derive(Clone, Default)]
    struct Mirror(Arc<Mutex<Vec<Vec<u8>>>>);

    impl FrameWire for Mirror {
        fn deliver(&self, frame: &[u8]) {
            self.0.lock().unwrap().push(frame.to_vec());
        }
        fn take_transmitted(&self, out: &mut Vec<Vec<u8>>) {
            out.append(&mut self.0.lock().unwrap());
        }
    }

    /// A link end another thread can feed and read: (frames to the bridge, frames from
    /// it).
    type Queues = Arc<Mutex<(VecDeque<Vec<u8>>, Vec<Vec<u8>>)>>;

    struct Port {
        caps: Capabilities,
        q: Queues,
    }

    impl PacketIo for Port {
        type Rx = OwnedFrame;
        type Tx = OwnedFrame;
        fn capabilities(&self) -> &Capabilities {
            &self.caps
        }
        fn receive(&mut self, out: &mut Vec<OwnedFrame>, max: usize) -> usize {
            let mut q = self.q.lock().unwrap();
            let n = q.0.len().min(max);
            out.extend(q.0.drain(..n).map(|data| OwnedFrame {
                data,
                meta: Default::default(),
            }));
            n
        }
        fn alloc_tx(&mut self, len: usize) -> Option<OwnedFrame> {
            Some(OwnedFrame {
                data: vec![0; len],
                meta: Default::default(),
            })
        }
        fn transmit(&mut self, frames: &mut Vec<OwnedFrame>) {
            let mut q = self.q.lock().unwrap();
            q.1.extend(frames.drain(..).map(|f| f.data));
        }
    }

    #[test]
    fn frames_cross_both_ways_until_the_bridge_stops() {
        let q: Queues = Arc::default();
        let port = Port {
            caps: Capabilities::new(MacAddr([2, 0, 0, 0, 0, 1]), 1500),
            q: Arc::clone(&q),
        };
        let bridge = Bridge::spawn(Mirror::default(), port).expect("a thread");
        q.lock().unwrap().0.extend((0..10u8).map(|i| vec![i; 60]));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while q.lock().unwrap().1.len() < 10 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let firsts: Vec<u8> = q.lock().unwrap().1.iter().map(|f| f[0]).collect();
        assert_eq!(firsts, (0..10).collect::<Vec<u8>>());
        let stats = bridge.stop();
        assert_eq!((stats.to_model, stats.to_link), (10, 10));
    }
}
