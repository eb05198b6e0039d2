//! Running a seed: the two engines over the faulty link until every connection has
//! closed and TIME-WAIT has passed, the checks that nothing is left, and runs over
//! ranges of seeds.

use super::*;

/// Virtual time a seed may take before it counts as stuck.
const VIRTUAL_TIME_LIMIT: Duration = Duration::from_secs(3600);
/// Simulation steps a seed may take before it counts as live-locked.
const STEP_LIMIT: u64 = 20_000_000;

/// What a passing seed reports (and what determinism compares).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome {
    pub(crate) client: Stats,
    pub(crate) server: Stats,
    pub(crate) virtual_time: Duration,
    pub(crate) steps: u64,
    pub(crate) bytes: usize,
}

pub(crate) fn replay_hint(seed: u64) -> String {
    format!("replay: RUSTY_SIM_SEED={seed} cargo test --test simulation replay -- --nocapture")
}

/// Run one seed; `Err` describes what went wrong.
fn run_seed(seed: u64, slow_readers: bool) -> Result<Outcome, String> {
    run_scenario(seed, Scenario::new(seed, slow_readers))
}

/// The two engines' configurations for `scenario`, keyed by `seed`.
fn engine_configs(seed: u64, scenario: &Scenario) -> [EngineConfig; 2] {
    let ends = [
        (sim::CLIENT_IP, sim::CLIENT_IP6),
        (SERVER_IP, sim::SERVER_IP6),
    ];
    [0, 1].map(|i| {
        let (ip, ip6) = ends[i];
        let mut cfg = match scenario.families {
            Families::V4 => sim::engine_config(ip, seed),
            Families::V6 => sim::engine_config_v6(Ipv4Addr::UNSPECIFIED, ip6, seed),
            Families::Both => sim::engine_config_v6(ip, ip6, seed),
        };
        if let Some(v6) = &scenario.ipv6 {
            if v6.routed && i == 1 {
                cfg.ipv6.push((SERVER_ROUTED, 64));
            }
            cfg.dad_transmits = v6.dad_transmits[i];
            if let Some(lifetime) = v6.neighbor_lifetime {
                cfg.arp.entry_lifetime = lifetime;
                // Reachability in doubt as soon: unreachability detection (DELAY,
                // probes, neighbours forgotten and resolved again) runs under the
                // faults too.
                cfg.arp.reachable_time = lifetime;
            }
        }
        let knobs = if i == 0 {
            &scenario.client
        } else {
            &scenario.server
        };
        cfg.tcp = knobs.tcp_config();
        let memory = [scenario.client_memory, scenario.server_memory][i];
        if let Some(m) = memory {
            cfg.memory = m;
        }
        cfg
    })
}

/// Run `scenario` with the engines seeded by `seed`.
pub(crate) fn run_scenario(seed: u64, scenario: Scenario) -> Result<Outcome, String> {
    let scenario = Rc::new(scenario);
    let n = scenario.conns.len();
    let log = Rc::new(RefCell::new(Log {
        client_closed: vec![Vec::new(); n],
        server_closed: vec![Vec::new(); n],
        errors: Vec::new(),
    }));
    let ports = Rc::new(RefCell::new(HashMap::new()));
    let [mut client_cfg, server_cfg] = engine_configs(seed, &scenario);
    if let Some(ports) = &scenario.client_ports {
        client_cfg.ephemeral_ports = ports.clone();
    }
    let routed = scenario.ipv6.as_ref().is_some_and(|v6| v6.routed);
    if routed {
        // The server engine is the client engine's router, known by its link-local
        // address, which the client resolves like any neighbour.
        client_cfg.ipv6_gateway = server_cfg.link_local(sim::SERVER_MAC);
    }
    let client_end = End {
        v4: sim::CLIENT_IP,
        v6: sim::CLIENT_IP6,
        link_local: client_cfg.link_local(sim::CLIENT_MAC),
        routed: None,
        port: CLIENT_PORT,
    };
    let server_end = End {
        v4: SERVER_IP,
        v6: sim::SERVER_IP6,
        link_local: server_cfg.link_local(sim::SERVER_MAC),
        routed: routed.then_some(SERVER_ROUTED),
        port: SERVER_PORT,
    };
    let peer = |client, ends| Peer::new(client, scenario.clone(), ends, ports.clone(), log.clone());
    let dad = [client_cfg.dad_transmits, server_cfg.dad_transmits];
    let mut net = SimPair::new(
        peer(true, (client_end, server_end)),
        client_cfg,
        peer(false, (server_end, client_end)),
        server_cfg,
        scenario.to_server,
        scenario.to_client,
        seed,
    );
    let start = net.now();
    if scenario.ipv6.is_some() {
        // An address is tentative for a probe interval (a second) per probe.
        let until = |probes: u8| start + Duration::from_secs(u64::from(probes));
        let clock = net.clock.clone();
        net.client
            .handler_mut()
            .set_tentative_until(clock.clone(), until(dad[0]));
        net.server
            .handler_mut()
            .set_tentative_until(clock, until(dad[1]));
    }
    net.server.listen(SERVER_PORT, scenario.backlog);
    net.client.listen(CLIENT_PORT, 128);
    // The client's first connection opens through the engine's API, the others through
    // the handlers' openers (in `poll`, and from `closed` as slots free up).
    if let Some((remote, side)) = net.client.handler_mut().first() {
        if let Err((e, side)) = net.client.connect(remote, side) {
            net.client.handler_mut().open_failed(remote, side, e);
        }
    }

    let all_closed = |log: &Log| {
        log.client_closed.iter().all(|c| !c.is_empty())
            && log.server_closed.iter().all(|c| !c.is_empty())
    };
    let mut steps = 0u64;
    let describe = |net: &SimPair<Peer, Peer>, what: &str| {
        let log = log.borrow();
        let open: Vec<usize> = (0..n)
            .filter(|&i| log.client_closed[i].is_empty() || log.server_closed[i].is_empty())
            .collect();
        format!(
            "{what} at t={:?}: conns not closed on both sides {open:?}\n  client states {:?}\n  server states {:?}\n  client {:?}\n  server {:?}\n  faults to server {:?}\n  faults to client {:?}",
            net.now(),
            net.client.connection_states().collect::<Vec<_>>(),
            net.server.connection_states().collect::<Vec<_>>(),
            net.client.stats(),
            net.server.stats(),
            net.client.device().stats(),
            net.server.device().stats(),
        )
    };
    loop {
        if all_closed(&log.borrow()) || !log.borrow().errors.is_empty() {
            break;
        }
        if net.now() - start > VIRTUAL_TIME_LIMIT {
            return Err(describe(&net, "virtual time limit"));
        }
        if steps >= STEP_LIMIT {
            return Err(describe(&net, "step limit (live-lock?)"));
        }
        steps += 1;
        if !net.step(Duration::from_secs(1)) {
            return Err(describe(&net, "nothing left to happen"));
        }
    }
    let finished = net.now();
    {
        let log = log.borrow();
        if !log.errors.is_empty() {
            return Err(format!(
                "{}\n{}",
                log.errors.join("\n"),
                describe(&net, "error")
            ));
        }
        for i in 0..n {
            if log.client_closed[i].len() != 1 || log.server_closed[i].len() != 1 {
                return Err(format!(
                    "conn {i}: closed client {:?} server {:?}",
                    log.client_closed[i], log.server_closed[i]
                ));
            }
        }
    }

    // Past TIME-WAIT (and every retransmission that could still be pending), nothing
    // may be left behind.
    let tw = tcp_config().time_wait;
    let until = finished + tw + Duration::from_secs(10);
    while net.now() < until {
        steps += 1;
        if steps >= STEP_LIMIT {
            return Err(describe(&net, "step limit after close"));
        }
        if !net.step(Duration::from_secs(1)) {
            break;
        }
    }
    if !log.borrow().errors.is_empty() {
        let errors = log.borrow().errors.join("\n");
        return Err(format!("{errors}\n{}", describe(&net, "error after close")));
    }
    let leaks = [
        net.client.connection_count(),
        net.client.time_wait_count(),
        net.server.connection_count(),
        net.server.time_wait_count(),
        net.client.stats().buffer_memory as usize,
        net.server.stats().buffer_memory as usize,
    ];
    if leaks != [0; 6] {
        return Err(describe(
            &net,
            &format!(
                "leak (client conns, client TW, server conns, server TW, client buffer \
                 bytes, server buffer bytes) = {leaks:?}"
            ),
        ));
    }
    let (c, s) = (net.client.stats(), net.server.stats());
    if c.duplicate_addresses + s.duplicate_addresses > 0 {
        return Err(describe(&net, "an address was taken for a duplicate"));
    }
    let expected = n as u64;
    if c.conns_closed != expected || s.conns_closed != expected {
        return Err(describe(&net, "conns_closed counters disagree"));
    }
    if c.unread_bytes_discarded + s.unread_bytes_discarded > 0 {
        return Err(describe(&net, "received bytes were discarded unread"));
    }
    Ok(Outcome {
        client: c.clone(),
        server: s.clone(),
        virtual_time: finished - start,
        steps,
        bytes: scenario.total_bytes(),
    })
}

/// Run a seed, turning panics into errors too, so the seed is always reported.
pub(crate) fn check_seed(seed: u64) -> Result<Outcome, String> {
    check_seed_with(seed, false)
}

pub(crate) fn check_seed_with(seed: u64, slow_readers: bool) -> Result<Outcome, String> {
    match catch_unwind(AssertUnwindSafe(|| run_seed(seed, slow_readers))) {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

/// What a range of seeds exercised beyond TCP, for the checks that a range covers what
/// it should.
#[derive(Debug, Default)]
pub(crate) struct Coverage {
    /// Seeds over IPv4, over IPv6, over both.
    pub(crate) seeds: [u64; 3],
    /// Seeds whose engines ran duplicate address detection at start (either engine).
    pub(crate) dad_seeds: u64,
    /// Neighbor solicitations each engine (client, server) sent to resolve the other,
    /// duplicate detection's probes left out.
    pub(crate) solicitations: [u64; 2],
    /// Neighbor advertisements each engine sent.
    pub(crate) advertisements: [u64; 2],
    /// Connections over IPv6; to a link-local address; opened by the server engine.
    pub(crate) v6_conns: u64,
    pub(crate) link_local_conns: u64,
    pub(crate) reversed: u64,
    /// Connections to the server's address outside the link's prefix, through the
    /// client's gateway.
    pub(crate) routed_conns: u64,
    /// In seeds over IPv6 alone: connections through SYN cookies, TIME-WAIT reuses.
    pub(crate) v6_cookies: u64,
    pub(crate) v6_time_wait_reused: u64,
}

impl Coverage {
    fn add(&mut self, scenario: &Scenario, o: &Outcome) {
        let family = match scenario.families {
            Families::V4 => 0,
            Families::V6 => 1,
            Families::Both => 2,
        };
        self.seeds[family] += 1;
        let Some(v6) = &scenario.ipv6 else { return };
        if scenario.families == Families::V6 {
            self.v6_cookies += o.server.syn_cookies_accepted;
            self.v6_time_wait_reused += o.client.time_wait_reused + o.server.time_wait_reused;
        }
        self.dad_seeds += u64::from(v6.dad_transmits != [0, 0]);
        for (i, stats) in [&o.client, &o.server].into_iter().enumerate() {
            // One probe per transmit for each address: the configured ones and the
            // link-local one.
            let addresses = 2 + u64::from(v6.routed && i == 1);
            let probes = addresses * u64::from(v6.dad_transmits[i]);
            self.solicitations[i] += stats.neighbor_solicitations_sent.saturating_sub(probes);
            self.advertisements[i] += stats.neighbor_advertisements_sent;
        }
        for c in &scenario.conns {
            self.v6_conns += u64::from(c.dest != Dest::V4);
            self.link_local_conns += u64::from(c.dest == Dest::LinkLocal);
            self.routed_conns += u64::from(c.dest == Dest::Routed);
            self.reversed += u64::from(c.reverse);
        }
    }
}

/// Run `seeds`; panics with every failing seed and how to replay it.
pub(crate) fn run_seeds(seeds: impl Iterator<Item = u64>, slow_readers: bool) -> Coverage {
    let started = std::time::Instant::now();
    let mut failures = Vec::new();
    let (mut count, mut bytes, mut retransmissions, mut cookies, mut reused) = (0, 0, 0, 0, 0);
    let mut coverage = Coverage::default();
    for seed in seeds {
        count += 1;
        match check_seed_with(seed, slow_readers) {
            Ok(o) => {
                bytes += o.bytes;
                retransmissions += o.client.retransmissions + o.server.retransmissions;
                cookies += o.server.syn_cookies_accepted;
                reused += o.client.time_wait_reused + o.server.time_wait_reused;
                coverage.add(&Scenario::new(seed, slow_readers), &o);
            }
            Err(e) => {
                eprintln!("seed {seed} FAILED: {e}\n  {}", replay_hint(seed));
                failures.push(seed);
            }
        }
    }
    eprintln!(
        "{count} seeds, {} MB of payload, {retransmissions} retransmissions, {cookies} \
         connections through SYN cookies, {reused} TIME-WAIT reuses, in {:?}\n{coverage:?}",
        bytes >> 20,
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {count} seeds failed: {failures:?}\n{}",
        failures.len(),
        failures
            .iter()
            .take(10)
            .map(|&s| replay_hint(s))
            .collect::<Vec<_>>()
            .join("\n")
    );
    coverage
}
