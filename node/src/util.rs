//! Small helpers shared by modules: atomic JSON files, ids, time, process liveness.

use crate::error::{Error, IoCtx, Result};
use serde::{de::DeserializeOwned, Serialize};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Write `value` as JSON to `path` via a temp file + rename so readers never see
/// a torn file. No fsync: these files describe processes that do not survive a
/// host crash anyway, and fsync would dominate the container start hot path.
pub(crate) fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let bytes =
        serde_json::to_vec(value).map_err(|e| Error::json(path.display().to_string(), e))?;
    write_atomic(path, &bytes)
}

pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp).ctx(&tmp, "create")?;
        f.write_all(bytes).ctx(&tmp, "write")?;
    }
    std::fs::rename(&tmp, path).ctx(path, "rename")
}

pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).ctx(path, "read")?;
    serde_json::from_slice(&bytes).map_err(|e| Error::json(path.display().to_string(), e))
}

/// Like [`read_json`] but `Ok(None)` when the file does not exist.
pub(crate) fn read_json_opt<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::json(path.display().to_string(), e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, "read", e)),
    }
}

/// A random lowercase hex id of `n` bytes.
pub(crate) fn random_hex(n: usize) -> String {
    let bytes: Vec<u8> = (0..n).map(|_| rand::random::<u8>()).collect();
    hex::encode(bytes)
}

pub(crate) fn now_ns() -> u64 {
    to_ns(SystemTime::now())
}

pub(crate) fn to_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

pub(crate) fn from_ns(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// The process start time (field 22 of /proc/PID/stat, clock ticks since boot)
/// and whether it is a zombie. Used to tell a live process from a recycled pid.
pub(crate) fn proc_start_time(pid: i32) -> Option<(u64, bool)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // rest starts at field 3 (state); starttime is field 22.
    let state = fields.first()?;
    let start = fields.get(22 - 3)?.parse().ok()?;
    Some((start, *state == "Z" || *state == "X"))
}

/// True if `pid` is alive (not a zombie) and started at `start_time`.
pub(crate) fn process_alive(pid: i32, start_time: u64) -> bool {
    matches!(proc_start_time(pid), Some((st, false)) if st == start_time)
}

/// Validate an id used as a file name and cgroup component.
pub(crate) fn validate_id(kind: &str, id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !id.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidSpec(format!(
            "{kind} id {id:?} must be 1-128 chars of [A-Za-z0-9._-] not starting with '.'"
        )))
    }
}

/// Remove a directory tree, treating "already gone" as success.
pub(crate) fn remove_dir_all_idem(path: &Path) -> Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(path, "remove_dir_all", e)),
    }
}

pub(crate) fn remove_file_idem(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(path, "remove_file", e)),
    }
}
