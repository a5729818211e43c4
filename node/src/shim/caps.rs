//! Capabilities: Docker's default set plus the spec's add/drop, applied to the
//! bounding, permitted, effective and inheritable sets; ambient cleared.

use crate::error::StepError;
use caps::{CapSet, Capability, CapsHashSet};
use std::str::FromStr;

/// Docker's default capability set (no CAP_SYS_ADMIN).
pub const DEFAULT_CAPS: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

fn normalize(name: &str) -> Result<String, String> {
    let up = name.trim().to_ascii_uppercase();
    let full = if up.starts_with("CAP_") {
        up
    } else {
        format!("CAP_{up}")
    };
    Capability::from_str(&full)
        .map(|c| c.to_string())
        .map_err(|_| format!("unknown capability {name:?}"))
}

/// Defaults ∪ add − drop, with `ALL` accepted on either side (drop wins).
pub fn effective_caps(add: &[String], drop: &[String]) -> Result<Vec<String>, String> {
    let is_all = |v: &[String]| v.iter().any(|s| s.eq_ignore_ascii_case("ALL"));
    let mut set: std::collections::BTreeSet<String> = if is_all(add) {
        caps::all().iter().map(|c| c.to_string()).collect()
    } else {
        DEFAULT_CAPS.iter().map(|s| s.to_string()).collect()
    };
    for a in add.iter().filter(|s| !s.eq_ignore_ascii_case("ALL")) {
        set.insert(normalize(a)?);
    }
    if is_all(drop) {
        set.clear();
    }
    for d in drop.iter().filter(|s| !s.eq_ignore_ascii_case("ALL")) {
        set.remove(&normalize(d)?);
    }
    Ok(set.into_iter().collect())
}

fn to_set(names: &[String]) -> Result<CapsHashSet, StepError> {
    names
        .iter()
        .map(|n| {
            Capability::from_str(n)
                .map_err(|_| StepError::new("capabilities", format!("unknown capability {n}")))
        })
        .collect()
}

fn cap_err(what: &str, e: caps::errors::CapsError) -> StepError {
    StepError::new("capabilities", format!("{what}: {e}"))
}

/// Step 1 (while still fully privileged): shrink the bounding set and clear
/// ambient caps. Must run before setuid, since dropping needs CAP_SETPCAP.
pub(super) fn drop_bounding(names: &[String]) -> Result<(), StepError> {
    let keep = to_set(names)?;
    for c in caps::all() {
        if !keep.contains(&c) {
            // EINVAL for caps this kernel does not know: nothing to drop.
            let _ = caps::drop(None, CapSet::Bounding, c);
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(|e| cap_err("clear ambient", e))
}

/// Step 2 (after setgid/setuid): set permitted/effective/inheritable. For a
/// non-root uid the kernel already cleared permitted/effective on setuid
/// (capabilities(7), "Effect of user ID changes"), which is Docker's behaviour.
pub(super) fn set_process_caps(names: &[String], uid: u32) -> Result<(), StepError> {
    let keep = to_set(names)?;
    if uid == 0 {
        caps::set(None, CapSet::Effective, &keep).map_err(|e| cap_err("set effective", e))?;
        caps::set(None, CapSet::Permitted, &keep).map_err(|e| cap_err("set permitted", e))?;
        caps::set(None, CapSet::Inheritable, &keep).map_err(|e| cap_err("set inheritable", e))?;
    } else {
        caps::clear(None, CapSet::Inheritable).map_err(|e| cap_err("clear inheritable", e))?;
    }
    Ok(())
}

/// setgroups([]) + setgid + setuid (supplementary groups cleared).
pub(super) fn switch_user(uid: u32, gid: u32) -> Result<(), StepError> {
    use nix::unistd::{setgid, setgroups, setuid, Gid, Uid};
    setgroups(&[]).map_err(|e| StepError::sys("user", e, "setgroups"))?;
    setgid(Gid::from_raw(gid)).map_err(|e| StepError::sys("user", e, format!("setgid {gid}")))?;
    setuid(Uid::from_raw(uid)).map_err(|e| StepError::sys("user", e, format!("setuid {uid}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_drop() {
        let c =
            effective_caps(&["net_admin".into()], &["CAP_KILL".into(), "mknod".into()]).unwrap();
        assert!(c.contains(&"CAP_NET_ADMIN".to_string()));
        assert!(!c.contains(&"CAP_KILL".to_string()));
        assert!(!c.contains(&"CAP_MKNOD".to_string()));
        assert!(!c.contains(&"CAP_SYS_ADMIN".to_string()));
        assert!(effective_caps(&[], &["ALL".into()]).unwrap().is_empty());
        assert!(effective_caps(&["BOGUS".into()], &[]).is_err());
    }
}
