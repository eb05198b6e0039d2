//! The engine's side of ARP: answering requests, learning and sharing mappings,
//! resolving next hops, and sending the frames that waited for a resolution. The wire
//! format and the neighbour cache live in [`crate::arp`]; the cache holds IPv6
//! neighbours too, which Neighbor Discovery (`v6`) learns and resolves.

use std::net::{IpAddr, Ipv4Addr};

use super::Engine;
use crate::app::Handler;
use crate::arp;
use crate::drop_reason::DropReason;
use crate::io::{MacAddr, PacketIo, TxFrame};
use crate::time::Clock;

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    /// Neighbour mappings (ARP's and Neighbor Discovery's) learned since the last
    /// call, to publish to sibling workers.
    pub fn drain_learned_arp(&mut self, out: &mut Vec<(IpAddr, MacAddr)>) {
        self.arp.drain_learned(out);
    }

    /// A mapping a sibling worker learned.
    pub fn import_arp(&mut self, ip: IpAddr, mac: MacAddr) {
        self.now = self.clock.now();
        let before = self.arp.lookup(ip, self.now);
        let ready = self.arp.import(ip, mac, self.now);
        self.on_arp_changed(ip, before);
        if ready > 0 {
            self.send_arp_ready();
            self.submit();
        }
    }

    pub(super) fn on_arp(&mut self, payload: &[u8]) {
        if self.addrs.v4().is_none() {
            return self.stats.drop(DropReason::NotOurAddress);
        }
        let input = match arp::process(payload, self.cfg.ip) {
            Ok(i) => i,
            Err(r) => return self.stats.drop(r),
        };
        // A sender address no host may use (0/8 but an RFC 5227 probe's 0.0.0.0, class
        // E, our subnet's directed broadcast) is neither learned nor answered, as IPv4
        // datagrams from it are dropped. Our own address as the sender is a conflict,
        // which `arp::process` reports and the cache handles.
        if !input.sender_ip.is_unspecified() && input.sender_ip != self.cfg.ip {
            if let Err(reason) = self.local.check_source(input.sender_ip) {
                return self.stats.drop(reason);
            }
        }
        let learnable = input.learnable();
        let before = learnable.and_then(|(ip, _)| self.arp.lookup(IpAddr::V4(ip), self.now));
        let ready = self.arp.learn(&input, self.now);
        if let Some((ip, _)) = learnable {
            self.on_arp_changed(IpAddr::V4(ip), before);
        }
        if input.reply_owed {
            let (mac, ip) = (self.mac, self.cfg.ip);
            let sent = self.send_arp_frame(|buf| {
                arp::build_reply(buf, mac, ip, input.sender_mac, input.sender_ip)
            });
            self.stats.arp_replies_sent += u64::from(sent);
        }
        if ready > 0 {
            self.send_arp_ready();
        }
    }

    /// `ip`'s mapping was `before` and may just have changed: connections that cached
    /// the old MAC for that next hop move to the new one (a neighbour replaced its NIC,
    /// or a failover moved its address). Only a change of a known mapping costs the
    /// scan over connections, which is rare; a first mapping leaves cached MACs (taken
    /// from the peer's own SYN) alone.
    pub(super) fn on_arp_changed(&mut self, ip: IpAddr, before: Option<MacAddr>) {
        let Some(old) = before else { return };
        let Some(new) = self.arp.lookup(ip, self.now) else {
            return;
        };
        if new == old {
            return;
        }
        let cfg = &self.cfg;
        for (_, block) in self.app.iter_mut() {
            if cfg.next_hop(block.key.remote_ip()) == ip && block.mac.is_some_and(|m| m != new) {
                block.mac = Some(new);
            }
        }
    }

    /// Retry or give up pending resolutions.
    pub(super) fn poll_arp(&mut self) {
        if !self.arp.has_work(self.now) {
            return;
        }
        let mut requests = std::mem::take(&mut self.arp_requests);
        let mut failed = 0;
        self.arp.poll(self.now, &mut requests, &mut failed);
        for _ in 0..failed {
            self.stats.drop(DropReason::ArpUnresolved);
        }
        for ip in requests.drain(..) {
            self.send_resolution(ip);
        }
        self.arp_requests = requests;
    }

    /// Ask the link for `target`'s MAC: an ARP request, or a Neighbor Solicitation.
    pub(super) fn send_resolution(&mut self, target: IpAddr) {
        match target {
            IpAddr::V4(ip) => self.send_arp_request(ip),
            IpAddr::V6(ip) => self.send_neighbor_solicitation(ip),
        }
    }

    fn send_arp_request(&mut self, target: Ipv4Addr) {
        let (mac, ip) = (self.mac, self.cfg.ip);
        let sent = self.send_arp_frame(|buf| arp::build_request(buf, mac, ip, target));
        self.stats.arp_requests_sent += u64::from(sent);
    }

    /// Announce our IPv4 address (and MAC) when the engine starts.
    pub(super) fn send_gratuitous_arp(&mut self) {
        if self.addrs.v4().is_none() {
            return;
        }
        let (mac, ip) = (self.mac, self.cfg.ip);
        self.send_arp_frame(|buf| arp::build_gratuitous(buf, mac, ip));
    }

    /// One ARP frame written by `build` (which returns its length); false when no
    /// transmit buffer was free.
    fn send_arp_frame(&mut self, build: impl FnOnce(&mut [u8]) -> usize) -> bool {
        let Some(mut buf) = self.dev.alloc_tx(arp::FRAME_LEN) else {
            self.stats.drop(DropReason::NoTxBuffer);
            return false;
        };
        let n = build(&mut buf);
        buf.truncate(n);
        self.push_tx(buf, false);
        true
    }

    /// Send frames that were waiting for an ARP resolution.
    pub(super) fn send_arp_ready(&mut self) {
        let mut ready = std::mem::take(&mut self.arp_ready);
        self.arp.drain_ready(&mut ready);
        for frame in ready.drain(..) {
            if frame.is_empty() {
                continue;
            }
            let Some(mut buf) = self.dev.alloc_tx(frame.len()) else {
                self.stats.drop(DropReason::NoTxBuffer);
                continue;
            };
            buf.copy_from_slice(&frame);
            self.push_tx(buf, false);
        }
        self.arp_ready = ready;
    }
}
