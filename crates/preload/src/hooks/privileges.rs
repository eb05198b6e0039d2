//! Giving up root. The library opens the process's queue of the link when the program
//! makes its first TCP socket, and opening a TAP queue takes root (`CAP_NET_ADMIN`). A
//! program that gives up root before its first socket (memcached switches to its `-u`
//! user first thing) would find the link closed to it then; so a call that takes the
//! effective user id away from root sets the library up first, while it still can,
//! with its queue detached until the program listens or connects (a program that
//! never does must not take a share of the link's flows).

use libc::uid_t;

use super::*;

/// Set the library up (when `rusty-run` asked for it) if the process runs as root and
/// is about to make `euid` its effective user id (`uid_t::MAX`, the calls' -1: no
/// change).
fn before_giving_up_root(euid: uid_t) {
    // SAFETY: no arguments; geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root && euid != 0 && euid != uid_t::MAX && !Bypass::active() && running() {
        process::with(|p| p.park());
    }
}

/// # Safety
/// As `setuid(2)`.
#[no_mangle]
pub unsafe extern "C" fn setuid(uid: uid_t) -> c_int {
    let _call = Call::enter("setuid");
    before_giving_up_root(uid);
    // SAFETY: the program's own arguments.
    unsafe { (originals().setuid)(uid) }
}

/// # Safety
/// As `seteuid(2)`.
#[no_mangle]
pub unsafe extern "C" fn seteuid(euid: uid_t) -> c_int {
    let _call = Call::enter("seteuid");
    before_giving_up_root(euid);
    // SAFETY: the program's own arguments.
    unsafe { (originals().seteuid)(euid) }
}

/// # Safety
/// As `setreuid(2)`.
#[no_mangle]
pub unsafe extern "C" fn setreuid(ruid: uid_t, euid: uid_t) -> c_int {
    let _call = Call::enter("setreuid");
    before_giving_up_root(euid);
    // SAFETY: the program's own arguments.
    unsafe { (originals().setreuid)(ruid, euid) }
}

/// # Safety
/// As `setresuid(2)`.
#[no_mangle]
pub unsafe extern "C" fn setresuid(ruid: uid_t, euid: uid_t, suid: uid_t) -> c_int {
    let _call = Call::enter("setresuid");
    before_giving_up_root(euid);
    // SAFETY: the program's own arguments.
    unsafe { (originals().setresuid)(ruid, euid, suid) }
}
