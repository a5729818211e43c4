//! The last steps of every container process before execve (the init and each exec'd
//! command): bounding set, user, capabilities, no_new_privs and the seccomp filter.
//!
//! The order follows from the kernel's rules. The bounding set shrinks while we still
//! hold CAP_SETPCAP; the user changes before the final capability sets (setuid clears
//! them for a non-root user). A seccomp filter goes in last, after everything that needs
//! the calls it blocks, with one exception: without no_new_privs only a process holding
//! CAP_SYS_ADMIN may install one, and we give that up with setuid or the final sets, so
//! then the filter goes in first and must let setgroups, setgid, setuid, capset and
//! execve through (the default profile does; runc has the same rule).

use super::{caps, user::Ids, Confinement};
use crate::error::StepError;

pub(super) fn finish(caps: &[String], ids: &Ids, c: &Confinement) -> Result<(), StepError> {
    let filters = match &c.seccomp {
        Some(p) => crate::seccomp::filters(p).map_err(|e| StepError::new("seccomp", e))?,
        None => vec![],
    };
    caps::drop_bounding(caps)?;
    if !c.no_new_privs {
        install(&filters)?;
    }
    caps::switch_user(ids.uid, ids.gid)?;
    caps::set_process_caps(caps, ids.uid)?;
    if c.no_new_privs {
        nix::sys::prctl::set_no_new_privs()
            .map_err(|e| StepError::sys("no_new_privs", e, "prctl"))?;
        install(&filters)?;
    }
    Ok(())
}

fn install(filters: &[crate::seccomp::BpfProgram]) -> Result<(), StepError> {
    for f in filters {
        crate::sys::install_seccomp(f)
            .map_err(|e| StepError::io("seccomp", &e, "install filter"))?;
    }
    Ok(())
}
