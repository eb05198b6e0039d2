//! # rusty-httpd
//!
//! A static file server written once against Rusty's [`Handler`] API, so it runs
//! unchanged on Rusty's own stack (TAP) and on the kernel's sockets.
//!
//! The whole root directory is read into an immutable [`Cache`] at start and shared by
//! every worker (`Arc`, no locks); bodies leave as references into it
//! (`Conn::send_shared`), never copied per connection.
//!
//! What it speaks, and the decisions the RFCs leave open:
//! - HTTP/1.1 and 1.0, `GET` and `HEAD`; other methods get 405 with `Allow: GET, HEAD`.
//!   Responses are `HTTP/1.1` (RFC 9110 §6.2). 1.1 connections persist unless
//!   `Connection: close`; 1.0 ones only with `Connection: keep-alive`. Pipelined
//!   requests are answered in order. A request announcing a body (`Content-Length` > 0
//!   or `Transfer-Encoding: chunked`) is answered, then the connection closes: bodies
//!   are never read. HTTP/1.1 without `Host` (or with two) is 400.
//! - Framing, as nginx does it ([`request`]): two `Content-Length` fields (even equal
//!   ones), a list or anything but digits in one, `Transfer-Encoding` together with
//!   `Content-Length`, twice, or in HTTP/1.0 are 400; a transfer coding other than
//!   `chunked` is 501 (RFC 9112 §6.1). Each closes the connection, so a request hidden
//!   in a body is never read.
//! - Paths: percent-decoded and normalised ([`path`]); `..` climbing out of the root,
//!   bad escapes and NUL/control bytes are 400 (and close); an encoded slash `%2F`
//!   never splits a segment, so it names nothing and is 404. Directories are served
//!   through `index.html` (404 without one, no listings); a directory named without
//!   its trailing slash gets 301 to the slash form.
//! - `ETag` (strong, from modification time and length) with `If-None-Match` (weak
//!   comparison) and `Last-Modified` with `If-Modified-Since` give 304;
//!   `If-None-Match` takes precedence. `If-Range` is honoured.
//! - `Range`: one range (`a-b`, `a-`, `-n`) gives 206 with `Content-Range`; an
//!   unsatisfiable one 416 with `Content-Range: bytes */len`; several ranges, or a
//!   header we cannot parse, the full 200 ([`range`]).
//! - Errors: 400 malformed, 404, 405, 408 header timeout, 414 target over 2048 bytes,
//!   416, 431 head over `max_header_bytes` (default 8192) or over 64 fields, 501
//!   unknown transfer coding, 505 other versions. Each has `Content-Length` and a small
//!   HTML body; after 400, 408, 414, 431, 501 and 505 the connection closes, after
//!   404/405/416 it stays open.
//! - Limits: a header timeout (408 if part of a head arrived, else a silent close), a
//!   keep-alive idle timeout, a per-worker connection limit (refused connections are
//!   reset), a head size limit; each refusal is counted in [`HttpStats`].
//! - Symlinks are followed only to regular files inside the root (see [`Cache`]).
//! - HTTPS ([`Https`]): the same server behind `rusty-tls` on every port or on one beside
//!   plain HTTP; bodies are encrypted from the cache. No `Strict-Transport-Security`.
//!
//! [`Handler`]: rusty_stack::Handler

#![warn(missing_docs)]

// `date`, `path`, `range` and `request` are the pure parsers, public for the fuzz targets
// and for anyone who wants them alone; the rest is reached through the re-exports.
mod cache;
pub mod date;
mod https;
mod metrics;
mod mime;
pub mod path;
pub mod range;
pub mod request;
mod server;

pub use cache::{Cache, CacheError, FileEntry, Node};
pub use https::{Https, HttpsConn, TlsPorts};
pub use request::Limits;
pub use server::{HttpConfig, HttpConn, HttpServer, HttpStats, StatsSink};
