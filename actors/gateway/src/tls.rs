//! The gateway's TLS identity: a cluster CA generated once per data dir and a serving
//! certificate it signs, kept as PEM files so restarts keep every kubeconfig valid.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("{path}: {detail}")]
    File { path: PathBuf, detail: String },
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// PEM files of the CA and the serving certificate.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const CERT: &str = "gateway.crt";
const KEY: &str = "gateway.key";

fn read(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), TlsError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| TlsError::File {
        path: path.clone(),
        detail: e.to_string(),
    })?;
    // Keys are secrets: readable by their owner only.
    if name.ends_with(".key") {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    }
    Ok(())
}

/// Loads the credentials kept in `dir`, or generates and keeps new ones whose serving
/// certificate names `hosts` (DNS names or IP addresses).
pub fn load_or_create(dir: &Path, hosts: &[String]) -> Result<Credentials, TlsError> {
    std::fs::create_dir_all(dir).map_err(|e| TlsError::File {
        path: dir.to_path_buf(),
        detail: e.to_string(),
    })?;
    if let (Some(ca_pem), Some(_), Some(cert_pem), Some(key_pem)) = (
        read(dir, CA_CERT),
        read(dir, CA_KEY),
        read(dir, CERT),
        read(dir, KEY),
    ) {
        return Ok(Credentials {
            ca_pem,
            cert_pem,
            key_pem,
        });
    }
    let creds = generate(hosts)?;
    write(dir, CA_CERT, &creds.0.ca_pem)?;
    write(dir, CA_KEY, &creds.1)?;
    write(dir, CERT, &creds.0.cert_pem)?;
    write(dir, KEY, &creds.0.key_pem)?;
    Ok(creds.0)
}

/// New credentials, and the CA's private key.
pub fn generate(hosts: &[String]) -> Result<(Credentials, String), TlsError> {
    let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into()];
    for h in hosts {
        if !names.contains(h) && !h.is_empty() && h != "0.0.0.0" {
            names.push(h.clone());
        }
    }
    let issued = shoal_bus::tls::issue(
        "shoal-ca",
        "shoal-gateway",
        names,
        vec![shoal_bus::tls::ExtendedKeyUsagePurpose::ServerAuth],
    )?;
    Ok((
        Credentials {
            ca_pem: issued.ca,
            cert_pem: issued.cert,
            key_pem: issued.key,
        },
        issued.ca_key,
    ))
}

/// A rustls server configuration offering HTTP/2 and HTTP/1.1.
pub fn server_config(creds: &Credentials) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let pem_err = |what: &str, e: rustls::pki_types::pem::Error| TlsError::File {
        path: PathBuf::from(what),
        detail: e.to_string(),
    };
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(creds.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| pem_err(CERT, e))?;
    let key =
        PrivateKeyDer::from_pem_slice(creds.key_pem.as_bytes()).map_err(|e| pem_err(KEY, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
