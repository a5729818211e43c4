//! Every namespace change the shim makes, in one place (as youki gathers its
//! own): leaving for fresh namespaces with unshare(2) and joining existing ones
//! with setns(2). The callers decide which namespaces and in what order; errors
//! name the step and the namespace, for the runtime to report.
//!
//! Both calls change only the calling (single) thread; for the pid namespace
//! they change only the namespace of the caller's next children.

use crate::error::StepError;
use nix::sched::CloneFlags;
use std::fs::File;
use std::os::fd::AsFd;
use std::path::Path;

/// Leave for fresh namespaces of the kinds in `kinds`; `what` names the call in errors.
pub(super) fn unshare(kinds: CloneFlags, step: &str, what: &str) -> Result<(), StepError> {
    nix::sched::unshare(kinds).map_err(|e| StepError::sys(step, e, what))
}

/// Join the namespace of kind `kind` at `path` (a bind mount or `/proc/<pid>/ns/<kind>`).
pub(super) fn join_path(path: &Path, kind: CloneFlags, step: &str) -> Result<(), StepError> {
    let file = open(path, step)?;
    join(&file, kind, step, path.display().to_string())
}

/// Open a namespace to join later: a process that joins several opens them all
/// first, since after joining a mount namespace the host's paths mean nothing.
pub(super) fn open(path: &Path, step: &str) -> Result<File, StepError> {
    File::open(path).map_err(|e| StepError::io(step, &e, path.display().to_string()))
}

/// Join the namespace of kind `kind` held open by `ns`; `what` names it in errors.
pub(super) fn join(
    ns: impl AsFd,
    kind: CloneFlags,
    step: &str,
    what: impl Into<String>,
) -> Result<(), StepError> {
    nix::sched::setns(ns.as_fd(), kind).map_err(|e| StepError::sys(step, e, what))
}
