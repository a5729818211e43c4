//! Termination messages: a file the container may write its last words to, kept on the host
//! so it outlives the container. The path inside the container (Kubernetes'
//! `/dev/termination-log` by default) usually lies on the container's private /dev tmpfs,
//! which is gone once the container exits; the kubelet solves this the same way, with a host
//! file bind-mounted over that path.

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::error::{Error, IoCtx, Result};
use crate::shim::BindMount;

/// The host side of the message file, in the container's directory.
const FILE: &str = "termination-log";
/// Kubernetes reads at most this much of the file.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// Creates the empty message file for a container about to start and the mount that puts it
/// at `path`. World-writable: the container may run as any user, and the file is its own.
pub(super) fn prepare(container_dir: &Path, path: &str) -> Result<BindMount> {
    if !path.starts_with('/') {
        return Err(Error::InvalidSpec(format!(
            "terminationMessagePath {path:?} must be absolute"
        )));
    }
    let file = container_dir.join(FILE);
    fs::write(&file, b"").ctx(&file, "create")?;
    fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).ctx(&file, "chmod")?;
    Ok(BindMount {
        source: file,
        destination: path.to_string(),
        read_only: false,
    })
}

/// What the container wrote, at most [`MAX_MESSAGE_BYTES`]; None when there is no file (the
/// container asked for none, or it is gone).
pub(super) fn read(container_dir: &Path) -> Result<Option<String>> {
    let file = container_dir.join(FILE);
    let opened = match fs::File::open(&file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx(&file, "open"),
    };
    let mut bytes = Vec::new();
    opened
        .take(MAX_MESSAGE_BYTES as u64)
        .read_to_end(&mut bytes)
        .ctx(&file, "read")?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_capped_and_missing_files_are_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let mount = prepare(dir.path(), "/dev/termination-log").unwrap();
        assert_eq!(mount.destination, "/dev/termination-log");
        assert_eq!(read(dir.path()).unwrap().as_deref(), Some(""));
        fs::write(&mount.source, "x".repeat(MAX_MESSAGE_BYTES + 100)).unwrap();
        assert_eq!(read(dir.path()).unwrap().unwrap().len(), MAX_MESSAGE_BYTES);
        assert!(prepare(dir.path(), "relative").is_err());
    }
}
