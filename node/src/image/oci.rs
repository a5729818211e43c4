//! OCI image-spec document types (index, manifest, config), digests and references.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use std::fmt;

pub const MEDIA_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MEDIA_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
pub const MEDIA_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";
pub const ANNOTATION_CONTAINERD_NAME: &str = "io.containerd.image.name";

/// A validated `sha256:<64 hex>` digest. Validation matters: digests become file
/// names in the store, so this type is what keeps `../` out of blob paths.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

impl Digest {
    pub fn parse(s: &str) -> Result<Digest> {
        let hex = s.strip_prefix("sha256:").ok_or_else(|| {
            Error::InvalidImage(format!("unsupported digest {s:?} (only sha256)"))
        })?;
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(Error::InvalidImage(format!("malformed digest {s:?}")));
        }
        Ok(Digest(s.to_string()))
    }

    pub fn of(bytes: &[u8]) -> Digest {
        Digest(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    pub(crate) fn from_hasher(h: Sha256) -> Digest {
        Digest(format!("sha256:{}", hex::encode(h.finalize())))
    }

    /// The 64 hex characters.
    pub fn hex(&self) -> &str {
        &self.0[7..]
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Digest {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        Digest::parse(&s)
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.0
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: Digest,
    pub size: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub manifests: Vec<Descriptor>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

/// The runtime-relevant part of an OCI image config (`config` object).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ImageConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exposed_ports: Option<BTreeMap<String, serde_json::Value>>,
}

impl ImageConfig {
    /// Exposed ports as written in the image, e.g. `80/tcp`.
    pub fn exposed_port_list(&self) -> Vec<String> {
        self.exposed_ports
            .as_ref()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RootFs {
    #[serde(rename = "type")]
    pub kind: String,
    pub diff_ids: Vec<Digest>,
}

/// The whole image config document.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConfigFile {
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ImageConfig>,
    #[serde(default)]
    pub rootfs: RootFs,
}

/// A parsed image reference: `name[:tag]` or `name@sha256:...`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reference {
    Tag {
        name: String,
        tag: String,
    },
    Digest {
        name: Option<String>,
        digest: Digest,
    },
}

impl Reference {
    pub fn parse(s: &str) -> Result<Reference> {
        let bad = || Error::InvalidReference(s.to_string());
        if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad());
        }
        if let Some((name, digest)) = s.split_once('@') {
            let digest = Digest::parse(digest).map_err(|_| bad())?;
            let name = if name.is_empty() {
                None
            } else {
                Some(name.to_string())
            };
            return Ok(Reference::Digest { name, digest });
        }
        if s.starts_with("sha256:") {
            return Ok(Reference::Digest {
                name: None,
                digest: Digest::parse(s).map_err(|_| bad())?,
            });
        }
        // A ':' after the last '/' separates the tag; one before it is a registry port.
        let last_slash = s.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match s[last_slash..].rfind(':') {
            Some(i) => (&s[..last_slash + i], &s[last_slash + i + 1..]),
            None => (s, "latest"),
        };
        if name.is_empty() || tag.is_empty() || name.ends_with('/') {
            return Err(bad());
        }
        Ok(Reference::Tag {
            name: name.to_string(),
            tag: tag.to_string(),
        })
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reference::Tag { name, tag } => write!(f, "{name}:{tag}"),
            Reference::Digest {
                name: Some(n),
                digest,
            } => write!(f, "{n}@{digest}"),
            Reference::Digest { name: None, digest } => write!(f, "{digest}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references() {
        assert_eq!(
            Reference::parse("busybox").unwrap().to_string(),
            "busybox:latest"
        );
        assert_eq!(
            Reference::parse("reg:5000/a/b:1.2").unwrap(),
            Reference::Tag {
                name: "reg:5000/a/b".into(),
                tag: "1.2".into()
            }
        );
        assert_eq!(
            Reference::parse("reg:5000/a/b").unwrap().to_string(),
            "reg:5000/a/b:latest"
        );
        let d = format!("sha256:{}", "a".repeat(64));
        assert!(matches!(
            Reference::parse(&format!("x@{d}")).unwrap(),
            Reference::Digest { name: Some(_), .. }
        ));
        assert!(Reference::parse("x@sha256:zz").is_err());
        assert!(Reference::parse("x:").is_err());
        assert!(Reference::parse("").is_err());
    }

    #[test]
    fn digest_validation_rejects_paths() {
        assert!(Digest::parse("sha256:../../etc/passwd").is_err());
        assert!(Digest::parse(&format!("sha256:{}", "A".repeat(64))).is_err());
        assert_eq!(Digest::of(b"").hex().len(), 64);
    }
}
