//! Certificates for the TLS tests: a test authority and a leaf it signs, made with
//! rcgen (ECDSA P-256) at test time and written as PEM into the test's directory.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

use crate::TestNet;

/// The files of [`TestNet::make_pki`].
#[derive(Debug, Clone)]
pub struct Pki {
    /// The authority's certificate, for clients to trust.
    pub ca: PathBuf,
    /// The leaf's chain (leaf, then the authority).
    pub chain: PathBuf,
    /// The leaf's private key (PKCS#8).
    pub key: PathBuf,
}

impl TestNet {
    /// A test authority and a leaf it signs for `names` (DNS names or addresses),
    /// written into the test's directory.
    pub fn make_pki(&self, names: &[&str]) -> Pki {
        let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // Names of their own: OpenSSL takes a leaf whose issuer is its own subject
        // (rcgen's default for both) for self-signed.
        params
            .distinguished_name
            .push(DnType::CommonName, "Rusty test authority");
        let ca = params.self_signed(&ca_key).expect("CA certificate");
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("leaf key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, "rusty-test-leaf");
        let leaf = params
            .signed_by(&key, &ca, &ca_key)
            .expect("leaf certificate");
        Pki {
            ca: self.write("ca.pem", &ca.pem()),
            chain: self.write("chain.pem", &(leaf.pem() + &ca.pem())),
            key: self.write("key.pem", &key.serialize_pem()),
        }
    }
}
