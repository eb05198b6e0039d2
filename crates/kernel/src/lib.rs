//! # rusty-kernel
//!
//! Rusty's [`Handler`](rusty_stack::Handler) API on the host kernel's own TCP: the
//! backend that needs no root and no NIC of its own, and the fair baseline Rusty's
//! stack is measured against.
//!
//! The shape is Rusty's: one worker per pinned core, each with its own epoll loop, its
//! own `SO_REUSEPORT` listening sockets (the kernel spreads connections over the
//! workers), its own connection table and its own handler instance. Sockets are
//! non-blocking with `TCP_NODELAY`. The callbacks and the connection handle behave as
//! on Rusty's engine, so an application cannot tell which backend runs it except by
//! speed:
//!
//! * `accept` may refuse (the connection is reset); `connected` follows `accept` at
//!   once for passive opens, and the end of a non-blocking connect for active ones
//!   (requested through [`Opener`](rusty_stack::Opener) from any callback or `poll`).
//! * `data` gets a slice of the worker's read buffer; what the handler leaves is kept
//!   and offered again while it makes progress, after more data, after `writable`, or
//!   on [`KernelEngine::resume_receive`]. While it holds `recv_buffer` unread bytes the
//!   socket is not read, so the kernel's window closes on the peer.
//! * `send` writes straight to the socket when nothing is queued and copies only what
//!   the kernel refuses, up to `send_buffer`; `send_shared` queues the [`Bytes`]
//!   by reference and the queue goes out with gathered `sendmsg` calls. `writable`
//!   follows a refused send once queued bytes reach the kernel.
//! * `close` flushes, sends FIN (`shutdown(SHUT_WR)`), reads and drops what still
//!   arrives, and ends when the peer's FIN does (or after `fin_timeout`);
//!   `shutdown_write` is the half-close; `abort` closes with `SO_LINGER` 0 (a RST).
//! * `set_timer` arms one one-shot timer per connection (re-arming replaces it, `None`
//!   cancels it); `timer` runs no earlier than asked, within a loop turn when the
//!   worker is busy and within `epoll_wait`'s millisecond when it is idle (the engine's
//!   next deadline counts armed timers). A connection that has ended never sees its
//!   timer.
//! * `closed` comes exactly once per connection: `Normal` when both sides closed,
//!   `Reset` (ECONNRESET, EPIPE), `Refused` (ECONNREFUSED on connect), `TimedOut`
//!   (ETIMEDOUT, unreachable, or `fin_timeout`), `Aborted` (our abort).
//!
//! Differences only a packet trace shows: `closed(Normal)` comes when our FIN is handed
//! to the kernel and the peer's has been read, not when our FIN is acknowledged; the
//! kernel's own TCP decides segment sizes, windows and timers, and runs its own
//! congestion control (the module [`KernelConfig::congestion_control`] asks for, if the
//! kernel has it; its default otherwise).
//!
//! [`Bytes`]: bytes::Bytes

#![warn(missing_docs)]

mod config;
mod conn;
mod engine;
mod queue;
// The system calls, through rustix; the crate's only unsafe code is the one libc ioctl
// there (SIOCOUTQ), behind a safe function with a SAFETY note.
#[allow(unsafe_code)]
mod sys;
mod worker;

pub use config::KernelConfig;
pub use engine::KernelEngine;
pub use worker::kernel_worker;
