//! Binding and listening: which socket may hold which port (Linux's rules, across
//! the two families), and which listening sockets the engine takes connections for.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

use super::addr::Binding;
use super::table::State;
use super::{addr_family, canonical, Errno, Family, SockId, Stack};

impl Stack {
    /// `bind` to `addr`, of the socket's family, as the program gave it (IPv4-mapped
    /// on an AF_INET6 socket for an IPv4 address): the wildcard or one of the stack's
    /// own addresses ([`binds`](Self::binds); the caller gives the others to the
    /// kernel). As on Linux, an IPv4-mapped address on an `IPV6_V6ONLY` socket is
    /// `EINVAL`, and a specific IPv6 address makes the socket IPv6-only; the port must
    /// not be held by a socket that takes some of the same addresses.
    pub fn bind(&mut self, s: SockId, addr: SocketAddr) -> Result<(), Errno> {
        let sock = self.sock(s)?;
        let (family, mut opts) = (sock.family, sock.opts);
        if !matches!(sock.state, State::Fresh) {
            return Err(Errno(libc::EINVAL));
        }
        if family != addr_family(addr) {
            return Err(Errno(libc::EAFNOSUPPORT));
        }
        let local = canonical(addr);
        if family == Family::V6 {
            match local.ip() {
                IpAddr::V4(_) if opts.v6only => return Err(Errno(libc::EINVAL)),
                IpAddr::V6(ip) if !ip.is_unspecified() => opts.v6only = true,
                _ => {}
            }
        }
        if !self.binds(addr)? {
            return Err(Errno(libc::EADDRNOTAVAIL));
        }
        let binding = Binding::new(family, local, opts.v6only);
        let port = if addr.port() == 0 {
            self.free_port().ok_or(Errno(libc::EADDRINUSE))?
        } else {
            if self.port_taken(s, addr.port(), &binding, opts.reuse_port) {
                return Err(Errno(libc::EADDRINUSE));
            }
            addr.port()
        };
        // A wildcard bind reads back as the wildcard, as on Linux; connections
        // accepted on it have the stack's address.
        let sock = self.sock_mut(s)?;
        sock.local = Some(SocketAddr::new(local.ip(), port));
        sock.opts = opts;
        sock.state = State::Bound;
        Ok(())
    }

    /// Whether a socket other than `s` holds `port` (bound or listening) for some of
    /// the addresses `binding` takes, in a way that keeps a new bind off it.
    fn port_taken(&self, s: SockId, port: u16, binding: &Binding, reuse_port: bool) -> bool {
        let table = self.engine.table();
        table.socks.iter().enumerate().any(|(id, o)| {
            o.as_ref().is_some_and(|o| {
                id != s
                    && matches!(o.state, State::Bound | State::Listening { .. })
                    && o.local.is_some_and(|l| l.port() == port)
                    && o.binding().is_some_and(|b| b.overlaps(binding))
                    && !(reuse_port && o.opts.reuse_port)
            })
        })
    }

    /// A port for `bind` to port 0, from the top of the range Linux uses: one no
    /// socket is bound to.
    fn free_port(&self) -> Option<u16> {
        let table = self.engine.table();
        (32768..=60999u16).rev().find(|&p| {
            !table.socks.iter().flatten().any(|o| {
                matches!(o.state, State::Bound | State::Listening { .. })
                    && o.local.is_some_and(|l| l.port() == p)
            })
        })
    }

    /// `listen`; with `engage`, the engine takes connections for the port at once,
    /// else from [`Stack::engage`] on (see `process.rs` for why a process that forked
    /// waits for interest).
    pub fn listen(&mut self, s: SockId, backlog: usize, engage: bool) -> Result<(), Errno> {
        let backlog = backlog.clamp(1, 65535);
        let sock = self.sock_mut(s)?;
        let family = sock.family;
        match &mut sock.state {
            State::Listening { backlog: b, .. } => {
                *b = backlog;
                let port = sock.local.map_or(0, |l| l.port());
                if self.engaged(s, port) {
                    self.relisten(port);
                }
                return Ok(());
            }
            State::Fresh | State::Bound => {}
            _ => return Err(Errno(libc::EINVAL)),
        }
        if sock.local.is_none() {
            self.bind(s, family.unspecified())?;
        }
        self.sock_mut(s)?.state = State::Listening {
            backlog,
            queue: VecDeque::new(),
        };
        self.listen_epoch += 1;
        if engage {
            self.engage(s)?;
        }
        Ok(())
    }

    /// Have the engine take connections for listening socket `s` (nothing if it
    /// already does); whether it now does (false: `s` is not listening).
    pub fn engage(&mut self, s: SockId) -> Result<bool, Errno> {
        let sock = self.sock(s)?;
        if !matches!(sock.state, State::Listening { .. }) {
            return Ok(false);
        }
        let port = sock.local.map_or(0, |l| l.port());
        if !self.engaged(s, port) {
            let table = self.engine.table_mut();
            table.listeners.entry(port).or_default().push(s);
            self.relisten(port);
        }
        Ok(true)
    }

    /// Whether the engine takes connections for listening socket `s` on `port`.
    fn engaged(&self, s: SockId, port: u16) -> bool {
        let table = self.engine.table();
        table.listeners.get(&port).is_some_and(|l| l.contains(&s))
    }

    /// Stop the engine taking connections for listening socket `s` on `port` (it is
    /// closing).
    pub(super) fn disengage(&mut self, s: SockId, port: u16) {
        if !self.engaged(s, port) {
            return;
        }
        if let Some(l) = self.engine.table_mut().listeners.get_mut(&port) {
            l.retain(|&id| id != s);
        }
        self.relisten(port);
    }

    /// Have the engine take connections on `port` as the sockets engaged there do:
    /// with the largest of their backlogs, from the families any of them takes; or
    /// not at all when none is left.
    fn relisten(&mut self, port: u16) {
        let table = self.engine.table_mut();
        let mut engaged = table.listeners.remove(&port).unwrap_or_default();
        engaged.retain(|&id| table.get(id).is_some());
        let (mut backlog, mut ipv4, mut ipv6) = (1, false, false);
        for sock in engaged.iter().filter_map(|&id| table.get(id)) {
            if let State::Listening { backlog: b, .. } = sock.state {
                backlog = backlog.max(b);
            }
            if let Some(binding) = sock.binding() {
                let (v4, v6) = binding.families();
                ipv4 |= v4;
                ipv6 |= v6;
            }
        }
        if engaged.is_empty() {
            self.engine.unlisten(port);
        } else {
            table.listeners.insert(port, engaged);
            self.engine.listen(port, backlog, ipv4, ipv6);
        }
    }

    /// Stop the engine taking connections for every listening socket; each stays
    /// listening for the program, and [`Stack::engage`] starts it again.
    pub fn disengage_all(&mut self) {
        let ports: Vec<u16> = self
            .engine
            .table_mut()
            .listeners
            .drain()
            .map(|(p, _)| p)
            .collect();
        for port in ports {
            self.engine.unlisten(port);
        }
    }
}
