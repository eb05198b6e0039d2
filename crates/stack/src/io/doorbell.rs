//! The doorbell: how a worker wakes a sibling parked in [`PacketIo::wait`].

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[cfg(doc)]
use super::PacketIo;

/// Wakes a worker parked in [`PacketIo::wait`] when a sibling hands it work through the
/// runtime's control channel (on links whose steering the stack cannot predict, the
/// segments of flows it owns), which it would otherwise see only when its wait times
/// out.
///
/// The worker creates one, hands it to its queue with [`PacketIo::set_doorbell`], and
/// gives [`Ringer`]s to its siblings. A queue that waits on file descriptors polls
/// [`Doorbell::as_fd`] along with its device, and calls [`Doorbell::drain`] when it
/// became readable.
///
/// It is a non-blocking Unix datagram socket pair. Rings coalesce: a ringer writes a
/// byte only if the bell was drained since the last one (a flag both ends share), so a
/// worker that never parks costs its siblings no system call per hand-over, and the
/// socket never fills. The bell keeps the sending end open, so its descriptor never
/// reports a hang-up.
pub struct Doorbell {
    rx: UnixDatagram,
    shared: Arc<Shared>,
}

/// Rings one [`Doorbell`]; cheap to clone and safe to use from any thread.
#[derive(Clone)]
pub struct Ringer {
    shared: Arc<Shared>,
}

/// What a bell and its ringers share: the sending end, and whether a ring would write.
struct Shared {
    tx: UnixDatagram,
    /// No byte is pending: the next ring writes one.
    armed: AtomicBool,
}

impl Doorbell {
    /// A new, silent doorbell.
    pub fn new() -> io::Result<Doorbell> {
        let (tx, rx) = UnixDatagram::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(Doorbell {
            rx,
            shared: Arc::new(Shared {
                tx,
                armed: AtomicBool::new(true),
            }),
        })
    }

    /// A ringer for this bell, to hand to the siblings that may wake its worker.
    pub fn ringer(&self) -> Ringer {
        Ringer {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Empty the bell (after it woke a wait) and re-arm it; returns whether it had
    /// rung. Never blocks.
    pub fn drain(&self) -> bool {
        let mut buf = [0u8; 16];
        let mut rung = false;
        // The loop ends on WouldBlock (empty) or any other error; the bell holds its
        // sending end, so the socket cannot report end of file.
        while self.rx.recv(&mut buf).is_ok() {
            rung = true;
        }
        // An acquiring swap, not a store: if a ringer disarmed the bell after the reads
        // above, this reads its write, so the message it sent before ringing is seen by
        // this worker's next look at its channel.
        self.shared.armed.swap(true, Ordering::AcqRel);
        rung
    }
}

impl AsFd for Doorbell {
    /// The descriptor to poll for reading: readable once the bell has rung.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.rx.as_fd()
    }
}

impl Ringer {
    /// Wake the bell's worker if it sleeps (it drains the bell when it wakes). Never
    /// blocks and never fails: a bell that is full or gone needs no more ringing.
    pub fn ring(&self) {
        let shared = &*self.shared;
        if shared.armed.swap(false, Ordering::AcqRel) {
            match shared.tx.send(&[1]) {
                Ok(_) => {}
                // Full: a byte is pending anyway.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The bell is gone, or the write failed: nothing is pending, so the next
                // ring tries again.
                Err(_) => shared.armed.store(true, Ordering::Release),
            }
        }
    }
}

impl PartialEq for Ringer {
    /// Two ringers are equal when they ring the same bell.
    fn eq(&self, other: &Ringer) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl Eq for Ringer {}

impl fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Doorbell").field("rx", &self.rx).finish()
    }
}

impl fmt::Debug for Ringer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ringer")
            .field("tx", &self.shared.tx)
            .field("armed", &self.shared.armed)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_is_drained_once_and_rearms_the_bell() {
        let bell = Doorbell::new().unwrap();
        assert!(!bell.drain(), "a silent bell drains nothing");
        let ringer = bell.ringer();
        ringer.ring();
        assert!(bell.drain());
        assert!(!bell.drain(), "drained");
        // Drained, it rings again.
        ringer.clone().ring();
        assert!(bell.drain());
    }

    #[test]
    fn rings_without_a_reader_coalesce_and_never_block() {
        let bell = Doorbell::new().unwrap();
        let ringers: Vec<Ringer> = (0..4).map(|_| bell.ringer()).collect();
        let start = std::time::Instant::now();
        for _ in 0..100_000 {
            for r in &ringers {
                r.ring();
            }
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
        let mut buf = [0u8; 16];
        assert_eq!(bell.rx.recv(&mut buf).unwrap(), 1, "one byte for all rings");
        assert!(bell.rx.recv(&mut buf).is_err(), "and nothing more");
    }

    #[test]
    fn ringing_a_dropped_bell_is_harmless() {
        let bell = Doorbell::new().unwrap();
        let ringer = bell.ringer();
        assert_eq!(ringer, bell.ringer());
        assert_ne!(ringer, Doorbell::new().unwrap().ringer());
        drop(bell);
        ringer.ring();
        ringer.ring();
    }

    #[test]
    fn a_ring_from_another_thread_is_seen() {
        let bell = Doorbell::new().unwrap();
        let ringer = bell.ringer();
        std::thread::spawn(move || ringer.ring()).join().unwrap();
        assert!(bell.drain());
    }
}
