//! Listening sockets that outlive `exec`.
//!
//! On Linux a listening socket whose descriptor is not close-on-exec survives `exec`:
//! the new program image finds it under the same number. nginx's binary upgrade hands
//! its listeners to the new binary this way (naming their numbers in its
//! environment), and so do other servers that re-exec themselves. Here the descriptor
//! is only an eventfd, and the socket belonged to the old image's engine, which `exec`
//! ends. So each process records its listening sockets in the table the program's
//! processes share ([`Table`]): the descriptor's number, the address, the backlog and
//! whether it was non-blocking, under the process's id and start time (both of which
//! `exec` keeps, and no other process shares). The new image, as the library is
//! loaded, looks up its own entries and, for each whose descriptor it still has (an
//! eventfd; one that was close-on-exec is gone), makes a listening socket with the
//! same family, address (IPv4 or IPv6, with its scope), `IPV6_V6ONLY` and number. Connections the old image had not accepted are lost with
//! its engine; on Linux they would still be in the queue.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use crate::sockets::Family;

/// Entries in the table: listening sockets across all the program's processes.
const SLOTS: usize = 256;

/// One listening socket of one process; free while `pid` is 0.
#[derive(Default)]
#[repr(C)]
struct Slot {
    pid: AtomicU32,
    fd: AtomicI32,
    started: AtomicU64,
    /// The address's 128 bits, the high half first (an IPv4 address IPv4-mapped).
    ip: [AtomicU64; 2],
    /// The port in the low 16 bits, and the [`AF_INET6`] and [`V6ONLY`] bits.
    port: AtomicU32,
    /// The scope of a link-local IPv6 address.
    scope: AtomicU32,
    /// The backlog in the low 31 bits; the top bit: non-blocking.
    backlog: AtomicU32,
}

/// The program's listening sockets, in the memory its processes share.
#[repr(C)]
pub(crate) struct Table {
    slots: [Slot; SLOTS],
}

impl Default for Table {
    fn default() -> Table {
        Table {
            slots: std::array::from_fn(|_| Slot::default()),
        }
    }
}

/// A process as the table knows it: its id and start time (in clock ticks since
/// boot), which `exec` keeps and a later process reusing the id does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Me {
    pub(crate) pid: u32,
    pub(crate) started: u64,
}

impl Me {
    /// The calling process.
    pub(crate) fn current() -> Me {
        let pid = std::process::id();
        Me {
            pid,
            started: start_time(pid).unwrap_or(0),
        }
    }

    /// Whether the process `pid` started at `started` still runs.
    pub(crate) fn alive(pid: u32, started: u64) -> bool {
        start_time(pid) == Some(started)
    }
}

/// Field 22 of `/proc/PID/stat`: when the process started.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A listening socket as the table records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Heirloom {
    pub(crate) fd: RawFd,
    pub(crate) family: Family,
    /// The address as the socket shows it (`getsockname`): on an AF_INET6 socket an
    /// IPv4 one is IPv4-mapped.
    pub(crate) addr: SocketAddr,
    /// `IPV6_V6ONLY`.
    pub(crate) v6only: bool,
    pub(crate) backlog: usize,
    pub(crate) nonblock: bool,
}

const NONBLOCK: u32 = 1 << 31;
/// In a slot's port: the socket is an AF_INET6 one.
const AF_INET6: u32 = 1 << 16;
/// In a slot's port: `IPV6_V6ONLY`.
const V6ONLY: u32 = 1 << 17;

/// A slot's encoding of `a`: the 128 bits and the scope.
fn encode(a: SocketAddr) -> (u128, u32) {
    match a {
        SocketAddr::V4(v4) => (v4.ip().to_ipv6_mapped().to_bits(), 0),
        SocketAddr::V6(v6) => (v6.ip().to_bits(), v6.scope_id()),
    }
}

/// The address a slot holds for a socket of `family`; `None` when the bits cannot be
/// its (an AF_INET socket's are IPv4-mapped).
fn decode(family: Family, bits: u128, port: u16, scope: u32) -> Option<SocketAddr> {
    let ip = Ipv6Addr::from_bits(bits);
    match family {
        Family::V4 => Some(SocketAddr::new(IpAddr::V4(ip.to_ipv4_mapped()?), port)),
        Family::V6 => Some(SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope))),
    }
}

impl Table {
    /// Record (or update) `me`'s listening socket `h`; false when the table is full
    /// even after freeing the entries of processes that are gone.
    pub(crate) fn record(&self, me: Me, h: Heirloom) -> bool {
        let slot = self.find(me, h.fd).or_else(|| self.claim(me)).or_else(|| {
            self.free_the_departed();
            self.claim(me)
        });
        let Some(slot) = slot else {
            return false;
        };
        slot.fd.store(h.fd, Ordering::Relaxed);
        let (bits, scope) = encode(h.addr);
        slot.ip[0].store((bits >> 64) as u64, Ordering::Relaxed);
        slot.ip[1].store(bits as u64, Ordering::Relaxed);
        let flags = match h.family {
            Family::V4 => 0,
            Family::V6 => AF_INET6 | if h.v6only { V6ONLY } else { 0 },
        };
        slot.port
            .store(u32::from(h.addr.port()) | flags, Ordering::Relaxed);
        slot.scope.store(scope, Ordering::Relaxed);
        let backlog =
            (h.backlog.min(NONBLOCK as usize - 1) as u32) | if h.nonblock { NONBLOCK } else { 0 };
        slot.backlog.store(backlog, Ordering::Relaxed);
        slot.started.store(me.started, Ordering::Release);
        true
    }

    /// `me` no longer listens on `fd`.
    pub(crate) fn forget(&self, me: Me, fd: RawFd) {
        if let Some(slot) = self.find(me, fd) {
            slot.pid.store(0, Ordering::Release);
        }
    }

    /// `me` is ending: none of its entries is anyone's any more.
    pub(crate) fn forget_all(&self, me: Me) {
        for slot in self.mine(me) {
            slot.pid.store(0, Ordering::Release);
        }
    }

    /// `me`'s listening sockets.
    pub(crate) fn of(&self, me: Me) -> Vec<Heirloom> {
        self.mine(me)
            .filter_map(|slot| {
                let bits = (u128::from(slot.ip[0].load(Ordering::Relaxed)) << 64)
                    | u128::from(slot.ip[1].load(Ordering::Relaxed));
                let port = slot.port.load(Ordering::Relaxed);
                let family = if port & AF_INET6 != 0 {
                    Family::V6
                } else {
                    Family::V4
                };
                let scope = slot.scope.load(Ordering::Relaxed);
                let backlog = slot.backlog.load(Ordering::Relaxed);
                Some(Heirloom {
                    fd: slot.fd.load(Ordering::Relaxed),
                    family,
                    addr: decode(family, bits, port as u16, scope)?,
                    v6only: port & V6ONLY != 0,
                    backlog: (backlog & !NONBLOCK) as usize,
                    nonblock: backlog & NONBLOCK != 0,
                })
            })
            .collect()
    }

    fn mine(&self, me: Me) -> impl Iterator<Item = &Slot> {
        self.slots.iter().filter(move |s| {
            s.pid.load(Ordering::Acquire) == me.pid
                && s.started.load(Ordering::Acquire) == me.started
        })
    }

    fn find(&self, me: Me, fd: RawFd) -> Option<&Slot> {
        self.mine(me).find(|s| s.fd.load(Ordering::Relaxed) == fd)
    }

    /// A free slot, now `me`'s (its other fields are the caller's to fill).
    fn claim(&self, me: Me) -> Option<&Slot> {
        self.slots.iter().find(|s| {
            s.pid
                .compare_exchange(0, me.pid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// Free the entries of processes that ended without saying so (killed).
    fn free_the_departed(&self) {
        for slot in &self.slots {
            let pid = slot.pid.load(Ordering::Acquire);
            if pid != 0 && !Me::alive(pid, slot.started.load(Ordering::Acquire)) {
                let _ = slot
                    .pid
                    .compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heirloom(fd: RawFd, port: u16) -> Heirloom {
        Heirloom {
            fd,
            family: Family::V4,
            addr: SocketAddr::from(([10, 0, 0, 2], port)),
            v6only: false,
            backlog: 511,
            nonblock: port.is_multiple_of(2),
        }
    }

    #[test]
    fn a_process_finds_its_own_entries_only() {
        let table = Box::<Table>::default();
        let me = Me::current();
        assert_ne!(me.started, 0, "/proc/self/stat has the start time");
        let other = Me {
            pid: me.pid,
            started: me.started + 1,
        };
        assert!(table.record(me, heirloom(7, 80)));
        assert!(table.record(me, heirloom(8, 443)));
        assert!(table.record(other, heirloom(7, 8080)));
        assert_eq!(table.of(me), [heirloom(7, 80), heirloom(8, 443)]);
        // Recording the same descriptor again updates its entry.
        let mut again = heirloom(7, 80);
        again.nonblock = true;
        assert!(table.record(me, again));
        assert_eq!(table.of(me), [again, heirloom(8, 443)]);
        table.forget(me, 7);
        assert_eq!(table.of(me), [heirloom(8, 443)]);
        table.forget_all(me);
        assert!(table.of(me).is_empty());
        assert_eq!(table.of(other), [heirloom(7, 8080)]);
    }

    #[test]
    fn ipv6_listeners_keep_their_family_address_scope_and_v6only() {
        let table = Box::<Table>::default();
        let me = Me::current();
        let v6 =
            |ip: &str, scope| SocketAddr::V6(SocketAddrV6::new(ip.parse().unwrap(), 80, 0, scope));
        let heirs = [
            Heirloom {
                fd: 4,
                family: Family::V6,
                addr: v6("::", 0),
                v6only: false,
                backlog: 128,
                nonblock: true,
            },
            Heirloom {
                fd: 5,
                family: Family::V6,
                addr: v6("::ffff:10.0.0.2", 0),
                v6only: false,
                backlog: 5,
                nonblock: false,
            },
            Heirloom {
                fd: 6,
                family: Family::V6,
                addr: v6("fe80::1:2", 7),
                v6only: true,
                backlog: 16,
                nonblock: false,
            },
            heirloom(7, 8080),
        ];
        for h in heirs {
            assert!(table.record(me, h));
        }
        assert_eq!(table.of(me), heirs);
        table.forget_all(me);
    }

    #[test]
    fn a_full_table_frees_the_entries_of_processes_that_are_gone() {
        let table = Box::<Table>::default();
        let gone = Me {
            pid: u32::MAX - 1,
            started: 1,
        };
        for fd in 0..SLOTS as RawFd {
            assert!(table.record(gone, heirloom(fd, 80)));
        }
        let me = Me::current();
        assert!(table.record(me, heirloom(3, 80)), "room made");
        assert_eq!(table.of(me), [heirloom(3, 80)]);
    }
}
