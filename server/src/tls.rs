//! Optional TLS: a certificate chain and private key in PEM files make the server answer
//! SSLRequest with 'S' (and accept direct TLS with the `postgresql` ALPN); without them it
//! answers 'N' and clients continue in plain text.

use std::path::Path;
use std::sync::Arc;

use pgwire::tokio::tokio_rustls::rustls::ServerConfig;
use pgwire::tokio::TlsAcceptor;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The server's TLS: the acceptor, and the certificate chain's PEM (which SCRAM-SHA-256-PLUS
/// binds logins to).
pub struct Tls {
    pub acceptor: TlsAcceptor,
    pub certificate_pem: Vec<u8>,
}

pub fn load(cert: &Path, key: &Path) -> Result<Tls, String> {
    let certificate_pem = std::fs::read(cert)
        .map_err(|e| format!("cannot read certificates from {}: {e}", cert.display()))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&certificate_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bad certificate in {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("no certificate in {}", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read the private key from {}: {e}", key.display()))?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("the certificate and key do not form a usable TLS identity: {e}"))?;
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(Tls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        certificate_pem,
    })
}
