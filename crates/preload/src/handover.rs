//! AF_XDP queues that a process hands to the children it forks.
//!
//! An AF_XDP socket is bound to one receive queue of the interface, and the memory its
//! frames live in (the UMEM) belongs to the process that mapped it. So the first
//! process of the program opens every queue of the link at once, with that memory
//! shared with the processes it forks later (`XdpConfig::fork_shared`), runs its
//! engine on the first and keeps the others spare. Each child it forks takes one spare
//! (the parent drops its copy, the child drops its copies of the rest). With no spare
//! left, a parent that has no connection hands over the queue its own engine runs on:
//! a master process never accepts, and the flows the interface steers to its queue
//! would otherwise go nowhere. Its engine then runs on no queue at all ([`Handover`]
//! receives nothing and sends nothing).
//!
//! A queue goes only from a parent to a child as it forks: a process that gets none
//! (all were handed out, or its parent has connections) makes no TCP sockets.

use std::time::Duration;

use rusty_drivers_xdp::{XdpQueue, XdpRx, XdpTx};
use rusty_stack::io::{Capabilities, Doorbell, PacketIo};

/// An AF_XDP queue that can be handed over, seen by its engine as the only queue on
/// its link: the other queues' flows belong to other processes (the engine learns that
/// the link is shared), not to sibling engines it could pass segments to.
pub(crate) struct Handover {
    queue: Option<XdpQueue>,
    caps: Capabilities,
}

impl Handover {
    pub(crate) fn new(queue: XdpQueue) -> Handover {
        let mut caps = queue.capabilities().clone();
        caps.queue = 0;
        caps.queue_count = 1;
        caps.rss = None;
        Handover {
            queue: Some(queue),
            caps,
        }
    }

    /// Give the queue up (to a child that forked with a copy of it); the engine runs
    /// on no queue from now on.
    pub(crate) fn take(&mut self) -> Option<XdpQueue> {
        self.queue.take()
    }
}

impl PacketIo for Handover {
    type Rx = XdpRx;
    type Tx = XdpTx;

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    fn receive(&mut self, out: &mut Vec<XdpRx>, max: usize) -> usize {
        self.queue.as_mut().map_or(0, |q| q.receive(out, max))
    }
    fn alloc_tx(&mut self, len: usize) -> Option<XdpTx> {
        self.queue.as_mut()?.alloc_tx(len)
    }
    fn transmit(&mut self, frames: &mut Vec<XdpTx>) {
        match self.queue.as_mut() {
            Some(q) => q.transmit(frames),
            None => frames.clear(),
        }
    }
    fn flush(&mut self) {
        if let Some(q) = self.queue.as_mut() {
            q.flush();
        }
    }
    fn wait(&mut self, timeout: Duration) {
        match self.queue.as_mut() {
            Some(q) => q.wait(timeout),
            None => std::thread::sleep(timeout.min(Duration::from_millis(1))),
        }
    }
    fn set_doorbell(&mut self, bell: Doorbell) {
        if let Some(q) = self.queue.as_mut() {
            q.set_doorbell(bell);
        }
    }
    fn pooled_bytes(&self) -> usize {
        self.queue.as_ref().map_or(0, |q| q.pooled_bytes())
    }
}
