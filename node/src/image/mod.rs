//! Local content-addressed image store.
//!
//! Blobs live under `blobs/sha256/<hex>` and are only ever written through
//! [`ImageStore::import_blob`], which hashes while copying and renames into place
//! only when the digest (and size, when known) match. `refs.json` maps
//! `name:tag` to a manifest digest. Layers are unpacked once into `layers/<hex>/`.
//!
//! Network distribution (the cluster keeps blobs in an object store) works at the
//! blob level: [`ImageStore::image_blobs`] lists what an image needs,
//! [`ImageStore::import_blob`] adds one blob by digest with verification, and
//! [`ImageStore::add_image`] records a reference once its manifest's blobs are present.

pub mod build;
pub mod oci;
mod unpack;

pub use oci::{Digest, ImageConfig, Reference};
pub use unpack::unpack_layer;

use crate::error::{Error, IoCtx, Result};
use crate::util;
use oci::{ConfigFile, Descriptor, Index, Manifest};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What the runtime needs to know about a stored image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageInfo {
    /// The reference it was resolved from (or the manifest digest if untagged).
    pub reference: String,
    pub manifest_digest: Digest,
    pub config_digest: Digest,
    pub config: ImageConfig,
    /// Layer blob digests, bottom first (manifest order).
    pub layers: Vec<Digest>,
}

/// An image at the level of its documents and blobs, for moving it between stores.
#[derive(Debug, Clone)]
pub struct ExportedImage {
    pub manifest_digest: Digest,
    pub manifest: Vec<u8>,
    pub config_digest: Digest,
    pub config: Vec<u8>,
    /// Layer digests; their bytes are at [`ImageStore::blob_path`].
    pub layers: Vec<Digest>,
}

pub struct ImageStore {
    root: PathBuf,
    refs_lock: Mutex<()>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DockerSaveEntry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

impl ImageStore {
    pub fn open(root: impl Into<PathBuf>) -> Result<ImageStore> {
        let root = root.into();
        for d in ["blobs/sha256", "layers", "tmp"] {
            let p = root.join(d);
            fs::create_dir_all(&p).ctx(&p, "mkdir")?;
        }
        Ok(ImageStore {
            root,
            refs_lock: Mutex::new(()),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(digest.hex())
    }

    pub fn has_blob(&self, digest: &Digest) -> bool {
        self.blob_path(digest).is_file()
    }

    /// Add one blob, verifying its sha256 (and `size` when given) before it
    /// becomes visible. Idempotent: an existing blob is kept.
    pub fn import_blob(
        &self,
        digest: &Digest,
        size: Option<u64>,
        mut data: impl Read,
    ) -> Result<PathBuf> {
        let dest = self.blob_path(digest);
        if dest.is_file() {
            return Ok(dest);
        }
        let tmp =
            self.root
                .join("tmp")
                .join(format!("blob-{}-{}", digest.hex(), util::random_hex(4)));
        let result = (|| {
            let mut f = fs::File::create(&tmp).ctx(&tmp, "create")?;
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; 128 * 1024];
            let mut total = 0u64;
            loop {
                let n = data.read(&mut buf).ctx(&tmp, "read blob source")?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                f.write_all(&buf[..n]).ctx(&tmp, "write")?;
                total += n as u64;
            }
            let actual = Digest::from_hasher(hasher);
            if &actual != digest {
                return Err(Error::DigestMismatch {
                    what: format!("blob {digest}"),
                    expected: digest.to_string(),
                    actual: actual.to_string(),
                });
            }
            if let Some(size) = size {
                if size != total {
                    return Err(Error::InvalidImage(format!(
                        "blob {digest}: size {total} does not match descriptor size {size}"
                    )));
                }
            }
            fs::rename(&tmp, &dest).ctx(&dest, "rename blob")
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result.map(|_| dest)
    }

    fn import_blob_bytes(&self, bytes: &[u8]) -> Result<Digest> {
        let d = Digest::of(bytes);
        self.import_blob(&d, Some(bytes.len() as u64), bytes)?;
        Ok(d)
    }

    fn read_blob(&self, digest: &Digest) -> Result<Vec<u8>> {
        let p = self.blob_path(digest);
        fs::read(&p).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::InvalidImage(format!("blob {digest} missing from store"))
            } else {
                Error::io(&p, "read blob", e)
            }
        })
    }

    /// Import an OCI image layout or a `docker save` tarball, given as a directory
    /// or a `.tar` file. Returns the images it contained.
    pub fn import(&self, path: &Path) -> Result<Vec<ImageInfo>> {
        if path.is_dir() {
            return self.import_dir(path);
        }
        let tmp = self
            .root
            .join("tmp")
            .join(format!("import-{}", util::random_hex(6)));
        fs::create_dir_all(&tmp).ctx(&tmp, "mkdir")?;
        let result = (|| {
            let f = fs::File::open(path).ctx(path, "open")?;
            // tar::Archive::unpack refuses entries escaping the destination.
            tar::Archive::new(f)
                .unpack(&tmp)
                .ctx(path, "extract image tar")?;
            self.import_dir(&tmp)
        })();
        let _ = fs::remove_dir_all(&tmp);
        result
    }

    fn import_dir(&self, dir: &Path) -> Result<Vec<ImageInfo>> {
        if dir.join("index.json").is_file() {
            self.import_oci_layout(dir)
        } else if dir.join("manifest.json").is_file() {
            self.import_docker_save(dir)
        } else {
            Err(Error::InvalidImage(format!(
                "{}: neither an OCI layout (index.json) nor a docker save (manifest.json)",
                dir.display()
            )))
        }
    }

    fn layout_blob(&self, dir: &Path, desc: &Descriptor) -> Result<PathBuf> {
        let src = dir.join("blobs/sha256").join(desc.digest.hex());
        let f = fs::File::open(&src).ctx(&src, "open blob")?;
        self.import_blob(&desc.digest, Some(desc.size), f)
    }

    fn import_oci_layout(&self, dir: &Path) -> Result<Vec<ImageInfo>> {
        let index_path = dir.join("index.json");
        let index: Index = util::read_json(&index_path)?;
        let mut out = Vec::new();
        for desc in &index.manifests {
            let name = desc
                .annotations
                .get(oci::ANNOTATION_CONTAINERD_NAME)
                .or_else(|| desc.annotations.get(oci::ANNOTATION_REF_NAME))
                .cloned();
            for (mdesc, name) in self.expand_index_entry(dir, desc, name)? {
                self.layout_blob(dir, &mdesc)?;
                let manifest_bytes = self.read_blob(&mdesc.digest)?;
                let manifest: Manifest = serde_json::from_slice(&manifest_bytes)
                    .map_err(|e| Error::json(format!("manifest {}", mdesc.digest), e))?;
                self.layout_blob(dir, &manifest.config)?;
                for l in &manifest.layers {
                    self.layout_blob(dir, l)?;
                }
                out.push(self.record(name.as_deref(), &mdesc.digest, &manifest)?);
            }
        }
        Ok(out)
    }

    /// Nested indexes (multi-arch) are followed, picking linux/amd64-compatible
    /// entries: we only run on this host's architecture.
    fn expand_index_entry(
        &self,
        dir: &Path,
        desc: &Descriptor,
        name: Option<String>,
    ) -> Result<Vec<(Descriptor, Option<String>)>> {
        if desc.media_type != oci::MEDIA_INDEX && desc.media_type != oci::DOCKER_MANIFEST_LIST {
            return Ok(vec![(desc.clone(), name)]);
        }
        self.layout_blob(dir, desc)?;
        let nested: Index = serde_json::from_slice(&self.read_blob(&desc.digest)?)
            .map_err(|e| Error::json(format!("index {}", desc.digest), e))?;
        let first = nested.manifests.first().cloned().ok_or_else(|| {
            Error::InvalidImage(format!("index {} has no manifests", desc.digest))
        })?;
        Ok(vec![(first, name)])
    }

    fn import_docker_save(&self, dir: &Path) -> Result<Vec<ImageInfo>> {
        let entries: Vec<DockerSaveEntry> = util::read_json(&dir.join("manifest.json"))?;
        let mut out = Vec::new();
        for e in entries {
            let config_path = safe_join(dir, &e.config)?;
            let config_bytes = fs::read(&config_path).ctx(&config_path, "read config")?;
            let config_digest = Digest::of(&config_bytes);
            // The config file is named after its digest: verify when it is.
            let stem = Path::new(&e.config)
                .file_name()
                .map(|s| s.to_string_lossy().trim_end_matches(".json").to_string())
                .unwrap_or_default();
            if stem.len() == 64 && stem != config_digest.hex() {
                return Err(Error::DigestMismatch {
                    what: format!("config {}", e.config),
                    expected: format!("sha256:{stem}"),
                    actual: config_digest.to_string(),
                });
            }
            let config: ConfigFile = serde_json::from_slice(&config_bytes)
                .map_err(|err| Error::json(format!("config {}", e.config), err))?;
            if config.rootfs.diff_ids.len() != e.layers.len() {
                return Err(Error::InvalidImage(format!(
                    "{} layers but {} diff_ids",
                    e.layers.len(),
                    config.rootfs.diff_ids.len()
                )));
            }
            let mut layers = Vec::new();
            for (layer, diff_id) in e.layers.iter().zip(&config.rootfs.diff_ids) {
                let p = safe_join(dir, layer)?;
                // docker save layers are named by id, not digest: verify the
                // uncompressed content against the config's diff_id instead.
                let actual = hash_reader(unpack::open_layer(&p)?, &p)?;
                if &actual != diff_id {
                    return Err(Error::DigestMismatch {
                        what: format!("layer {layer}"),
                        expected: diff_id.to_string(),
                        actual: actual.to_string(),
                    });
                }
                let (digest, size) = {
                    let f = fs::File::open(&p).ctx(&p, "open layer")?;
                    (hash_reader(f, &p)?, fs::metadata(&p).ctx(&p, "stat")?.len())
                };
                let f = fs::File::open(&p).ctx(&p, "open layer")?;
                self.import_blob(&digest, Some(size), f)?;
                let gz = is_gzip(&p)?;
                layers.push(Descriptor {
                    media_type: if gz {
                        oci::MEDIA_LAYER_GZIP
                    } else {
                        oci::MEDIA_LAYER_TAR
                    }
                    .into(),
                    digest,
                    size,
                    annotations: Default::default(),
                });
            }
            self.import_blob_bytes(&config_bytes)?;
            let manifest = Manifest {
                schema_version: 2,
                media_type: Some(oci::MEDIA_MANIFEST.into()),
                config: Descriptor {
                    media_type: oci::MEDIA_CONFIG.into(),
                    digest: config_digest,
                    size: config_bytes.len() as u64,
                    annotations: Default::default(),
                },
                layers,
            };
            let manifest_bytes =
                serde_json::to_vec(&manifest).map_err(|err| Error::json("manifest", err))?;
            let manifest_digest = self.import_blob_bytes(&manifest_bytes)?;
            let tags = e.repo_tags.unwrap_or_default();
            if tags.is_empty() {
                out.push(self.record(None, &manifest_digest, &manifest)?);
            }
            for tag in tags {
                out.push(self.record(Some(&tag), &manifest_digest, &manifest)?);
            }
        }
        Ok(out)
    }

    /// Record `reference -> manifest` (when named) and return the image info.
    fn record(
        &self,
        name: Option<&str>,
        manifest_digest: &Digest,
        manifest: &Manifest,
    ) -> Result<ImageInfo> {
        let config_bytes = self.read_blob(&manifest.config.digest)?;
        let config: ConfigFile = serde_json::from_slice(&config_bytes)
            .map_err(|e| Error::json(format!("config {}", manifest.config.digest), e))?;
        let reference = match name {
            Some(n) => {
                let r = Reference::parse(n)?.to_string();
                self.set_ref(&r, manifest_digest)?;
                r
            }
            None => manifest_digest.to_string(),
        };
        Ok(ImageInfo {
            reference,
            manifest_digest: manifest_digest.clone(),
            config_digest: manifest.config.digest.clone(),
            config: config.config.unwrap_or_default(),
            layers: manifest.layers.iter().map(|l| l.digest.clone()).collect(),
        })
    }

    fn refs_path(&self) -> PathBuf {
        self.root.join("refs.json")
    }

    fn load_refs(&self) -> Result<BTreeMap<String, Digest>> {
        Ok(util::read_json_opt(&self.refs_path())?.unwrap_or_default())
    }

    fn set_ref(&self, reference: &str, digest: &Digest) -> Result<()> {
        let _g = self.refs_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut refs = self.load_refs()?;
        refs.insert(reference.to_string(), digest.clone());
        util::write_json_atomic(&self.refs_path(), &refs)
    }

    fn load_manifest(&self, digest: &Digest) -> Result<Manifest> {
        let bytes = self.read_blob(digest)?;
        serde_json::from_slice(&bytes).map_err(|e| Error::json(format!("manifest {digest}"), e))
    }

    /// Resolve `name:tag`, `name@sha256:..` or a bare manifest digest.
    pub fn resolve(&self, reference: &str) -> Result<ImageInfo> {
        let parsed = Reference::parse(reference)?;
        let (name, digest) = match &parsed {
            Reference::Tag { .. } => {
                let key = parsed.to_string();
                let refs = self.load_refs()?;
                let d = refs
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| Error::ImageNotFound(key.clone()))?;
                (Some(key), d)
            }
            Reference::Digest { digest, .. } => {
                if !self.has_blob(digest) {
                    return Err(Error::ImageNotFound(reference.to_string()));
                }
                (None, digest.clone())
            }
        };
        let manifest = self.load_manifest(&digest)?;
        let mut info = self.record(None, &digest, &manifest)?;
        info.reference = name.unwrap_or_else(|| parsed.to_string());
        Ok(info)
    }

    /// All named images.
    pub fn list(&self) -> Result<Vec<ImageInfo>> {
        let refs = self.load_refs()?;
        refs.keys().map(|r| self.resolve(r)).collect()
    }

    /// Every blob an image needs: manifest, config, then layers.
    pub fn image_blobs(&self, reference: &str) -> Result<Vec<Digest>> {
        let info = self.resolve(reference)?;
        let mut v = vec![info.manifest_digest, info.config_digest];
        v.extend(info.layers);
        Ok(v)
    }

    pub fn export(&self, reference: &str) -> Result<ExportedImage> {
        let info = self.resolve(reference)?;
        Ok(ExportedImage {
            manifest: self.read_blob(&info.manifest_digest)?,
            config: self.read_blob(&info.config_digest)?,
            manifest_digest: info.manifest_digest,
            config_digest: info.config_digest,
            layers: info.layers,
        })
    }

    /// Record an image whose blobs were added with [`import_blob`](Self::import_blob).
    /// Fails if the manifest's config or any layer is missing.
    pub fn add_image(&self, reference: &str, manifest_bytes: &[u8]) -> Result<ImageInfo> {
        let manifest: Manifest =
            serde_json::from_slice(manifest_bytes).map_err(|e| Error::json("manifest", e))?;
        for d in std::iter::once(&manifest.config).chain(&manifest.layers) {
            if !self.has_blob(&d.digest) {
                return Err(Error::InvalidImage(format!(
                    "{reference}: blob {} not in store",
                    d.digest
                )));
            }
        }
        let digest = self.import_blob_bytes(manifest_bytes)?;
        self.record(Some(reference), &digest, &manifest)
    }

    /// Remove a reference (blobs and unpacked layers are kept: they may be shared).
    pub fn untag(&self, reference: &str) -> Result<()> {
        let key = Reference::parse(reference)?.to_string();
        let _g = self.refs_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut refs = self.load_refs()?;
        refs.remove(&key);
        util::write_json_atomic(&self.refs_path(), &refs)
    }

    /// Directory holding the unpacked layer, extracting it on first use. Extraction
    /// goes to a temp dir renamed into place, so concurrent callers and crashes
    /// never expose a half-extracted layer.
    pub fn unpack(&self, layer: &Digest) -> Result<PathBuf> {
        let dest = self.root.join("layers").join(layer.hex());
        if dest.is_dir() {
            return Ok(dest);
        }
        let blob = self.blob_path(layer);
        if !blob.is_file() {
            return Err(Error::InvalidImage(format!("layer {layer} not in store")));
        }
        let tmp =
            self.root
                .join("tmp")
                .join(format!("layer-{}-{}", layer.hex(), util::random_hex(4)));
        fs::create_dir(&tmp).ctx(&tmp, "mkdir")?;
        if let Err(e) = unpack_layer(&blob, &tmp) {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e);
        }
        if let Err(e) = fs::rename(&tmp, &dest) {
            let _ = fs::remove_dir_all(&tmp);
            if !dest.is_dir() {
                return Err(Error::io(&dest, "rename layer", e));
            }
        }
        Ok(dest)
    }

    /// Unpacked layer dirs for an image, top layer first (overlay lowerdir order).
    pub fn lower_dirs(&self, info: &ImageInfo) -> Result<Vec<PathBuf>> {
        let mut v = info
            .layers
            .iter()
            .map(|l| self.unpack(l))
            .collect::<Result<Vec<_>>>()?;
        v.reverse();
        Ok(v)
    }
}

fn safe_join(dir: &Path, rel: &str) -> Result<PathBuf> {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(Error::InvalidImage(format!(
            "unsafe path {rel:?} in manifest.json"
        )));
    }
    Ok(dir.join(p))
}

fn hash_reader(mut r: impl Read, path: &Path) -> Result<Digest> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut r, &mut hasher).ctx(path, "hash")?;
    Ok(Digest::from_hasher(hasher))
}

fn is_gzip(p: &Path) -> Result<bool> {
    let mut f = fs::File::open(p).ctx(p, "open")?;
    let mut magic = [0u8; 2];
    Ok(f.read_exact(&mut magic).is_ok() && magic == [0x1f, 0x8b])
}
