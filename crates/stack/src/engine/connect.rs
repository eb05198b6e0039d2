//! Active opens: start a connection to a remote address on a local port whose return
//! flow reaches this worker. With Toeplitz RSS that is a port whose return flow the NIC
//! hashes to this worker's queue; on a link whose steering the stack cannot predict
//! (TAP, a veth under AF_XDP) it is a port this worker owns by `port % queues`, so that
//! siblings hand the flow's segments here wherever they land (the rule for every flow,
//! passive ones included, is in [`owner`](super::owner)).

use std::net::SocketAddr;

use super::ports::{Held, Steering};
use super::{Engine, FlowKey};
use crate::app::{AppCore, ConnectError, Handler, OpenResult};
use crate::io::PacketIo;
use crate::tcp::tcb::Open;
use crate::time::Clock;

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    /// Start the active opens the handler's callbacks asked for. One whose source would
    /// be an IPv6 address still being checked for duplicates waits until the check is
    /// over (a tentative address is not used, RFC 4862 §5.4), as a packet waits for its
    /// neighbour to be resolved, rather than failing: a program that connects as soon
    /// as it starts would otherwise fail for its first second. Once the engine stops
    /// accepting, or the address turns out to be another node's, they go on and fail.
    pub(super) fn start_requested_connects(&mut self) {
        // Most turns have no open to start and none held: nothing to do, and no walk over
        // the addresses for a check still running.
        if !self.app.has_requests() && self.held_connects.is_empty() {
            return;
        }
        if self.addrs.has_v6() && (self.detecting_duplicates() || !self.held_connects.is_empty()) {
            let accepting = self.app.is_accepting();
            let addrs = &self.addrs;
            self.app.hold_requests(&mut self.held_connects, |remote| {
                accepting && addrs.awaiting_source(remote.ip())
            });
        }
        AppCore::start_requested(self, |e| &mut e.app, Self::start_connect);
    }

    pub(super) fn start_connect(
        &mut self,
        remote: SocketAddr,
        state: H::Conn,
    ) -> OpenResult<H::Conn> {
        // The addresses input would drop as martian sources can be no peer either; no
        // SYN goes to a broadcast, multicast or loopback address (RFC 1122 §3.2.1.3).
        if remote.port() == 0 || !self.may_be_peer(remote.ip()) {
            return Err((ConnectError::InvalidAddress, state));
        }
        let Some(local) = self.addrs.source_for(remote.ip()) else {
            return Err((ConnectError::NoSourceAddress, state));
        };
        let state = self.app.may_open(state)?;
        let Some(port) = self.pick_port(local, remote) else {
            return Err((ConnectError::NoPortAvailable, state));
        };
        let key = FlowKey::new(remote.ip(), remote.port(), port, local);
        let hash = self.tuple_hash(&key);
        let iss = hash.isn(self.now);
        self.stats.conns_opened_active += 1;
        let id = self.insert_conn(key, iss, hash.ts_offset, Open::Active, Some(state), None);
        Ok(id)
    }

    /// A free ephemeral port; on a multi-queue link one whose return flow the NIC's RSS
    /// steers to this worker's queue (as Fastsocket, mTCP and Seastar do), or, on a link
    /// without Toeplitz RSS, one this worker owns
    /// ([`owner_queue`](super::owner::owner_queue)). Bounded work, and
    /// O(1) when the destination is out of ports: see [`ports`](super::ports).
    fn pick_port(&mut self, local: u8, remote: SocketAddr) -> Option<u16> {
        let range = &self.cfg.ephemeral_ports;
        let caps = self.dev.capabilities();
        let dest = (remote.ip(), remote.port());
        // The flow table holds both live connections and TIME-WAIT entries.
        let held = Held::of(self.flows.ports_in_use(dest));
        let flows = &self.flows;
        let is_free = |local_port: u16| {
            let key = FlowKey::new(dest.0, dest.1, local_port, local);
            !flows.contains_key(&key)
        };
        let (queue, queues) = (caps.queue, caps.queue_count.max(1));
        match (&caps.rss, queues > 1) {
            (Some(rss), true) => {
                let local_ip = self.addrs.get(local).ip;
                let queue_of = rss.return_queue_by_local_port(local_ip, dest.0, dest.1);
                let ours = |port| queue_of(port) == queue;
                let steering = Steering::Hashed(&ours);
                self.ports.pick(dest, range, &steering, held, is_free)
            }
            // Without Toeplitz RSS the port itself says which queue owns the flow
            // (`owner_queue`).
            (_, true) => {
                let steering = Steering::Modulo { queue, queues };
                self.ports.pick(dest, range, &steering, held, is_free)
            }
            _ => {
                let steering = Steering::All;
                self.ports.pick(dest, range, &steering, held, is_free)
            }
        }
    }
}
