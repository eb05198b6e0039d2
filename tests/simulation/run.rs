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
    let peer = |name| Peer::new(name, scenario.clone(), ports.clone(), log.clone());
    let mut client_cfg = sim::engine_config(sim::CLIENT_IP, seed);
    if let Some(ports) = &scenario.client_ports {
        client_cfg.ephemeral_ports = ports.clone();
    }
    let mut server_cfg = sim::engine_config(SERVER_IP, seed);
    client_cfg.tcp = scenario.client.tcp_config();
    server_cfg.tcp = scenario.server.tcp_config();
    if let Some(m) = scenario.client_memory {
        client_cfg.memory = m;
    }
    if let Some(m) = scenario.server_memory {
        server_cfg.memory = m;
    }
    let mut net = SimPair::new(
        Client::new(peer("client")),
        client_cfg,
        Server::new(peer("server")),
        server_cfg,
        scenario.to_server,
        scenario.to_client,
        seed,
    );
    net.server.listen(SERVER_PORT, scenario.backlog);
    // The first connection opens through the engine's API, the others through the
    // handler's opener (in `poll`, and from `closed` as slots free up).
    if let Some((remote, side)) = net.client.handler_mut().next_conn() {
        if let Err((e, side)) = net.client.connect(remote, side) {
            return Err(format!("connect of conn {} failed: {e}", side.index));
        }
    }

    let all_closed = |log: &Log| {
        log.client_closed.iter().all(|c| !c.is_empty())
            && log.server_closed.iter().all(|c| !c.is_empty())
    };
    let start = net.now();
    let mut steps = 0u64;
    let describe = |net: &SimPair<Client, Server>, what: &str| {
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

pub(crate) fn run_seeds(seeds: impl Iterator<Item = u64>, slow_readers: bool) {
    let started = std::time::Instant::now();
    let mut failures = Vec::new();
    let (mut count, mut bytes, mut retransmissions, mut cookies, mut reused) = (0, 0, 0, 0, 0);
    for seed in seeds {
        count += 1;
        match check_seed_with(seed, slow_readers) {
            Ok(o) => {
                bytes += o.bytes;
                retransmissions += o.client.retransmissions + o.server.retransmissions;
                cookies += o.server.syn_cookies_accepted;
                reused += o.client.time_wait_reused + o.server.time_wait_reused;
            }
            Err(e) => {
                eprintln!("seed {seed} FAILED: {e}\n  {}", replay_hint(seed));
                failures.push(seed);
            }
        }
    }
    eprintln!(
        "{count} seeds, {} MB of payload, {retransmissions} retransmissions, {cookies} \
         connections through SYN cookies, {reused} TIME-WAIT reuses, in {:?}",
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
}
