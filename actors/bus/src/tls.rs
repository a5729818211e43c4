//! The bus's TLS (`shoal up --tls`, benchmarks comparing TLS on and off): the bus's CA and the server certificate it signs, made once per data dir
//! (`<data dir>/auth/tls/`) and kept, so every client's `--ca` stays valid across restarts.
//! The server certificate serves clients and, between the servers of a NATS cluster, both
//! ends of a route (routes verify each other: server and client use).

use std::path::Path;

use crate::natsd::TlsFiles;
pub use rcgen::ExtendedKeyUsagePurpose;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("generating the bus's TLS certificates: {0}")]
    Generate(#[from] rcgen::Error),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
    move |source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The TLS files in `dir`, made now (naming `hosts` beside localhost, 127.0.0.1 and this
/// machine's name) unless they exist.
pub fn load_or_create(dir: &Path, hosts: &[String]) -> Result<TlsFiles, TlsError> {
    let files = TlsFiles {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server-key.pem"),
    };
    let ca_key = dir.join("ca-key.pem");
    if [&files.ca, &files.cert, &files.key, &ca_key]
        .iter()
        .all(|p| p.is_file())
    {
        return Ok(files);
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".into()),
    ];
    for host in hosts {
        if !host.is_empty() && host != "0.0.0.0" && !names.contains(host) {
            names.push(host.clone());
        }
    }
    let generated = issue(
        "shoal-bus-ca",
        "shoal-nats",
        names,
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    )?;
    for (path, text, secret) in [
        (&files.ca, &generated.ca, false),
        (&ca_key, &generated.ca_key, true),
        (&files.cert, &generated.cert, false),
        (&files.key, &generated.key, true),
    ] {
        write(path, text, secret)?;
    }
    Ok(files)
}

/// A CA and one certificate it signed, as PEM.
pub struct Issued {
    pub ca: String,
    pub ca_key: String,
    pub cert: String,
    pub key: String,
}

/// A new CA named `ca_name` and a certificate for `names` it signs, good for `usages`: the bus
/// server's (server and client, for routes) and the gateway's (server only).
pub fn issue(
    ca_name: &str,
    cert_name: &str,
    names: Vec<String>,
    usages: Vec<ExtendedKeyUsagePurpose>,
) -> Result<Issued, rcgen::Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate()?;
    let ca = ca_params.self_signed(&ca_key)?;
    let mut params = CertificateParams::new(names)?;
    params
        .distinguished_name
        .push(DnType::CommonName, cert_name);
    params.extended_key_usages = usages;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca, &ca_key)?;
    Ok(Issued {
        ca: ca.pem(),
        ca_key: ca_key.serialize_pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

fn write(path: &Path, text: &str, secret: bool) -> Result<(), TlsError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mode = if secret { 0o600 } else { 0o644 };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(io(path))?;
    file.write_all(text.as_bytes()).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_are_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let files = load_or_create(dir.path(), &["10.0.0.5".into()]).unwrap();
        let ca = std::fs::read_to_string(&files.ca).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
        let again = load_or_create(dir.path(), &[]).unwrap();
        assert_eq!(std::fs::read_to_string(&again.ca).unwrap(), ca);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&files.key).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the server's key is private");
    }
}
