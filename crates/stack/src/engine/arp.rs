//! The engine's side of ARP: answering requests, learning and sharing mappings,
//! resolving and probing next hops, and sending the frames that waited for a
//! resolution. The wire format and the neighbour cache live in [`crate::arp`]; the
//! cache holds IPv6 neighbours too, which Neighbor Discovery (`v6`) learns, resolves
//! and probes.

use std::net::{IpAddr, Ipv4Addr};

use super::Engine;
use crate::app::Handler;
use crate::arp::{self, Solicit};
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
        let ready = self.arp.import(ip, mac, self.now);
        self.after_neighbour_news(ready);
        self.submit();
    }

    /// The ARP packet `payload` of `frame`.
    pub(super) fn on_arp(&mut self, frame: &[u8], payload: &[u8]) {
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
        let to_us = frame.get(..6) == Some(&self.mac.0[..]);
        let ready = self.arp.learn(&input, to_us, self.now);
        if input.reply_owed {
            let (mac, ip) = (self.mac, self.cfg.ip);
            let sent = self.send_arp_frame(|buf| {
                arp::build_reply(buf, mac, ip, input.sender_mac, input.sender_ip)
            });
            self.stats.arp_replies_sent += u64::from(sent);
        }
        self.after_neighbour_news(ready);
    }

    /// The neighbour cache took news that made `ready` frames sendable and may have
    /// changed what connections send to.
    pub(super) fn after_neighbour_news(&mut self, ready: usize) {
        self.apply_neighbour_changes();
        if ready > 0 {
            self.send_arp_ready();
        }
    }

    /// The neighbour cache's timers: resolutions retried or given up, neighbours
    /// probed or forgotten (asking connections whether they confirmed them), unused
    /// entries forgotten.
    #[inline]
    pub(super) fn poll_arp(&mut self) {
        if self.arp.has_work(self.now) {
            self.run_arp_timers();
        }
    }

    /// [`poll_arp`](Self::poll_arp) with work to do. Out of line: it is rare, and
    /// inlined into the loop turn it takes registers the turn's common path needs.
    #[inline(never)]
    fn run_arp_timers(&mut self) {
        let mut solicits = std::mem::take(&mut self.arp_requests);
        let (app, users) = (&self.app, &self.neighbour_users);
        let polled = self
            .arp
            .poll(self.now, |n| users.latest_progress(n, app), &mut solicits);
        for _ in 0..polled.failed_frames {
            self.stats.drop(DropReason::ArpUnresolved);
        }
        self.stats.neighbours_unreachable += polled.unreachable;
        for s in solicits.drain(..) {
            self.send_solicit(s);
        }
        self.arp_requests = solicits;
        self.apply_neighbour_changes();
    }

    /// Ask the link for a neighbour's MAC, or probe the one cached: an ARP request, or
    /// a Neighbor Solicitation.
    pub(super) fn send_solicit(&mut self, s: Solicit) {
        let sent = match s.ip {
            IpAddr::V4(ip) => self.send_arp_request(ip, s.unicast),
            IpAddr::V6(ip) => self.send_neighbor_solicitation(ip, s.unicast),
        };
        if sent && s.unicast.is_some() {
            self.stats.neighbour_probes_sent += 1;
        }
    }

    /// Who has `target`: broadcast, or unicast to the MAC cached for it (a probe).
    /// Whether it was sent.
    fn send_arp_request(&mut self, target: Ipv4Addr, unicast: Option<MacAddr>) -> bool {
        let (mac, ip) = (self.mac, self.cfg.ip);
        let sent = self.send_arp_frame(|buf| match unicast {
            Some(to) => arp::build_probe(buf, mac, ip, target, to),
            None => arp::build_request(buf, mac, ip, target),
        });
        self.stats.arp_requests_sent += u64::from(sent);
        sent
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
