//! Per-container overlayfs: lowerdirs = unpacked image layers (top first),
//! upper/work dirs in the container's state dir, mounted at `<dir>/rootfs`.
//!
//! The shim mounts the overlay *inside the container's private mount namespace*,
//! so it disappears with the container's last process and never leaks into the
//! host mount table; [`Rootfs::remove`] still unmounts defensively (for a rootfs
//! someone mounted in the host namespace) before deleting the directories.
//!
//! NOTE: the lowerdir option must fit in one page (~4 KiB) of mount data. With
//! paths like `<state>/images/layers/<64 hex>` that is ~40 layers; images deeper
//! than that would need short symlinked aliases. Not handled yet.

use crate::error::{Error, IoCtx, Result};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rootfs {
    /// Unpacked layers, top first.
    pub lowers: Vec<PathBuf>,
    pub upper: PathBuf,
    pub work: PathBuf,
    /// Mount point.
    pub merged: PathBuf,
}

impl Rootfs {
    /// Describe (and create the directories of) a rootfs under `container_dir`.
    pub fn prepare(container_dir: &Path, lowers: Vec<PathBuf>) -> Result<Rootfs> {
        if lowers.is_empty() {
            return Err(Error::InvalidSpec("image has no layers".into()));
        }
        let r = Rootfs {
            lowers,
            upper: container_dir.join("upper"),
            work: container_dir.join("work"),
            merged: container_dir.join("rootfs"),
        };
        for d in [&r.upper, &r.work, &r.merged] {
            fs::create_dir_all(d).ctx(d, "mkdir")?;
        }
        Ok(r)
    }

    pub fn mount_options(&self) -> String {
        let lowers: Vec<String> = self
            .lowers
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        // NOTE: `volatile` skips the syncfs(2) overlay does on unmount; container
        // upper dirs are throwaway (a new instance gets a fresh one), so durability
        // buys nothing and the sync would sit on the exit path.
        format!(
            "lowerdir={},upperdir={},workdir={},volatile",
            lowers.join(":"),
            self.upper.display(),
            self.work.display()
        )
    }

    /// Mount the overlay at `merged` (in the caller's mount namespace).
    pub fn mount(&self) -> Result<()> {
        let opts = self.mount_options();
        mount(
            Some("overlay"),
            &self.merged,
            Some("overlay"),
            MsFlags::empty(),
            Some(opts.as_str()),
        )
        .ctx(&self.merged, "mount overlay")
    }

    /// Detach the mount if present (idempotent).
    pub fn unmount(&self) -> Result<()> {
        match umount2(&self.merged, MntFlags::MNT_DETACH) {
            Ok(()) | Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => Ok(()),
            Err(e) => Err(Error::sys(&self.merged, "umount overlay", e)),
        }
    }

    /// Unmount and delete upper, work and the mount point (idempotent).
    pub fn remove(&self) -> Result<()> {
        self.unmount()?;
        for d in [&self.merged, &self.upper, &self.work] {
            crate::util::remove_dir_all_idem(d)?;
        }
        Ok(())
    }
}
