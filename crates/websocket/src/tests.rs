//! End to end: our client and server roles, and a raw byte-level client, over the
//! simulated link (virtual time, optional loss and reordering).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use rusty_stack::io::fault::FaultConfig;
use rusty_stack::{Conn, Handler};
use rusty_testkit::sim::{self, SimPair};

use crate::frame::{apply_mask, OpCode, RSV1};
use crate::parser::{FrameParser, Role, Step};
use crate::*;

const PORT: u16 = 9001;

fn server_addr() -> SocketAddr {
    SocketAddr::from((sim::SERVER_IP, PORT))
}

/// `client` connected (with connection state `state`) to `server` listening on
/// [`PORT`], over a link with `faults` both ways.
fn connected<C: Handler, S: Handler>(
    client: C,
    state: C::Conn,
    server: S,
    faults: FaultConfig,
    seed: u64,
) -> SimPair<C, S> {
    let mut net = SimPair::new(
        client,
        sim::engine_config(sim::CLIENT_IP, seed),
        server,
        sim::engine_config(sim::SERVER_IP, seed),
        faults,
        faults,
        seed,
    );
    net.server.listen(PORT, 16);
    let _ = net.client.connect(server_addr(), state);
    net
}

/// One message of the client's script: sent whole, or in fragments cut at `cuts`
/// with a ping after each fragment but the last.
struct Scripted {
    kind: MessageKind,
    data: Vec<u8>,
    cuts: Vec<usize>,
}

fn script() -> Vec<Scripted> {
    let text = "Hello, wörld ✓ κόσμε".as_bytes().to_vec();
    let bin: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    let big: Vec<u8> = (0..200_000u32).map(|i| (i >> 3) as u8).collect();
    let mut s = vec![
        // Cut inside the two-byte 'ö' and the three-byte '✓'.
        Scripted {
            kind: MessageKind::Text,
            data: text,
            cuts: vec![9, 16, 17],
        },
        Scripted {
            kind: MessageKind::Binary,
            data: bin,
            cuts: vec![1, 1000, 2999],
        },
        Scripted {
            kind: MessageKind::Binary,
            data: big.clone(),
            cuts: vec![],
        },
        Scripted {
            kind: MessageKind::Binary,
            data: big,
            cuts: vec![70_000],
        },
        Scripted {
            kind: MessageKind::Text,
            data: Vec::new(),
            cuts: vec![],
        },
        Scripted {
            kind: MessageKind::Binary,
            data: Vec::new(),
            cuts: vec![0],
        },
    ];
    for i in 0..50 {
        let data = format!("message {i}").into_bytes();
        s.push(Scripted {
            kind: MessageKind::Text,
            data,
            cuts: vec![],
        });
    }
    s
}

/// The client application: plays the script on open, collects what comes back, and
/// closes once every echo arrived.
#[derive(Default)]
struct EchoCheck {
    received: Vec<(MessageKind, Vec<u8>)>,
    pongs: Vec<Vec<u8>>,
    pings_sent: Vec<Vec<u8>>,
    expect: usize,
    closed: Option<CloseInfo>,
}

impl WsApp for EchoCheck {
    type State = ();

    fn opened(&mut self, ws: &mut WsHandle<'_, '_, ()>) {
        let s = script();
        self.expect = s.len();
        for (i, m) in s.iter().enumerate() {
            if m.cuts.is_empty() {
                let r = match m.kind {
                    MessageKind::Text => ws.send_text(std::str::from_utf8(&m.data).unwrap()),
                    MessageKind::Binary => ws.send_binary(&m.data),
                };
                r.unwrap();
                continue;
            }
            let mut bounds = vec![0];
            bounds.extend(&m.cuts);
            bounds.push(m.data.len());
            let n = bounds.len() - 1;
            for j in 0..n {
                let part = &m.data[bounds[j]..bounds[j + 1]];
                ws.send_fragment(m.kind, part, j == 0, j + 1 == n).unwrap();
                if j + 1 < n {
                    let p = format!("ping {i}.{j}").into_bytes();
                    ws.ping(&p).unwrap();
                    self.pings_sent.push(p);
                }
            }
        }
        // A whole message inside a fragmented one is refused.
        ws.send_fragment(MessageKind::Text, b"a", true, false)
            .unwrap();
        assert_eq!(ws.send_text("b"), Err(WsSendError::FragmentInProgress));
        ws.send_fragment(MessageKind::Text, b"b", false, true)
            .unwrap();
        self.expect += 1;
    }

    fn message(&mut self, ws: &mut WsHandle<'_, '_, ()>, msg: Message<'_>) {
        if let Data::Text(t) = msg.data() {
            assert_eq!(t.as_bytes(), msg.as_bytes());
        }
        self.received.push((msg.kind(), msg.as_bytes().to_vec()));
        if self.received.len() == self.expect {
            assert_eq!(
                ws.close(close::NO_STATUS, ""),
                Err(WsSendError::InvalidCloseCode)
            );
            ws.close(close::NORMAL, "done").unwrap();
            assert_eq!(ws.send_text("late"), Err(WsSendError::NotOpen));
            assert_eq!(ws.close(close::NORMAL, ""), Err(WsSendError::NotOpen));
        }
    }

    fn pong(&mut self, _ws: &mut WsHandle<'_, '_, ()>, payload: &[u8]) {
        self.pongs.push(payload.to_vec());
    }

    fn closed(&mut self, _state: (), info: CloseInfo) {
        self.closed = Some(info);
    }
}

type EchoNet = SimPair<WsClient<EchoCheck>, WsServer<WsEcho>>;

fn echo_net(client_cfg: WsConfig, server_cfg: WsConfig, faults: FaultConfig, seed: u64) -> EchoNet {
    let mut client = WsClient::new(EchoCheck::default(), client_cfg);
    let state = client.connection(ClientRequest::new("10.0.0.2:9001", "/echo"), ());
    let server = WsServer::new(WsEcho, server_cfg);
    connected(client, state, server, faults, seed)
}

fn check_echo(faults: FaultConfig, seed: u64) {
    check_echo_with(WsConfig::default(), WsConfig::default(), faults, seed);
}

/// Run the script from a client with `client_cfg` against an echo server with
/// `server_cfg`; returns the client's and the server's counters.
fn check_echo_with(
    client_cfg: WsConfig,
    server_cfg: WsConfig,
    faults: FaultConfig,
    seed: u64,
) -> (WsStats, WsStats) {
    let mut net = echo_net(client_cfg, server_cfg, faults, seed);
    let done = net.run_until(Duration::from_secs(300), |n| {
        n.client.handler().app().closed.is_some() && n.server.handler().stats().clean_closes == 1
    });
    let app = net.client.handler().app();
    assert!(
        done,
        "seed {seed}: got {} of {} echoes, client {}, server {}",
        app.received.len(),
        app.expect,
        net.client.handler().stats(),
        net.server.handler().stats()
    );
    let mut want: Vec<(MessageKind, Vec<u8>)> =
        script().into_iter().map(|m| (m.kind, m.data)).collect();
    want.push((MessageKind::Text, b"ab".to_vec()));
    assert_eq!(app.received.len(), want.len());
    for (i, (got, want)) in app.received.iter().zip(&want).enumerate() {
        assert!(got == want, "seed {seed}: message {i} differs");
    }
    assert_eq!(app.pongs, app.pings_sent);
    let info = app.closed.clone().unwrap();
    assert_eq!(
        (info.code, info.clean, info.opened),
        (close::NORMAL, true, true)
    );
    let (c, s) = (net.client.handler().stats(), net.server.handler().stats());
    assert_eq!((c.total_errors(), s.total_errors()), (0, 0));
    assert_eq!(s.messages_in, want.len() as u64);
    assert_eq!(s.messages_out, want.len() as u64);
    assert_eq!(s.pings_in, app.pings_sent.len() as u64);
    assert_eq!((c.clean_closes, s.clean_closes), (1, 1));
    (*c, *s)
}

#[test]
fn client_and_server_echo_fragmented_messages_with_pings() {
    check_echo(FaultConfig::none(), 1);
}

/// 3% loss, 5% reordering by 3 ms, 1% duplication.
fn lossy() -> FaultConfig {
    {
        let mut c = FaultConfig::none();
        c.loss = 0.03;
        c.reorder = 0.05;
        c.reorder_delay = Duration::from_millis(3);
        c.duplicate = 0.01;
        c
    }
}

#[test]
fn echo_survives_loss_and_reordering() {
    let f = lossy();
    for seed in 1..=4 {
        check_echo(f, seed);
    }
}

/// A byte-level client: sends `script` on connect, records everything that comes back.
#[derive(Default)]
struct Raw {
    script: Vec<u8>,
    got: Vec<u8>,
    done: bool,
    /// Leave received bytes unread (so our window closes).
    stall: bool,
    id: Option<rusty_stack::ConnId>,
}

impl Handler for Raw {
    type Conn = ();

    fn accept(&mut self, _l: std::net::SocketAddr, _r: std::net::SocketAddr) -> Option<()> {
        None
    }

    fn connected(&mut self, conn: &mut Conn<'_, ()>) {
        self.id = Some(conn.id());
        conn.send_shared(Bytes::from(self.script.clone())).unwrap();
    }

    fn data(&mut self, _conn: &mut Conn<'_, ()>, data: &[u8]) -> usize {
        if self.stall {
            return 0;
        }
        self.got.extend_from_slice(data);
        data.len()
    }

    fn peer_closed(&mut self, conn: &mut Conn<'_, ()>) {
        conn.close();
    }

    fn closed(
        &mut self,
        _o: &mut rusty_stack::Opener<'_, ()>,
        _s: (),
        _r: rusty_stack::CloseReason,
    ) {
        self.done = true;
    }
}

const UPGRADE: &str = "GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// A masked client frame with first byte `b0` (FIN, RSV, opcode as given).
fn raw_frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    let key = [0xA1, 0xB2, 0xC3, 0xD4];
    let mut f = vec![b0];
    match payload.len() {
        n @ 0..=125 => f.push(0x80 | n as u8),
        n @ 126..=0xFFFF => {
            f.push(0x80 | 126);
            f.extend((n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend((n as u64).to_be_bytes());
        }
    }
    f.extend(key);
    let at = f.len();
    f.extend_from_slice(payload);
    apply_mask(&mut f[at..], key, 0);
    f
}

/// What the raw client saw: the response head and the frames after it.
struct Seen {
    head: String,
    frames: Vec<(u8, Vec<u8>)>,
    closed: bool,
}

impl Seen {
    fn status(&self) -> u16 {
        self.head
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    fn close_code(&self) -> Option<u16> {
        let (_, p) = self.frames.iter().find(|(b0, _)| b0 & 0x0F == 0x8)?;
        Some(if p.len() >= 2 {
            u16::from_be_bytes([p[0], p[1]])
        } else {
            close::NO_STATUS
        })
    }
}

fn raw_run<A: WsServerApp>(app: A, cfg: WsConfig, script: Vec<u8>) -> (Seen, WsStats) {
    let mut net = connected(
        Raw {
            script,
            ..Raw::default()
        },
        (),
        WsServer::new(app, cfg),
        FaultConfig::none(),
        9,
    );
    net.run_until(Duration::from_secs(60), |n| n.client.handler().done);
    let raw = net.client.handler();
    (
        parse_seen(&raw.got, raw.done),
        *net.server.handler().stats(),
    )
}

/// Split what a raw client received into the response head and the frames after it.
fn parse_seen(got: &[u8], done: bool) -> Seen {
    let end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(got.len(), |p| p + 4);
    let head = String::from_utf8_lossy(&got[..end]).into_owned();
    let mut frames = Vec::new();
    let mut parser = FrameParser::new(Role::Client, u64::MAX >> 1);
    parser.allow_rsv(RSV1);
    // Only a 101 is followed by frames.
    let mut rest = if got.starts_with(b"HTTP/1.1 101 ") {
        &got[end..]
    } else {
        &[][..]
    };
    let mut cur = (0u8, Vec::new());
    while !rest.is_empty() || parser.end_pending() {
        let (n, step) = parser.feed(rest).expect("server frames parse");
        rest = &rest[n..];
        match step {
            Step::NeedMore => break,
            Step::Header(h) => {
                cur = (
                    u8::from(h.fin) << 7 | h.rsv << 4 | h.opcode.bits(),
                    Vec::new(),
                )
            }
            Step::Payload { data, mask, .. } => {
                assert!(mask.is_none(), "server frames are unmasked");
                cur.1.extend_from_slice(data);
            }
            Step::End(_) => frames.push(std::mem::take(&mut cur)),
        }
    }
    Seen {
        head,
        frames,
        closed: done,
    }
}

fn after_upgrade(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut s = UPGRADE.as_bytes().to_vec();
    for f in frames {
        s.extend_from_slice(f);
    }
    s
}

#[test]
fn frames_in_the_request_segment_are_processed() {
    let script = after_upgrade(&[
        raw_frame(0x81, b"hi"),
        raw_frame(0x89, b"pp"),
        raw_frame(0x88, &[0x03, 0xE8, b'b', b'y', b'e']),
    ]);
    let (seen, stats) = raw_run(WsEcho, WsConfig::default(), script);
    assert_eq!(seen.status(), 101, "{}", seen.head);
    assert!(seen
        .head
        .contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
    assert_eq!(
        seen.frames,
        vec![
            (0x81, b"hi".to_vec()),
            (0x8A, b"pp".to_vec()),
            (0x88, vec![0x03, 0xE8])
        ]
    );
    assert!(seen.closed);
    assert_eq!(
        (stats.handshakes, stats.messages_in, stats.clean_closes),
        (1, 1, 1)
    );
}

#[test]
fn each_violation_fails_with_its_status_and_is_counted() {
    use ProtocolError as E;
    let long_len = {
        let mut f = vec![0x82, 0x80 | 127];
        f.extend(0x8000_0000_0000_0001u64.to_be_bytes());
        f.extend([1, 2, 3, 4]);
        f
    };
    let cases: Vec<(Vec<Vec<u8>>, E)> = vec![
        (vec![raw_frame(0x80 | 0x40 | 0x1, b"x")], E::ReservedBits),
        (vec![raw_frame(0x83, b"")], E::ReservedOpcode),
        (vec![raw_frame(0x8B, b"")], E::ReservedOpcode),
        (vec![raw_frame(0x89, &[0; 126])], E::ControlTooLong),
        (vec![raw_frame(0x09, b"")], E::FragmentedControl),
        (vec![vec![0x81, 0x01, b'x']], E::Unmasked),
        (vec![long_len], E::LengthOverflow),
        (vec![raw_frame(0x80, b"x")], E::UnexpectedContinuation),
        (
            vec![raw_frame(0x01, b"a"), raw_frame(0x81, b"b")],
            E::ExpectedContinuation,
        ),
        (vec![raw_frame(0x88, &[3])], E::CloseLength),
        (vec![raw_frame(0x88, &[0x03, 0xED])], E::CloseCode),
        (
            vec![raw_frame(0x88, &[0x03, 0xE8, 0xC0, 0xAF])],
            E::CloseReason,
        ),
        // Fail fast: the first fragment already cannot be UTF-8, no FIN ever comes.
        (
            vec![raw_frame(0x01, &[b'a', 0xED, 0xA0, 0x80])],
            E::InvalidUtf8,
        ),
        (vec![raw_frame(0x81, &[0xCE, 0xBA, 0xE1])], E::InvalidUtf8),
        (vec![raw_frame(0x82, &[0; 2000])], E::FrameTooBig),
        (
            vec![
                raw_frame(0x02, &[0; 1000]),
                raw_frame(0x00, &[0; 1000]),
                raw_frame(0x80, &[0; 1000]),
            ],
            E::MessageTooBig,
        ),
    ];
    let cfg = WsConfig {
        max_frame: 1500,
        max_message: 2500,
        ..WsConfig::default()
    };
    for (frames, err) in cases {
        let (seen, stats) = raw_run(WsEcho, cfg.clone(), after_upgrade(&frames));
        assert_eq!(seen.status(), 101);
        assert_eq!(
            seen.close_code(),
            Some(err.close_code()),
            "{err:?}: {:?}",
            seen.frames
        );
        assert!(seen.closed, "{err:?}: connection left open");
        assert_eq!(stats.error(err), 1, "{err:?}: {stats}");
        assert_eq!(stats.total_errors(), 1, "{err:?}: {stats}");
        assert_eq!(stats.messages_in, 0, "{err:?}");
    }
}

/// A server that serves `/chat` only, refuses a foreign origin, and picks the `chat`
/// subprotocol when offered.
struct Picky;

impl WsApp for Picky {
    type State = String;

    fn message(&mut self, ws: &mut WsHandle<'_, '_, String>, msg: Message<'_>) {
        let reply = format!("{} {}", ws.state(), msg.as_bytes().len());
        ws.send_text(&reply).unwrap();
    }
}

impl WsServerApp for Picky {
    fn open(&mut self, req: &Request, _peer: SocketAddr) -> Result<Accept<String>, Reject> {
        if req.path() != "/chat" {
            return Err(Reject::new(404));
        }
        if req.origin().is_some_and(|o| o != "http://good.example") {
            return Err(Reject::new(403).body("origin\n"));
        }
        let accept = Accept::new(req.path().to_string()).header("X-Seen", "yes");
        if req.protocols().any(|p| p == "chat") {
            return Ok(accept.protocol("chat"));
        }
        Ok(accept)
    }
}

#[test]
fn handshake_outcomes() {
    let with = |extra: &str, path: &str| {
        let req = UPGRADE
            .replace("/chat", path)
            .replace("\r\n\r\n", &format!("\r\n{extra}\r\n"));
        let mut s = req.into_bytes();
        s.extend(raw_frame(0x81, b"abc"));
        s.extend(raw_frame(0x88, &[0x03, 0xE8]));
        raw_run(Picky, WsConfig::default(), s)
    };
    let (seen, stats) = with(
        "Sec-WebSocket-Protocol: superchat, chat\r\nOrigin: http://good.example\r\n",
        "/chat",
    );
    assert_eq!(seen.status(), 101);
    assert!(
        seen.head.contains("\r\nSec-WebSocket-Protocol: chat\r\n"),
        "{}",
        seen.head
    );
    assert!(seen.head.contains("\r\nX-Seen: yes\r\n"));
    assert_eq!(seen.frames[0], (0x81, b"/chat 3".to_vec()));
    assert_eq!(stats.handshakes, 1);

    let (seen, stats) = with("Origin: http://evil.example\r\n", "/chat");
    assert_eq!(seen.status(), 403);
    assert!(seen.frames.is_empty() && seen.closed);
    assert_eq!(
        (stats.rejected, stats.rejected_by_app, stats.handshakes),
        (1, 1, 0)
    );

    let (seen, _) = with("", "/other");
    assert_eq!(seen.status(), 404);

    let old = UPGRADE.replace("Version: 13", "Version: 8");
    let (seen, stats) = raw_run(WsEcho, WsConfig::default(), old.into_bytes());
    assert_eq!(seen.status(), 426);
    assert!(seen.head.contains("\r\nSec-WebSocket-Version: 13\r\n"));
    assert_eq!((stats.rejected, stats.rejected_by_app), (1, 0));

    let huge = UPGRADE.replace(
        "\r\n\r\n",
        &format!("\r\nX-Big: {}\r\n\r\n", "a".repeat(9000)),
    );
    let (seen, _) = raw_run(WsEcho, WsConfig::default(), huge.into_bytes());
    assert_eq!(seen.status(), 431);
    assert!(seen.closed);
}

#[test]
fn idle_connections_are_closed_with_1001() {
    let cfg = WsConfig {
        idle_timeout: Some(Duration::from_secs(5)),
        ..WsConfig::default()
    };
    // The raw client sends the request and then nothing, not even an answer to the
    // server's close: the close timeout ends it.
    let (seen, stats) = raw_run(WsEcho, cfg, UPGRADE.as_bytes().to_vec());
    assert_eq!(seen.close_code(), Some(close::GOING_AWAY));
    assert!(seen.closed);
    assert_eq!((stats.idle_timeouts, stats.close_timeouts), (1, 1));
}

/// A stand-in for permessage-deflate: "compresses" by XOR with 0x55.
struct Xor;

impl MessageCodec for Xor {
    fn decompress(
        &mut self,
        p: &[u8],
        _end: bool,
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), CodecError> {
        if out.len() + p.len() > limit {
            return Err(CodecError::TooBig);
        }
        if p.first() == Some(&0x55) {
            return Err(CodecError::Invalid);
        }
        out.extend(p.iter().map(|b| b ^ 0x55));
        Ok(())
    }

    fn compress(&mut self, p: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        out.extend(p.iter().map(|b| b ^ 0x55));
        Ok(())
    }
}

struct XorEcho;

impl WsApp for XorEcho {
    type State = ();

    fn message(&mut self, ws: &mut WsHandle<'_, '_, ()>, msg: Message<'_>) {
        WsEcho.message(ws, msg);
    }
}

impl WsServerApp for XorEcho {
    fn open(&mut self, req: &Request, _peer: SocketAddr) -> Result<Accept<()>, Reject> {
        assert_eq!(req.extensions().collect::<Vec<_>>(), ["x-xor"]);
        Ok(Accept::new(()).extension(Box::new(Xor), "x-xor"))
    }
}

#[test]
fn compressed_messages_go_through_the_codec() {
    let x = |s: &[u8]| s.iter().map(|b| b ^ 0x55).collect::<Vec<u8>>();
    let upgrade = UPGRADE.replace("\r\n\r\n", "\r\nSec-WebSocket-Extensions: x-xor\r\n\r\n");
    let run = |frames: &[Vec<u8>]| {
        let mut s = upgrade.clone().into_bytes();
        for f in frames {
            s.extend_from_slice(f);
        }
        raw_run(XorEcho, WsConfig::default(), s)
    };
    // RSV1 on the first frame only; the continuation's bytes are compressed too.
    let (seen, stats) = run(&[
        raw_frame(0x40 | 0x1, &x(b"he")),
        raw_frame(0x80, &x("llö".as_bytes())),
        raw_frame(0x82, b"plain"),
        raw_frame(0x88, &[]),
    ]);
    assert!(seen
        .head
        .contains("\r\nSec-WebSocket-Extensions: x-xor\r\n"));
    assert_eq!(seen.frames[0], (0xC1, x("hellö".as_bytes())));
    assert_eq!(seen.frames[1], (0xC2, x(b"plain")));
    assert_eq!(stats.total_errors(), 0);
    let (seen, stats) = run(&[raw_frame(0x01, b"a"), raw_frame(0xC0, b"b")]);
    assert_eq!(seen.close_code(), Some(close::PROTOCOL_ERROR));
    assert_eq!(stats.error(ProtocolError::CompressedContinuation), 1);
    // Decompressed text is checked for UTF-8 like any other.
    let (seen, _) = run(&[raw_frame(0xC1, &x(&[0xFF]))]);
    assert_eq!(seen.close_code(), Some(close::INVALID_PAYLOAD));
    let (_, stats) = run(&[raw_frame(0xC2, &[0x55])]);
    assert_eq!(stats.error(ProtocolError::BadCompression), 1);
    let _ = OpCode::Text;
}

#[test]
fn a_peer_that_does_not_read_stops_being_read() {
    let (n, size) = (300, 8000);
    let mut frames: Vec<Vec<u8>> = (0..n)
        .map(|i| raw_frame(0x82, &vec![i as u8; size]))
        .collect();
    frames.push(raw_frame(0x88, &[0x03, 0xE8]));
    let cfg = WsConfig {
        max_send_queue: 64 << 10,
        ..WsConfig::default()
    };
    let mut net = connected(
        Raw {
            script: after_upgrade(&frames),
            stall: true,
            ..Raw::default()
        },
        (),
        WsServer::new(WsEcho, cfg),
        FaultConfig::none(),
        4,
    );
    net.run_until(Duration::from_secs(10), |_| false);
    let s = *net.server.handler().stats();
    assert!(s.paused >= 1, "{s}");
    // Echoes queued stay near the bound: what the client's window and our queue hold.
    assert!(s.messages_in < n as u64 / 2, "{s}");
    let id = net.client.handler().id.unwrap();
    net.client.handler_mut().stall = false;
    net.client.resume_receive(id);
    let done = net.run_until(Duration::from_secs(60), |n| n.client.handler().done);
    assert!(done);
    let seen = parse_seen(&net.client.handler().got, true);
    assert_eq!(seen.frames.len(), n + 1);
    for (i, (b0, p)) in seen.frames[..n].iter().enumerate() {
        assert!(
            *b0 == 0x82 && p.len() == size && p.iter().all(|&b| b == i as u8),
            "echo {i}"
        );
    }
    assert_eq!(seen.close_code(), Some(close::NORMAL));
    assert_eq!(net.server.handler().stats().messages_out, n as u64);
}

#[test]
fn a_stalled_handshake_times_out() {
    let cfg = WsConfig {
        handshake_timeout: Some(Duration::from_secs(3)),
        ..WsConfig::default()
    };
    let (seen, stats) = raw_run(WsEcho, cfg, b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec());
    assert!(seen.closed && seen.head.is_empty());
    assert_eq!((stats.handshake_timeouts, stats.handshakes), (1, 0));
}

/// Run our client against `server` on `path` until the client application hears
/// that the connection closed; returns what it heard and the pair.
fn client_outcome<S: Handler>(
    server: S,
    path: &str,
) -> (CloseInfo, SimPair<WsClient<EchoCheck>, S>) {
    let mut client = WsClient::new(EchoCheck::default(), WsConfig::default());
    let state = client.connection(ClientRequest::new("10.0.0.2:9001", path), ());
    let mut net = connected(client, state, server, FaultConfig::none(), 2);
    net.run_until(Duration::from_secs(30), |n| {
        n.client.handler().app().closed.is_some()
    });
    let info = net
        .client
        .handler()
        .app()
        .closed
        .clone()
        .expect("closed reported");
    (info, net)
}

#[test]
fn a_refused_client_handshake_is_reported() {
    let (info, net) = client_outcome(WsServer::new(Picky, WsConfig::default()), "/nowhere");
    assert_eq!(
        (info.code, info.clean, info.opened),
        (close::ABNORMAL, false, false)
    );
    assert!(info.reason.contains("404"), "{}", info.reason);
    assert_eq!(net.client.handler().stats().rejected, 1);
    assert_eq!(net.server.handler().stats().rejected_by_app, 1);
}

#[test]
fn a_refused_tcp_connection_is_reported() {
    // The raw handler refuses every connection it is offered: we are reset.
    let (info, _) = client_outcome(Raw::default(), "/");
    assert_eq!((info.code, info.opened), (close::ABNORMAL, false));
    assert!(info.reason.starts_with("TCP: "), "{}", info.reason);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Whatever follows the handshake, the server neither panics nor leaves the
    /// connection hanging: it echoes, or fails the connection with a close frame. The
    /// noise may end inside a frame header (e.g. `01 80`: a masked frame whose key never
    /// comes), after which only a timer can end the connection, so the idle timeout is
    /// on, as a server facing the open Internet would have it.
    #[test]
    fn garbage_after_the_handshake_is_survived(
        frames in proptest::collection::vec(
            (proptest::prelude::any::<u8>(), proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)),
            0..6,
        ),
        noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
    ) {
        let mut raw: Vec<Vec<u8>> = frames.iter().map(|(b0, p)| raw_frame(*b0, p)).collect();
        raw.push(noise);
        raw.push(raw_frame(0x88, &[0x03, 0xE8]));
        let cfg = WsConfig {
            handshake_timeout: Some(Duration::from_secs(2)),
            idle_timeout: Some(Duration::from_secs(5)),
            ..WsConfig::default()
        };
        let (seen, stats) = raw_run(WsEcho, cfg, after_upgrade(&raw));
        proptest::prop_assert_eq!(seen.status(), 101);
        proptest::prop_assert!(seen.closed);
        let code = seen.close_code();
        proptest::prop_assert!(code.is_some_and(close::is_valid_code) || code == Some(close::NO_STATUS), "{:?}", code);
        if stats.total_errors() == 0 {
            proptest::prop_assert_eq!(stats.messages_in, stats.messages_out);
        }
    }
}

#[test]
fn an_open_idle_connection_is_small() {
    // Inline state only: the handshake buffer and the message buffers are freed once
    // no message is in progress.
    assert!(
        std::mem::size_of::<WsConn<()>>() <= 408,
        "{}",
        std::mem::size_of::<WsConn<()>>()
    );
}

mod deflate;
