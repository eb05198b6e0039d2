//! [`TlsInfo`]: what a connection's handshake settled, for the application.
//!
//! The application's handler reads it through the stack's layer-neutral seam,
//! [`Conn::layer_info`](rusty_stack::Conn::layer_info), so that neither the stack nor
//! the application's signatures name a rustls type.

/// A TLS protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsVersion {
    /// TLS 1.2 (RFC 5246).
    Tls12,
    /// TLS 1.3 (RFC 8446).
    Tls13,
}

/// What the handshake of one connection settled. The application's handler gets it
/// with `conn.layer_info::<TlsInfo>()` in any callback from `connected` on (the layer
/// calls nothing else earlier); the handler holding [`Tls`](crate::Tls) gets it from
/// [`TlsConn::info`](crate::TlsConn::info).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsInfo {
    alpn: Option<Vec<u8>>,
    server_name: Option<String>,
    version: TlsVersion,
    cipher_suite: &'static str,
    resumed: bool,
}

impl TlsInfo {
    /// The state of `tls`, whose handshake is over; `client_name` is the name a client
    /// connection asked for.
    pub(crate) fn of(tls: &rustls::Connection, client_name: Option<String>) -> TlsInfo {
        let server_name = match tls {
            rustls::Connection::Server(s) => s.server_name().map(str::to_owned),
            rustls::Connection::Client(_) => client_name,
        };
        let version = match tls.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => TlsVersion::Tls13,
            // rustls speaks nothing but 1.3 and 1.2.
            _ => TlsVersion::Tls12,
        };
        let cipher_suite = tls
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .unwrap_or("unknown");
        TlsInfo {
            alpn: tls.alpn_protocol().map(<[u8]>::to_vec),
            server_name,
            version,
            cipher_suite,
            resumed: tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
        }
    }

    /// The application protocol both sides agreed on through ALPN (RFC 7301), or
    /// `None` when either offered none.
    pub fn alpn(&self) -> Option<&[u8]> {
        self.alpn.as_deref()
    }

    /// The server's name (SNI, RFC 6066 §3). On a server: the name the client asked
    /// for, if it sent one (the certificate served was chosen by it). On a client: the
    /// name the server's certificate was verified for, which was sent as SNI unless it
    /// is an IP address.
    pub fn server_name(&self) -> Option<&str> {
        self.server_name.as_deref()
    }

    /// The protocol version.
    pub fn version(&self) -> TlsVersion {
        self.version
    }

    /// The cipher suite, by rustls's name for it: the IANA registry's, with TLS 1.3
    /// suites marked (`TLS13_AES_128_GCM_SHA256`,
    /// `TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384`, ...).
    pub fn cipher_suite(&self) -> &'static str {
        self.cipher_suite
    }

    /// The session was resumed (from a ticket or a TLS 1.2 session id) rather than
    /// negotiated in full.
    pub fn resumed(&self) -> bool {
        self.resumed
    }
}
