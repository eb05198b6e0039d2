//! The process's stack: one engine on one queue of the link, the program's descriptors
//! that stand for its sockets, the epoll sets that watch them, and how a thread waits.
//!
//! One [`Process`] per process, behind one lock: every socket call of every thread
//! takes it, runs the engine (received frames, due timers), does its work and lets
//! go. A single-threaded program (an nginx or redis process) never contends for it; a
//! program that passes sockets between threads pays for the lock and for the threads
//! taking turns, which is what correctness across threads costs here.
//!
//! Waiting (a blocking call, `epoll_wait`, `poll`, `select`): try, then keep polling
//! for the configured spin, then sleep in the kernel on the link's descriptor, the
//! thread's own eventfd (rung by any thread whose work may have made something ready)
//! and the program's kernel descriptors, for at most the engine's next timer.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant as StdInstant};

use libc::pollfd;
use rusty_stack::time::{Clock, SystemClock};

use crate::config::Config;
use crate::heirs::Heirloom;
use crate::siblings::Siblings;
use crate::snapshots::Publisher;
use crate::sockets::{ready, Errno, SockId, Stack};
use crate::start::Opened;
use crate::sys::{self, Bypass, Woken};

/// What a descriptor number is to the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// The kernel's: every call goes to libc.
    Kernel = 0,
    /// A Rusty socket.
    Socket = 1,
    /// An epoll set that watches at least one Rusty socket.
    Epoll = 2,
}

/// Descriptor numbers below this have their kind in a lock-free table, so that a call
/// on a kernel descriptor costs one atomic load; the (rare) numbers above take the
/// lock.
const MARKED: usize = 1 << 16;

static MARKS: [AtomicU8; MARKED] = [const { AtomicU8::new(0) }; MARKED];

/// What `fd` is, without the lock for numbers below `MARKED`.
pub(crate) fn kind(fd: RawFd) -> Kind {
    let Ok(i) = usize::try_from(fd) else {
        return Kind::Kernel;
    };
    let mark = match MARKS.get(i) {
        Some(m) => m.load(Ordering::Acquire),
        // A thread inside the stack holds the lock and makes only kernel calls.
        None if Bypass::active() => 0,
        None => PROCESS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|p| p.far_marks.get(&fd).copied())
            .unwrap_or(0),
    };
    match mark {
        1 => Kind::Socket,
        2 => Kind::Epoll,
        _ => Kind::Kernel,
    }
}

/// A socket's open file description: what `dup` shares.
#[derive(Debug, Clone)]
pub(crate) struct Desc {
    /// The socket.
    pub(crate) sock: SockId,
    /// `O_NONBLOCK`.
    pub(crate) nonblock: bool,
    /// `SO_RCVTIMEO`: how long a blocking receive waits.
    pub(crate) recv_timeout: Option<Duration>,
    /// `SO_SNDTIMEO`: how long a blocking send waits.
    pub(crate) send_timeout: Option<Duration>,
    /// Options set while the socket could still become a kernel socket, to set on it
    /// then: (level, name, value).
    pub(crate) early_options: Vec<(i32, i32, Vec<u8>)>,
}

/// One program epoll set's interest in one Rusty socket.
#[derive(Debug, Clone)]
struct Interest {
    fd: RawFd,
    /// The socket watched; `None` for an epoll set inside this one (its Rusty
    /// sockets make it readable).
    sock: Option<SockId>,
    events: u32,
    data: u64,
    /// The socket's event count when last reported (edge-triggered).
    reported: Option<u64>,
    /// Disarmed after a one-shot report, until `EPOLL_CTL_MOD`.
    armed: bool,
}

/// The stack of this process.
pub(crate) struct Process {
    /// The sockets.
    pub(crate) stack: Stack,
    /// AF_XDP queues kept for the children this process forks (see `handover`).
    spares: Vec<rusty_drivers_xdp::XdpQueue>,
    clock: SystemClock,
    link_fd: RawFd,
    spin: Duration,
    /// What the stack was built from, to build the next one after a fork.
    config: Config,
    /// The process forked (or was forked): its listeners take connections only once it
    /// shows interest in them (an accept, a wait on them), so that connections do not
    /// pile up in a process that only holds the socket (a master process).
    forked: bool,
    /// The program's descriptors that are Rusty sockets.
    descs: HashMap<RawFd, Desc>,
    /// Rusty sockets in the program's epoll sets, by epoll descriptor.
    epolls: HashMap<RawFd, Vec<Interest>>,
    /// Marks of descriptor numbers at or above [`MARKED`].
    far_marks: HashMap<RawFd, u8>,
    /// Eventfds of threads asleep in a wait.
    sleepers: Vec<RawFd>,
    /// Something may have become ready for a sleeping thread.
    stirred: bool,
    /// What the program's processes share.
    siblings: Siblings,
    /// Whether the engine treats the link as shared (see `siblings`).
    shared_link: bool,
    /// Mappings moving between the engine and `siblings`.
    learned: Vec<(std::net::IpAddr, rusty_stack::io::MacAddr)>,
    /// The stack's listen epoch whose ports `siblings` has.
    ports_published: Option<u64>,
    /// Where the engine's counters go once a second, when `rusty-run` exports them
    /// (see `snapshots`).
    metrics: Option<Publisher>,
}

// SAFETY: a `Process` owns its engine outright. The engine is `!Send` so that a
// worker's engine stays on its worker; what it holds that a thread could care about is
// the `Rc` its connection blocks share, and every clone of that `Rc` lives inside the
// engine. Moved as a whole between threads, one thread at a time under `PROCESS`'s
// lock, no reference count is ever touched by two threads at once. The device (a TAP
// or AF_XDP queue) and the socket table are `Send` in their own right.
#[allow(unsafe_code)]
unsafe impl Send for Process {}

mod fork;

static PROCESS: Mutex<Option<Process>> = Mutex::new(None);

/// The result of setting the library up, once per process.
static STARTED: OnceLock<bool> = OnceLock::new();

impl Process {
    /// A process stack on what [`open_stack`](crate::start::open_stack) opened, built
    /// from `config`, sharing `siblings` with the program's other processes.
    pub(crate) fn new(opened: Opened, config: Config, siblings: Siblings) -> Process {
        siblings.join();
        let metrics = siblings.publisher();
        let Opened {
            stack,
            link_fd,
            clock,
            spares,
        } = opened;
        let mut process = Process {
            stack,
            spares,
            clock,
            link_fd,
            spin: config.spin,
            config,
            forked: false,
            descs: HashMap::new(),
            epolls: HashMap::new(),
            far_marks: HashMap::new(),
            sleepers: Vec::new(),
            stirred: false,
            siblings,
            shared_link: false,
            learned: Vec::new(),
            ports_published: None,
            metrics,
        };
        process.publish_due();
        process
    }

    fn mark(&mut self, fd: RawFd, kind: Kind) {
        match usize::try_from(fd).ok().and_then(|i| MARKS.get(i)) {
            Some(m) => m.store(kind as u8, Ordering::Release),
            None if kind == Kind::Kernel => {
                self.far_marks.remove(&fd);
            }
            None => {
                self.far_marks.insert(fd, kind as u8);
            }
        }
    }

    /// Run the engine; note that sleepers may have something to see.
    fn turn(&mut self) {
        self.sync_siblings();
        if self.stack.poll() > 0 {
            self.stirred = true;
            self.stack.drain_learned_arp(&mut self.learned);
            if !self.learned.is_empty() {
                self.siblings.publish(&self.learned);
                self.learned.clear();
            }
        }
        let crowded = self.forked || self.siblings.crowded();
        if crowded != self.shared_link {
            self.shared_link = crowded;
            self.stack.set_shared_link(crowded);
        }
        self.publish_due();
    }

    /// Publish the engine's counters if they are due (at once for a new stack, so
    /// that a process shows from its start, then once per interval).
    fn publish_due(&mut self) {
        if let Some(m) = &mut self.metrics {
            let now = sys::monotonic_ns();
            if m.due(now) {
                let (stats, gauges) = self.stack.counters();
                m.publish(now, stats, gauges);
            }
        }
    }

    /// How long the process may sleep before it must publish what its engine did
    /// since its last publication; `None`: as long as it likes.
    fn metrics_sleep_limit(&self) -> Option<Duration> {
        let m = self.metrics.as_ref()?;
        let (stats, gauges) = self.stack.counters();
        m.sleep_limit(stats, gauges, sys::monotonic_ns)
    }

    /// Tell the other processes which ports this one listens on, if that changed, and
    /// take in what they published: neighbours, and the ports any of them listens on.
    fn sync_siblings(&mut self) {
        let epoch = self.stack.listen_epoch();
        if self.ports_published != Some(epoch) {
            self.ports_published = Some(epoch);
            self.siblings.set_listening(&self.stack.listening_ports());
        }
        if self.siblings.take_new(&mut self.learned) {
            self.stack.set_link_listeners(self.siblings.listened());
        }
        for (ip, mac) in self.learned.drain(..) {
            self.stack.import_arp(ip, mac);
        }
    }

    /// Record that the caller changed something another thread may wait for.
    pub(crate) fn stir(&mut self) {
        self.stirred = true;
    }

    /// The descriptor `fd`, if it is a Rusty socket.
    pub(crate) fn desc(&self, fd: RawFd) -> Result<&Desc, Errno> {
        self.descs.get(&fd).ok_or(Errno(libc::EBADF))
    }

    /// The descriptor `fd`, if it is a Rusty socket.
    pub(crate) fn desc_mut(&mut self, fd: RawFd) -> Result<&mut Desc, Errno> {
        self.descs.get_mut(&fd).ok_or(Errno(libc::EBADF))
    }

    /// Make `fd` (a fresh eventfd) stand for socket `sock`.
    pub(crate) fn attach(&mut self, fd: RawFd, sock: SockId, nonblock: bool) {
        self.descs.insert(
            fd,
            Desc {
                sock,
                nonblock,
                recv_timeout: None,
                send_timeout: None,
                early_options: Vec::new(),
            },
        );
        self.mark(fd, Kind::Socket);
    }

    /// `new` (a duplicate of `old`'s eventfd) stands for the same socket as `old`.
    pub(crate) fn duplicate(&mut self, old: RawFd, new: RawFd) -> Result<(), Errno> {
        let desc = self.desc(old)?.clone();
        self.stack.add_ref(desc.sock)?;
        self.descs.insert(new, desc);
        self.mark(new, Kind::Socket);
        Ok(())
    }

    /// Forget descriptor `fd` (the caller closes the number): its socket loses a
    /// reference, and epoll sets stop watching it through `fd`. Does nothing for a
    /// kernel descriptor, but an epoll set's shadow goes with its descriptor.
    pub(crate) fn forget(&mut self, fd: RawFd) {
        self.epolls.remove(&fd);
        for interests in self.epolls.values_mut() {
            interests.retain(|i| i.fd != fd);
        }
        if let Some(desc) = self.descs.remove(&fd) {
            let listening = self.stack.backlog(desc.sock).is_some();
            if listening {
                self.siblings.disinherit(fd);
            }
            let _ = self.stack.release(desc.sock);
            self.stirred = true;
            if listening {
                self.sync_siblings();
            }
        }
        self.mark(fd, Kind::Kernel);
    }

    /// `listen` on socket `fd`: the engine takes connections at once, unless the
    /// process forked (then from the first sign of interest, [`Process::engage`]).
    pub(crate) fn listen(&mut self, fd: RawFd, backlog: usize) -> Result<(), Errno> {
        let sock = self.desc(fd)?.sock;
        let engage = !self.forked;
        self.stack.listen(sock, backlog, engage)?;
        if engage {
            self.stack.set_steered(true);
        }
        self.stirred = true;
        self.bequeath(fd);
        // The other processes learn of the port now, not at this one's next turn: it
        // may fork or exec before it has one.
        self.sync_siblings();
        Ok(())
    }

    /// Record listening socket `fd` (again, after a change) for the program this
    /// process may exec (see `heirs`); nothing if `fd` is not a listening socket.
    pub(crate) fn bequeath(&mut self, fd: RawFd) {
        let Ok(desc) = self.desc(fd) else {
            return;
        };
        let (sock, nonblock) = (desc.sock, desc.nonblock);
        let (Some(backlog), Ok(addr), Ok(family), Ok(opts)) = (
            self.stack.backlog(sock),
            self.stack.local_addr(sock),
            self.stack.family(sock),
            self.stack.opts(sock),
        ) else {
            return;
        };
        let h = Heirloom {
            fd,
            family,
            addr,
            v6only: opts.v6only,
            backlog,
            nonblock,
        };
        if !self.siblings.bequeath(h) {
            log::warn!("listening socket {fd} will not survive exec: the table is full");
        }
    }

    /// Take up the listening sockets the program image before this one's `exec` had
    /// (see `heirs`): each whose descriptor survived becomes a listening socket again,
    /// with the same number and address. The process then behaves as a forked one
    /// (its listeners take connections from the first sign of interest).
    pub(crate) fn inherit(&mut self) {
        for h in self.siblings.inheritance() {
            if self.descs.contains_key(&h.fd) || !sys::is_eventfd(h.fd) {
                self.siblings.disinherit(h.fd);
                continue;
            }
            self.forked = true;
            let sock = self.stack.socket(h.family);
            let made = self
                .stack
                .opts(sock)
                .and_then(|opts| {
                    let opts = crate::sockets::SockOpts {
                        v6only: h.v6only,
                        ..opts
                    };
                    self.stack.set_opts(sock, opts)
                })
                .and_then(|()| self.stack.bind(sock, h.addr))
                .and_then(|()| self.stack.listen(sock, h.backlog, false));
            if let Err(e) = made {
                log::warn!("inherited listening socket {} on {}: {e:?}", h.fd, h.addr);
                let _ = self.stack.release(sock);
                continue;
            }
            self.attach(h.fd, sock, h.nonblock);
        }
    }

    /// The program shows interest in connections on `fd` (an accept, or a wait that
    /// includes it): if it is a listening socket, the engine takes connections for
    /// it, and the process's queue receives frames again.
    pub(crate) fn engage(&mut self, fd: RawFd) {
        if let Ok(sock) = self.desc(fd).map(|d| d.sock) {
            self.engage_sock(sock);
        }
    }

    fn engage_sock(&mut self, sock: SockId) {
        if self.stack.is_listening(sock) == Ok(true) && self.stack.engage(sock) == Ok(true) {
            self.stack.set_steered(true);
        }
    }

    /// The process starts an active open: its queue must receive frames.
    pub(crate) fn connecting(&mut self) {
        self.stack.set_steered(true);
    }

    /// The library was set up before the program made any socket (it is giving up
    /// root, see `hooks::privileges`): until it listens or connects, the kernel steers
    /// nothing to its queue, so that a process that never makes a TCP socket holds no
    /// share of the link's flows.
    pub(crate) fn park(&mut self) {
        if self.descs.is_empty() {
            self.stack.set_steered(false);
        }
    }

    /// Whether socket `fd` could still become a kernel socket (nothing done yet that
    /// only Rusty's stack can carry).
    pub(crate) fn is_fresh(&self, fd: RawFd) -> bool {
        self.desc(fd)
            .and_then(|d| self.stack.is_fresh(d.sock))
            .unwrap_or(false)
    }

    // ----- epoll -----

    /// `epoll_ctl` for a Rusty socket `fd` in the program's epoll set `epfd`.
    pub(crate) fn epoll_ctl(
        &mut self,
        epfd: RawFd,
        op: i32,
        fd: RawFd,
        events: u32,
        data: u64,
    ) -> Result<(), Errno> {
        let sock = match kind(fd) {
            Kind::Socket => Some(self.desc(fd)?.sock),
            Kind::Epoll => None,
            Kind::Kernel => return Err(Errno(libc::EBADF)),
        };
        let interests = self.epolls.entry(epfd).or_default();
        let at = interests.iter().position(|i| i.fd == fd);
        match (op, at) {
            (libc::EPOLL_CTL_ADD, Some(_)) => return Err(Errno(libc::EEXIST)),
            (libc::EPOLL_CTL_ADD, None) => interests.push(Interest {
                fd,
                sock,
                events,
                data,
                reported: None,
                armed: true,
            }),
            (libc::EPOLL_CTL_MOD, Some(i)) => {
                let interest = &mut interests[i];
                interest.events = events;
                interest.data = data;
                interest.reported = None;
                interest.armed = true;
            }
            (libc::EPOLL_CTL_DEL, Some(i)) => {
                interests.remove(i);
            }
            (libc::EPOLL_CTL_MOD | libc::EPOLL_CTL_DEL, None) => return Err(Errno(libc::ENOENT)),
            _ => return Err(Errno(libc::EINVAL)),
        }
        self.mark(epfd, Kind::Epoll);
        Ok(())
    }

    /// What interest `i` sees now: its readiness bits and the event count that
    /// edge-triggered reports compare.
    fn interest_state(&self, i: &Interest, depth: u8) -> (u32, u64) {
        match i.sock {
            Some(sock) => (self.stack.readiness(sock), self.stack.events(sock)),
            None => {
                let ready = if self.epoll_peek(i.fd, depth + 1) {
                    ready::IN
                } else {
                    0
                };
                (ready, self.epoll_count(i.fd, depth + 1))
            }
        }
    }

    /// Ready events of the Rusty sockets (and nested epoll sets) in epoll set `epfd`,
    /// at most `max`, as `(events, data)`; edge-triggered and one-shot interests are
    /// updated as Linux updates them when it reports.
    pub(crate) fn epoll_ready(&mut self, epfd: RawFd, max: usize, out: &mut Vec<(u32, u64)>) {
        let Some(mut interests) = self.epolls.remove(&epfd) else {
            return;
        };
        // Waiting on a set that holds a listener is interest in its connections (a
        // parent that forked stopped taking them until it showed some).
        for sock in interests.iter().filter_map(|i| i.sock) {
            self.engage_sock(sock);
        }
        for i in interests.iter_mut() {
            if out.len() >= max {
                break;
            }
            if !i.armed {
                continue;
            }
            let (bits, count) = self.interest_state(i, 0);
            let bits = bits & (i.events | ready::ERR | ready::HUP);
            if bits == 0 {
                continue;
            }
            if i.events & libc::EPOLLET as u32 != 0 {
                if i.reported == Some(count) {
                    continue;
                }
                i.reported = Some(count);
            }
            if i.events & libc::EPOLLONESHOT as u32 != 0 {
                i.armed = false;
            }
            out.push((bits, i.data));
        }
        self.epolls.insert(epfd, interests);
    }

    /// Whether epoll set `epfd` would report one of its Rusty sockets now (nested
    /// sets at most four deep, as Linux bounds nesting).
    pub(crate) fn epoll_peek(&self, epfd: RawFd, depth: u8) -> bool {
        if depth > 4 {
            return false;
        }
        self.epolls.get(&epfd).is_some_and(|interests| {
            interests.iter().filter(|i| i.armed).any(|i| {
                let (bits, count) = self.interest_state(i, depth);
                let edge_seen = i.events & libc::EPOLLET as u32 != 0 && i.reported == Some(count);
                bits & (i.events | ready::ERR | ready::HUP) != 0 && !edge_seen
            })
        })
    }

    /// The sum of the event counts of what epoll set `epfd` watches: it moves with
    /// every event in the set.
    fn epoll_count(&self, epfd: RawFd, depth: u8) -> u64 {
        if depth > 4 {
            return 0;
        }
        self.epolls.get(&epfd).map_or(0, |interests| {
            interests
                .iter()
                .map(|i| self.interest_state(i, depth).1)
                .fold(0, u64::wrapping_add)
        })
    }

    /// Whether epoll set `epfd` watches any Rusty socket.
    pub(crate) fn epoll_watches_sockets(&self, epfd: RawFd) -> bool {
        self.epolls.get(&epfd).is_some_and(|i| !i.is_empty())
    }

    /// Readiness of Rusty socket `fd` as `poll` reports it for `events`.
    pub(crate) fn poll_revents(&self, fd: RawFd, events: i16) -> i16 {
        let Ok(desc) = self.desc(fd) else {
            return libc::POLLNVAL;
        };
        let bits = self.stack.readiness(desc.sock);
        let wanted = events as u16 as u32 | ready::ERR | ready::HUP;
        (bits & wanted) as u16 as i16
    }
}

/// Run `f` on the process's stack, with this thread's calls bypassing the hooks;
/// `None` when the library is not running in this process. The engine does not run:
/// a call that finds what it needs (bytes to read, room to send) costs no system
/// call, and one that does not runs the engine and tries again ([`with_turn`]).
///
/// Small writes the stack holds back (`Stack::send`) are sent first: whatever the
/// program does next, it may wait for their answer.
pub(crate) fn with<R>(f: impl FnOnce(&mut Process) -> R) -> Option<R> {
    locked(Entry::Release, f)
}

/// [`with`], after one engine turn (frames received, timers due, held writes sent).
pub(crate) fn with_turn<R>(f: impl FnOnce(&mut Process) -> R) -> Option<R> {
    locked(Entry::Turn, f)
}

/// [`with`] for a send: small writes held back stay held, to leave in one segment
/// with what this call adds.
pub(crate) fn with_held<R>(f: impl FnOnce(&mut Process) -> R) -> Option<R> {
    locked(Entry::Hold, f)
}

/// Send the small writes the stack holds back, if any, for a call that does not
/// otherwise take the lock (one on a kernel descriptor). Costs one atomic load when
/// nothing is held.
pub(crate) fn settle() {
    if HOLDING.load(Ordering::Relaxed) && !Bypass::active() {
        with(|_| ());
    }
}

/// Whether the stack holds small writes back; read without the lock by [`settle`].
static HOLDING: AtomicBool = AtomicBool::new(false);

/// What taking the lock does before the call's own work.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// Send held writes.
    Release,
    /// Run an engine turn (which sends them too).
    Turn,
    /// Nothing.
    Hold,
}

fn locked<R>(entry: Entry, f: impl FnOnce(&mut Process) -> R) -> Option<R> {
    let _bypass = Bypass::enter();
    let mut guard = PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    let p = guard.as_mut()?;
    match entry {
        Entry::Release => p.stack.release_held(),
        Entry::Turn => p.turn(),
        Entry::Hold => {}
    }
    let r = f(p);
    HOLDING.store(p.stack.holding(), Ordering::Relaxed);
    if std::mem::take(&mut p.stirred) {
        for &bell in &p.sleepers {
            sys::ring(bell);
        }
    }
    Some(r)
}

/// Install the process's stack (the library's start-up), and the handlers that give a
/// forked child a stack of its own.
pub(crate) fn install(process: Process) {
    let _bypass = Bypass::enter();
    *PROCESS.lock().unwrap_or_else(|p| p.into_inner()) = Some(process);
    if let Err(e) = sys::at_fork(
        fork::before_fork,
        fork::after_fork_in_parent,
        fork::after_fork_in_child,
    ) {
        sys::fatal(&format!("pthread_atfork: {e}"));
    }
    if let Err(e) = sys::at_exit(at_exit) {
        sys::fatal(&format!("atexit: {e}"));
    }
}

/// How long an exiting process keeps its stack running for what it still has to
/// deliver.
const EXIT_LINGER: Duration = Duration::from_secs(10);

/// At `exit`: close what the program left open, as the kernel would, then keep the
/// engine running until every connection has delivered its data and FIN (or
/// [`EXIT_LINGER`] passes): the kernel finishes sending for an exited process, and
/// here the process is the stack. Then the process leaves the link's count of stacks,
/// and gives up its metrics slot.
/// (A process ended by a signal or `_exit` skips this, as it skips every `atexit`.)
extern "C" fn at_exit() {
    let _call = crate::call::Call::enter("exit");
    let start = StdInstant::now();
    let Some(link_fd) = with(|p| {
        p.stack.release_all();
        p.link_fd
    }) else {
        return;
    };
    while start.elapsed() < EXIT_LINGER {
        let Some((delivering, timer)) = with_turn(|p| {
            let now = p.clock.now();
            let timer = p
                .stack
                .next_deadline()
                .map(|d| d.saturating_duration_since(now));
            (p.stack.delivering(), timer)
        }) else {
            return;
        };
        if !delivering {
            break;
        }
        let left = EXIT_LINGER.saturating_sub(start.elapsed());
        let mut fds = [pollfd {
            fd: link_fd,
            events: libc::POLLIN,
            revents: 0,
        }];
        let _bypass = Bypass::enter();
        sys::sleep(&mut fds, Some(timer.map_or(left, |t| t.min(left))), None);
    }
    with(|p| {
        p.siblings.leave();
        if let Some(m) = p.metrics.take() {
            m.release();
        }
    });
}

/// Whether the library runs this process's TCP sockets; sets it up on first call from
/// the environment (`start`).
pub(crate) fn running(start: impl FnOnce() -> bool) -> bool {
    *STARTED.get_or_init(start)
}

/// Whether the library was set up and runs this process's TCP sockets (no set-up).
pub(crate) fn started() -> bool {
    STARTED.get().copied().unwrap_or(false)
}

thread_local! {
    /// This thread's eventfd, which other threads ring while it sleeps.
    static BELL: std::cell::Cell<Option<RawFd>> = const { std::cell::Cell::new(None) };
}

fn bell() -> Option<RawFd> {
    BELL.try_with(|b| {
        if b.get().is_none() {
            b.set(sys::eventfd(true, true).ok());
        }
        b.get()
    })
    .ok()
    .flatten()
}

/// How a wait ended without its condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unmet {
    /// The time given ran out.
    TimedOut,
    /// A signal arrived (`EINTR`).
    Interrupted,
    /// The link's queue reports an error or hang-up: the device is gone, and waiting on
    /// it would spin (`ENETDOWN`).
    LinkGone,
}

/// What a wait does next.
enum Step<R> {
    Done(R),
    Expired,
    Spin,
    Sleep(Option<Duration>, RawFd),
}

/// Wait until `attempt` (run under the lock, after an engine turn) returns
/// `Some`, for at most `timeout` (`None`: no limit). While sleeping, the thread also
/// wakes for `extra` (the program's kernel descriptors; their `revents` are not kept:
/// `attempt` looks at them itself). `sigmask`, if given, is in place while sleeping.
pub(crate) fn wait<R>(
    timeout: Option<Duration>,
    extra: &[pollfd],
    sigmask: Option<&libc::sigset_t>,
    mut attempt: impl FnMut(&mut Process) -> Option<R>,
) -> Result<R, Unmet> {
    let start = StdInstant::now();
    let bell = bell();
    let mut fds: Vec<pollfd> = Vec::with_capacity(extra.len() + 2);
    loop {
        let step = with_turn(|p| {
            if let Some(r) = attempt(p) {
                return Step::Done(r);
            }
            let waited = start.elapsed();
            if timeout.is_some_and(|t| waited >= t) {
                return Step::Expired;
            }
            if waited < p.spin {
                return Step::Spin;
            }
            let now = p.clock.now();
            let timer = p
                .stack
                .next_deadline()
                .map(|d| d.saturating_duration_since(now));
            let left = timeout.map(|t| t.saturating_sub(waited));
            let publish = p.metrics_sleep_limit();
            if let Some(b) = bell {
                p.sleepers.push(b);
            }
            let limit = [timer, left, publish].into_iter().flatten().min();
            Step::Sleep(limit, p.link_fd)
        });
        let (limit, link_fd) = match step {
            Some(Step::Done(r)) => return Ok(r),
            Some(Step::Expired) | None => return Err(Unmet::TimedOut),
            Some(Step::Spin) => {
                std::hint::spin_loop();
                continue;
            }
            Some(Step::Sleep(limit, link_fd)) => (limit, link_fd),
        };
        fds.clear();
        fds.extend([link_fd].into_iter().chain(bell).map(|fd| pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        }));
        fds.extend(extra.iter().map(|p| pollfd { revents: 0, ..*p }));
        let woken = {
            let _bypass = Bypass::enter();
            sys::sleep(&mut fds, limit, sigmask)
        };
        with(|p| p.sleepers.retain(|&s| Some(s) != bell));
        if let Some(b) = bell {
            sys::drain(b);
        }
        if woken == Woken::Interrupted {
            return Err(Unmet::Interrupted);
        }
        if fds[0].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            return Err(Unmet::LinkGone);
        }
    }
}
