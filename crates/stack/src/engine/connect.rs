//! Active opens: start a connection to a remote address on a local port whose return
//! flow reaches this worker. With Toeplitz RSS that is a port whose return flow the NIC
//! hashes to this worker's queue; on a link whose steering the stack cannot predict
//! (TAP, a veth under AF_XDP) it is a port this worker owns by `port % queues`, so that
//! siblings hand the flow's segments here wherever they land (the rule for every flow,
//! passive ones included, is in [`owner`](super::owner)).

use std::net::SocketAddrV4;

use super::owner::owner_queue;
use super::{Engine, FlowKey};
use crate::app::{AppCore, ConnectError, Handler, OpenResult};
use crate::io::PacketIo;
use crate::tcp::tcb::Tcb;
use crate::time::Clock;

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    /// Start the active opens the handler's callbacks asked for.
    pub(super) fn start_requested_connects(&mut self) {
        AppCore::start_requested(self, |e| &mut e.app, Self::start_connect);
    }

    pub(super) fn start_connect(
        &mut self,
        remote: SocketAddrV4,
        state: H::Conn,
    ) -> OpenResult<H::Conn> {
        // The addresses input would drop as martian sources can be no peer either; no
        // SYN goes to a broadcast, multicast or loopback address (RFC 1122 §3.2.1.3).
        if remote.port() == 0 || self.local.check_source(*remote.ip()).is_err() {
            return Err((ConnectError::InvalidAddress, state));
        }
        let state = self.app.may_open(state)?;
        let Some(port) = self.pick_port(remote) else {
            return Err((ConnectError::NoPortAvailable, state));
        };
        let key = FlowKey {
            remote_ip: *remote.ip(),
            remote_port: remote.port(),
            local_port: port,
        };
        let iss = self.isn.isn(self.local_addr(port), remote, self.now);
        let tcb = Tcb::connect(&self.opening(&key, iss));
        self.stats.conns_opened_active += 1;
        Ok(self.insert_conn(tcb, Some(state), key, None, None))
    }

    /// A free ephemeral port; on a multi-queue link one whose return flow the NIC's RSS
    /// steers to this worker's queue (as Fastsocket, mTCP and Seastar do), or, on a link
    /// without Toeplitz RSS, one this worker owns ([`owner_queue`]).
    fn pick_port(&mut self, remote: SocketAddrV4) -> Option<u16> {
        let range = self.cfg.ephemeral_ports.clone();
        let caps = self.dev.capabilities();
        let flows = &self.flows;
        let time_wait = &self.time_wait;
        let key = |local_port: u16| FlowKey {
            remote_ip: *remote.ip(),
            remote_port: remote.port(),
            local_port,
        };
        let is_free = |p: u16| !flows.contains_key(&key(p)) && !time_wait.contains(&key(p));
        let (queue, queues) = (caps.queue, caps.queue_count.max(1));
        let start = self.next_port;
        let next = |p: u16| {
            if p >= *range.end() {
                *range.start()
            } else {
                p + 1
            }
        };
        let port = match (&caps.rss, caps.queue_count > 1) {
            (Some(rss), true) => rss.pick_local_port(
                self.cfg.ip,
                *remote.ip(),
                remote.port(),
                caps.queue,
                range.clone(),
                start,
                is_free,
            ),
            _ => {
                // Without Toeplitz RSS the port itself says which queue owns the flow.
                let span = (*range.end() as u32 - *range.start() as u32 + 1) as usize;
                std::iter::successors(Some(start), |&p| Some(next(p)))
                    .take(span)
                    .find(|&p| owner_queue(&key(p), &range, queues) == queue && is_free(p))
            }
        };
        if let Some(p) = port {
            self.next_port = next(p);
        }
        port
    }
}
