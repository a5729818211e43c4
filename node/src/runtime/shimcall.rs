//! Spawning `shoal-shim` with a JSON request and reading its JSON reply.

use crate::error::{Error, Result};
use crate::shim::Reply;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where to find the shim: `$SHOAL_SHIM`, else `shoal-shim` next to the current
/// executable or one directory up (cargo puts test binaries in `deps/`).
pub fn find_shim() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SHOAL_SHIM") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join("shoal-shim"), dir.parent()?.join("shoal-shim")]
        .into_iter()
        .find(|p| p.is_file())
}

pub(crate) fn call<T: Serialize>(shim: &Path, mode: &'static str, req: &T) -> Result<Reply> {
    let body =
        serde_json::to_vec(req).map_err(|e| Error::json(format!("shim {mode} request"), e))?;
    let mut child = Command::new(shim)
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(shim, "spawn shim", e))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(&body)
            .map_err(|e| Error::io(shim, "write shim request", e))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::io(shim, "wait for shim", e))?;
    serde_json::from_slice(&out.stdout).map_err(|e| Error::Shim {
        mode,
        message: format!(
            "bad reply ({e}); exit {:?}; stderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    })
}
