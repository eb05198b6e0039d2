//! The callback rules of [`AppCore`], on a fake connection: re-offer, pause, resume, a
//! wrapped message offered whole, callbacks that end the connection, exactly one
//! `closed`, stale ids, and active opens requested from callbacks.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::app::conn::SendError;

const LOCAL: SocketAddr =
    SocketAddr::V4(std::net::SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80));
const REMOTE: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    Ipv4Addr::new(10, 0, 0, 2),
    4000,
));

/// Unread bytes as a ring that "wraps" after `wrap_at` bytes: `readable` shows only
/// the part before the wrap until it is made contiguous.
#[derive(Default)]
struct FakeUnread {
    bytes: Vec<u8>,
    wrap_at: Option<usize>,
}

impl UnreadBytes for FakeUnread {
    fn readable(&self) -> &[u8] {
        let end = self.wrap_at.unwrap_or(usize::MAX).min(self.bytes.len());
        &self.bytes[..end]
    }
    fn len(&self) -> usize {
        self.bytes.len()
    }
}

#[derive(Default)]
struct FakeConn {
    unread: FakeUnread,
    aborted: bool,
    sent: Vec<u8>,
}

impl Connection for FakeConn {
    fn local_addr(&self) -> SocketAddr {
        LOCAL
    }
    fn peer_addr(&self) -> SocketAddr {
        REMOTE
    }
    fn send_space(&self) -> usize {
        usize::MAX
    }
    fn send(&mut self, data: &[u8]) -> Result<usize, SendError> {
        self.sent.extend_from_slice(data);
        Ok(data.len())
    }
    fn send_shared(&mut self, data: Bytes) -> Result<(), SendError> {
        self.sent.extend_from_slice(&data);
        Ok(())
    }
    fn notify_writable(&mut self) {}
    fn set_timer(&mut self, _: Option<Duration>) {}
    fn set_user_timeout(&mut self, _: Option<Duration>) {}
    fn set_keepalive(&mut self, _: Option<crate::Keepalive>) {}
    fn unacked_len(&self) -> usize {
        0
    }
    fn close(&mut self) {}
    fn shutdown_write(&mut self) {}
    fn abort(&mut self) {
        self.aborted = true;
    }
}

impl AppConn for FakeConn {
    /// Counts lends, to show the context reaches the connection.
    type Ctx = usize;
    type Unread = FakeUnread;
    fn with_ops<R>(&mut self, ctx: &mut usize, f: impl FnOnce(&mut dyn Connection) -> R) -> R {
        *ctx += 1;
        f(self)
    }
    fn addrs(&self) -> (SocketAddr, SocketAddr) {
        (LOCAL, REMOTE)
    }
    fn is_closed(&self) -> bool {
        self.aborted
    }
    fn unread_len(&self) -> usize {
        self.unread.len()
    }
    fn take_unread(&mut self) -> FakeUnread {
        std::mem::take(&mut self.unread)
    }
    fn put_unread(&mut self, mut u: FakeUnread, consumed: usize, contiguous: bool, _: &mut usize) {
        u.bytes.drain(..consumed);
        u.wrap_at = if contiguous {
            None
        } else {
            u.wrap_at.map(|w| w - consumed)
        };
        self.unread = u;
    }
    fn keep_unread(&mut self, rest: &[u8], _: &mut usize) {
        self.unread.bytes.extend_from_slice(rest);
    }
}

/// What a [`Script`] handler does with offered bytes.
#[derive(Clone, Copy, PartialEq)]
enum Take {
    /// At most this many per call.
    Upto(usize),
    /// Only whole lines; nothing on a partial one.
    Lines,
    /// Abort on the first offer.
    Abort,
}

struct Script {
    take: Take,
    refuse: bool,
    log: Vec<String>,
    reconnect: bool,
}

impl Script {
    fn new(take: Take) -> Script {
        Script {
            take,
            refuse: false,
            log: Vec::new(),
            reconnect: false,
        }
    }
}

impl Handler for Script {
    type Conn = u32;
    fn accept(&mut self, _: SocketAddr, _: SocketAddr) -> Option<u32> {
        self.log.push("accept".into());
        (!self.refuse).then_some(0)
    }
    fn connected(&mut self, _: &mut Conn<'_, u32>) {
        self.log.push("connected".into());
    }
    fn data(&mut self, conn: &mut Conn<'_, u32>, data: &[u8]) -> usize {
        let n = match self.take {
            Take::Upto(n) => n.min(data.len()),
            Take::Lines => data.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1),
            Take::Abort => {
                conn.abort();
                0
            }
        };
        *conn.state() += 1;
        self.log
            .push(format!("data {:?}", String::from_utf8_lossy(&data[..n])));
        n
    }
    fn writable(&mut self, _: &mut Conn<'_, u32>) {
        self.log.push("writable".into());
    }
    fn receive_resumed(&mut self, _: &mut Conn<'_, u32>) {
        self.log.push("receive_resumed".into());
    }
    fn peer_closed(&mut self, _: &mut Conn<'_, u32>) {
        self.log.push("peer_closed".into());
    }
    fn closed(&mut self, opener: &mut Opener<'_, u32>, calls: u32, reason: CloseReason) {
        self.log.push(format!("closed {reason:?} after {calls}"));
        if self.reconnect {
            opener.connect(REMOTE, 7);
        }
    }
    fn connect_failed(
        &mut self,
        opener: &mut Opener<'_, u32>,
        _: SocketAddr,
        state: u32,
        error: ConnectError,
    ) {
        self.log.push(format!("connect_failed {state} {error:?}"));
        // Retry at once: must not run again in the same turn.
        opener.connect(REMOTE, state + 1);
    }
}

fn accepted(take: Take) -> (AppCore<Script, FakeConn>, usize, Stats) {
    let mut core = AppCore::new(Script::new(take), 4, 4);
    let mut stats = Stats::default();
    let id = core.insert(FakeConn::default(), None);
    let index = core.index_of(id).unwrap();
    assert!(core.accept(index, &mut stats));
    core.connected(&mut 0, index);
    (core, index, stats)
}

#[test]
fn partial_takes_are_offered_again_at_once() {
    let (mut core, i, _) = accepted(Take::Upto(3));
    core.data(&mut 0, i, b"abcdefgh");
    assert_eq!(
        core.handler().log[2..],
        ["data \"abc\"", "data \"def\"", "data \"gh\""]
    );
    assert_eq!(core[i].unread_len(), 0);
}

#[test]
fn a_pause_keeps_bytes_until_the_backend_offers_again() {
    let (mut core, i, _) = accepted(Take::Lines);
    core.data(&mut 0, i, b"GET /");
    assert_eq!(core[i].unread_len(), 5, "paused: kept");
    // New bytes queue behind the unread ones and the whole is offered.
    core.data(&mut 0, i, b" HTTP\nrest");
    assert_eq!(
        core.handler().log[3..],
        ["data \"GET / HTTP\\n\"", "data \"\""]
    );
    assert_eq!(core[i].unread_len(), 4);
    // After writable the unread bytes are offered again.
    core.writable(&mut 0, i);
    assert_eq!(core.handler().log[5..], ["writable", "data \"\""]);
}

#[test]
fn resuming_runs_receive_resumed_then_offers_the_unread_bytes() {
    let (mut core, i, _) = accepted(Take::Lines);
    core.resume(&mut 0, i);
    assert_eq!(
        core.handler().log[2..],
        ["receive_resumed"],
        "nothing unread"
    );
    core.data(&mut 0, i, b"GET /");
    core.handler_mut().take = Take::Upto(9);
    core.resume(&mut 0, i);
    assert_eq!(
        core.handler().log[3..],
        ["data \"\"", "receive_resumed", "data \"GET /\""]
    );
    // A connection a callback ended gets no more.
    core.handler_mut().take = Take::Abort;
    core.data(&mut 0, i, b"x");
    core.resume(&mut 0, i);
    assert_eq!(core.handler().log.last().unwrap(), "data \"\"");
}

#[test]
fn a_message_across_the_wrap_is_offered_whole() {
    let (mut core, i, _) = accepted(Take::Lines);
    core[i].unread = FakeUnread {
        bytes: b"hello\n".to_vec(),
        wrap_at: Some(3),
    };
    core.data(&mut 0, i, &[]);
    assert_eq!(
        core.handler().log[2..],
        ["data \"\"", "data \"hello\\n\""],
        "the wrapped piece, then the whole line"
    );
}

#[test]
fn an_abort_inside_data_ends_the_callbacks_and_closed_comes_once() {
    let (mut core, i, mut stats) = accepted(Take::Abort);
    core.data(&mut 0, i, b"xyz");
    core.writable(&mut 0, i);
    core.peer_closed(&mut 0, i);
    core.data(&mut 0, i, b"more");
    core.finish(&mut 0, i, CloseReason::Aborted, &mut stats);
    core.finish(&mut 0, i, CloseReason::Normal, &mut stats);
    let conn = core.remove(&mut 0, i, &mut stats);
    assert!(conn.aborted);
    assert_eq!(
        core.handler().log,
        ["accept", "connected", "data \"\"", "closed Aborted after 1"]
    );
    assert_eq!(stats.conns_aborted, 1);
    assert_eq!(stats.conns_closed, 0);
    assert_eq!(stats.unread_bytes_discarded, 3, "the aborted offer's bytes");
}

#[test]
fn unread_bytes_get_a_last_offer_then_are_counted() {
    let (mut core, i, mut stats) = accepted(Take::Upto(2));
    core[i].unread.bytes = b"abcd".to_vec();
    core.handler_mut().take = Take::Lines;
    core.peer_closed(&mut 0, i);
    core.handler_mut().take = Take::Upto(2);
    core.finish(&mut 0, i, CloseReason::Normal, &mut stats);
    assert_eq!(
        core.handler().log[2..],
        [
            "peer_closed",
            "data \"ab\"",
            "data \"cd\"",
            "closed Normal after 2"
        ]
    );
    assert_eq!(stats.conns_closed, 1);
    assert_eq!(stats.unread_bytes_discarded, 0);
}

#[test]
fn refused_connections_never_see_closed_and_removal_finishes_the_rest() {
    let mut core = AppCore::new(Script::new(Take::Upto(9)), 4, 4);
    core.handler_mut().refuse = true;
    let mut stats = Stats::default();
    let id = core.insert(FakeConn::default(), None);
    let i = core.index_of(id).unwrap();
    assert!(!core.accept(i, &mut stats));
    core.data(&mut 0, i, b"ignored");
    core.finish(&mut 0, i, CloseReason::Aborted, &mut stats);
    core.remove(&mut 0, i, &mut stats);
    assert_eq!(core.handler().log, ["accept"]);
    assert_eq!((stats.conns_refused, stats.conns_aborted), (1, 1));
    // An active open removed without a close still gets exactly one `closed`.
    let id = core.insert(FakeConn::default(), Some(5));
    core.remove(&mut 0, core.index_of(id).unwrap(), &mut stats);
    assert_eq!(core.handler().log[1..], ["closed Normal after 5"]);
}

#[test]
fn stale_ids_do_not_reach_a_reused_slot() {
    let mut core: AppCore<Script, FakeConn> = AppCore::new(Script::new(Take::Upto(1)), 4, 4);
    let mut stats = Stats::default();
    let old = core.insert(FakeConn::default(), Some(0));
    assert_eq!(core.next_id().index(), old.index() + 1);
    core.remove(&mut 0, old.index() as usize, &mut stats);
    let new = core.insert(FakeConn::default(), Some(0));
    assert_eq!(new.index(), old.index(), "the slot is reused");
    assert_eq!(core.index_of(old), None);
    assert_eq!(core.index_of(new), Some(new.index() as usize));
    assert_eq!(core.id(new.index() as usize), Some(new));
}

/// A backend whose connects fail: `connect_failed` runs, and its retry waits a turn.
struct Refusing {
    core: AppCore<Script, FakeConn>,
    attempts: Vec<u32>,
}

#[test]
fn requested_opens_start_after_the_callback_and_retries_wait_a_turn() {
    let mut b = Refusing {
        core: AppCore::new(Script::new(Take::Upto(1)), 4, 4),
        attempts: Vec::new(),
    };
    b.core.handler_mut().reconnect = true;
    let mut stats = Stats::default();
    let id = b.core.insert(FakeConn::default(), Some(0));
    let i = b.core.index_of(id).unwrap();
    b.core.finish(&mut 0, i, CloseReason::Reset, &mut stats);
    let refuse = |b: &mut Refusing, _: SocketAddr, state: u32| {
        b.attempts.push(state);
        Err((ConnectError::NoPortAvailable, state))
    };
    AppCore::start_requested(&mut b, |b| &mut b.core, refuse);
    assert_eq!(b.attempts, [7], "one attempt per turn");
    AppCore::start_requested(&mut b, |b| &mut b.core, refuse);
    assert_eq!(b.attempts, [7, 8], "the retry ran on the next turn");
    assert_eq!(
        b.core.handler().log[1..],
        [
            "connect_failed 7 NoPortAvailable",
            "connect_failed 8 NoPortAvailable"
        ]
    );
}

#[test]
fn the_backend_context_is_lent_to_every_callback() {
    let (mut core, i, _) = accepted(Take::Upto(100));
    let mut lends = 0;
    core.data(&mut lends, i, b"x");
    core.peer_closed(&mut lends, i);
    assert_eq!(lends, 2);
}

#[test]
fn opens_are_refused_when_full_or_stopping() {
    let mut core: AppCore<Script, FakeConn> = AppCore::new(Script::new(Take::Upto(1)), 1, 8);
    assert_eq!(core.may_open(3), Ok(3));
    core.insert(FakeConn::default(), Some(0));
    assert!(core.is_full());
    assert_eq!(core.may_open(3), Err((ConnectError::TooManyConnections, 3)));
    core.remove(&mut 0, 0, &mut Stats::default());
    core.stop_accepting();
    assert!(!core.is_accepting());
    assert_eq!(core.may_open(3), Err((ConnectError::ShuttingDown, 3)));
}
