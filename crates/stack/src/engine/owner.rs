//! Which worker owns a flow on a link whose steering the stack cannot predict.
//!
//! A link with several queues and no Toeplitz RSS the stack can compute
//! ([`Capabilities::unpredictable_steering`]) may deliver a flow's segments to any of
//! its workers: TAP steers a flow to the queue we last transmitted it on, and a veth
//! under AF_XDP delivers it on whichever queue the *peer* kernel transmitted it from (its
//! socket's transmit hash, which Linux draws anew on a retransmission timeout or when
//! it receives spurious retransmissions, `sk_rethink_txhash`). So on such links every
//! flow has an owner queue that every worker of the link computes the same way:
//!
//! - an active open (local port in [`EngineConfig::ephemeral_ports`]) is owned by
//!   `local port % queues`, and the opener picks a port it owns;
//! - every other flow (a passive open: the local port is a service port) is owned by a
//!   hash of the remote address and port, modulo the queue count.
//!
//! A segment that finds no connection on the worker it landed on, and whose flow that
//! worker does not own, is handed to the owner through the runtime's control channel
//! ([`Engine::take_misdirected`], [`Engine::inject_frames`]) *before* TIME-WAIT entries
//! and listeners are consulted: the owner holds the flow's TIME-WAIT entry, and it
//! answers the flow's SYN so that the listen and accept happen there and every
//! connection lives on its owner. Its replies leave from its own queue.
//!
//! The hash is not keyed: the workers of a link share no secret (each engine draws its
//! own), and they must agree. That is acceptable because on these links the peer
//! already chooses which queue, hence which worker, receives its segments; a peer that
//! picks its ports so that all its connections share an owner only moves the work of
//! handling them to the worker it could already load by its own steering. A listener on
//! a port inside the ephemeral range has its connections owned by the port rule, all
//! on one worker: correct, but unbalanced (keep service ports outside the range, as
//! usual).
//!
//! Links that steer predictably (one queue, or Toeplitz RSS the stack knows) pay one
//! branch, and only when a segment finds no connection.
//!
//! [`Capabilities::unpredictable_steering`]: crate::io::Capabilities::unpredictable_steering
//! [`EngineConfig::ephemeral_ports`]: super::EngineConfig::ephemeral_ports

use std::net::IpAddr;
use std::ops::RangeInclusive;

use super::{Engine, FlowKey};
use crate::app::Handler;
use crate::io::PacketIo;
use crate::time::Clock;

/// The queue, of `queues` (at least 1), that owns the flow `key` when local ports in
/// `ephemeral` are active opens. See the `engine::owner` module docs.
pub fn owner_queue(key: &FlowKey, ephemeral: &RangeInclusive<u16>, queues: u16) -> u16 {
    let queues = queues.max(1);
    if ephemeral.contains(&key.local_port) {
        key.local_port % queues
    } else {
        (remote_hash(key.remote_ip(), key.remote_port) % u64::from(queues)) as u16
    }
}

/// A well-spread, unkeyed hash of a remote endpoint: the 48 bits of an IPv4 address
/// and port (an IPv6 address first folded to 64 bits, its halves xored) through
/// MurmurHash3's 64-bit finaliser, in which every input bit flips each output bit with
/// probability close to one half (so neighbouring ports and addresses spread evenly over
/// any number of queues).
fn remote_hash(ip: IpAddr, port: u16) -> u64 {
    let addr = match ip {
        IpAddr::V4(ip) => u64::from(ip.to_bits()),
        IpAddr::V6(ip) => {
            let bits = ip.to_bits();
            (bits as u64) ^ ((bits >> 64) as u64)
        }
    };
    let mut x = (addr << 16) ^ u64::from(port);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    /// The sibling queue that owns the flow `key`, on a link whose steering the stack
    /// cannot predict; `None` when this worker owns it or the link steers predictably.
    pub(super) fn flow_owner(&self, key: &FlowKey) -> Option<u16> {
        let caps = self.dev.capabilities();
        if !caps.unpredictable_steering() {
            return None;
        }
        let owner = owner_queue(key, &self.cfg.ephemeral_ports, caps.queue_count);
        (owner != caps.queue).then_some(owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::net::Ipv4Addr;

    fn key(remote_ip: impl Into<IpAddr>, remote_port: u16, local_port: u16) -> FlowKey {
        FlowKey::new(remote_ip.into(), remote_port, local_port, 0)
    }

    #[test]
    fn active_opens_are_owned_by_their_port() {
        let eph = 32768..=60999;
        let peer = Ipv4Addr::new(10, 0, 0, 1);
        for port in [32768, 32769, 40001, 60999] {
            for queues in 1..=5 {
                assert_eq!(
                    owner_queue(&key(peer, 80, port), &eph, queues),
                    port % queues
                );
            }
        }
    }

    #[test]
    fn passive_flows_spread_evenly_and_ignore_the_local_port() {
        let eph = 32768..=60999;
        for queues in [2u16, 3, 4, 7] {
            let mut counts = vec![0u32; usize::from(queues)];
            // A client's consecutive ephemeral ports, and many clients on one port.
            for i in 0..4096u16 {
                let sequential = key(Ipv4Addr::new(10, 0, 0, 1), 40000 + i, 80);
                let hosts = key(Ipv4Addr::from(0x0a00_0000 + u32::from(i)), 5555, 443);
                for k in [sequential, hosts] {
                    let q = owner_queue(&k, &eph, queues);
                    assert_eq!(
                        q,
                        owner_queue(&key(k.remote_ip(), k.remote_port, 7), &eph, queues)
                    );
                    counts[usize::from(q)] += 1;
                }
            }
            let fair = 8192 / u32::from(queues);
            for c in counts {
                assert!(
                    c.abs_diff(fair) < fair / 10,
                    "{queues} queues: {c} vs {fair}"
                );
            }
        }
    }
}
