//! The crate's only `unsafe` code: thin wrappers over syscalls that nix exposes
//! as `unsafe` (fork) or not at all (pidfd_open). Everything else uses nix's safe API.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd};

pub(crate) enum Forked {
    Parent(i32),
    Child,
}

/// fork(2). Only called from the single-threaded `shoal-shim` process, where the
/// child may run arbitrary code (fork(2), NOTES: async-signal-safety only matters
/// for multi-threaded parents).
pub(crate) fn fork() -> nix::Result<Forked> {
    // SAFETY: fork(2): the shim is single-threaded (no std threads are spawned in
    // it), so the child has a consistent copy of all locks and allocator state.
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Parent { child } => Ok(Forked::Parent(child.as_raw())),
        nix::unistd::ForkResult::Child => Ok(Forked::Child),
    }
}

/// pidfd_open(2): a file descriptor that becomes readable (POLLIN) when the
/// process exits. Works for processes that are not our children (since Linux 5.3),
/// which is what lets a restarted agent wait on monitors it did not spawn.
pub(crate) fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open(2) takes (pid_t pid, unsigned int flags) and returns a new
    // fd or -1; no memory is passed to the kernel.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd to us and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
