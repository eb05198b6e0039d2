//! Views of an engine's bookkeeping for Rusty's own integration tests, which check
//! invariants no application can observe: which rings are held, how many timer entries
//! are pending, what the flow table maps a key to, what the port search cost, which
//! IPv6 addresses are usable, what the neighbour cache holds. Built with the
//! `internals` feature only; not an API.

use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use super::{Engine, Flow, FlowKey};
use crate::app::{ConnId, Handler};
use crate::arp::cache::Nud;
use crate::io::{MacAddr, PacketIo};
use crate::tcp::segment::{Segment, TxSegment};
use crate::tcp::seq::SeqNum;
use crate::time::{Clock, Instant};

/// How long a connection's drained send ring stays held before it goes back to the
/// pool (one to two of these after the connection goes quiet).
pub const IDLE_RING_RELEASE: Duration = super::IDLE_RING_RELEASE;

/// A read-only view of an [`Engine`]'s internals ([`Engine::internals`]).
pub struct EngineInternals<'a, D: PacketIo, H: Handler, C: Clock> {
    engine: &'a Engine<D, H, C>,
}

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    /// A view of this engine's bookkeeping.
    pub fn internals(&self) -> EngineInternals<'_, D, H, C> {
        EngineInternals { engine: self }
    }

    /// Abort connection `id` as its application would and finish the turn; whether
    /// the connection is gone afterwards (`false` also when `id` was not live).
    pub fn abort_internal(&mut self, id: ConnId) -> bool {
        let Some(index) = self.app.index_of(id) else {
            return false;
        };
        self.app[index].tcb.abort();
        self.mark_dirty(index);
        self.end_turn();
        self.app.index_of(id).is_none()
    }

    /// Queue frame `buf` for the device as the output path does (`tso`: it is a TSO
    /// frame), with the output path's MTU check.
    pub fn push_tx_internal(&mut self, buf: D::Tx, tso: bool) {
        self.push_tx(buf, tso);
    }

    /// Hand the queued frames to the device.
    pub fn submit_internal(&mut self) {
        self.submit();
    }

    /// Send `seg` on `key` to `mac` directly, past every check of the output path.
    pub fn send_raw_internal(&mut self, mac: MacAddr, key: FlowKey, seg: &TxSegment) {
        self.send_raw(mac, key, seg);
    }

    /// Hand a parsed segment from `mac` to the listener path directly, past the
    /// checks of the receive path that come before it.
    pub fn listen_input_internal(
        &mut self,
        mac: MacAddr,
        key: FlowKey,
        seg: &Segment,
        payload: &[u8],
    ) {
        self.listen_input(mac, key, seg, payload, None);
    }
}

impl<D: PacketIo, H: Handler, C: Clock> EngineInternals<'_, D, H, C> {
    /// Bytes of ring storage the engine's buffer pool has handed out.
    pub fn buffers_in_use(&self) -> usize {
        self.engine.pool.in_use()
    }

    /// Bytes of ring storage the pool keeps idle for reuse.
    pub fn idle_buffer_bytes(&self) -> usize {
        self.engine.pool.idle_bytes()
    }

    /// Connections listed as keeping an empty send ring, to be swept when quiet.
    pub fn ring_keepers(&self) -> usize {
        self.engine.ring_keepers.len()
    }

    /// Entries pending on the timer wheel.
    pub fn pending_timers(&self) -> usize {
        self.engine.timers.len()
    }

    /// What the flow table maps `key` to.
    pub fn flow(&self, key: &FlowKey) -> Option<Flow> {
        self.engine.flows.get(key)
    }

    /// Each live connection's table index and flow key.
    pub fn connections(&self) -> impl Iterator<Item = (usize, FlowKey)> + '_ {
        self.engine.app.iter().map(|(index, b)| (index, b.key))
    }

    /// Whether the connection at table index `index` keeps only an empty send ring
    /// (everything it sent is acknowledged).
    pub fn holds_idle_send_ring(&self, index: usize) -> bool {
        self.engine.app[index].tcb.holds_idle_send_ring()
    }

    /// Ports the active-open port search has checked, and the walks it made.
    pub fn port_search_cost(&self) -> (u64, u64) {
        (self.engine.ports.probes, self.engine.ports.walks)
    }

    /// The engine's idea of now, as of its last turn.
    pub fn now(&self) -> Instant {
        self.engine.now
    }

    /// The SYN cookie (the ISN of our SYN-ACK) the engine would answer a SYN on `key`
    /// with, sequence number `client_isn` and MSS option `mss`, sent now.
    pub fn syn_cookie(&self, key: &FlowKey, client_isn: SeqNum, mss: u16) -> SeqNum {
        let (local, remote) = self.engine.endpoints(key);
        let now = self.engine.now;
        self.engine
            .cookies
            .encode(local, remote, client_isn, mss, now)
    }

    /// The neighbour cache's entry for `ip`: its reachability state and MAC, if any.
    pub fn neighbour(&self, ip: impl Into<IpAddr>) -> Option<(Nud, Option<MacAddr>)> {
        let ip = ip.into();
        Some((self.engine.arp.state(ip)?, self.engine.arp.lookup(ip)))
    }

    /// The engine's own MAC address.
    pub fn mac(&self) -> MacAddr {
        self.engine.mac
    }

    /// The engine's IPv6 addresses (its link-local one as last drawn), each with
    /// whether traffic may use it yet: not tentative, not a duplicate.
    pub fn ipv6_addresses(&self) -> impl Iterator<Item = (Ipv6Addr, bool)> + '_ {
        self.engine.addrs.v6().map(|(_, a, ip)| (ip, a.usable()))
    }
}
