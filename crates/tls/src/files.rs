//! [`TlsFiles`]: where a server's certificates are on disk (a default chain and key, and
//! one more pair per server name), read at start and again on every reload, and the
//! `NAME=CERT,KEY` form programs take them in ([`parse_sni`]).

use std::fmt;
use std::path::PathBuf;

use crate::config::{CertKey, Certificates, ConfigError, TlsAcceptor};

/// Where the server's certificates are: the default chain and key, and one more of each
/// per server name (SNI).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The default certificate chain (PEM, leaf first).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// `(name, chain, key)`: the certificate for clients that ask for `name`.
    pub sni: Vec<(String, PathBuf, PathBuf)>,
}

/// What is wrong with one of the [`TlsFiles`]: which files, and why.
#[derive(Debug)]
pub struct TlsFilesError {
    /// The chain and key files that could not be used.
    pub files: String,
    /// Why.
    pub error: ConfigError,
}

impl fmt::Display for TlsFilesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.files, self.error)
    }
}

impl std::error::Error for TlsFilesError {}

impl TlsFiles {
    /// Read every file now.
    pub fn load(&self) -> Result<Certificates, TlsFilesError> {
        let pair = |cert: &PathBuf, key: &PathBuf| {
            CertKey::from_pem_files(cert, key).map_err(|error| TlsFilesError {
                files: format!("{} and {}", cert.display(), key.display()),
                error,
            })
        };
        let mut certs = Certificates::new(pair(&self.cert, &self.key)?);
        for (name, cert, key) in &self.sni {
            certs = certs.add(name, pair(cert, key)?);
        }
        Ok(certs)
    }

    /// Read every file again and serve what they hold to new connections; on any
    /// error, keep serving the certificates held so far.
    pub fn reload_into(&self, acceptor: &TlsAcceptor) -> Result<(), TlsFilesError> {
        let certs = self.load()?;
        acceptor.reload(certs).map_err(|error| TlsFilesError {
            files: format!("{} and {}", self.cert.display(), self.key.display()),
            error,
        })
    }
}

/// Parse `NAME=CERT,KEY`: the certificate chain and key for clients that ask for NAME.
pub fn parse_sni(s: &str) -> Result<(String, PathBuf, PathBuf), String> {
    let bad = || format!("'{s}' is not NAME=CERT,KEY");
    let (name, files) = s.split_once('=').ok_or_else(bad)?;
    let (cert, key) = files.split_once(',').ok_or_else(bad)?;
    if name.is_empty() || cert.is_empty() || key.is_empty() {
        return Err(bad());
    }
    Ok((name.to_string(), cert.into(), key.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sni_flags_parse_or_say_why_not() {
        assert_eq!(
            parse_sni("a.example=a.pem,a.key").unwrap(),
            ("a.example".to_string(), "a.pem".into(), "a.key".into())
        );
        for bad in ["a.example", "a.example=a.pem", "=a,b", "a=,b", "a=b,"] {
            assert!(parse_sni(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unreadable_files_are_named_in_the_error() {
        let files = TlsFiles {
            cert: "/nonexistent/chain.pem".into(),
            key: "/nonexistent/key.pem".into(),
            sni: Vec::new(),
        };
        let e = files.load().expect_err("no such files");
        assert!(e.to_string().contains("/nonexistent/chain.pem"), "{e}");
    }
}
