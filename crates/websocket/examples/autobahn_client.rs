//! Drive Autobahn's fuzzing server (`wstest -m fuzzingserver`) with [`WsClient`] on the
//! kernel's sockets, to check the client role against a peer we did not write:
//!
//! `autobahn_client <ipv4:port> [agent] [--deflate]` (`--deflate`: offer
//! permessage-deflate, for sections 12 and 13) asks the server how many cases it has, runs
//! each (echoing every message back, as Autobahn expects), then asks it to write its
//! report. One connection at a time, one worker.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rusty::cli::link::LinkSpec;
use rusty::launch::{self, Launch};
use rusty::runtime::StopHandle;
use rusty_stack::{CloseReason, Conn, ConnectError, Handler, Opener};
use rusty_websocket::{
    ClientRequest, CloseInfo, Data, Message, WsApp, WsClient, WsConfig, WsConn, WsHandle,
};

/// What a connection is for.
#[derive(Debug, Clone, Copy)]
enum Purpose {
    Count,
    Case,
    Report,
}

/// The WebSocket side: echo in cases, read the count, note when a connection ends.
#[derive(Default)]
struct Ab {
    count: Option<usize>,
    connection_over: bool,
}

impl WsApp for Ab {
    type State = Purpose;

    fn message(&mut self, ws: &mut WsHandle<'_, '_, Purpose>, msg: Message<'_>) {
        match *ws.state() {
            Purpose::Count => {
                if let Data::Text(t) = msg.data() {
                    self.count = t.trim().parse().ok();
                }
            }
            Purpose::Case => {
                let kind = msg.kind();
                let _ = ws.send_shared(kind, msg.into_bytes());
            }
            Purpose::Report => {}
        }
    }

    fn closed(&mut self, _state: Purpose, _info: CloseInfo) {
        self.connection_over = true;
    }
}

/// The `Handler`: a client plus the sequence of connections.
struct Driver {
    client: WsClient<Ab>,
    target: SocketAddr,
    agent: String,
    next_case: usize,
    busy: bool,
    reported: bool,
    stop: StopHandle,
    failed: Arc<AtomicBool>,
}

impl Driver {
    fn open(&mut self, opener: &mut Opener<'_, WsConn<Purpose>>, path: String, purpose: Purpose) {
        let req = ClientRequest::new(&self.target.to_string(), &path);
        let state = self.client.connection(req, purpose);
        opener.connect(self.target, state);
        self.busy = true;
    }
}

impl rusty::metrics::AppMetrics for Driver {}

impl Handler for Driver {
    type Conn = WsConn<Purpose>;

    fn accept(&mut self, l: std::net::SocketAddr, r: std::net::SocketAddr) -> Option<Self::Conn> {
        self.client.accept(l, r)
    }
    fn connected(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        self.client.connected(conn)
    }
    fn data(&mut self, conn: &mut Conn<'_, Self::Conn>, data: &[u8]) -> usize {
        self.client.data(conn, data)
    }
    fn writable(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        self.client.writable(conn)
    }
    fn peer_closed(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        self.client.peer_closed(conn)
    }
    fn timer(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        self.client.timer(conn)
    }
    fn closed(&mut self, o: &mut Opener<'_, Self::Conn>, state: Self::Conn, reason: CloseReason) {
        Handler::closed(&mut self.client, o, state, reason)
    }
    fn connect_failed(
        &mut self,
        o: &mut Opener<'_, Self::Conn>,
        remote: std::net::SocketAddr,
        state: Self::Conn,
        error: ConnectError,
    ) {
        Handler::connect_failed(&mut self.client, o, remote, state, error);
        self.failed.store(true, Ordering::Relaxed);
        self.stop.stop();
    }

    fn poll(&mut self, opener: &mut Opener<'_, Self::Conn>) {
        let app = self.client.app_mut();
        if self.busy && !app.connection_over {
            return;
        }
        app.connection_over = false;
        self.busy = false;
        let count = app.count;
        match count {
            None if self.next_case == 0 => {
                self.next_case = 1;
                self.open(opener, "/getCaseCount".into(), Purpose::Count);
            }
            None => {
                eprintln!("autobahn_client: no case count");
                self.failed.store(true, Ordering::Relaxed);
                self.stop.stop();
            }
            Some(n) if self.next_case <= n => {
                let path = format!("/runCase?case={}&agent={}", self.next_case, self.agent);
                self.next_case += 1;
                self.open(opener, path, Purpose::Case);
            }
            Some(_) if !self.reported => {
                self.reported = true;
                let path = format!("/updateReports?agent={}", self.agent);
                self.open(opener, path, Purpose::Report);
            }
            Some(_) => self.stop.stop(),
        }
    }
}

fn main() -> ExitCode {
    let (flags, mut args): (Vec<String>, Vec<String>) =
        std::env::args().skip(1).partition(|a| a.starts_with("--"));
    let deflate = flags.iter().any(|f| f == "--deflate");
    let usage = flags.iter().any(|f| f != "--deflate") || args.is_empty() || args.len() > 2;
    let target = args.first().and_then(|a| a.parse::<SocketAddr>().ok());
    let (false, Some(target)) = (usage, target) else {
        eprintln!("usage: autobahn_client <ipv4:port> [agent] [--deflate]");
        return ExitCode::from(2);
    };
    let agent = if args.len() == 2 {
        args.remove(1)
    } else {
        "rusty-ws-client".to_string()
    };
    let mut cfg = WsConfig::default();
    cfg.deflate.enabled = deflate;
    let launch = Launch::new(vec![LinkSpec::kernel(1)]);
    let stop = StopHandle::new();
    let failed = Arc::new(AtomicBool::new(false));
    let make = {
        let (stop, failed, agent) = (stop.clone(), failed.clone(), agent.clone());
        move |_: &rusty::runtime::WorkerContext| Driver {
            client: WsClient::new(Ab::default(), cfg.clone()),
            target,
            agent: agent.clone(),
            next_case: 0,
            busy: false,
            reported: false,
            stop: stop.clone(),
            failed: failed.clone(),
        }
    };
    match launch::run(&launch, None, &stop, make, || {}) {
        Ok(_) if !failed.load(Ordering::Relaxed) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("autobahn_client: {e}");
            ExitCode::from(1)
        }
    }
}
