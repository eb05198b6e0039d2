//! SIGHUP as a request to reload: [`on_hangup`] runs a closure on a thread of its own
//! each time the process gets SIGHUP, instead of the signal's default (ending the
//! process). Servers use it to reload their configuration (httpd: its TLS
//! certificates) while the workers run on.

use std::io;
use std::thread::JoinHandle;

use signal_hook::consts::SIGHUP;
use signal_hook::iterator::{Handle, Signals};

/// Runs the closure given to [`on_hangup`] on every SIGHUP until dropped; then SIGHUP
/// is ignored (no longer fatal) and the thread has ended.
pub struct Hangup {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
}

/// Call `reload` on a thread of its own for every SIGHUP from now until the returned
/// [`Hangup`] is dropped. Signals that arrive while `reload` runs are merged into one
/// more call.
pub fn on_hangup(mut reload: impl FnMut() + Send + 'static) -> io::Result<Hangup> {
    let mut signals = Signals::new([SIGHUP])?;
    let handle = signals.handle();
    let thread = std::thread::Builder::new()
        .name("sighup".into())
        .spawn(move || {
            for _ in signals.forever() {
                reload();
            }
        })?;
    Ok(Hangup {
        handle,
        thread: Some(thread),
    })
}

impl Drop for Hangup {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn each_hangup_runs_the_closure_until_dropped() {
        let (tx, rx) = mpsc::channel();
        let hangup = on_hangup(move || {
            let _ = tx.send(());
        })
        .expect("register SIGHUP");
        signal_hook::low_level::raise(SIGHUP).expect("raise SIGHUP");
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the closure ran");
        drop(hangup);
        // The closure's thread has ended, so its sender is gone.
        assert!(rx.recv_timeout(Duration::from_secs(1)).is_err());
    }
}
