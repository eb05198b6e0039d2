//! The permessage-deflate extension (RFC 7692): negotiation and per-message compression.
//!
//! # Negotiation
//!
//! A server calls [`negotiate`] with the request's `Sec-WebSocket-Extensions` value(s) and,
//! when it returns `Some`, sends the returned string as its `Sec-WebSocket-Extensions`
//! response value. A client sends [`client_offer`] and validates the server's response with
//! [`client_accept`]; an error there means the client must fail the connection (RFC 7692
//! §5). The header is parsed by its grammar (RFC 6455 §9.1: comma-separated extensions,
//! `;`-separated parameters, token or quoted-string values, optional whitespace), and
//! names are compared without regard to ASCII case. A server skips an offer with an
//! unknown parameter, a duplicate parameter or an invalid value and tries the next one.
//!
//! # Window bits
//!
//! The backend is `flate2` on `zlib-rs` (a pure-Rust port of zlib): it compresses with any
//! window from 2^9 to 2^15 bytes. zlib cannot produce a raw deflate stream with a 2^8
//! window (asked for 8 it silently uses 9, or refuses). This module never does that:
//! when the window negotiated for our direction is 8 bits (a client offered
//! `server_max_window_bits=8`, or a server answered `client_max_window_bits=8`), the offer is
//! still accepted, and [`PerMessageDeflate::compress`] writes the message as DEFLATE blocks
//! with no compression (stored blocks), which contain no back-references at all and so
//! honour any window; [`PerMessageDeflate::should_compress`] then says `false`, so the caller
//! normally sends such messages uncompressed (RSV1 clear), which RFC 7692 allows per
//! message. Receiving is unaffected: the decompressor is created with the peer's window
//! (9 for a peer's 8, which decodes anything a 2^8 window can produce). Note that zlib-rs's
//! inflater keeps a 32 KiB window whatever it is told, so a smaller peer window saves no
//! memory on our side, and a peer that reaches further back than negotiated is not caught.
//!
//! # Memory
//!
//! The compressor and decompressor are allocated on first use (a connection that only
//! receives small plain messages never allocates them). A zlib compressor at 15 bits holds
//! a few hundred KiB (less at smaller windows); the inflater about 40 KiB.
//!
//! # Messages
//!
//! [`PerMessageDeflate::compress`] deflates one whole message and strips the
//! `0x00 0x00 0xff 0xff` tail (RFC 7692 §7.2.1). [`PerMessageDeflate::decompress`] inflates
//! a compressed message piece by piece: the pieces may be whole frames or any slices of
//! them (as TCP segments arrive), in order, with `end_of_message` set on the last piece of
//! the FIN frame (or use [`PerMessageDeflate::finish_message`] after the last piece). Its
//! output never grows past a caller-given limit (decompression bombs).
//!
//! A message whose DEFLATE data ends with a block with BFINAL set (RFC 7692 §7.2.3.4) is
//! accepted; bytes after the end of that stream (the `0x00` padding the RFC shows, the
//! appended tail) are ignored, and the decompressor starts the next message with an empty
//! window (a peer that finishes a DEFLATE stream starts the next one afresh).

use std::fmt;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The extension's name in `Sec-WebSocket-Extensions`.
pub const EXTENSION_NAME: &str = "permessage-deflate";

/// The four octets a sender strips from, and a receiver appends to, each message (RFC 7692
/// §7.2.1, §7.2.2).
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Which end of the connection this is.
// Exhaustive: a connection has two ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The end that accepted the connection.
    Server,
    /// The end that opened the connection.
    Client,
}

/// What this end wants from permessage-deflate. Off by default (`enabled: false`).
///
/// The fields are named from this end's point of view, so one configuration serves a
/// server and a client: "our" compressor is the server's when we are the server and the
/// client's when we are the client.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeflateConfig {
    /// Whether to offer (client) or accept (server) the extension at all.
    pub enabled: bool,
    /// Reset our compressor after every message and announce it: a server answers with
    /// `server_no_context_takeover`, a client offers `client_no_context_takeover`. Costs
    /// compression ratio, lets the peer's decompressor forget between messages.
    pub no_context_takeover: bool,
    /// Ask the peer to reset its compressor after every message: a server answers with
    /// `client_no_context_takeover`, a client offers `server_no_context_takeover`.
    pub request_peer_no_context_takeover: bool,
    /// Whether we agree when the peer asks us not to use context takeover. A server
    /// declines an offer with `server_no_context_takeover` when this is false; a client fails
    /// on a response with `client_no_context_takeover`. Default true.
    pub accept_no_context_takeover: bool,
    /// The largest window (base-2 logarithm, 8..=15) our compressor may use. Below 15 a
    /// server announces it (`server_max_window_bits`) and a client hints it
    /// (`client_max_window_bits=N`). 8 means stored blocks only (see the module docs).
    pub max_window_bits: u8,
    /// The window (8..=15) we ask the peer's compressor to stay within, to save our
    /// decompressor's memory: a client offers `server_max_window_bits=N` when below 15; a
    /// server answers `client_max_window_bits=N` when the offer allows it. A wish, not a
    /// condition: a server still accepts an offer that cannot carry it.
    pub peer_max_window_bits: u8,
    /// Compression level, 0 (none) ..= 9 (best); 6 by default.
    pub level: u32,
    /// Messages shorter than this are sent uncompressed ([`PerMessageDeflate::should_compress`]).
    pub min_compress_size: usize,
}

impl Default for DeflateConfig {
    fn default() -> Self {
        DeflateConfig {
            enabled: false,
            no_context_takeover: false,
            request_peer_no_context_takeover: false,
            accept_no_context_takeover: true,
            max_window_bits: 15,
            peer_max_window_bits: 15,
            level: 6,
            min_compress_size: 32,
        }
    }
}

impl DeflateConfig {
    /// The default configuration with the extension switched on.
    pub fn enabled() -> Self {
        DeflateConfig {
            enabled: true,
            ..DeflateConfig::default()
        }
    }

    fn own_bits(&self) -> u8 {
        self.max_window_bits.clamp(8, 15)
    }

    fn peer_bits(&self) -> u8 {
        self.peer_max_window_bits.clamp(8, 15)
    }
}

/// The parameters in force on a connection after negotiation (absent window bits are 15).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Negotiated {
    /// The server resets its compressor after every message.
    pub server_no_context_takeover: bool,
    /// The client resets its compressor after every message.
    pub client_no_context_takeover: bool,
    /// The largest window (base-2 logarithm) the server's compressor may use.
    pub server_max_window_bits: u8,
    /// The largest window (base-2 logarithm) the client's compressor may use.
    pub client_max_window_bits: u8,
}

impl Default for Negotiated {
    fn default() -> Self {
        Negotiated {
            server_no_context_takeover: false,
            client_no_context_takeover: false,
            server_max_window_bits: 15,
            client_max_window_bits: 15,
        }
    }
}

/// What can go wrong in negotiation or (de)compression.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeflateError {
    /// The server's response is not a valid answer to our offer (RFC 7692 §5: the client
    /// fails the connection).
    InvalidResponse(String),
    /// A decompressed message would be longer than the caller's limit.
    TooLarge {
        /// The limit that would have been passed.
        limit: usize,
    },
    /// The compressed data is not valid DEFLATE (or not valid for the negotiated window).
    Corrupt(String),
    /// The compressor failed (should not happen).
    Compress(String),
}

impl fmt::Display for DeflateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeflateError::InvalidResponse(why) => {
                write!(f, "invalid permessage-deflate response: {why}")
            }
            DeflateError::TooLarge { limit } => {
                write!(f, "decompressed message exceeds the limit of {limit} bytes")
            }
            DeflateError::Corrupt(why) => write!(f, "invalid compressed data: {why}"),
            DeflateError::Compress(why) => write!(f, "compression failed: {why}"),
        }
    }
}

impl std::error::Error for DeflateError {}

// ---------------------------------------------------------------------------------------
// Header grammar (RFC 6455 §9.1, RFC 7230 §3.2.6)

/// One extension of an extension list: its name and parameters (names lower-cased, values
/// unquoted).
#[derive(Debug, PartialEq, Eq)]
struct Extension {
    name: String,
    params: Vec<(String, Option<String>)>,
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_tchar)
}

fn trim_ows(s: &str) -> &str {
    s.trim_matches(|c| c == ' ' || c == '\t')
}

/// The (lower-cased) names of the extensions in a `Sec-WebSocket-Extensions` value, or
/// `None` if any element is malformed: a client checks that a server answered only what it
/// offered.
pub(crate) fn extension_names(header: &str) -> Option<Vec<String>> {
    parse_extension_list(header)
        .into_iter()
        .map(|e| e.ok().map(|e| e.name))
        .collect()
}

/// Splits `s` at every `sep` outside a quoted-string. `Err` if a quoted-string is not closed.
fn split_outside_quotes(s: &str, sep: u8) -> Result<Vec<&str>, ()> {
    let bytes = s.as_bytes();
    let mut parts = Vec::new();
    let mut start = 0;
    let mut in_quotes = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_quotes {
            if b == b'\\' {
                i += 1;
            } else if b == b'"' {
                in_quotes = false;
            }
        } else if b == b'"' {
            in_quotes = true;
        } else if b == sep {
            parts.push(&s[start..i]);
            start = i + 1;
        }
        i += 1;
    }
    if in_quotes {
        return Err(());
    }
    parts.push(&s[start..]);
    Ok(parts)
}

/// The content of a quoted-string (with its quotes), unescaped.
fn unquote(s: &str) -> Result<String, ()> {
    let inner = s
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .ok_or(())?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next().ok_or(())?),
            '"' => return Err(()),
            c if c.is_control() && c != '\t' => return Err(()),
            c => out.push(c),
        }
    }
    Ok(out)
}

fn parse_param(s: &str) -> Result<(String, Option<String>), ()> {
    let s = trim_ows(s);
    let (name, value) = match s.find('=') {
        None => (s, None),
        Some(eq) => (trim_ows(&s[..eq]), Some(trim_ows(&s[eq + 1..]))),
    };
    if !is_token(name) {
        return Err(());
    }
    let value = match value {
        None => None,
        Some(v) if v.starts_with('"') => Some(unquote(v)?),
        Some(v) if is_token(v) => Some(v.to_string()),
        Some(_) => return Err(()),
    };
    Ok((name.to_ascii_lowercase(), value))
}

fn parse_extension(s: &str) -> Result<Extension, ()> {
    let mut parts = split_outside_quotes(s, b';')?.into_iter();
    let name = trim_ows(parts.next().unwrap_or(""));
    if !is_token(name) {
        return Err(());
    }
    let params = parts.map(parse_param).collect::<Result<Vec<_>, ()>>()?;
    Ok(Extension {
        name: name.to_ascii_lowercase(),
        params,
    })
}

/// Parses an extension list. Empty list elements are skipped (the `#` rule allows them);
/// a malformed element is returned as `Err` in its place, so a server can skip it and go on
/// with the next one. An unclosed quoted-string makes the rest of the value one bad element.
fn parse_extension_list(header: &str) -> Vec<Result<Extension, ()>> {
    let (good, poisoned) = match split_outside_quotes(header, b',') {
        Ok(_) => (header, false),
        Err(()) => {
            // Keep the elements before the one holding the unclosed quote.
            let quote = first_unclosed_quote(header);
            let cut = header[..quote].rfind(',').unwrap_or(0);
            (&header[..cut], true)
        }
    };
    let mut elements: Vec<Result<Extension, ()>> = split_outside_quotes(good, b',')
        .unwrap_or_default()
        .into_iter()
        .filter(|p| !trim_ows(p).is_empty())
        .map(parse_extension)
        .collect();
    if poisoned {
        elements.push(Err(()));
    }
    elements
}

/// The index of the quote that opens a quoted-string never closed.
fn first_unclosed_quote(s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut open = None;
    let mut i = 0;
    while i < bytes.len() {
        match (open, bytes[i]) {
            (Some(_), b'\\') => i += 1,
            (Some(_), b'"') => open = None,
            (None, b'"') => open = Some(i),
            _ => {}
        }
        i += 1;
    }
    open.unwrap_or(bytes.len())
}

/// A window-bits value: "8" ..= "15", no leading zeros (RFC 7692 §7.1.2).
fn parse_window_bits(v: &str) -> Option<u8> {
    match v {
        "8" | "9" | "10" | "11" | "12" | "13" | "14" | "15" => v.parse().ok(),
        _ => None,
    }
}

/// The permessage-deflate parameters of one offer or response, validated for syntax.
#[derive(Debug, Default, PartialEq, Eq)]
struct Params {
    server_no_context_takeover: bool,
    client_no_context_takeover: bool,
    server_max_window_bits: Option<u8>,
    /// `Some(None)`: present without a value (allowed in an offer only).
    client_max_window_bits: Option<Option<u8>>,
}

/// Validates the parameters of a permessage-deflate element: known names, each at most
/// once, valid values.
fn parse_params(params: &[(String, Option<String>)]) -> Result<Params, String> {
    let mut p = Params::default();
    let mut seen = [false; 4];
    for (name, value) in params {
        let slot = match name.as_str() {
            "server_no_context_takeover" => 0,
            "client_no_context_takeover" => 1,
            "server_max_window_bits" => 2,
            "client_max_window_bits" => 3,
            other => return Err(format!("unknown parameter {other}")),
        };
        if std::mem::replace(&mut seen[slot], true) {
            return Err(format!("duplicate parameter {name}"));
        }
        let bits = |v: &Option<String>| match v.as_deref().map(parse_window_bits) {
            Some(Some(b)) => Ok(b),
            _ => Err(format!("invalid value for {name}")),
        };
        match slot {
            0 | 1 if value.is_some() => return Err(format!("{name} takes no value")),
            0 => p.server_no_context_takeover = true,
            1 => p.client_no_context_takeover = true,
            2 => p.server_max_window_bits = Some(bits(value)?),
            _ => {
                p.client_max_window_bits = Some(match value {
                    None => None,
                    Some(_) => Some(bits(value)?),
                })
            }
        }
    }
    Ok(p)
}

fn render(neg: &Negotiated, with_server_bits: bool, with_client_bits: bool) -> String {
    let mut s = String::from(EXTENSION_NAME);
    if neg.server_no_context_takeover {
        s.push_str("; server_no_context_takeover");
    }
    if neg.client_no_context_takeover {
        s.push_str("; client_no_context_takeover");
    }
    if with_server_bits {
        s.push_str(&format!(
            "; server_max_window_bits={}",
            neg.server_max_window_bits
        ));
    }
    if with_client_bits {
        s.push_str(&format!(
            "; client_max_window_bits={}",
            neg.client_max_window_bits
        ));
    }
    s
}

/// Server side: picks the first acceptable permessage-deflate offer in `offers` (the
/// request's `Sec-WebSocket-Extensions` value; several header lines joined by `", "` is
/// fine) and returns the parameters in force and the response header value, or `None`
/// when the extension is not used (disabled, not offered, or no offer acceptable).
///
/// An offer is skipped when malformed, when it has an unknown or duplicate parameter or an
/// invalid value, or when it asks for `server_no_context_takeover` and
/// [`DeflateConfig::accept_no_context_takeover`] is false. Every other offer is accepted:
/// - `server_no_context_takeover` is answered when offered or when
///   [`DeflateConfig::no_context_takeover`] is set;
/// - `server_max_window_bits` is answered with the smaller of the offered value and
///   [`DeflateConfig::max_window_bits`] (also when not offered, if ours is below 15);
///   an answer of 8 means stored blocks only (module docs);
/// - `client_no_context_takeover` is answered when
///   [`DeflateConfig::request_peer_no_context_takeover`] is set;
/// - `client_max_window_bits` is answered only when offered, with the smaller of the
///   offered value (15 if none) and [`DeflateConfig::peer_max_window_bits`], and left out
///   when that is 15 and the offer had no value.
pub fn negotiate(offers: &str, cfg: &DeflateConfig) -> Option<(Negotiated, String)> {
    if !cfg.enabled {
        return None;
    }
    for ext in parse_extension_list(offers).into_iter().flatten() {
        if ext.name != EXTENSION_NAME {
            continue;
        }
        let Ok(offer) = parse_params(&ext.params) else {
            continue;
        };
        if offer.server_no_context_takeover && !cfg.accept_no_context_takeover {
            continue;
        }
        let own = cfg.own_bits();
        let server_bits = offer.server_max_window_bits.map_or(own, |b| b.min(own));
        let announce_server_bits = offer.server_max_window_bits.is_some() || server_bits < 15;
        let (client_bits, announce_client_bits) = match offer.client_max_window_bits {
            None => (15, false),
            Some(v) => {
                let b = v.unwrap_or(15).min(cfg.peer_bits());
                (b, v.is_some() || b < 15)
            }
        };
        let neg = Negotiated {
            server_no_context_takeover: offer.server_no_context_takeover || cfg.no_context_takeover,
            client_no_context_takeover: cfg.request_peer_no_context_takeover,
            server_max_window_bits: server_bits,
            client_max_window_bits: client_bits,
        };
        let header = render(&neg, announce_server_bits, announce_client_bits);
        return Some((neg, header));
    }
    None
}

/// Client side: the `Sec-WebSocket-Extensions` offer to send (empty when disabled).
///
/// Always `client_max_window_bits` (so the server may limit our window), with our window as
/// its value when below 15; `server_max_window_bits=N` when
/// [`DeflateConfig::peer_max_window_bits`] is below 15; `server_no_context_takeover` and
/// `client_no_context_takeover` as configured.
pub fn client_offer(cfg: &DeflateConfig) -> String {
    if !cfg.enabled {
        return String::new();
    }
    let mut s = String::from(EXTENSION_NAME);
    if cfg.no_context_takeover {
        s.push_str("; client_no_context_takeover");
    }
    if cfg.request_peer_no_context_takeover {
        s.push_str("; server_no_context_takeover");
    }
    if cfg.own_bits() < 15 {
        s.push_str(&format!("; client_max_window_bits={}", cfg.own_bits()));
    } else {
        s.push_str("; client_max_window_bits");
    }
    if cfg.peer_bits() < 15 {
        s.push_str(&format!("; server_max_window_bits={}", cfg.peer_bits()));
    }
    s
}

/// Client side: validates the server's `Sec-WebSocket-Extensions` response to
/// [`client_offer`] and returns the parameters in force. Extensions other than
/// permessage-deflate in the value are left to the caller. An error means the client
/// must fail the connection: the value is malformed, has no or several permessage-deflate
/// elements, an unknown or duplicate parameter or an invalid value, a
/// `client_max_window_bits` without a value, a `server_max_window_bits` larger than we
/// offered or missing when we offered it, no `server_no_context_takeover` although we asked
/// for it, or a `client_no_context_takeover` we are configured not to accept; or we did not
/// offer the extension at all.
pub fn client_accept(response: &str, cfg: &DeflateConfig) -> Result<Negotiated, DeflateError> {
    let bad = |why: &str| Err(DeflateError::InvalidResponse(why.to_string()));
    if !cfg.enabled {
        return bad("the extension was not offered");
    }
    let mut found = None;
    for ext in parse_extension_list(response) {
        let Ok(ext) = ext else {
            return bad("malformed Sec-WebSocket-Extensions value");
        };
        if ext.name == EXTENSION_NAME {
            if found.is_some() {
                return bad("permessage-deflate answered more than once");
            }
            found = Some(ext);
        }
    }
    let Some(ext) = found else {
        return bad("no permessage-deflate in the response");
    };
    let p = parse_params(&ext.params).map_err(DeflateError::InvalidResponse)?;
    let client_bits = match p.client_max_window_bits {
        None => 15,
        Some(None) => return bad("client_max_window_bits without a value"),
        Some(Some(b)) => b,
    };
    let server_bits = match p.server_max_window_bits {
        None if cfg.peer_bits() < 15 => {
            return bad("server_max_window_bits was offered but not answered")
        }
        None => 15,
        Some(b) if b > cfg.peer_bits() => {
            return bad("server_max_window_bits larger than offered");
        }
        Some(b) => b,
    };
    if cfg.request_peer_no_context_takeover && !p.server_no_context_takeover {
        return bad("server_no_context_takeover was offered but not answered");
    }
    if p.client_no_context_takeover && !cfg.accept_no_context_takeover {
        return bad("client_no_context_takeover is not accepted");
    }
    Ok(Negotiated {
        server_no_context_takeover: p.server_no_context_takeover,
        client_no_context_takeover: p.client_no_context_takeover || cfg.no_context_takeover,
        server_max_window_bits: server_bits,
        client_max_window_bits: client_bits,
    })
}

// ---------------------------------------------------------------------------------------
// Compression

/// The compression state of one connection: our compressor and the decompressor for the
/// peer's messages. Both are allocated on first use.
pub struct PerMessageDeflate {
    compressor: Option<Compress>,
    /// Our compressor's window (8 = stored blocks only).
    compress_bits: u8,
    /// Reset our compressor after each message.
    compress_reset: bool,
    level: Compression,
    min_compress_size: usize,
    decompressor: Option<Decompress>,
    /// The decompressor's window (9..=15).
    decompress_bits: u8,
    /// Reset the decompressor after each message (the peer does not take over context).
    decompress_reset: bool,
    /// The DEFLATE stream of the current incoming message ended (a BFINAL block).
    stream_ended: bool,
}

impl fmt::Debug for PerMessageDeflate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerMessageDeflate")
            .field("compress_bits", &self.compress_bits)
            .field("compress_reset", &self.compress_reset)
            .field("decompress_bits", &self.decompress_bits)
            .field("decompress_reset", &self.decompress_reset)
            .finish_non_exhaustive()
    }
}

impl PerMessageDeflate {
    /// The state for a connection that negotiated `neg`, at our end `role`. Our compressor
    /// uses the smaller of our direction's negotiated window and
    /// [`DeflateConfig::max_window_bits`], and resets after each message when our
    /// direction's no_context_takeover was negotiated or [`DeflateConfig::no_context_takeover`]
    /// is set.
    pub fn new(neg: &Negotiated, role: Role, cfg: &DeflateConfig) -> Self {
        let (own_bits, own_reset, peer_bits, peer_reset) = match role {
            Role::Server => (
                neg.server_max_window_bits,
                neg.server_no_context_takeover,
                neg.client_max_window_bits,
                neg.client_no_context_takeover,
            ),
            Role::Client => (
                neg.client_max_window_bits,
                neg.client_no_context_takeover,
                neg.server_max_window_bits,
                neg.server_no_context_takeover,
            ),
        };
        PerMessageDeflate {
            compressor: None,
            compress_bits: own_bits.clamp(8, 15).min(cfg.own_bits()),
            compress_reset: own_reset || cfg.no_context_takeover,
            level: Compression::new(cfg.level.min(9)),
            min_compress_size: cfg.min_compress_size,
            decompressor: None,
            // zlib's inflater takes 9..=15; a 2^9 window decodes all a 2^8 one produces.
            decompress_bits: peer_bits.clamp(9, 15),
            decompress_reset: peer_reset,
            stream_ended: false,
        }
    }

    /// Whether a message of `len` bytes should be sent compressed: at least
    /// [`DeflateConfig::min_compress_size`] bytes, and our window is not 8 bits (stored
    /// blocks only, which would only grow the message).
    pub fn should_compress(&self, len: usize) -> bool {
        len >= self.min_compress_size && self.compress_bits > 8
    }

    /// Deflates one whole message payload, appending the compressed bytes (with the
    /// `0x00 0x00 0xff 0xff` tail removed) to `out`; send them with RSV1 set. With context
    /// takeover the compressor keeps its window for the next message.
    pub fn compress(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), DeflateError> {
        if self.compress_bits <= 8 || payload.is_empty() {
            // An empty message is the header byte of an empty stored block (whose
            // `00 00 ff ff` is the stripped tail): valid after any earlier message, which
            // ended byte-aligned, and it leaves the compressor's window as it was. (zlib
            // would write nothing for a sync flush right after another one.)
            write_stored(payload, out);
            return Ok(());
        }
        let (bits, level) = (self.compress_bits, self.level);
        let c = self
            .compressor
            .get_or_insert_with(|| Compress::new_with_window_bits(level, false, bits));
        let start = out.len();
        let mut input = payload;
        loop {
            // Room for the input's worst case (stored) plus block headers and the flush.
            out.reserve(input.len() + input.len() / 16 + 64);
            let before = c.total_in();
            c.compress_vec(input, out, FlushCompress::Sync)
                .map_err(|e| DeflateError::Compress(e.to_string()))?;
            let consumed = usize::try_from(c.total_in() - before).unwrap_or(input.len());
            input = &input[consumed.min(input.len())..];
            // The flush is complete once the compressor stops with room left over.
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
        }
        if out.len() < start + TAIL.len() || out[out.len() - TAIL.len()..] != TAIL {
            return Err(DeflateError::Compress(
                "sync flush did not end with 00 00 ff ff".into(),
            ));
        }
        out.truncate(out.len() - TAIL.len());
        if self.compress_reset {
            c.reset();
        }
        Ok(())
    }

    /// Inflates the next piece of a compressed message's payload (RSV1 was set on its first
    /// frame), appending to `out`. Pieces are passed in order; they may be whole frames or
    /// any slices of them. Set `end_of_message` on the last piece of the FIN frame (an empty
    /// piece is fine): the `0x00 0x00 0xff 0xff` tail is then appended and the state
    /// prepared for the next message.
    ///
    /// Fails with [`DeflateError::TooLarge`] if `out` would grow past `limit` bytes in all
    /// (its length never exceeds `limit`, nor does this call make its capacity exceed
    /// `limit`), and with [`DeflateError::Corrupt`] if the data is not valid DEFLATE. After
    /// an error the connection should be failed; the state is not usable for more messages.
    pub fn decompress(
        &mut self,
        frame_payload: &[u8],
        end_of_message: bool,
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), DeflateError> {
        self.inflate(frame_payload, out, limit)?;
        if end_of_message {
            self.finish_message(out, limit)?;
        }
        Ok(())
    }

    /// Ends the current incoming message: appends the `0x00 0x00 0xff 0xff` tail, inflates
    /// what it releases into `out` (within `limit`, as for [`Self::decompress`]) and prepares
    /// for the next message. Same as `decompress(&[], true, out, limit)`.
    pub fn finish_message(&mut self, out: &mut Vec<u8>, limit: usize) -> Result<(), DeflateError> {
        let result = self.inflate(&TAIL, out, limit);
        if self.decompress_reset || self.stream_ended {
            if let Some(d) = self.decompressor.as_mut() {
                d.reset(false);
            }
        }
        self.stream_ended = false;
        result
    }

    fn inflate(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), DeflateError> {
        let bits = self.decompress_bits;
        let d = self
            .decompressor
            .get_or_insert_with(|| Decompress::new_with_window_bits(false, bits));
        if out.len() > limit {
            return Err(DeflateError::TooLarge { limit });
        }
        let mut full = false;
        while !input.is_empty() && !self.stream_ended {
            let (consumed, produced, status);
            (consumed, produced, status, full) = inflate_step(d, input, out, limit)?;
            input = &input[consumed..];
            match status {
                Status::StreamEnd => self.stream_ended = true,
                _ if consumed == 0 && produced == 0 => {
                    return Err(DeflateError::Corrupt("inflater made no progress".into()));
                }
                _ => {}
            }
        }
        // The input is all taken; if the last step filled the room it was given, the
        // inflater may still hold output (a long match, a stored block read but not yet
        // copied out): drain it.
        while full && !self.stream_ended {
            let status;
            (_, _, status, full) = inflate_step(d, &[], out, limit)?;
            if status == Status::StreamEnd {
                self.stream_ended = true;
            }
        }
        Ok(())
    }
}

/// One call of the inflater on `input`, writing into `out` past its length but never past
/// `limit` bytes (nor growing its capacity past `limit`). Returns the bytes consumed and
/// produced, the status, and whether the output room given was filled (then there may be
/// more to come). At the limit it offers a one-byte probe: any output there is an error.
fn inflate_step(
    d: &mut Decompress,
    input: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(usize, usize, Status, bool), DeflateError> {
    let corrupt = |e: flate2::DecompressError| DeflateError::Corrupt(e.to_string());
    let (before_in, before_out) = (d.total_in(), d.total_out());
    let len = out.len();
    let room = limit.saturating_sub(len);
    let mut full = false;
    let status = if room == 0 {
        let mut probe = [0u8; 1];
        let status = d
            .decompress(input, &mut probe, FlushDecompress::None)
            .map_err(corrupt)?;
        if d.total_out() != before_out {
            return Err(DeflateError::TooLarge { limit });
        }
        status
    } else {
        // Expose a window proportional to the input (inflation is rarely above 4:1 for a
        // step; the loops call again when it is), and grow the capacity geometrically,
        // both capped by the limit.
        let want = room.min(input.len().saturating_mul(4).max(4096));
        if out.capacity() - len < want {
            out.reserve_exact(room.min(len.max(want)));
        }
        out.resize(len + want, 0);
        let result = d.decompress(input, &mut out[len..], FlushDecompress::None);
        let produced = usize::try_from(d.total_out() - before_out).unwrap_or(want);
        out.truncate(len + produced.min(want));
        full = produced >= want;
        result.map_err(corrupt)?
    };
    let consumed = usize::try_from(d.total_in() - before_in).unwrap_or(input.len());
    let produced = usize::try_from(d.total_out() - before_out).unwrap_or(0);
    Ok((consumed.min(input.len()), produced, status, full))
}

/// Writes `payload` as DEFLATE blocks with no compression (BFINAL 0), then the header byte
/// of the empty stored block that a sync flush ends with, whose `00 00 ff ff` is the
/// stripped tail (RFC 7692 §7.2.3.3).
fn write_stored(payload: &[u8], out: &mut Vec<u8>) {
    out.reserve(payload.len() + 5 * (payload.len() / 65_535 + 1) + 1);
    for block in payload.chunks(65_535) {
        let len = block.len() as u16;
        out.push(0x00);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.push(0x00);
}

#[cfg(test)]
mod tests;
