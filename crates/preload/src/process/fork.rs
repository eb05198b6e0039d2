//! What `fork` does to the process's stack: the parent keeps its engine, queue and
//! connections; the child gets a stack of its own (a new TAP queue, or an AF_XDP queue
//! the parent hands it) with the parent's sockets adopted.

use std::os::fd::RawFd;

use super::{Interest, Process, PROCESS};
use crate::sys::{self, Bypass};

thread_local! {
    /// The process lock, held by the forking thread across `fork`, so that no other
    /// thread is inside the stack when the child's copy of it is taken.
    static HELD_ACROSS_FORK: std::cell::RefCell<Option<std::sync::MutexGuard<'static, Option<Process>>>> =
        const { std::cell::RefCell::new(None) };
}

/// The process lock the forking thread took in `before_fork`, now its to release.
fn held_across_fork() -> Option<std::sync::MutexGuard<'static, Option<Process>>> {
    HELD_ACROSS_FORK
        .try_with(|h| h.borrow_mut().take())
        .ok()
        .flatten()
}

pub(super) extern "C" fn before_fork() {
    let _call = crate::call::Call::enter("fork");
    let _bypass = Bypass::enter();
    let guard = PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    let _ = HELD_ACROSS_FORK.try_with(|h| *h.borrow_mut() = Some(guard));
}

/// The parent keeps its engine, queue and connections. Its listeners stop taking
/// connections until it shows interest again (a master process hands the listening
/// sockets to its children and never accepts), and with no connection either, its
/// queue is detached, so the kernel steers new flows to the children's queues.
pub(super) extern "C" fn after_fork_in_parent() {
    let _call = crate::call::Call::enter("fork");
    let _bypass = Bypass::enter();
    let Some(mut guard) = held_across_fork() else {
        return;
    };
    if let Some(p) = guard.as_mut() {
        p.forked = true;
        p.stack.set_shared_link(true);
        p.shared_link = true;
        p.stack.disengage_all();
        let idle = !p.stack.has_connections();
        if idle {
            p.stack.set_steered(false);
        }
        // The AF_XDP queue the child took (the same choice as `child_queue`) is the
        // child's now: this copy goes without a frame sent.
        if !p.spares.is_empty() {
            drop(p.spares.remove(0));
        } else if idle && p.stack.hand_over().is_some() {
            p.link_fd = -1;
        }
    }
}

/// The AF_XDP queue a child forked from `parent` takes: a spare, else, if the parent
/// has no connection, the one its engine runs on (see `handover`). The parent's
/// `after_fork_in_parent` makes the same choice from the same state.
fn child_queue(parent: &mut Process) -> Option<rusty_drivers_xdp::XdpQueue> {
    if !parent.spares.is_empty() {
        return Some(parent.spares.remove(0));
    }
    if parent.stack.has_connections() {
        return None;
    }
    parent.stack.hand_over()
}

/// The child gets a stack of its own on a new queue of the link, with the parent's
/// sockets adopted (`Stack::adopt`): listeners, fresh and bound sockets as they were,
/// connections as ended ones (they stay the parent's). The parent's engine copy is
/// dropped without a frame sent.
pub(super) extern "C" fn after_fork_in_child() {
    let _call = crate::call::Call::enter("fork");
    let _bypass = Bypass::enter();
    let Some(mut guard) = held_across_fork() else {
        return;
    };
    let Some(mut old) = guard.take() else {
        return;
    };
    let opened = if old.config.queue_per_process() {
        crate::start::open_stack(&old.config)
    } else {
        let Some(queue) = child_queue(&mut old) else {
            // No AF_XDP queue for this child: its inherited sockets are no longer
            // anyone's (their calls get EBADF), and it makes no new ones.
            drop(old);
            return;
        };
        crate::start::stack_on(&old.config, queue)
    };
    let opened = match opened {
        Ok(o) => o,
        Err(e) => sys::fatal(&format!("after fork: {e}")),
    };
    let Process {
        stack: old_stack,
        config,
        descs,
        epolls,
        far_marks,
        mut siblings,
        ..
    } = old;
    siblings.forked();
    let mut new = Process::new(opened, config, siblings);
    new.forked = true;
    let map = new.stack.adopt(&old_stack);
    for (fd, mut desc) in descs {
        if let Some(&sock) = map.get(&desc.sock) {
            desc.sock = sock;
            new.descs.insert(fd, desc);
        }
    }
    for (epfd, interests) in epolls {
        let adopted = interests
            .into_iter()
            .filter_map(|i| {
                let sock = match i.sock {
                    Some(old) => Some(*map.get(&old)?),
                    None => None,
                };
                Some(Interest {
                    sock,
                    reported: None,
                    ..i
                })
            })
            .collect();
        new.epolls.insert(epfd, adopted);
    }
    new.far_marks = far_marks;
    let fds: Vec<RawFd> = new.descs.keys().copied().collect();
    for fd in fds {
        new.bequeath(fd);
    }
    // The parent's engine copy goes without a frame sent; its queue's descriptor
    // closes in this process only.
    drop(old_stack);
    *guard = Some(new);
}
