//! Configuration: certificates and keys from PEM, the server side ([`TlsAcceptor`],
//! reloadable) and the client side ([`TlsConnector`]).
//!
//! Both sides use rustls's defaults for everything this module does not name: its
//! cipher suites and key exchange groups (ring's), no client authentication, no
//! 0-RTT data. Only TLS 1.3 and TLS 1.2 exist in rustls.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ProducesTickets, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedProtocolVersion};

/// What went wrong building a configuration.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// A file could not be read.
    Io(String, std::io::Error),
    /// A PEM input held no certificate.
    NoCertificate,
    /// A PEM input held no private key (PKCS#8, PKCS#1 or SEC1).
    NoKey,
    /// A PEM input was malformed.
    Pem(String),
    /// rustls refused the certificate, the key or the configuration.
    Tls(String),
    /// A server name is neither a valid DNS name nor an IP address.
    BadName(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Io(path, e) => write!(f, "{path}: {e}"),
            ConfigError::NoCertificate => f.write_str("no certificate in the PEM input"),
            ConfigError::NoKey => f.write_str("no private key in the PEM input"),
            ConfigError::Pem(e) => write!(f, "malformed PEM: {e}"),
            ConfigError::Tls(e) => write!(f, "TLS configuration refused: {e}"),
            ConfigError::BadName(n) => write!(f, "not a DNS name or IP address: {n}"),
        }
    }
}

impl std::error::Error for ConfigError {}

fn tls_error(e: rustls::Error) -> ConfigError {
    ConfigError::Tls(e.to_string())
}

fn read(path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| ConfigError::Io(path.display().to_string(), e))
}

/// The crypto provider: ring (see the crate's docs for why).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Which protocol versions a side speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Versions {
    /// TLS 1.3, and TLS 1.2 for peers without it (the default).
    #[default]
    Both,
    /// TLS 1.3 only.
    Tls13,
    /// TLS 1.2 only (for tests and old peers).
    Tls12,
}

impl Versions {
    fn list(self) -> &'static [&'static SupportedProtocolVersion] {
        static BOTH: [&SupportedProtocolVersion; 2] =
            [&rustls::version::TLS13, &rustls::version::TLS12];
        static TLS13: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        static TLS12: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
        match self {
            Versions::Both => &BOTH,
            Versions::Tls13 => &TLS13,
            Versions::Tls12 => &TLS12,
        }
    }
}

/// A certificate chain (leaf first) with its private key: RSA, ECDSA (P-256, P-384)
/// or Ed25519.
#[derive(Clone)]
pub struct CertKey {
    key: Arc<CertifiedKey>,
}

impl fmt::Debug for CertKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertKey")
            .field("chain_len", &self.key.cert.len())
            .finish()
    }
}

impl CertKey {
    /// From PEM: `chain` holds the certificates, leaf first; `key` the private key.
    /// The key must belong to the leaf.
    pub fn from_pem(chain: &[u8], key: &[u8]) -> Result<CertKey, ConfigError> {
        let certs = certificates(chain)?;
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => ConfigError::NoKey,
            e => ConfigError::Pem(e.to_string()),
        })?;
        let key = CertifiedKey::from_der(certs, key, &provider()).map_err(tls_error)?;
        Ok(CertKey { key: Arc::new(key) })
    }

    /// [`CertKey::from_pem`] of two files.
    pub fn from_pem_files(chain: &Path, key: &Path) -> Result<CertKey, ConfigError> {
        CertKey::from_pem(&read(chain)?, &read(key)?)
    }
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::Pem(e.to_string()))?;
    if certs.is_empty() {
        return Err(ConfigError::NoCertificate);
    }
    Ok(certs)
}

/// The server's certificates: a default, and others chosen by the name the client asks
/// for (SNI, RFC 6066 §3). A client that names no host, or one we have no certificate
/// for, gets the default.
#[derive(Debug, Clone)]
pub struct Certificates {
    default: CertKey,
    by_name: HashMap<String, CertKey>,
}

impl Certificates {
    /// Just `default`.
    pub fn new(default: CertKey) -> Certificates {
        Certificates {
            default,
            by_name: HashMap::new(),
        }
    }

    /// Serve `cert` to clients that ask for `name` (a DNS name, compared without regard
    /// to case; `*.example.com` matches one label in front of `example.com`).
    pub fn add(mut self, name: &str, cert: CertKey) -> Certificates {
        self.by_name.insert(name.to_ascii_lowercase(), cert);
        self
    }

    fn find(&self, name: Option<&str>) -> &CertKey {
        let Some(name) = name.map(str::to_ascii_lowercase) else {
            return &self.default;
        };
        if let Some(c) = self.by_name.get(&name) {
            return c;
        }
        let wildcard = name.split_once('.').map(|(_, rest)| format!("*.{rest}"));
        wildcard
            .and_then(|w| self.by_name.get(&w))
            .unwrap_or(&self.default)
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.find(hello.server_name()).key.clone())
    }
}

/// How the server side behaves, besides its certificates.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerSettings {
    /// Application protocols offered through ALPN (RFC 7301), most preferred first.
    /// A client that offers ALPN but none of these is refused. Default: `http/1.1`.
    pub alpn: Vec<Vec<u8>>,
    /// Protocol versions. Default: TLS 1.3 and 1.2.
    pub versions: Versions,
    /// Resume sessions with tickets (RFC 8446 §4.6.1, RFC 5077), encrypted with keys
    /// rustls rotates (every six hours, the previous key still accepted). Default on.
    pub tickets: bool,
    /// A handshake that has not finished this long after the TCP connection was
    /// accepted is aborted (slow or stalled peers). Default 10 s.
    pub handshake_timeout: Duration,
    /// Most handshakes in progress at once on one worker; connections past it are
    /// refused (reset) and counted. Default 256.
    pub max_handshakes: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            alpn: vec![b"http/1.1".to_vec()],
            versions: Versions::Both,
            tickets: true,
            handshake_timeout: Duration::from_secs(10),
            max_handshakes: 256,
        }
    }
}

/// The server side's configuration, shared by every worker (behind an `Arc`), and
/// reloadable: [`TlsAcceptor::reload`] swaps the certificates for connections accepted
/// afterwards while those already open keep theirs.
pub struct TlsAcceptor {
    settings: ServerSettings,
    ticketer: Option<Arc<dyn ProducesTickets>>,
    current: RwLock<Arc<ServerConfig>>,
}

impl fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsAcceptor")
            .field("settings", &self.settings)
            .finish()
    }
}

impl TlsAcceptor {
    /// A server side serving `certs` with `settings`.
    pub fn new(certs: Certificates, settings: ServerSettings) -> Result<TlsAcceptor, ConfigError> {
        let ticketer = if settings.tickets {
            Some(rustls::crypto::ring::Ticketer::new().map_err(tls_error)?)
        } else {
            None
        };
        let config = build_server(&settings, ticketer.clone(), certs)?;
        Ok(TlsAcceptor {
            settings,
            ticketer,
            current: RwLock::new(config),
        })
    }

    /// Serve `certs` to connections accepted from now on; open connections keep the
    /// certificates they were accepted with. Ticket keys are kept, so sessions resume
    /// across a reload. Safe to call from any thread (a SIGHUP handler's, say).
    pub fn reload(&self, certs: Certificates) -> Result<(), ConfigError> {
        let config = build_server(&self.settings, self.ticketer.clone(), certs)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = config;
        Ok(())
    }

    /// The settings this side was built with.
    pub fn settings(&self) -> &ServerSettings {
        &self.settings
    }

    pub(crate) fn config(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn build_server(
    settings: &ServerSettings,
    ticketer: Option<Arc<dyn ProducesTickets>>,
    certs: Certificates,
) -> Result<Arc<ServerConfig>, ConfigError> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(settings.versions.list())
        .map_err(tls_error)?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(certs));
    config.alpn_protocols = settings.alpn.clone();
    config.max_early_data_size = 0;
    match ticketer {
        Some(t) => config.ticketer = t,
        None => config.send_tls13_tickets = 0,
    }
    Ok(Arc::new(config))
}

/// How the client side behaves, besides whom it trusts.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientSettings {
    /// Application protocols offered through ALPN, most preferred first. Default:
    /// `http/1.1`.
    pub alpn: Vec<Vec<u8>>,
    /// Protocol versions. Default: TLS 1.3 and 1.2.
    pub versions: Versions,
    /// Resume sessions the server gave tickets for. Default on.
    pub resumption: bool,
    /// A handshake that has not finished this long after the TCP connection was
    /// established is aborted. Default 10 s.
    pub handshake_timeout: Duration,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            alpn: vec![b"http/1.1".to_vec()],
            versions: Versions::Both,
            resumption: true,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// The client side's configuration: whom it trusts, the name it expects servers to
/// prove (and sends as SNI) unless a connection names another
/// ([`TlsConn::with_server_name`](crate::TlsConn::with_server_name),
/// [`Tls::with_server_name_of`](crate::Tls::with_server_name_of)), and its settings. Shared by every worker, and so is its
/// store of session tickets: a later connection to the same server resumes.
pub struct TlsConnector {
    settings: ClientSettings,
    server_name: ServerName<'static>,
    config: Arc<ClientConfig>,
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector")
            .field("server_name", &self.server_name)
            .field("settings", &self.settings)
            .finish()
    }
}

impl TlsConnector {
    /// Trust the certificate authorities in `ca_pem` and expect servers to prove
    /// `server_name` (a DNS name or an IP address).
    pub fn new(
        ca_pem: &[u8],
        server_name: &str,
        settings: ClientSettings,
    ) -> Result<TlsConnector, ConfigError> {
        let mut roots = RootCertStore::empty();
        for cert in certificates(ca_pem)? {
            roots.add(cert).map_err(tls_error)?;
        }
        let server_name = parse_server_name(server_name)?;
        let mut config = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(settings.versions.list())
            .map_err(tls_error)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = settings.alpn.clone();
        config.enable_early_data = false;
        if !settings.resumption {
            config.resumption = rustls::client::Resumption::disabled();
        }
        Ok(TlsConnector {
            settings,
            server_name,
            config: Arc::new(config),
        })
    }

    /// [`TlsConnector::new`] with the authorities read from a file.
    pub fn from_ca_file(
        ca: &Path,
        server_name: &str,
        settings: ClientSettings,
    ) -> Result<TlsConnector, ConfigError> {
        TlsConnector::new(&read(ca)?, server_name, settings)
    }

    /// The settings this side was built with.
    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// A client connection to a server that must prove `name`, or the connector's
    /// name; with the name it proves, as text.
    pub(crate) fn start(
        &self,
        name: Option<&ServerName<'static>>,
    ) -> Result<(rustls::ClientConnection, String), rustls::Error> {
        let name = name.unwrap_or(&self.server_name);
        let tls = rustls::ClientConnection::new(self.config.clone(), name.clone())?;
        Ok((tls, name.to_str().into_owned()))
    }
}

/// A server name as a client names it: a DNS name or an IP address.
pub(crate) fn parse_server_name(name: &str) -> Result<ServerName<'static>, ConfigError> {
    ServerName::try_from(name.to_owned()).map_err(|_| ConfigError::BadName(name.to_owned()))
}
