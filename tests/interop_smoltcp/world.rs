//! The two-stack world: our engine and a smoltcp interface on one virtual clock, run
//! until a test's condition holds.

use super::*;

// ----- The two-stack world -----

pub(crate) struct World<H: Handler> {
    pub(crate) clock: VirtualClock,
    pub(crate) engine: Engine<Link, H, VirtualClock>,
    pub(crate) phy: SmolPhy,
    pub(crate) iface: Interface,
    pub(crate) sockets: SocketSet<'static>,
    pub(crate) sock: SocketHandle,
    pub(crate) steps: u64,
    pub(crate) family: Family,
}

pub(crate) fn smol_now(clock: &VirtualClock) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros(clock.now().as_micros() as i64)
}

impl<H: Handler> World<H> {
    /// The stacks over `family` (each with one address of it); `to_peer` applies to
    /// our frames, `to_us` to smoltcp's; `seed` drives both and smoltcp's ISNs. `buf` is
    /// smoltcp's socket buffer size (each way).
    pub(crate) fn new(
        handler: H,
        family: Family,
        to_peer: FaultConfig,
        to_us: FaultConfig,
        seed: u64,
        buf: usize,
    ) -> World<H> {
        let clock = VirtualClock::new();
        // Start away from zero so smoltcp's and our timestamp clocks are non-trivial.
        clock.set(rusty_stack::time::Instant::from_millis(1000));
        let (ours, theirs) = memory::pair(
            Capabilities::new(OUR_MAC, 1500),
            Capabilities::new(PEER_MAC, 1500),
        );
        let ours = FaultInjector::new(ours, clock.clone(), to_peer, seed.wrapping_mul(7) + 1);
        let theirs = FaultInjector::new(theirs, clock.clone(), to_us, seed.wrapping_mul(13) + 5);
        // Over IPv6 our engine has no IPv4 address, and keeps the default duplicate
        // address detection.
        let cfg = match family {
            Family::V4 => sim::engine_config(OUR_IP, seed),
            Family::V6 => sim::engine_config_v6(Ipv4Addr::UNSPECIFIED, OUR_IP6, seed),
        };
        let engine = Engine::new(ours, handler, clock.clone(), cfg);
        let mut phy = SmolPhy {
            io: theirs,
            rx: VecDeque::new(),
            burst: Vec::new(),
            wire: Wire::default(),
            tx_dropped: 0,
        };
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(PEER_MAC.0)));
        config.random_seed = seed ^ 0x1234_5678;
        let mut iface = Interface::new(config, &mut phy, smol_now(&clock));
        iface.update_ip_addrs(|addrs| {
            let prefix = match family {
                Family::V4 => 24,
                Family::V6 => 64,
            };
            addrs
                .push(IpCidr::new(family.peer().into(), prefix))
                .expect("one address fits");
        });
        let mut socket = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0u8; buf]),
            tcp::SocketBuffer::new(vec![0u8; buf]),
        );
        // smoltcp only does RFC 7323 timestamps with a generator.
        socket.set_tsval_generator(Some(smoltcp_tsval));
        let mut sockets = SocketSet::new(Vec::new());
        let sock = sockets.add(socket);
        World {
            clock,
            engine,
            phy,
            iface,
            sockets,
            sock,
            steps: 0,
            family,
        }
    }

    pub(crate) fn socket(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.sock)
    }

    pub(crate) fn smol_state(&self) -> tcp::State {
        self.sockets.get::<tcp::Socket>(self.sock).state()
    }

    /// Run until `done`, with `app` driving the smoltcp socket each turn (it returns
    /// whether it did anything). Panics with diagnostics after `limit` of virtual time or
    /// too many steps, or when nothing is left to happen.
    pub(crate) fn run(
        &mut self,
        limit: Duration,
        mut app: impl FnMut(&mut tcp::Socket<'static>, &Interface) -> bool,
        mut done: impl FnMut(&mut World<H>) -> bool,
    ) {
        let end = self.clock.now() + limit;
        loop {
            if done(self) {
                return;
            }
            self.steps += 1;
            assert!(
                self.steps < 5_000_000 && self.clock.now() < end,
                "gave up at {:?} after {} steps: smoltcp {} / ours {:?}\n{}\n{:?}",
                self.clock.now(),
                self.steps,
                self.smol_state(),
                self.engine.connection_states().collect::<Vec<_>>(),
                self.engine.stats(),
                self.phy.wire,
            );
            let n = self.engine.poll();
            NOW_MS.with(|c| c.set(self.clock.now().as_millis() as u32));
            let now = smol_now(&self.clock);
            self.phy.io.flush();
            let mut busy = self.iface.poll(now, &mut self.phy, &mut self.sockets)
                == PollResult::SocketStateChanged;
            let sock = self.sockets.get_mut::<tcp::Socket>(self.sock);
            if app(sock, &self.iface) {
                busy = true;
                self.iface.poll(now, &mut self.phy, &mut self.sockets);
            }
            let pending = self.engine.device().inner().pending() + self.phy.io.inner().pending();
            if n > 0 || busy || pending > 0 || !self.phy.rx.is_empty() {
                continue;
            }
            // Both idle: jump to the next thing that can happen.
            let now = self.clock.now();
            let smol_at = self
                .iface
                .poll_delay(smol_now(&self.clock), &self.sockets)
                .map(|d| now + Duration::from_micros(d.total_micros()));
            let next = [
                self.engine.next_deadline(),
                smol_at,
                self.engine.device().next_release(),
                self.phy.io.next_release(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) => self.clock.set(t.max(now + Duration::from_micros(1))),
                None => {
                    if done(self) {
                        return;
                    }
                    panic!(
                        "stalled at {:?}: smoltcp {} / ours {:?}\n{}\n{:?}",
                        now,
                        self.smol_state(),
                        self.engine.connection_states().collect::<Vec<_>>(),
                        self.engine.stats(),
                        self.phy.wire,
                    );
                }
            }
        }
    }
}
