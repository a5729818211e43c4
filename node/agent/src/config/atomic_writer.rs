//! Kubernetes' atomic writer: a volume's files live in a timestamped directory; `..data` is
//! a symlink to the current one, and each visible name is a symlink through `..data`. An
//! update writes a new directory, points `..data_tmp` at it and renames that over `..data`
//! (rename(2) is atomic), so a reader resolving `key` finds the whole old set or the whole
//! new one. The directory replaced is kept until the next update, so a reader that resolved
//! `..data` just before the swap still finds its files.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

/// One file of a volume: its bytes and mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub data: Vec<u8>,
    pub mode: u32,
}

/// Relative path → file.
pub type Payload = BTreeMap<String, File>;

const DATA_LINK: &str = "..data";
const DATA_TMP_LINK: &str = "..data_tmp";

fn ioerr(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// The directory `..data` points at, if any.
fn current(dir: &Path) -> Option<PathBuf> {
    fs::read_link(dir.join(DATA_LINK)).ok().map(|t| dir.join(t))
}

/// Whether `data_dir` holds exactly `payload`.
fn holds(data_dir: &Path, payload: &Payload) -> bool {
    let mut found = 0;
    let mut same = true;
    for (path, file) in payload {
        let p = data_dir.join(path);
        match (fs::read(&p), fs::metadata(&p)) {
            (Ok(data), Ok(meta)) => {
                found += 1;
                same &= data == file.data && meta.permissions().mode() & 0o7777 == file.mode;
            }
            _ => return false,
        }
    }
    same && count_files(data_dir) == found
}

fn count_files(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => count_files(&e.path()),
            Ok(_) => 1,
            Err(_) => 0,
        })
        .sum()
}

/// The visible top-level names of a payload (`a/b` shows as `a`).
fn top_level(payload: &Payload) -> std::collections::BTreeSet<String> {
    payload
        .keys()
        .map(|p| p.split('/').next().unwrap_or(p).to_string())
        .collect()
}

/// Makes `dir` hold `payload`. Returns whether anything changed.
pub fn write(dir: &Path, payload: &Payload) -> io::Result<bool> {
    fs::create_dir_all(dir).map_err(|e| ioerr(dir, e))?;
    let old = current(dir);
    if old.as_deref().is_some_and(|old| holds(old, payload)) {
        return Ok(false);
    }
    let stamp = chrono::Utc::now().format("..%Y_%m_%d_%H_%M_%S.%f");
    let fresh_name = format!("{stamp}{}", std::process::id());
    let fresh = dir.join(&fresh_name);
    fs::create_dir(&fresh).map_err(|e| ioerr(&fresh, e))?;
    for (path, file) in payload {
        let p = fresh.join(path);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).map_err(|e| ioerr(parent, e))?;
        }
        fs::write(&p, &file.data).map_err(|e| ioerr(&p, e))?;
        fs::set_permissions(&p, fs::Permissions::from_mode(file.mode)).map_err(|e| ioerr(&p, e))?;
    }
    let tmp_link = dir.join(DATA_TMP_LINK);
    let _ = fs::remove_file(&tmp_link);
    symlink(&fresh_name, &tmp_link).map_err(|e| ioerr(&tmp_link, e))?;
    let data_link = dir.join(DATA_LINK);
    fs::rename(&tmp_link, &data_link).map_err(|e| ioerr(&data_link, e))?;

    // Visible names: add the new ones, drop those the payload no longer has.
    let wanted = top_level(payload);
    for name in &wanted {
        let visible = dir.join(name);
        if fs::symlink_metadata(&visible).is_err() {
            symlink(format!("{DATA_LINK}/{name}"), &visible).map_err(|e| ioerr(&visible, e))?;
        }
    }
    for entry in fs::read_dir(dir).map_err(|e| ioerr(dir, e))?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let keep_dir = Some(entry.path()) == old || name == fresh_name;
        if name.starts_with("..") {
            if name != DATA_LINK && !keep_dir {
                let _ = fs::remove_dir_all(entry.path());
            }
        } else if !wanted.contains(&name) {
            let _ = fs::remove_file(entry.path());
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(files: &[(&str, &str)]) -> Payload {
        files
            .iter()
            .map(|(p, d)| {
                (
                    p.to_string(),
                    File {
                        data: d.as_bytes().to_vec(),
                        mode: 0o644,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn swaps_whole_sets_through_the_data_link() {
        let dir = tempfile::tempdir().unwrap();
        let v = dir.path();
        assert!(write(v, &payload(&[("a", "1"), ("nested/b", "2")])).unwrap());
        assert_eq!(fs::read_to_string(v.join("a")).unwrap(), "1");
        assert_eq!(fs::read_to_string(v.join("nested/b")).unwrap(), "2");
        assert_eq!(
            fs::read_link(v.join("a")).unwrap(),
            PathBuf::from("..data/a")
        );
        assert!(
            !write(v, &payload(&[("a", "1"), ("nested/b", "2")])).unwrap(),
            "no change, no write"
        );

        let first = current(v).unwrap();
        assert!(write(v, &payload(&[("a", "one"), ("c", "3")])).unwrap());
        assert_eq!(fs::read_to_string(v.join("a")).unwrap(), "one");
        assert_eq!(fs::read_to_string(v.join("c")).unwrap(), "3");
        assert!(
            fs::symlink_metadata(v.join("nested")).is_err(),
            "dropped names vanish"
        );
        assert!(
            first.exists(),
            "the replaced set stays for readers mid-resolution"
        );
        assert!(write(v, &payload(&[("a", "uno")])).unwrap());
        assert!(!first.exists(), "two generations back is removed");
        assert!(!v.join(DATA_TMP_LINK).exists());
    }

    #[test]
    fn modes_count_as_content() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = payload(&[("k", "v")]);
        write(dir.path(), &p).unwrap();
        p.get_mut("k").unwrap().mode = 0o400;
        assert!(write(dir.path(), &p).unwrap());
        let mode = fs::metadata(dir.path().join("k"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o400);
    }
}
