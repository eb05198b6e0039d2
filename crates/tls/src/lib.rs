//! TLS 1.3 and 1.2 for any [`Handler`](rusty_stack::Handler), on any backend.
//!
//! [`Tls`] wraps an application's handler: it is the handler the backend (Rusty's
//! engine or the kernel-socket backend) runs, it speaks TLS with rustls on every
//! connection, and it runs the application's handler on the plaintext through the same
//! callbacks and the same [`Conn`](rusty_stack::Conn) calls. The application does not
//! change:
//!
//! - `data` gets decrypted bytes; what it leaves is offered again, as TCP does;
//! - `send` encrypts as much as the TCP send buffer has room for, and a short `send`
//!   is followed by `writable`, as with TCP; `send_shared` is always accepted;
//! - `close` and `shutdown_write` send `close_notify` before TCP's FIN; `abort` resets;
//! - `peer_closed` means the peer's `close_notify`; a FIN without it ends the
//!   connection with [`CloseReason::Truncated`](rusty_stack::CloseReason::Truncated),
//!   and a peer that breaks the protocol with
//!   [`CloseReason::ProtocolError`](rusty_stack::CloseReason::ProtocolError);
//! - `connected` runs when the TLS handshake has finished, and the handshake has a
//!   timeout of its own; from then on `conn.layer_info::<TlsInfo>()` tells what it
//!   settled ([`TlsInfo`]: ALPN's choice, the server name, version, cipher suite);
//! - `resume_receive` on the backend offers the plaintext the layer holds, too.
//!
//! The server side is a [`TlsAcceptor`] (certificates from PEM chosen by SNI, ALPN,
//! session tickets with rotating keys, no 0-RTT, reloadable), the client side a
//! [`TlsConnector`] (trusted authorities from PEM, and a default server name that each
//! connection may replace: [`TlsConn::with_server_name`], [`Tls::with_server_name_of`]).
//! Cryptography is rustls's ring provider: it builds with the Rust toolchain and a C
//! compiler alone, on every target the workspace builds for (aws-lc-rs needs CMake on
//! some). [`TlsStats`] counts
//! handshakes, failures by cause, alerts and rejected records per worker.
//!
//! See `docs/tls.md` for the design.

#![warn(missing_docs)]

mod config;
mod files;
mod handler;
mod info;
mod record;
mod session;
mod stats;

pub use config::{
    CertKey, Certificates, ClientSettings, ConfigError, ServerSettings, TlsAcceptor, TlsConnector,
    Versions,
};
pub use files::{parse_sni, TlsFiles, TlsFilesError};
pub use handler::Tls;
pub use info::{TlsInfo, TlsVersion};
pub use session::TlsConn;
pub use stats::{StatsSink, TlsStats};
