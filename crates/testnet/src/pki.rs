//! Certificates for the TLS tests (and `cargo xtask autobahn --tls`): a test authority
//! and two leaves it signs for the same names, made with rcgen (ECDSA P-256) at run time
//! and written as PEM into a directory.

use std::fs;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use sha2::{Digest, Sha256};

use crate::TestNet;

/// The files of [`make_pki`] ([`TestNet::make_pki`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Pki {
    /// The authority's certificate, for clients to trust.
    pub ca: PathBuf,
    /// The leaf's chain (leaf, then the authority); CN `rusty-test-leaf`.
    pub chain: PathBuf,
    /// The leaf's private key (PKCS#8).
    pub key: PathBuf,
    /// SHA-256 of the leaf's DER, lowercase hex (what a client that prints the
    /// certificate it got prints).
    pub fingerprint: String,
    /// A second leaf for the same names by the same authority (CN `rusty-test-leaf-2`,
    /// a key of its own): what a certificate reload swaps in. Chain, key, fingerprint.
    pub second: (PathBuf, PathBuf, String),
}

/// SHA-256 of `der`, lowercase hex.
pub fn sha256_hex(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A test authority and two leaves it signs for `names` (DNS names or addresses),
/// written into `dir` (`ca.pem`, `chain.pem`, `key.pem`, `chain2.pem`, `key2.pem`).
pub fn make_pki(dir: &Path, names: &[&str]) -> Pki {
    let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // Names of their own: OpenSSL takes a leaf whose issuer is its own subject
    // (rcgen's default for both) for self-signed.
    params
        .distinguished_name
        .push(DnType::CommonName, "Rusty test authority");
    let ca = params.self_signed(&ca_key).expect("CA certificate");
    let write = |name: &str, contents: &str| {
        let p = dir.join(name);
        fs::write(&p, contents).unwrap_or_else(|e| panic!("writing {}: {e}", p.display()));
        p
    };
    let leaf = |cn: &str, chain: &str, key_file: &str| {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("leaf key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, cn);
        let leaf = params
            .signed_by(&key, &ca, &ca_key)
            .expect("leaf certificate");
        (
            write(chain, &(leaf.pem() + &ca.pem())),
            write(key_file, &key.serialize_pem()),
            sha256_hex(leaf.der()),
        )
    };
    let (chain, key, fingerprint) = leaf("rusty-test-leaf", "chain.pem", "key.pem");
    let second = leaf("rusty-test-leaf-2", "chain2.pem", "key2.pem");
    Pki {
        ca: write("ca.pem", &ca.pem()),
        chain,
        key,
        fingerprint,
        second,
    }
}

impl TestNet {
    /// [`make_pki`] into the test's directory.
    pub fn make_pki(&self, names: &[&str]) -> Pki {
        make_pki(&self.dir, names)
    }
}
