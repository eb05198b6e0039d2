//! `setsockopt` and `getsockopt` on Rusty sockets.
//!
//! Every option a program may set is either applied, or accepted where Rusty's
//! behaviour already is what the program asks for, and `getsockopt` always answers
//! what is in effect, never merely what was asked. Options Rusty does not have get the
//! error Linux gives for an unknown option (`ENOPROTOOPT`; `getsockopt` of an IPv6
//! option on an AF_INET socket: `EOPNOTSUPP`). The table is in `docs/preload.md`.

use std::os::fd::RawFd;
use std::time::Duration;

use crate::process::Process;
use crate::sockets::{Errno, Family};

const ENOPROTOOPT: Errno = Errno(libc::ENOPROTOOPT);
const EINVAL: Errno = Errno(libc::EINVAL);

/// An `int` option value.
fn int_of(raw: &[u8]) -> Result<i32, Errno> {
    let bytes: [u8; 4] = raw.get(..4).and_then(|b| b.try_into().ok()).ok_or(EINVAL)?;
    Ok(i32::from_ne_bytes(bytes))
}

fn int(v: i32) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

fn timeval_of(raw: &[u8]) -> Result<Option<Duration>, Errno> {
    if raw.len() < std::mem::size_of::<libc::timeval>() {
        return Err(EINVAL);
    }
    let sec = i64::from_ne_bytes(raw[..8].try_into().map_err(|_| EINVAL)?);
    let usec = i64::from_ne_bytes(raw[8..16].try_into().map_err(|_| EINVAL)?);
    if sec < 0 || !(0..1_000_000).contains(&usec) {
        return Err(Errno(libc::EDOM));
    }
    let d = Duration::from_secs(sec as u64) + Duration::from_micros(usec as u64);
    Ok((!d.is_zero()).then_some(d))
}

fn timeval(d: Option<Duration>) -> Vec<u8> {
    let d = d.unwrap_or_default();
    let mut out = (d.as_secs() as i64).to_ne_bytes().to_vec();
    out.extend_from_slice(&i64::from(d.subsec_micros()).to_ne_bytes());
    out
}

/// `setsockopt` on Rusty socket `fd`.
pub(crate) fn set(
    p: &mut Process,
    fd: RawFd,
    level: i32,
    name: i32,
    raw: &[u8],
) -> Result<(), Errno> {
    let fresh = p.is_fresh(fd);
    let sock = p.desc(fd)?.sock;
    let mut opts = p.stack.opts(sock)?;
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => opts.reuse_addr = int_of(raw)? != 0,
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => opts.reuse_port = int_of(raw)? != 0,
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => opts.keepalive = int_of(raw)? != 0,
        // Linux doubles the value for its own bookkeeping and reports the double.
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
            opts.rcvbuf = (int_of(raw)?.max(1152) as usize).saturating_mul(2)
        }
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
            opts.sndbuf = (int_of(raw)?.max(2304) as usize).saturating_mul(2)
        }
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            if raw.len() < std::mem::size_of::<libc::linger>() {
                return Err(EINVAL);
            }
            let on = int_of(&raw[..4])?;
            let secs = int_of(&raw[4..8])?;
            opts.linger = (on != 0).then(|| Duration::from_secs(secs.max(0) as u64));
        }
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => p.desc_mut(fd)?.recv_timeout = timeval_of(raw)?,
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => p.desc_mut(fd)?.send_timeout = timeval_of(raw)?,
        // TCP_NODELAY reads back as set: 0 permits Nagle's delay, which Rusty never
        // takes (see `SockOpts::nodelay`). TCP_CORK, which would hold partial
        // segments, is accepted, not applied, and reads back as off; TCP_DEFER_ACCEPT
        // likewise (connections are offered when established).
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => opts.nodelay = int_of(raw)? != 0,
        (libc::IPPROTO_TCP, libc::TCP_CORK | libc::TCP_DEFER_ACCEPT) => {
            int_of(raw)?;
        }
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => {
            let ms = int_of(raw)?;
            if ms < 0 {
                return Err(EINVAL);
            }
            opts.user_timeout = (ms > 0).then(|| Duration::from_millis(ms as u64));
        }
        // Linux's bounds: seconds up to MAX_TCP_KEEPIDLE (32767), at most 127 probes.
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL | libc::TCP_KEEPCNT) => {
            let v = int_of(raw)?;
            let max = if name == libc::TCP_KEEPCNT {
                127
            } else {
                32767
            };
            if !(1..=max).contains(&v) {
                return Err(EINVAL);
            }
            let t = &mut opts.keepalive_timing;
            match name {
                libc::TCP_KEEPIDLE => t.idle = Duration::from_secs(v as u64),
                libc::TCP_KEEPINTVL => t.interval = Duration::from_secs(v as u64),
                _ => t.probes = v as u32,
            }
        }
        // Linux: only before the socket has a port (bound, listening or connected).
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) if p.stack.family(sock)? == Family::V6 => {
            let v = int_of(raw)?;
            if !fresh {
                return Err(EINVAL);
            }
            opts.v6only = v != 0;
        }
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
            let name = std::str::from_utf8(raw).map_err(|_| EINVAL)?;
            let name = name.trim_end_matches('\0');
            if name != p.stack.congestion() {
                // What Linux says for an algorithm it has not loaded.
                return Err(Errno(libc::ENOENT));
            }
        }
        _ => return Err(ENOPROTOOPT),
    }
    p.stack.set_opts(sock, opts)?;
    if fresh {
        p.desc_mut(fd)?
            .early_options
            .push((level, name, raw.to_vec()));
    }
    Ok(())
}

/// `getsockopt` on Rusty socket `fd`: the value's bytes.
pub(crate) fn get(p: &mut Process, fd: RawFd, level: i32, name: i32) -> Result<Vec<u8>, Errno> {
    let desc = p.desc(fd)?.clone();
    let sock = desc.sock;
    let opts = p.stack.opts(sock)?;
    let family = p.stack.family(sock)?;
    Ok(match (level, name) {
        (libc::SOL_SOCKET, libc::SO_TYPE) => int(libc::SOCK_STREAM),
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => int(family.domain()),
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) => int(libc::IPPROTO_TCP),
        (libc::SOL_SOCKET, libc::SO_ERROR) => int(p.stack.take_error(sock)?),
        (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => int(p.stack.is_listening(sock)? as i32),
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => int(opts.reuse_addr as i32),
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => int(opts.reuse_port as i32),
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => int(opts.keepalive as i32),
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => int(opts.rcvbuf.min(i32::MAX as usize) as i32),
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => int(opts.sndbuf.min(i32::MAX as usize) as i32),
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            let mut v = int(opts.linger.is_some() as i32);
            v.extend(int(opts.linger.map_or(0, |d| d.as_secs() as i32)));
            v
        }
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => timeval(desc.recv_timeout),
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => timeval(desc.send_timeout),
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => int(opts.nodelay as i32),
        (libc::IPPROTO_TCP, libc::TCP_CORK | libc::TCP_DEFER_ACCEPT) => int(0),
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => int(opts
            .user_timeout
            .map_or(0, |d| d.as_millis().min(i32::MAX as u128) as i32)),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => int(opts.keepalive_timing.idle.as_secs() as i32),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => {
            int(opts.keepalive_timing.interval.as_secs() as i32)
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => int(opts.keepalive_timing.probes as i32),
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
            let mut v = p.stack.congestion().as_bytes().to_vec();
            v.resize(16, 0);
            v
        }
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) if family == Family::V6 => int(opts.v6only as i32),
        // An AF_INET socket's IP layer answers another level's options so.
        (libc::IPPROTO_IPV6, _) if family == Family::V4 => return Err(Errno(libc::EOPNOTSUPP)),
        _ => return Err(ENOPROTOOPT),
    })
}
