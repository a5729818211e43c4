//! Deterministic images: a layer builder, an OCI layout writer and the busybox
//! image made from the host's busybox-static (what `shoal image build-busybox`
//! pushes, and what tests and benchmarks run). Fixed mtimes/owners and gzip
//! without timestamps make the digests stable across runs.

use crate::error::{Error, IoCtx, Result};
use crate::image::oci::{self, ConfigFile, Descriptor, ImageConfig, Index, Manifest, RootFs};
use crate::image::Digest;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

/// mtime stamped on every entry (2024-01-01T00:00:00Z).
pub const FIXED_MTIME: u64 = 1_704_067_200;

pub const BUSYBOX_APPLETS: &[&str] = &[
    "sh",
    "ash",
    "ls",
    "cat",
    "echo",
    "sleep",
    "httpd",
    "nc",
    "wget",
    "true",
    "false",
    "id",
    "ps",
    "hostname",
    "mount",
    "env",
    "grep",
    "head",
    "tail",
    "kill",
    "touch",
    "mkdir",
    "rm",
    "dd",
    "yes",
    "cut",
    "wc",
    "seq",
    "top",
    "tr",
    "printf",
    "test",
    "[",
    "stat",
    "cp",
    "mv",
    "ln",
    "chmod",
    "chown",
    "pwd",
    "readlink",
    "sed",
    "awk",
    "sort",
    "uniq",
    "whoami",
    "uname",
    "date",
    "du",
    "df",
    "find",
    "xargs",
    "timeout",
    "usleep",
    "nslookup",
    "ip",
    "ifconfig",
    "ping",
    "tee",
    "base64",
    "md5sum",
    "sha256sum",
    "umount",
    "dmesg",
    "free",
    "pidof",
];

/// Builds one layer tarball in memory.
pub struct LayerBuilder {
    tar: tar::Builder<Vec<u8>>,
}

impl Default for LayerBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl LayerBuilder {
    pub fn new() -> Self {
        LayerBuilder {
            tar: tar::Builder::new(Vec::new()),
        }
    }

    pub(crate) fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(FIXED_MTIME);
        h
    }

    pub fn dir(&mut self, path: &str, mode: u32) -> Result<&mut Self> {
        let mut h = Self::header(tar::EntryType::Directory, mode, 0);
        self.tar
            .append_data(
                &mut h,
                format!("{}/", path.trim_end_matches('/')),
                std::io::empty(),
            )
            .ctx(path, "tar append dir")?;
        Ok(self)
    }

    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) -> Result<&mut Self> {
        let mut h = Self::header(tar::EntryType::Regular, mode, data.len() as u64);
        self.tar
            .append_data(&mut h, path, data)
            .ctx(path, "tar append file")?;
        Ok(self)
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> Result<&mut Self> {
        let mut h = Self::header(tar::EntryType::Symlink, 0o777, 0);
        self.tar
            .append_link(&mut h, path, target)
            .ctx(path, "tar append symlink")?;
        Ok(self)
    }

    pub fn hardlink(&mut self, path: &str, target: &str) -> Result<&mut Self> {
        let mut h = Self::header(tar::EntryType::Link, 0o644, 0);
        self.tar
            .append_link(&mut h, path, target)
            .ctx(path, "tar append hardlink")?;
        Ok(self)
    }

    /// `.wh.NAME` next to `path`'s file name: deletes `path` from lower layers.
    pub fn whiteout(&mut self, path: &str) -> Result<&mut Self> {
        let p = Path::new(path);
        let name = p
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let wh = match p.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) => format!("{}/.wh.{name}", d.display()),
            None => format!(".wh.{name}"),
        };
        self.file(&wh, 0o644, b"")
    }

    /// `.wh..wh..opq` inside `dir`: hides all lower-layer content of `dir`.
    pub fn opaque(&mut self, dir: &str) -> Result<&mut Self> {
        self.file(
            &format!("{}/.wh..wh..opq", dir.trim_end_matches('/')),
            0o644,
            b"",
        )
    }

    /// The uncompressed tarball.
    pub fn finish(self) -> Result<Vec<u8>> {
        self.tar.into_inner().ctx("<layer>", "finish tar")
    }
}

/// gzip without a file name or timestamp in the header, so output is deterministic.
pub fn gzip(data: &[u8]) -> Result<Vec<u8>> {
    let mut enc = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).ctx("<gzip>", "compress")?;
    enc.finish().ctx("<gzip>", "compress")
}

/// One layer as it goes into an image: the bytes stored and whether they're gzipped.
pub struct Layer {
    pub tar: Vec<u8>,
    pub gzip: bool,
}

impl Layer {
    pub(crate) fn blob(&self) -> Result<Vec<u8>> {
        if self.gzip {
            gzip(&self.tar)
        } else {
            Ok(self.tar.clone())
        }
    }
}

pub(crate) fn config_file(config: &ImageConfig, layers: &[Layer]) -> ConfigFile {
    ConfigFile {
        architecture: "amd64".into(),
        os: "linux".into(),
        config: Some(config.clone()),
        rootfs: RootFs {
            kind: "layers".into(),
            diff_ids: layers.iter().map(|l| Digest::of(&l.tar)).collect(),
        },
    }
}

fn write_blob(dir: &Path, bytes: &[u8]) -> Result<Digest> {
    let d = Digest::of(bytes);
    let p = dir.join("blobs/sha256").join(d.hex());
    fs::write(&p, bytes).ctx(&p, "write blob")?;
    Ok(d)
}

/// Write an OCI image layout directory for `reference` (`name:tag`).
/// Returns the manifest digest.
pub fn write_oci_layout(
    out_dir: &Path,
    reference: &str,
    config: &ImageConfig,
    layers: &[Layer],
) -> Result<Digest> {
    let blobs = out_dir.join("blobs/sha256");
    fs::create_dir_all(&blobs).ctx(&blobs, "mkdir")?;
    let mut descs = Vec::new();
    for l in layers {
        let bytes = l.blob()?;
        descs.push(Descriptor {
            media_type: if l.gzip {
                oci::MEDIA_LAYER_GZIP
            } else {
                oci::MEDIA_LAYER_TAR
            }
            .into(),
            size: bytes.len() as u64,
            digest: write_blob(out_dir, &bytes)?,
            annotations: BTreeMap::new(),
        });
    }
    let cfg =
        serde_json::to_vec(&config_file(config, layers)).map_err(|e| Error::json("config", e))?;
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(oci::MEDIA_MANIFEST.into()),
        config: Descriptor {
            media_type: oci::MEDIA_CONFIG.into(),
            size: cfg.len() as u64,
            digest: write_blob(out_dir, &cfg)?,
            annotations: BTreeMap::new(),
        },
        layers: descs,
    };
    let mbytes = serde_json::to_vec(&manifest).map_err(|e| Error::json("manifest", e))?;
    let mdigest = write_blob(out_dir, &mbytes)?;
    let tag = oci::Reference::parse(reference)?;
    let tag_only = match &tag {
        oci::Reference::Tag { tag, .. } => tag.clone(),
        _ => "latest".into(),
    };
    let index = Index {
        schema_version: 2,
        media_type: Some(oci::MEDIA_INDEX.into()),
        manifests: vec![Descriptor {
            media_type: oci::MEDIA_MANIFEST.into(),
            digest: mdigest.clone(),
            size: mbytes.len() as u64,
            annotations: BTreeMap::from([
                (oci::ANNOTATION_CONTAINERD_NAME.to_string(), tag.to_string()),
                (oci::ANNOTATION_REF_NAME.to_string(), tag_only),
            ]),
        }],
    };
    let p = out_dir.join("index.json");
    fs::write(
        &p,
        serde_json::to_vec(&index).map_err(|e| Error::json("index", e))?,
    )
    .ctx(&p, "write")?;
    let p = out_dir.join("oci-layout");
    fs::write(&p, br#"{"imageLayoutVersion":"1.0.0"}"#).ctx(&p, "write")?;
    Ok(mdigest)
}

/// The single busybox layer (uncompressed tar) and the image config.
pub fn busybox_layer() -> Result<(Layer, ImageConfig)> {
    let busybox_path = Path::new("/bin/busybox");
    let busybox =
        fs::read(busybox_path).ctx(busybox_path, "read busybox (install busybox-static)")?;
    let mut b = LayerBuilder::new();
    for (d, mode) in [
        ("bin", 0o755),
        ("dev", 0o755),
        ("etc", 0o755),
        ("home", 0o755),
        ("proc", 0o555),
        ("root", 0o700),
        ("sys", 0o555),
        ("tmp", 0o1777),
        ("usr", 0o755),
        ("usr/bin", 0o755),
        ("var", 0o755),
        ("var/www", 0o755),
    ] {
        b.dir(d, mode)?;
    }
    b.file("bin/busybox", 0o755, &busybox)?;
    for applet in BUSYBOX_APPLETS {
        b.symlink(&format!("bin/{applet}"), "busybox")?;
    }
    b.symlink("usr/bin/env", "/bin/busybox")?;
    b.file(
        "etc/passwd",
        0o644,
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    )?;
    b.file("etc/group", 0o644, b"root:x:0:\nnobody:x:65534:\n")?;
    // Bind-mount targets, so starting a container writes nothing to its upper dir.
    for f in ["etc/hosts", "etc/resolv.conf", "etc/hostname"] {
        b.file(f, 0o644, b"")?;
    }
    b.file("var/www/index.html", 0o644, b"hello from shoal\n")?;
    let config = ImageConfig {
        cmd: Some(vec!["sh".into()]),
        env: Some(vec![
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ]),
        working_dir: Some("/".into()),
        exposed_ports: Some(BTreeMap::from([(
            "80/tcp".to_string(),
            serde_json::json!({}),
        )])),
        ..Default::default()
    };
    Ok((
        Layer {
            tar: b.finish()?,
            gzip: true,
        },
        config,
    ))
}

/// Build the busybox OCI image layout at `out_dir` tagged `name:tag`.
/// Returns the manifest digest (stable across runs on the same busybox binary).
pub fn build_busybox_layout(out_dir: &Path, name: &str, tag: &str) -> Result<Digest> {
    let (layer, config) = busybox_layer()?;
    write_oci_layout(out_dir, &format!("{name}:{tag}"), &config, &[layer])
}
