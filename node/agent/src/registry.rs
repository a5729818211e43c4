//! The cluster's image registry: a JetStream object store (`shoal-images`) holding blobs by
//! digest (`blobs/sha256:…`) and references (`refs/<name:tag>` → manifest digest). Nodes pull
//! what they lack and verify every blob's sha256 as it lands in their local store.

use std::path::Path;

use async_nats::jetstream::{self, object_store};
use bus_schemas::subjects::IMAGE_STORE;
use shoal_node::image::{Digest, ImageInfo, ImageStore};
use tokio::io::AsyncReadExt;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("image registry {IMAGE_STORE}: {0}")]
    Store(String),
    #[error("image {0:?} is not in the cluster registry: import it with `shoal image import`")]
    NotFound(String),
    #[error("local image store: {0}")]
    Local(#[from] shoal_node::error::Error),
}

fn store_err(e: impl std::fmt::Display) -> RegistryError {
    RegistryError::Store(e.to_string())
}

/// Progress of a transfer, for people watching a large push or pull.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub blobs_done: usize,
    pub blobs_total: usize,
    pub bytes_done: u64,
    pub bytes_skipped: u64,
}

#[derive(Clone)]
pub struct Registry {
    store: object_store::ObjectStore,
}

fn blob_key(digest: &Digest) -> String {
    format!("blobs/{digest}")
}

fn ref_key(reference: &str) -> String {
    format!("refs/{reference}")
}

/// `busybox` → `busybox:latest`, as image references are normalised everywhere.
pub fn normalise(reference: &str) -> String {
    let last = reference.rsplit('/').next().unwrap_or(reference);
    if reference.contains('@') || last.contains(':') {
        reference.to_string()
    } else {
        format!("{reference}:latest")
    }
}

impl Registry {
    pub async fn open(js: &jetstream::Context) -> Result<Registry, RegistryError> {
        let store = match js.get_object_store(IMAGE_STORE).await {
            Ok(store) => store,
            Err(_) => {
                // Clusters bootstrapped before the image store was part of bootstrap: create
                // it at the state's replica count, never silently at R1 on a cluster.
                let replicas = shoal_bus::store::state_replicas(js).await.unwrap_or(1);
                shoal_bus::store::ensure_image_store(js, replicas)
                    .await
                    .map_err(store_err)?;
                js.get_object_store(IMAGE_STORE).await.map_err(store_err)?
            }
        };
        Ok(Registry { store })
    }

    async fn has(&self, key: &str) -> bool {
        self.store.info(key).await.is_ok_and(|i| !i.deleted)
    }

    /// Uploads an image from a local store; blobs already present are skipped.
    pub async fn push(
        &self,
        local: &ImageStore,
        reference: &str,
        mut progress: impl FnMut(Progress),
    ) -> Result<ImageInfo, RegistryError> {
        let info = local.resolve(reference)?;
        let blobs = local.image_blobs(reference)?;
        let mut p = Progress {
            blobs_done: 0,
            blobs_total: blobs.len(),
            bytes_done: 0,
            bytes_skipped: 0,
        };
        for digest in &blobs {
            let path = local.blob_path(digest);
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let key = blob_key(digest);
            if self.has(&key).await {
                p.bytes_skipped += size;
            } else {
                let mut file = tokio::fs::File::open(&path).await.map_err(|e| {
                    RegistryError::Store(format!("reading {}: {e}", path.display()))
                })?;
                self.store
                    .put(key.as_str(), &mut file)
                    .await
                    .map_err(store_err)?;
                p.bytes_done += size;
            }
            p.blobs_done += 1;
            progress(p);
        }
        let mut manifest_ref = info.manifest_digest.to_string().into_bytes();
        let key = ref_key(&normalise(reference));
        self.store
            .put(key.as_str(), &mut manifest_ref.as_slice())
            .await
            .map_err(store_err)?;
        manifest_ref.clear();
        Ok(info)
    }

    /// Makes `reference` available in the local store, fetching only the missing blobs.
    pub async fn pull(
        &self,
        local: &ImageStore,
        reference: &str,
    ) -> Result<ImageInfo, RegistryError> {
        let reference = normalise(reference);
        let manifest_digest = match self.read(&ref_key(&reference)).await {
            Ok(bytes) => Digest::parse(String::from_utf8_lossy(&bytes).trim())?,
            Err(_) => return Err(RegistryError::NotFound(reference)),
        };
        let manifest = self.fetch_blob(local, &manifest_digest).await?;
        let parsed: serde_json::Value = serde_json::from_slice(&manifest)
            .map_err(|e| RegistryError::Store(format!("manifest of {reference}: {e}")))?;
        let mut needed = Vec::new();
        if let Some(config) = parsed.pointer("/config/digest").and_then(|d| d.as_str()) {
            needed.push(Digest::parse(config)?);
        }
        for layer in parsed
            .get("layers")
            .and_then(|l| l.as_array())
            .into_iter()
            .flatten()
        {
            if let Some(d) = layer.get("digest").and_then(|d| d.as_str()) {
                needed.push(Digest::parse(d)?);
            }
        }
        for digest in &needed {
            if !local.has_blob(digest) {
                self.fetch_blob(local, digest).await?;
            }
        }
        Ok(local.add_image(&reference, &manifest)?)
    }

    async fn read(&self, key: &str) -> Result<Vec<u8>, RegistryError> {
        let mut object = self.store.get(key).await.map_err(store_err)?;
        let mut bytes = Vec::new();
        object.read_to_end(&mut bytes).await.map_err(store_err)?;
        Ok(bytes)
    }

    async fn fetch_blob(
        &self,
        local: &ImageStore,
        digest: &Digest,
    ) -> Result<Vec<u8>, RegistryError> {
        let bytes = self.read(&blob_key(digest)).await?;
        // import_blob verifies the sha256 before anything is stored.
        local.import_blob(digest, Some(bytes.len() as u64), bytes.as_slice())?;
        Ok(bytes)
    }

    /// References the registry holds, with their manifest digests.
    pub async fn list(&self) -> Result<Vec<(String, String)>, RegistryError> {
        use futures::StreamExt;
        let mut list = self.store.list().await.map_err(store_err)?;
        let mut refs = Vec::new();
        while let Some(info) = list.next().await {
            let info = info.map_err(store_err)?;
            if let Some(reference) = info.name.strip_prefix("refs/") {
                if !info.deleted {
                    let digest = self
                        .read(&info.name)
                        .await
                        .map(|b| String::from_utf8_lossy(&b).to_string())
                        .unwrap_or_default();
                    refs.push((reference.to_string(), digest));
                }
            }
        }
        refs.sort();
        Ok(refs)
    }

    /// Imports an OCI layout (dir or tar) or a `docker save` tar into the registry.
    pub async fn import_path(
        &self,
        scratch: &ImageStore,
        path: &Path,
        mut progress: impl FnMut(&str, Progress),
    ) -> Result<Vec<ImageInfo>, RegistryError> {
        let images = scratch.import(path)?;
        let mut pushed = Vec::new();
        for image in images {
            let reference = image.reference.clone();
            pushed.push(
                self.push(scratch, &reference, |p| progress(&reference, p))
                    .await?,
            );
        }
        Ok(pushed)
    }
}
