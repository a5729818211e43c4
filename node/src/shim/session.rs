//! `shoal-shim exec-session`: an interactive command inside a running container, for as
//! long as the runtime's caller keeps the session.
//!
//! The caller gives the session's stdio as the shim's fds 0–2 (a pty's slave three times,
//! or pipes) and a SOCK_SEQPACKET control socket as fd 3. The spec ([`SessionSpec`]) is the
//! first message on it; the shim answers [`SessionEvent::Started`] or
//! [`SessionEvent::Failed`], then [`SessionEvent::Exited`] when the command ends. Any
//! message from the caller, or the socket closing (the caller ended the session, or died),
//! kills the command's whole process group: a session never outlives whoever holds it.

use super::exec::{enter_container, exec_command, ContainerCgroups};
use super::{send, PipeMsg, SessionEvent, SessionSpec};
use crate::error::StepError;
use crate::sys::{self, Forked};
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::sys::socket::{recv, send as send_to, MsgFlags};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{pipe2, Pid};
use std::convert::Infallible;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// The largest spec accepted (argv and env).
const MAX_SPEC_BYTES: usize = 1 << 20;

pub(super) fn main() -> i32 {
    let Ok(control) = sys::take_fd3() else {
        eprintln!("shoal-shim exec-session: fd 3 (the control socket) is not open");
        return 2;
    };
    let spec = match read_spec(&control) {
        Ok(s) => s,
        Err(e) => {
            report(&control, &SessionEvent::Failed(e));
            return 0;
        }
    };
    match start(&spec) {
        Ok(child) => {
            report(&control, &SessionEvent::Started { pid: child });
            supervise(&control, child);
        }
        Err(e) => report(&control, &SessionEvent::Failed(e)),
    }
    0
}

fn read_spec(control: &OwnedFd) -> Result<SessionSpec, StepError> {
    let mut buf = vec![0u8; MAX_SPEC_BYTES];
    let n = recv(control.as_raw_fd(), &mut buf, MsgFlags::empty())
        .map_err(|e| StepError::sys("config", e, "read session spec"))?;
    serde_json::from_slice(&buf[..n])
        .map_err(|e| StepError::new("config", format!("parse session spec: {e}")))
}

fn report(control: &OwnedFd, event: &SessionEvent) {
    if let Ok(body) = serde_json::to_vec(event) {
        let _ = send_to(control.as_raw_fd(), &body, MsgFlags::MSG_NOSIGNAL);
    }
}

/// Forks the command inside the container; returns its pid (in the shim's pid namespace)
/// once it has exec'd.
fn start(spec: &SessionSpec) -> Result<i32, StepError> {
    let cgroups = enter_container(&spec.exec)?;
    let (rep_r, rep_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| StepError::sys("exec", e, "pipe2"))?;
    let child = match sys::fork().map_err(|e| StepError::sys("exec", e, "fork"))? {
        Forked::Child => {
            drop(rep_r);
            let e = match child(spec, &cgroups) {
                Ok(never) => match never {},
                Err(e) => e,
            };
            let mut w = File::from(rep_w);
            send(&mut w, &PipeMsg::Failed(e));
            std::process::exit(127)
        }
        Forked::Parent(pid) => pid,
    };
    drop(rep_w);
    // EOF without a message: the exec succeeded (the pipe is close-on-exec).
    for line in BufReader::new(File::from(rep_r))
        .lines()
        .map_while(Result::ok)
    {
        if let Ok(PipeMsg::Failed(e)) = serde_json::from_str::<PipeMsg>(&line) {
            let _ = waitpid(Pid::from_raw(child), None);
            return Err(e);
        }
    }
    Ok(child)
}

fn child(spec: &SessionSpec, cgroups: &ContainerCgroups) -> Result<Infallible, StepError> {
    cgroups.join()?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| StepError::sys("exec", e, "pdeathsig"))?;
    // A session of its own: its process group is what the shim kills at the end, and a
    // terminal needs a session leader to become anyone's controlling terminal.
    nix::unistd::setsid().map_err(|e| StepError::sys("exec", e, "setsid"))?;
    if spec.tty {
        sys::set_controlling_terminal().map_err(|e| StepError::io("tty", &e, "TIOCSCTTY"))?;
    }
    exec_command(&spec.exec)
}

/// Waits for the command to exit or the caller to let go, whichever comes first.
fn supervise(control: &OwnedFd, child: i32) {
    let pid = Pid::from_raw(child);
    let pidfd = match sys::pidfd_open(child) {
        Ok(fd) => fd,
        Err(_) => {
            // Cannot watch it: do not leave it running unwatched.
            let _ = kill(Pid::from_raw(-child), Signal::SIGKILL);
            finish(control, pid, None);
            return;
        }
    };
    loop {
        let mut fds = [
            PollFd::new(control.as_fd(), PollFlags::POLLIN),
            PollFd::new(pidfd.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
        let caller = fds[0].revents().is_some_and(|r| !r.is_empty());
        let exited = fds[1].revents().is_some_and(|r| !r.is_empty());
        if exited {
            break;
        }
        if caller {
            // Read what the caller said: a socket closed with unread data resets the
            // connection, and the caller would lose the exit report that follows.
            let mut said = [0u8; 64];
            let _ = recv(control.as_raw_fd(), &mut said, MsgFlags::MSG_DONTWAIT);
            let error = "the session was ended by its client".to_string();
            let _ = kill(Pid::from_raw(-child), Signal::SIGKILL);
            finish(control, pid, Some(error));
            return;
        }
    }
    finish(control, pid, None);
}

/// Reaps the command, kills what it left in its process group (a session leaves nothing
/// running behind it), and reports how it ended.
fn finish(control: &OwnedFd, pid: Pid, error: Option<String>) {
    let status = loop {
        match waitpid(pid, None) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other,
        }
    };
    let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
    let (exit_code, signal) = match status {
        Ok(WaitStatus::Exited(_, code)) => (code, None),
        Ok(WaitStatus::Signaled(_, s, _)) => (128 + s as i32, Some(s as i32)),
        _ => (255, None),
    };
    report(
        control,
        &SessionEvent::Exited {
            exit_code,
            signal,
            error,
        },
    );
}
