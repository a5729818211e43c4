//! Extracting one layer tarball into its own directory, in the form overlayfs
//! expects for a lower layer: `.wh.NAME` becomes a 0:0 character device and
//! `.wh..wh..opq` becomes the `trusted.overlay.opaque=y` xattr on its directory.
//!
//! Safety: entry names containing `..` are rejected; extraction never follows a
//! symlink (parents are checked with lstat and rejected if they are links, files
//! are created with O_EXCL after removing whatever was there), so symlink targets
//! — absolute or relative — are stored verbatim and only ever resolved inside the
//! container's root. Hardlink targets must name a path inside the layer.
//! Device nodes and FIFOs in layers are skipped (containers get a fresh /dev).

use crate::error::{Error, IoCtx, Result};
use flate2::read::GzDecoder;
use nix::sys::stat::{makedev, mknod, Mode, SFlag};
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{lchown, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_MARKER: &str = ".wh..wh..opq";

/// Open a layer blob, transparently decompressing gzip (detected by magic bytes).
pub(crate) fn open_layer(blob: &Path) -> Result<Box<dyn Read>> {
    let f = fs::File::open(blob).ctx(blob, "open layer")?;
    let mut r = BufReader::with_capacity(256 * 1024, f);
    let head = r.fill_buf().ctx(blob, "read layer")?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(GzDecoder::new(r)))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Err(Error::Unsupported(format!(
            "{}: zstd-compressed layers",
            blob.display()
        )))
    } else {
        Ok(Box::new(r))
    }
}

/// Turn a tar entry name into a safe relative path (None for the root itself).
fn sanitize(layer: &str, raw: &Path) -> Result<Option<PathBuf>> {
    let mut out = PathBuf::new();
    for c in raw.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                return Err(Error::UnsafePath {
                    layer: layer.to_string(),
                    path: raw.display().to_string(),
                    reason: "path escapes the layer root",
                })
            }
        }
    }
    Ok(if out.as_os_str().is_empty() {
        None
    } else {
        Some(out)
    })
}

/// mkdir -p `rel` under `root`, refusing to traverse symlinks (an earlier entry
/// could have planted `a -> /etc` to make `a/passwd` land on the host).
fn ensure_dir(layer: &str, root: &Path, rel: &Path) -> Result<()> {
    let mut cur = root.to_path_buf();
    for c in rel.components() {
        cur.push(c);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::UnsafePath {
                    layer: layer.to_string(),
                    path: rel.display().to_string(),
                    reason: "parent directory is a symlink",
                })
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                fs::remove_file(&cur).ctx(&cur, "remove non-directory")?;
                fs::create_dir(&cur).ctx(&cur, "mkdir")?;
            }
            Err(_) => fs::create_dir(&cur).ctx(&cur, "mkdir")?,
        }
    }
    Ok(())
}

fn remove_existing(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path).ctx(path, "remove"),
        Ok(_) => fs::remove_file(path).ctx(path, "remove"),
        Err(_) => Ok(()),
    }
}

struct DirMeta {
    path: PathBuf,
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: u64,
}

/// Extract the layer at `blob` into `dest` (which must exist and be empty).
pub fn unpack_layer(blob: &Path, dest: &Path) -> Result<()> {
    let layer = blob
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut archive = tar::Archive::new(open_layer(blob)?);
    let mut dirs: Vec<DirMeta> = Vec::new();
    let entries = archive.entries().ctx(blob, "read tar")?;
    for entry in entries {
        let mut entry = entry.ctx(blob, "read tar entry")?;
        let raw = entry.path().ctx(blob, "tar entry path")?.into_owned();
        let Some(rel) = sanitize(&layer, &raw)? else {
            continue;
        };
        let name = rel
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parent_rel = rel.parent().unwrap_or(Path::new(""));
        ensure_dir(&layer, dest, parent_rel)?;
        let parent = dest.join(parent_rel);

        if name == OPAQUE_MARKER {
            xattr::set(&parent, "trusted.overlay.opaque", b"y").ctx(&parent, "set opaque xattr")?;
            continue;
        }
        if let Some(victim) = name.strip_prefix(WHITEOUT_PREFIX) {
            let target = parent.join(victim);
            remove_existing(&target)?;
            mknod(&target, SFlag::S_IFCHR, Mode::empty(), makedev(0, 0))
                .ctx(&target, "mknod whiteout")?;
            continue;
        }

        let target = dest.join(&rel);
        let header = entry.header();
        let mode = header.mode().unwrap_or(0o644) & 0o7777;
        let uid = header.uid().unwrap_or(0);
        let gid = header.gid().unwrap_or(0);
        let mtime = header.mtime().unwrap_or(0);
        let kind = header.entry_type();
        match kind {
            tar::EntryType::Directory => {
                match fs::symlink_metadata(&target) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => {
                        remove_existing(&target)?;
                        fs::create_dir(&target).ctx(&target, "mkdir")?;
                    }
                    Err(_) => fs::create_dir(&target).ctx(&target, "mkdir")?,
                }
                dirs.push(DirMeta {
                    path: target,
                    mode,
                    uid,
                    gid,
                    mtime,
                });
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                remove_existing(&target)?;
                let mut f = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&target)
                    .ctx(&target, "create")?;
                std::io::copy(&mut entry, &mut f).ctx(&target, "write")?;
                drop(f);
                lchown(&target, Some(uid as u32), Some(gid as u32)).ctx(&target, "chown")?;
                // chmod after chown: chown clears setuid/setgid bits.
                fs::set_permissions(&target, fs::Permissions::from_mode(mode))
                    .ctx(&target, "chmod")?;
                let t = filetime::FileTime::from_unix_time(mtime as i64, 0);
                filetime::set_file_mtime(&target, t).ctx(&target, "set mtime")?;
            }
            tar::EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .ctx(&target, "symlink target")?
                    .ok_or_else(|| {
                        Error::InvalidImage(format!("symlink {rel:?} without target"))
                    })?;
                remove_existing(&target)?;
                std::os::unix::fs::symlink(&link, &target).ctx(&target, "symlink")?;
                lchown(&target, Some(uid as u32), Some(gid as u32)).ctx(&target, "chown")?;
            }
            tar::EntryType::Link => {
                let link = entry
                    .link_name()
                    .ctx(&target, "hardlink target")?
                    .ok_or_else(|| {
                        Error::InvalidImage(format!("hardlink {rel:?} without target"))
                    })?;
                let src_rel = sanitize(&layer, &link)?.ok_or_else(|| Error::UnsafePath {
                    layer: layer.clone(),
                    path: link.display().to_string(),
                    reason: "hardlink to the layer root",
                })?;
                // The source's parents must not be symlinks either, and linkat(2)
                // without AT_SYMLINK_FOLLOW links a symlink itself, never its target.
                ensure_dir(&layer, dest, src_rel.parent().unwrap_or(Path::new("")))?;
                let src = dest.join(&src_rel);
                remove_existing(&target)?;
                fs::hard_link(&src, &target).ctx(&target, "hardlink")?;
            }
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                tracing::debug!(path = %rel.display(), "skipping device node in layer");
            }
            _ => {
                tracing::debug!(path = %rel.display(), ?kind, "skipping unsupported tar entry");
            }
        }
    }
    // Directory modes last: a read-only directory must not block its own children.
    for d in dirs.iter().rev() {
        lchown(&d.path, Some(d.uid as u32), Some(d.gid as u32)).ctx(&d.path, "chown")?;
        fs::set_permissions(&d.path, fs::Permissions::from_mode(d.mode)).ctx(&d.path, "chmod")?;
        let t = filetime::FileTime::from_unix_time(d.mtime as i64, 0);
        filetime::set_file_mtime(&d.path, t).ctx(&d.path, "set mtime")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_rejects_parent_components() {
        assert!(sanitize("l", Path::new("../etc/passwd")).is_err());
        assert!(sanitize("l", Path::new("a/../../b")).is_err());
        assert_eq!(
            sanitize("l", Path::new("/./etc/passwd")).unwrap().unwrap(),
            PathBuf::from("etc/passwd")
        );
        assert_eq!(sanitize("l", Path::new("./")).unwrap(), None);
    }
}
