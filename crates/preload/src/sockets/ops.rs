//! What the socket layer needs of an engine, and how Rusty's engine provides it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use rusty_metrics::Gauges;
use rusty_stack::io::{MacAddr, PacketIo};
use rusty_stack::time::{Clock, Instant};
use rusty_stack::{
    CongestionAlgorithm, Conn, ConnId, ConnectError, Engine, Keepalive, Stats, TcpState,
};

use super::{SockId, Table};

/// What the socket layer needs of an engine, so that [`Stack`](super::Stack) is one type whatever
/// the device under it.
pub trait EngineOps {
    /// Run one loop turn; frames received.
    fn poll(&mut self) -> usize;
    /// The earliest time the engine has timer work.
    fn next_deadline(&self) -> Option<Instant>;
    /// The engine's IPv4 address (unspecified: none).
    fn address(&self) -> Ipv4Addr;
    /// The engine's IPv6 addresses, its link-local one first; none when the link has
    /// no IPv6.
    fn ipv6_addresses(&self) -> Vec<Ipv6Addr>;
    /// Whether `ip` is reached through this engine's link (on it, or through its
    /// gateway).
    fn routes(&self, ip: Ipv4Addr) -> bool;
    /// Whether IPv6 address `ip` is reached through this engine's link: the link has
    /// IPv6, and `ip` is on it or there is a gateway.
    fn routes_v6(&self, ip: Ipv6Addr) -> bool;
    /// Keepalive probing, when the stack runs it.
    fn keepalive(&self) -> Option<Keepalive>;
    /// Let the kernel steer frames to the engine's queue, or stop it.
    fn set_steered(&mut self, on: bool);
    /// Give up the engine's AF_XDP queue (see `Steered::hand_over`).
    fn hand_over(&mut self) -> Option<rusty_drivers_xdp::XdpQueue>;
    /// The engine's MAC address.
    fn mac(&self) -> MacAddr;
    /// Whether other engines share the link (`EngineConfig::shared_link`).
    fn set_shared_link(&mut self, shared: bool);
    /// The ports some engine on the shared link listens on.
    fn set_link_listeners(&mut self, ports: Vec<u16>);
    /// Whether a connection still has something of ours to deliver: data or a FIN
    /// not yet acknowledged, or a handshake under way.
    fn delivering(&self) -> bool;
    /// Neighbour mappings learned since the last call.
    fn drain_learned_arp(&mut self, out: &mut Vec<(IpAddr, MacAddr)>);
    /// A neighbour mapping learned elsewhere.
    fn import_arp(&mut self, ip: IpAddr, mac: MacAddr);
    /// The congestion control connections run, by Linux's name for it.
    fn congestion(&self) -> &'static str;
    /// Listen on `port`, taking connections from peers of the families allowed.
    fn listen(&mut self, port: u16, backlog: usize, ipv4: bool, ipv6: bool);
    /// Stop listening on `port`.
    fn unlisten(&mut self, port: u16);
    /// Start an active open for socket `id`.
    fn connect(&mut self, remote: SocketAddr, id: SockId) -> Result<(), ConnectError>;
    /// Whether duplicate address detection still runs for an IPv6 address of ours (a
    /// connect that found no source address may find one once it ends).
    fn detecting_duplicates(&self) -> bool;
    /// Act on connection `id`; false when it is gone.
    fn with_conn(&mut self, id: ConnId, f: &mut dyn FnMut(&mut Conn<'_, SockId>)) -> bool;
    /// [`with_conn`](Self::with_conn), leaving what `f` queued unsent until the next
    /// [`flush`](Self::flush) or [`poll`](Self::poll).
    fn with_conn_deferred(&mut self, id: ConnId, f: &mut dyn FnMut(&mut Conn<'_, SockId>)) -> bool;
    /// Send what deferred calls queued.
    fn flush(&mut self);
    /// The payload of a full-sized segment on the link: the MTU less the IPv6 and TCP
    /// headers (an IPv4 segment's is 20 bytes more; taking the smaller only ever
    /// sends sooner).
    fn segment_size(&self) -> usize;
    /// Offer the connection's held bytes again.
    fn resume_receive(&mut self, id: ConnId);
    /// The socket table.
    fn table(&self) -> &Table;
    /// The socket table.
    fn table_mut(&mut self) -> &mut Table;
    /// The engine's counters.
    fn stats(&self) -> &Stats;
    /// The connections the engine holds.
    fn gauges(&self) -> Gauges;
}

/// A device whose queue the kernel may stop steering frames to, for a process that
/// holds a queue but wants no traffic for now. Devices that cannot say so keep
/// receiving.
pub trait Steered {
    /// Start or stop the kernel steering frames to this queue.
    fn set_steered(&self, on: bool) -> std::io::Result<()> {
        let _ = on;
        Ok(())
    }
    /// Give up the AF_XDP queue under the device, for a forked child to take over;
    /// `None` for devices that have none to give.
    fn hand_over(&mut self) -> Option<rusty_drivers_xdp::XdpQueue> {
        None
    }
}

impl Steered for rusty_drivers_tap::TapQueue {
    fn set_steered(&self, on: bool) -> std::io::Result<()> {
        self.set_attached(on)
    }
}

/// An AF_XDP queue is chosen by the NIC's RSS, not detached; it is handed over whole
/// (see `handover`).
impl Steered for crate::handover::Handover {
    fn hand_over(&mut self) -> Option<rusty_drivers_xdp::XdpQueue> {
        self.take()
    }
}

impl<D: PacketIo + Steered, C: Clock> EngineOps for Engine<D, Table, C> {
    fn poll(&mut self) -> usize {
        Engine::poll(self)
    }
    fn next_deadline(&self) -> Option<Instant> {
        Engine::next_deadline(self)
    }
    fn address(&self) -> Ipv4Addr {
        self.config().ip
    }
    fn ipv6_addresses(&self) -> Vec<Ipv6Addr> {
        let cfg = self.config();
        let link_local = cfg.link_local(self.device().capabilities().mac);
        link_local
            .into_iter()
            .chain(cfg.ipv6.iter().map(|&(a, _)| a))
            .collect()
    }
    fn routes(&self, ip: Ipv4Addr) -> bool {
        let cfg = self.config();
        cfg.on_link(ip) || cfg.gateway.is_some()
    }
    fn routes_v6(&self, ip: Ipv6Addr) -> bool {
        let cfg = self.config();
        !cfg.ipv6.is_empty() && (cfg.on_link_v6(ip) || cfg.ipv6_gateway.is_some())
    }
    fn keepalive(&self) -> Option<Keepalive> {
        self.config().tcp.keepalive
    }
    fn mac(&self) -> MacAddr {
        self.device().capabilities().mac
    }
    fn drain_learned_arp(&mut self, out: &mut Vec<(IpAddr, MacAddr)>) {
        Engine::drain_learned_arp(self, out);
    }
    fn set_shared_link(&mut self, shared: bool) {
        Engine::set_shared_link(self, shared);
    }
    fn set_link_listeners(&mut self, ports: Vec<u16>) {
        Engine::set_link_listeners(self, ports);
    }
    fn delivering(&self) -> bool {
        self.connection_states().any(|(_, s)| {
            !matches!(
                s,
                TcpState::FinWait2 | TcpState::TimeWait | TcpState::Closed
            )
        })
    }
    fn import_arp(&mut self, ip: IpAddr, mac: MacAddr) {
        Engine::import_arp(self, ip, mac);
    }
    fn set_steered(&mut self, on: bool) {
        if let Err(e) = self.device().set_steered(on) {
            log::warn!(
                "cannot {} the link's queue: {e}",
                if on { "attach" } else { "detach" }
            );
        }
    }
    fn hand_over(&mut self) -> Option<rusty_drivers_xdp::XdpQueue> {
        self.device_mut().hand_over()
    }
    fn congestion(&self) -> &'static str {
        match self.config().tcp.congestion_control {
            CongestionAlgorithm::NewReno => "reno",
            _ => "cubic",
        }
    }
    fn listen(&mut self, port: u16, backlog: usize, ipv4: bool, ipv6: bool) {
        Engine::listen(self, port, backlog);
        Engine::listen_families(self, port, ipv4, ipv6);
    }
    fn unlisten(&mut self, port: u16) {
        Engine::unlisten(self, port);
    }
    fn connect(&mut self, remote: SocketAddr, id: SockId) -> Result<(), ConnectError> {
        Engine::connect(self, remote, id)
            .map(|_| ())
            .map_err(|(e, _)| e)
    }
    fn detecting_duplicates(&self) -> bool {
        Engine::detecting_duplicates(self)
    }
    fn with_conn(&mut self, id: ConnId, f: &mut dyn FnMut(&mut Conn<'_, SockId>)) -> bool {
        Engine::with_conn(self, id, |_, conn| f(conn)).is_some()
    }
    fn with_conn_deferred(&mut self, id: ConnId, f: &mut dyn FnMut(&mut Conn<'_, SockId>)) -> bool {
        Engine::with_conn_deferred(self, id, |_, conn| f(conn)).is_some()
    }
    fn flush(&mut self) {
        Engine::flush(self);
    }
    fn segment_size(&self) -> usize {
        self.device().capabilities().mtu.saturating_sub(60)
    }
    fn resume_receive(&mut self, id: ConnId) {
        Engine::resume_receive(self, id);
    }
    fn table(&self) -> &Table {
        self.handler()
    }
    fn table_mut(&mut self) -> &mut Table {
        self.handler_mut()
    }
    fn stats(&self) -> &Stats {
        Engine::stats(self)
    }
    fn gauges(&self) -> Gauges {
        Gauges::of_engine(self)
    }
}
