//! Passive opens: SYNs for a listening port start half-open connections up to the
//! listener's backlog; past it, SYN cookies (RFC 4987 §3.6) answer statelessly and a
//! returning cookie ACK rebuilds the connection.

use std::net::IpAddr;

use super::{Engine, FlowKey};
use crate::app::Handler;
use crate::drop_reason::DropReason;
use crate::io::{MacAddr, PacketIo};
use crate::tcp::cookie;
use crate::tcp::options::{ts_clock, DEFAULT_MSS};
use crate::tcp::segment::{Segment, TxSegment};
use crate::tcp::seq::SeqNum;
use crate::tcp::tcb::{Open, SynOptions};
use crate::time::Clock;

/// A listening port.
pub(super) struct Listener {
    /// Most half-open connections before SYN cookies take over.
    pub backlog: usize,
    pub half_open: usize,
    /// Whether SYNs from IPv4 peers are taken.
    pub ipv4: bool,
    /// Whether SYNs from IPv6 peers are taken.
    pub ipv6: bool,
}

impl Listener {
    /// Whether the listener takes connections from `peer`'s family.
    fn takes(&self, peer: IpAddr) -> bool {
        match peer {
            IpAddr::V4(_) => self.ipv4,
            IpAddr::V6(_) => self.ipv6,
        }
    }
}

/// The listening ports, sorted by port. A server listens on a few ports, and every new
/// connection looks its port up three times (is it listening, its backlog, the backlog
/// again when the handshake ends): a binary search over a few entries is cheaper than
/// hashing the port.
#[derive(Default)]
pub(super) struct Listeners {
    ports: Vec<(u16, Listener)>,
}

impl Listeners {
    fn find(&self, port: u16) -> Result<usize, usize> {
        self.ports.binary_search_by_key(&port, |&(p, _)| p)
    }

    pub(super) fn contains_key(&self, port: &u16) -> bool {
        self.find(*port).is_ok()
    }

    pub(super) fn get_mut(&mut self, port: &u16) -> Option<&mut Listener> {
        let i = self.find(*port).ok()?;
        Some(&mut self.ports[i].1)
    }

    /// Listen on `port` with `backlog`, for peers of both families; on a port already
    /// listening, only the backlog changes: the half-open connections already counted
    /// still release their count when they complete or die.
    pub(super) fn listen(&mut self, port: u16, backlog: usize) {
        match self.find(port) {
            Ok(i) => self.ports[i].1.backlog = backlog,
            Err(i) => self.ports.insert(
                i,
                (
                    port,
                    Listener {
                        backlog,
                        half_open: 0,
                        ipv4: true,
                        ipv6: true,
                    },
                ),
            ),
        }
    }

    /// Stop listening on `port`; whether it was listening.
    pub(super) fn remove(&mut self, port: u16) -> bool {
        self.find(port).map(|i| self.ports.remove(i)).is_ok()
    }

    pub(super) fn clear(&mut self) {
        self.ports.clear();
    }
}

impl<D: PacketIo, H: Handler, C: Clock> Engine<D, H, C> {
    /// A segment for no connection on a listening port, from `mac`.
    ///
    /// A connection sends every frame to the MAC its SYN (or cookie ACK) came from, so a
    /// group MAC there is refused ([`DropReason::SendToGroupMac`]) before any state is
    /// made: defence in depth behind input, which drops frames from group sources. The
    /// other MACs a connection uses come from the ARP cache, which holds none.
    pub(super) fn listen_input(
        &mut self,
        mac: MacAddr,
        key: FlowKey,
        seg: &Segment,
        payload: &[u8],
        iss_floor: Option<SeqNum>,
    ) {
        if mac.is_multicast() {
            return self.stats.drop(DropReason::SendToGroupMac);
        }
        if seg.flags.rst {
            return;
        }
        if seg.flags.ack {
            if !seg.flags.syn && self.cfg.syn_cookies && self.app.is_accepting() {
                if let Some(index) = self.cookie_ack(mac, key, seg) {
                    return self.conn_input(index, seg, payload);
                }
            }
            self.stats.drop(DropReason::NoConnection);
            if self.cfg.shared_link {
                return;
            }
            return self.send_rst_reply(mac, key, seg);
        }
        if !seg.flags.syn {
            return self.stats.drop(DropReason::NoConnection);
        }
        if self.app.is_full() {
            self.stats.syns_dropped_overload += 1;
            return;
        }
        let Some(listener) = self.listeners.get_mut(&key.local_port) else {
            return;
        };
        if !listener.takes(key.remote_ip()) {
            // As for a port nobody listens on (see `input`): on a shared link another
            // engine may take this family on the port.
            self.stats.drop(DropReason::NoListener);
            if !self.cfg.shared_link {
                self.send_rst_reply(mac, key, seg);
            }
            return;
        }
        if listener.half_open >= listener.backlog {
            if self.cfg.syn_cookies {
                self.send_cookie_syn_ack(mac, key, seg);
            } else {
                self.stats.syns_dropped_overload += 1;
            }
            return;
        }
        listener.half_open += 1;
        let hash = self.tuple_hash(&key);
        let mut iss = hash.isn(self.now);
        if let Some(floor) = iss_floor {
            // Reopened from TIME-WAIT: start beyond the old incarnation's sequence space
            // (RFC 1122 §4.2.2.13), whatever the clock-driven ISN says; old duplicates
            // then cannot land in the new window, with or without timestamps.
            iss = iss.max(floor);
        }
        let how = Open::Passive(seg);
        self.insert_conn(key, iss, hash.ts_offset, how, None, Some(mac));
    }

    /// The half-open connection in `index` no longer counts against its listener's
    /// backlog (it completed or died).
    pub(super) fn release_half_open(&mut self, index: usize) {
        let block = &mut self.app[index];
        if std::mem::take(&mut block.half_open) {
            if let Some(l) = self.listeners.get_mut(&block.key.local_port) {
                l.half_open = l.half_open.saturating_sub(1);
            }
        }
    }

    /// Answer a SYN statelessly with a cookie (the backlog is full).
    fn send_cookie_syn_ack(&mut self, mac: MacAddr, key: FlowKey, seg: &Segment) {
        let (local, remote) = self.endpoints(&key);
        let our_mss = self.addrs.get(key.local).mss;
        let mss = seg.mss.unwrap_or(DEFAULT_MSS).min(our_mss);
        let cookie = self.cookies.encode(local, remote, seg.seq, mss, self.now);
        self.cookies.sent(self.now);
        let tcp = &self.cfg.tcp;
        let mut tx = TxSegment {
            seq: cookie,
            ack: Some(seg.seq + 1),
            syn: true,
            mss: Some(our_mss),
            window: tcp.recv_buffer.min(65535) as u16,
            ..Default::default()
        };
        // Window scale and SACK survive only inside our TSval (see tcp::cookie).
        if let (true, Some((tsval, _))) = (tcp.timestamps, seg.timestamp) {
            let peer_ws = if tcp.window_scaling { seg.wscale } else { None };
            let sack = tcp.sack && seg.sack_permitted;
            if peer_ws.is_some() {
                tx.wscale = Some(tcp.rcv_wscale());
            }
            tx.sack_permitted = sack;
            let clock = ts_clock(self.now, self.tuple_hash(&key).ts_offset);
            let ours = cookie::tsval_with_options(clock, peer_ws, sack);
            tx.timestamp = Some((ours, tsval));
        }
        self.stats.syn_cookies_sent += 1;
        self.send_raw(mac, key, &tx);
    }

    /// An ACK for no connection on a listening port: a returning SYN cookie?
    fn cookie_ack(&mut self, mac: MacAddr, key: FlowKey, seg: &Segment) -> Option<usize> {
        if !self.cookies.outstanding(self.now) || self.app.is_full() {
            return None;
        }
        let (local, remote) = self.endpoints(&key);
        let client_isn = seg.seq - 1;
        let cookie = seg.ack - 1;
        let Some(mss) = self
            .cookies
            .decode(local, remote, client_isn, cookie, self.now)
        else {
            self.stats.syn_cookies_rejected += 1;
            return None;
        };
        let mut opts = SynOptions {
            mss: Some(mss),
            ..Default::default()
        };
        if let (true, Some((tsval, tsecr))) = (self.cfg.tcp.timestamps, seg.timestamp) {
            let (ws, sack) = cookie::decode_ts_options(tsecr);
            opts.wscale = ws;
            opts.sack_permitted = sack;
            opts.timestamp = Some((tsval, tsecr));
        }
        let ts_offset = self.tuple_hash(&key).ts_offset;
        self.stats.syn_cookies_accepted += 1;
        let how = Open::Cookie(seg, opts);
        let id = self.insert_conn(key, cookie, ts_offset, how, None, Some(mac));
        Some(id.index() as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_are_found_by_port_and_listening_again_keeps_the_count() {
        let mut l = Listeners::default();
        for port in [8080, 80, 443, 1, 65535] {
            l.listen(port, 4);
        }
        for port in [1, 80, 443, 8080, 65535] {
            assert!(l.contains_key(&port), "{port}");
        }
        for port in [0, 2, 81, 444, 65534] {
            assert!(!l.contains_key(&port), "{port}");
            assert!(l.get_mut(&port).is_none());
        }
        l.get_mut(&443).expect("listening").half_open = 3;
        l.listen(443, 16);
        let l443 = l.get_mut(&443).expect("listening");
        assert_eq!((l443.backlog, l443.half_open), (16, 3));
        assert!(l.remove(443) && !l.remove(443));
        assert!(!l.contains_key(&443) && l.contains_key(&80) && l.contains_key(&8080));
        l.clear();
        assert!(!l.contains_key(&80));
    }
}
