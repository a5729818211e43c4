//! Test fixtures: the `docker save` writer (the runtime only reads that format) and
//! the busybox image in it, plus, re-exported, the deterministic image builder of
//! [`crate::image::build`] that tests use to make multi-layer images with whiteouts.
//! Behind the `test-support` feature.

pub use crate::image::build::*;

use crate::error::{Error, IoCtx, Result};
use crate::image::build::config_file;
use crate::image::oci::{self, ImageConfig};
use crate::image::Digest;
use std::fs;
use std::path::Path;

/// Write a legacy `docker save` tarball (`manifest.json`, `<hex>.json`,
/// `<n>/layer.tar`) for `reference`.
pub fn write_docker_save(
    out_tar: &Path,
    reference: &str,
    config: &ImageConfig,
    layers: &[Layer],
) -> Result<()> {
    let cfg =
        serde_json::to_vec(&config_file(config, layers)).map_err(|e| Error::json("config", e))?;
    let cfg_name = format!("{}.json", Digest::of(&cfg).hex());
    let mut tar = tar::Builder::new(fs::File::create(out_tar).ctx(out_tar, "create")?);
    let mut append = |name: &str, data: &[u8]| -> Result<()> {
        let mut h = LayerBuilder::header(tar::EntryType::Regular, 0o644, data.len() as u64);
        tar.append_data(&mut h, name, data)
            .ctx(out_tar, "tar append")
    };
    let mut layer_names = Vec::new();
    for (i, l) in layers.iter().enumerate() {
        let name = format!("{i:03}/layer.tar");
        append(&name, &l.blob()?)?;
        layer_names.push(name);
    }
    append(&cfg_name, &cfg)?;
    let manifest = serde_json::json!([{
        "Config": cfg_name,
        "RepoTags": [oci::Reference::parse(reference)?.to_string()],
        "Layers": layer_names,
    }]);
    append("manifest.json", manifest.to_string().as_bytes())?;
    tar.into_inner().ctx(out_tar, "finish tar")?;
    Ok(())
}

/// Same image as a `docker save` tarball (uncompressed layer).
pub fn build_busybox_docker_save(out_tar: &Path, name: &str, tag: &str) -> Result<()> {
    let (mut layer, config) = busybox_layer()?;
    layer.gzip = false;
    write_docker_save(out_tar, &format!("{name}:{tag}"), &config, &[layer])
}
