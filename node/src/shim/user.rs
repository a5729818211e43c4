//! User/group resolution against the container's own /etc/passwd and
//! /etc/group (read after pivot_root), and executable lookup in $PATH.

use crate::error::StepError;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ids {
    pub uid: u32,
    pub gid: u32,
    pub home: Option<String>,
}

struct Entry {
    name: String,
    id: u32,
    gid: u32,
    home: Option<String>,
}

fn parse(file: &Path, passwd: bool) -> Vec<Entry> {
    let Ok(s) = fs::read_to_string(file) else {
        return vec![];
    };
    s.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let id = f.get(2)?.parse().ok()?;
            Some(Entry {
                name: f.first()?.to_string(),
                id,
                gid: if passwd { f.get(3)?.parse().ok()? } else { id },
                home: if passwd {
                    f.get(5).map(|s| s.to_string())
                } else {
                    None
                },
            })
        })
        .collect()
}

/// `user` is `uid`, `uid:gid`, `name` or `name:group`; None/empty = root.
pub(super) fn resolve(user: Option<&str>, passwd: &Path, group: &Path) -> Result<Ids, StepError> {
    let user = user.unwrap_or("").trim();
    let (u, g) = match user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (user, None),
    };
    let users = parse(passwd, true);
    let u = if u.is_empty() { "0" } else { u };
    let (uid, mut gid, home) = match u.parse::<u32>() {
        Ok(uid) => match users.iter().find(|e| e.id == uid) {
            Some(e) => (uid, e.gid, e.home.clone()),
            None => (uid, 0, None),
        },
        Err(_) => match users.iter().find(|e| e.name == u) {
            Some(e) => (e.id, e.gid, e.home.clone()),
            None => {
                return Err(StepError::new(
                    "user",
                    format!("unable to find user {u}: no matching entries in passwd file"),
                ))
            }
        },
    };
    if let Some(g) = g.filter(|g| !g.is_empty()) {
        gid = match g.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => parse(group, false)
                .into_iter()
                .find(|e| e.name == g)
                .map(|e| e.id)
                .ok_or_else(|| {
                    StepError::new(
                        "user",
                        format!("unable to find group {g}: no matching entries in group file"),
                    )
                })?,
        };
    }
    Ok(Ids { uid, gid, home })
}

fn is_executable(p: &Path) -> Option<bool> {
    let m = fs::metadata(p).ok()?;
    Some(m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Find `cmd` like execvp(3) would, but with errors worth showing a user.
pub(super) fn lookup_executable(cmd: &str, path_env: Option<&str>) -> Result<PathBuf, StepError> {
    if cmd.is_empty() {
        return Err(StepError::new("exec", "no command specified"));
    }
    if cmd.contains('/') {
        return match is_executable(Path::new(cmd)) {
            Some(true) => Ok(PathBuf::from(cmd)),
            Some(false) => Err(StepError {
                step: "exec".into(),
                errno: libc::EACCES,
                message: format!("{cmd:?} is not an executable file"),
            }),
            None => Err(StepError {
                step: "exec".into(),
                errno: libc::ENOENT,
                message: format!("executable file not found: {cmd:?}: no such file or directory"),
            }),
        };
    }
    let path = path_env.unwrap_or("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let cand = Path::new(dir).join(cmd);
        if is_executable(&cand) == Some(true) {
            return Ok(cand);
        }
    }
    Err(StepError {
        step: "exec".into(),
        errno: libc::ENOENT,
        message: format!("executable file not found in $PATH: {cmd:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_users_and_groups() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("passwd");
        let g = tmp.path().join("group");
        fs::write(
            &p,
            "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/nonexistent:/bin/false\n",
        )
        .unwrap();
        fs::write(&g, "root:x:0:\nnogroup:x:65534:\nstaff:x:50:\n").unwrap();
        let r = |u| resolve(Some(u), &p, &g);
        assert_eq!(r("").unwrap().uid, 0);
        assert_eq!(
            r("nobody").unwrap(),
            Ids {
                uid: 65534,
                gid: 65534,
                home: Some("/nonexistent".into())
            }
        );
        assert_eq!((r("1000").unwrap().uid, r("1000").unwrap().gid), (1000, 0));
        assert_eq!(r("nobody:staff").unwrap().gid, 50);
        assert_eq!(r("5:7").unwrap().gid, 7);
        let e = r("ghost").unwrap_err();
        assert_eq!(e.step, "user");
        assert!(e.message.contains("unable to find user ghost"));
        assert!(r("root:ghosts").is_err());
    }
}
