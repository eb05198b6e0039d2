//! Which of the library's entry points a thread is in, so that a panic (a bug in the
//! library) ends the process with a message that names the call, instead of unwinding
//! into the C program that made it.

use std::cell::Cell;

use crate::sys;

thread_local! {
    /// The entry point this thread is in; empty outside the library.
    static CURRENT: Cell<&'static str> = const { Cell::new("") };
}

/// A thread inside one of the library's entry points, until it is dropped. Entry
/// points nest (the library's own calls to libc pass through its hooks); dropping
/// restores the outer one.
pub(crate) struct Call {
    outer: &'static str,
}

impl Call {
    /// The thread enters `name` (a socket function's name, or a handler's).
    pub(crate) fn enter(name: &'static str) -> Call {
        let outer = CURRENT.try_with(|c| c.replace(name)).unwrap_or("");
        Call { outer }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.set(self.outer));
    }
}

/// Make a panic inside an entry point abort the process with a message naming it
/// (once, as the library is loaded). The hook belongs to the library's own copy of
/// the standard library, so a Rust program the library is loaded into keeps its own.
pub(crate) fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let call = CURRENT.try_with(|c| c.get()).unwrap_or("");
        if call.is_empty() {
            return previous(info);
        }
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        let at = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        sys::write_stderr(&message(call, what, &at));
        std::process::abort();
    }));
}

/// The line a panic inside `call` leaves on standard error.
fn message(call: &str, what: &str, at: &str) -> String {
    format!("librusty_preload: bug: panic in {call}: {what} ({at}); aborting\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_nest_and_the_message_names_the_innermost() {
        let current = || CURRENT.with(|c| c.get());
        assert_eq!(current(), "");
        {
            let _outer = Call::enter("epoll_wait");
            {
                let _inner = Call::enter("read");
                assert_eq!(current(), "read");
            }
            assert_eq!(current(), "epoll_wait");
        }
        assert_eq!(current(), "");
        assert_eq!(
            message("sendfile", "index out of bounds", "src/x.rs:3"),
            "librusty_preload: bug: panic in sendfile: index out of bounds (src/x.rs:3); aborting\n"
        );
    }
}
