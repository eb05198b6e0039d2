//! Moving bytes: the read, receive, write and send calls in every form, and sendfile.

use super::*;

/// # Safety
/// As `read(2)`.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    let _call = Call::enter("read");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().read)(fd, buf, count) };
    }
    // SAFETY: the program's own buffer.
    size(receive(fd, unsafe { bytes_mut(buf, count) }, 0))
}

/// # Safety
/// As `recv(2)`.
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t {
    let _call = Call::enter("recv");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().recv)(fd, buf, len, flags) };
    }
    // SAFETY: the program's own buffer.
    size(receive(fd, unsafe { bytes_mut(buf, len) }, flags))
}

/// # Safety
/// As `recvfrom(2)`.
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> ssize_t {
    let _call = Call::enter("recvfrom");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().recvfrom)(fd, buf, len, flags, addr, addrlen) };
    }
    // SAFETY: the program's own buffer.
    let r = receive(fd, unsafe { bytes_mut(buf, len) }, flags);
    // A stream socket reports no source address, as on Linux.
    if r.is_ok() && !addr.is_null() && !addrlen.is_null() {
        // SAFETY: the program's address length.
        unsafe { *addrlen = 0 };
    }
    size(r)
}

/// Receive into the program's I/O vectors: into one buffer, then scattered.
///
/// # Safety
/// `iov` has `count` entries, each naming a writable buffer.
unsafe fn receive_vectored(fd: RawFd, iov: *const iovec, count: c_int, flags: c_int) -> ssize_t {
    // SAFETY: the caller's vectors.
    let iov = match unsafe { iovecs(iov, count) } {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let total: usize = iov.iter().map(|v| v.iov_len).sum();
    let mut buf = vec![0u8; total];
    let n = match receive(fd, &mut buf, flags) {
        Ok(n) => n,
        Err(e) => return fail(e),
    };
    let mut at = 0;
    for v in iov {
        if at == n {
            break;
        }
        let k = v.iov_len.min(n - at);
        // SAFETY: each vector names `iov_len` writable bytes.
        unsafe { bytes_mut(v.iov_base, k) }.copy_from_slice(&buf[at..at + k]);
        at += k;
    }
    n as ssize_t
}

/// Send the program's I/O vectors as one buffer.
///
/// # Safety
/// `iov` has `count` entries, each naming a readable buffer.
unsafe fn send_vectored(fd: RawFd, iov: *const iovec, count: c_int, flags: c_int) -> ssize_t {
    // SAFETY: the caller's vectors.
    let iov = match unsafe { iovecs(iov, count) } {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    if let [one] = iov {
        // SAFETY: the vector names `iov_len` readable bytes.
        return size(transmit(
            fd,
            unsafe { bytes(one.iov_base, one.iov_len) },
            flags,
        ));
    }
    let mut buf = Vec::with_capacity(iov.iter().map(|v| v.iov_len).sum());
    for v in iov {
        // SAFETY: each vector names `iov_len` readable bytes.
        buf.extend_from_slice(unsafe { bytes(v.iov_base, v.iov_len) });
    }
    size(transmit(fd, &buf, flags))
}

/// # Safety
/// As `readv(2)`.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
    let _call = Call::enter("readv");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().readv)(fd, iov, count) };
    }
    // SAFETY: the program's own vectors.
    unsafe { receive_vectored(fd, iov, count, 0) }
}

/// # Safety
/// As `recvmsg(2)`.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    let _call = Call::enter("recvmsg");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().recvmsg)(fd, msg, flags) };
    }
    if msg.is_null() {
        return fail(Errno(libc::EFAULT));
    }
    // SAFETY: the program's message header.
    let m = unsafe { &mut *msg };
    // SAFETY: the program's own vectors.
    let n = unsafe { receive_vectored(fd, m.msg_iov, m.msg_iovlen as c_int, flags) };
    if n >= 0 {
        m.msg_controllen = 0;
        m.msg_flags = 0;
        // A stream socket reports no source address, as on Linux.
        m.msg_namelen = 0;
    }
    n
}

/// # Safety
/// As `write(2)`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    let _call = Call::enter("write");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().write)(fd, buf, count) };
    }
    // SAFETY: the program's own buffer.
    size(transmit(fd, unsafe { bytes(buf, count) }, 0))
}

/// # Safety
/// As `send(2)`.
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    let _call = Call::enter("send");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().send)(fd, buf, len, flags) };
    }
    // SAFETY: the program's own buffer.
    size(transmit(fd, unsafe { bytes(buf, len) }, flags))
}

/// `sendto`: on a connected stream socket the address is ignored, as on Linux.
///
/// # Safety
/// As `sendto(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    addrlen: socklen_t,
) -> ssize_t {
    let _call = Call::enter("sendto");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().sendto)(fd, buf, len, flags, addr, addrlen) };
    }
    // SAFETY: the program's own buffer.
    size(transmit(fd, unsafe { bytes(buf, len) }, flags))
}

/// # Safety
/// As `writev(2)`.
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
    let _call = Call::enter("writev");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().writev)(fd, iov, count) };
    }
    // SAFETY: the program's own vectors.
    unsafe { send_vectored(fd, iov, count, 0) }
}

/// # Safety
/// As `sendmsg(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    let _call = Call::enter("sendmsg");
    if !ours(fd) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().sendmsg)(fd, msg, flags) };
    }
    if msg.is_null() {
        return fail(Errno(libc::EFAULT));
    }
    // SAFETY: the program's message header.
    let m = unsafe { &*msg };
    // SAFETY: the program's own vectors.
    unsafe { send_vectored(fd, m.msg_iov, m.msg_iovlen as c_int, flags) }
}

/// The most `sendfile` reads from the file at a time.
const SENDFILE_PIECE: usize = 256 << 10;

thread_local! {
    /// The thread's buffer for `sendfile`'s pieces, kept between calls (allocating and
    /// zeroing one per call cost more than the copy for large files).
    static SENDFILE_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// `sendfile` from a file to a Rusty socket: the file's bytes are read and sent in
/// pieces; the file offset (or `*offset`) moves by what was sent.
///
/// # Safety
/// As `sendfile(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendfile(
    out: c_int,
    input: c_int,
    offset: *mut off_t,
    count: size_t,
) -> ssize_t {
    let _call = Call::enter("sendfile");
    if !ours(out) {
        // SAFETY: the program's own arguments.
        return unsafe { (originals().sendfile)(out, input, offset, count) };
    }
    let mut at = if offset.is_null() {
        // SAFETY: plain integer arguments.
        unsafe { libc::lseek(input, 0, libc::SEEK_CUR) }
    } else {
        // SAFETY: the program's offset.
        unsafe { *offset }
    };
    if at < 0 {
        return fail(Errno(if offset.is_null() {
            sys::errno()
        } else {
            libc::EINVAL
        }));
    }
    let mut buf = SENDFILE_BUFFER.try_with(|b| b.take()).unwrap_or_default();
    buf.resize(count.min(SENDFILE_PIECE), 0);
    let mut sent = 0usize;
    let result = loop {
        if sent == count {
            break Ok(sent);
        }
        let want = (count - sent).min(buf.len());
        // SAFETY: reads at most `want` bytes into a live buffer of at least that size.
        let got = unsafe { libc::pread(input, buf.as_mut_ptr().cast(), want, at) };
        if got < 0 {
            break if sent > 0 {
                Ok(sent)
            } else {
                Err(Errno(sys::errno()))
            };
        }
        if got == 0 {
            break Ok(sent);
        }
        let got = got as usize;
        // After the first piece, send only what fits now, as Linux returns a short
        // count rather than block again.
        let flags = if sent > 0 { libc::MSG_DONTWAIT } else { 0 };
        match transmit(out, &buf[..got], flags) {
            Ok(n) => {
                sent += n;
                at += n as off_t;
                if n < got {
                    break Ok(sent);
                }
            }
            Err(e) if sent > 0 && matches!(e.0, libc::EAGAIN | libc::EINTR) => break Ok(sent),
            Err(e) => break Err(e),
        }
    };
    let _ = SENDFILE_BUFFER.try_with(|b| b.set(buf));
    if offset.is_null() {
        // SAFETY: plain integer arguments.
        unsafe { libc::lseek(input, at, libc::SEEK_SET) };
    } else {
        // SAFETY: the program's offset.
        unsafe { *offset = at };
    }
    size(result)
}

/// `sendfile64`, the name glibc's headers give `sendfile` for programs built with
/// 64-bit file offsets (the same call on 64-bit Linux).
///
/// # Safety
/// As `sendfile(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendfile64(
    out: c_int,
    input: c_int,
    offset: *mut off_t,
    count: size_t,
) -> ssize_t {
    let _call = Call::enter("sendfile64");
    // SAFETY: the program's own arguments.
    unsafe { sendfile(out, input, offset, count) }
}
