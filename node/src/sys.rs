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

/// Makes `fd` the spawned child's fd 3, open across its exec (the one fd besides stdio that
/// `shoal-shim exec-session` takes: its control socket).
pub(crate) fn pass_as_fd3(cmd: &mut std::process::Command, fd: &OwnedFd) {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let raw = fd.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and calls only dup2(2) or
    // fcntl(2), both async-signal-safe; `raw` stays open until spawn() returns (the caller
    // holds `fd`). dup2 onto itself would keep close-on-exec set, hence fcntl for fd 3.
    unsafe {
        cmd.pre_exec(move || {
            let r = if raw == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(raw, 3)
            };
            if r < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        })
    };
}

/// Takes ownership of fd 3 (what [`pass_as_fd3`] passed), marking it close-on-exec so the
/// container process the shim starts never inherits it.
pub(crate) fn take_fd3() -> std::io::Result<OwnedFd> {
    // SAFETY: fcntl(2) on an fd number only reads and sets flags; it fails with EBADF when
    // fd 3 is not open, and then nothing is taken.
    if unsafe { libc::fcntl(3, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd 3 is open (fcntl succeeded) and, by the shim's protocol, nothing else in
    // this process owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(3) })
}

/// TIOCSCTTY: makes the terminal on fd 0 the calling session leader's controlling terminal.
pub(crate) fn set_controlling_terminal() -> std::io::Result<()> {
    // SAFETY: ioctl(0, TIOCSCTTY, 0) passes no pointer; it fails cleanly when fd 0 is not a
    // terminal or the caller is not a session leader.
    if unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// TIOCSWINSZ: sets a terminal's size (on a pty's master or slave); the foreground process
/// group gets SIGWINCH.
pub(crate) fn set_window_size(
    fd: std::os::fd::BorrowedFd<'_>,
    cols: u16,
    rows: u16,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `struct winsize` from the pointer, which points at a live
    // local of that type for the whole call.
    if unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TIOCSWINSZ,
            &size as *const libc::winsize,
        )
    } < 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// TIOCGWINSZ: a terminal's size as (columns, rows).
pub(crate) fn window_size(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<(u16, u16)> {
    use std::os::fd::AsRawFd;
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `struct winsize` through the pointer, which points at a
    // live local of that type for the whole call.
    if unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TIOCGWINSZ,
            &mut size as *mut libc::winsize,
        )
    } < 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok((size.ws_col, size.ws_row))
}

/// seccomp(2) SECCOMP_SET_MODE_FILTER with `filter`, for this thread (the shim's processes
/// are single-threaded) and its future children. Unlike seccompiler's own installer it
/// leaves no_new_privs alone: whether to set it is the container's choice.
pub(crate) fn install_seccomp(filter: &[seccompiler::sock_filter]) -> std::io::Result<()> {
    let len = u16::try_from(filter.len())
        .map_err(|_| std::io::Error::other("seccomp filter longer than 65535 instructions"))?;
    #[repr(C)]
    struct SockFprog {
        len: libc::c_ushort,
        filter: *const seccompiler::sock_filter,
    }
    let prog = SockFprog {
        len,
        filter: filter.as_ptr(),
    };
    // SAFETY: seccomp(2) reads `len` instructions from `filter`, which `prog` borrows for
    // the duration of the call; sock_filter is #[repr(C)] with the kernel's layout.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0u32,
            &prog as *const SockFprog,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
