//! `shoal image`: the cluster's image registry.

use anyhow::{Context, Result};
use shoal_agent::registry::{Progress, Registry};
use shoal_node::image::ImageStore;

use crate::cli::ImageCommand;
use crate::remote::Session;

fn show(reference: &str, p: Progress) {
    eprintln!(
        "  {reference}: {}/{} blobs, {} KiB sent, {} KiB already present",
        p.blobs_done,
        p.blobs_total,
        p.bytes_done / 1024,
        p.bytes_skipped / 1024
    );
}

pub async fn run(session: &Session, command: ImageCommand) -> Result<i32> {
    let js = async_nats::jetstream::new(session.nats.clone());
    let registry = Registry::open(&js).await?;
    match command {
        ImageCommand::Import { path } => {
            let scratch_dir = tempfile::tempdir()?;
            let scratch = ImageStore::open(scratch_dir.path())?;
            eprintln!("importing {} …", path.display());
            let images = registry.import_path(&scratch, &path, show).await?;
            for image in images {
                println!("imported {} ({})", image.reference, image.manifest_digest);
            }
        }
        ImageCommand::Ls => {
            let refs = registry.list().await?;
            println!("{:<40} DIGEST", "IMAGE");
            for (reference, digest) in refs {
                println!("{reference:<40} {digest}");
            }
        }
        ImageCommand::BuildBusybox { name, tag } => {
            let dir = tempfile::tempdir()?;
            let layout = dir.path().join("layout");
            shoal_node::image::build::build_busybox_layout(&layout, &name, &tag)
                .context("building the busybox image (is busybox-static installed?)")?;
            let scratch = ImageStore::open(dir.path().join("store"))?;
            let images = registry.import_path(&scratch, &layout, show).await?;
            for image in images {
                println!("imported {} ({})", image.reference, image.manifest_digest);
            }
        }
    }
    Ok(0)
}
