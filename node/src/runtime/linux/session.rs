//! Interactive exec sessions: a command in a running container with its stdio handed to the
//! caller (a pseudo-terminal's master, or pipes), for as long as the caller holds the
//! session. The shim (`exec-session`) enters the container and supervises the command; its
//! control socket is the session's lifeline: dropping [`ExecSession::control`] kills the
//! command and everything in its process group.

use super::*;
use crate::shim::{SessionEvent, SessionSpec};
use nix::fcntl::OFlag;
use nix::pty::{grantpt, posix_openpt, ptsname_r, unlockpt, PtyMaster};
use nix::sys::socket::{recv, send, socketpair, AddressFamily, MsgFlags, SockFlag, SockType};
use nix::unistd::pipe2;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::process::{Command, Stdio};

/// How long the shim may take to enter the container and exec the command.
const START_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRequest {
    pub argv: Vec<String>,
    /// Added to the container's environment (overriding same names).
    pub env: Vec<(String, String)>,
    /// Run on a new pseudo-terminal, the command's controlling terminal.
    pub tty: bool,
    /// Give the caller the command's stdin (otherwise /dev/null, or the terminal unread).
    pub stdin: bool,
    /// The terminal's initial size (columns, rows).
    pub size: Option<(u16, u16)>,
}

/// A started session. The fds are blocking and close-on-exec; callers set O_NONBLOCK for
/// async I/O. Reading a pty master whose command is gone fails with EIO: that is its EOF.
#[derive(Debug)]
pub struct ExecSession {
    /// Write end of the command's stdin (the pty master with a TTY), if asked for.
    pub stdin: Option<OwnedFd>,
    /// The command's stdout, or the pty master (stdout and stderr together).
    pub stdout: OwnedFd,
    /// The command's stderr; None with a TTY.
    pub stderr: Option<OwnedFd>,
    /// The pty master, for resizes; None without a TTY.
    pub terminal: Option<OwnedFd>,
    /// The shim's control socket (SOCK_SEQPACKET): [`decode_event`] its messages; the last
    /// is [`SessionEvent::Exited`]. Closing it ends the session.
    pub control: OwnedFd,
    /// The supervising shim: wait for it once the session ended (it exits on its own then).
    pub shim: std::process::Child,
    /// The command's pid on the host.
    pub pid: i32,
}

/// One message read from [`ExecSession::control`].
pub fn decode_event(message: &[u8]) -> Option<SessionEvent> {
    serde_json::from_slice(message).ok()
}

/// Sets a session terminal's size (the command's foreground process group gets SIGWINCH).
pub fn resize(terminal: BorrowedFd<'_>, cols: u16, rows: u16) -> std::io::Result<()> {
    crate::pty::set_size(terminal, cols, rows)
}

impl LinuxRuntime {
    /// Starts `req` in running container `id`; returns once the command has been exec'd
    /// (or with the step that failed: not running, executable not found, …).
    pub fn exec_session(&self, id: &str, req: &SessionRequest) -> Result<ExecSession> {
        let exec = self.exec_spec(id, &req.argv, &req.env, Duration::ZERO)?;
        let shim_err = |message: String| Error::Shim {
            mode: "exec-session",
            message,
        };
        let sys_err = |what: &str, e: nix::Error| shim_err(format!("{what}: {e}"));
        let (child_io, mut session_io) = if req.tty {
            let (master, slave) = open_pty().map_err(|e| sys_err("opening a pty", e))?;
            if let Some((cols, rows)) = req.size {
                let _ = sys::set_window_size(master.as_fd(), cols, rows);
            }
            let dup = |fd: &OwnedFd| {
                fd.try_clone()
                    .map_err(|e| shim_err(format!("dup of the pty: {e}")))
            };
            let stdin = if req.stdin { Some(dup(&master)?) } else { None };
            let child_io = [dup(&slave)?, dup(&slave)?, slave];
            let session_io = (stdin, dup(&master)?, None, Some(master));
            (child_io, session_io)
        } else {
            let pipe = || pipe2(OFlag::O_CLOEXEC).map_err(|e| sys_err("pipe2", e));
            let (out_r, out_w) = pipe()?;
            let (err_r, err_w) = pipe()?;
            let (stdin, in_r) = if req.stdin {
                let (r, w) = pipe()?;
                (Some(w), r)
            } else {
                let null = std::fs::File::open("/dev/null")
                    .map_err(|e| Error::io("/dev/null", "open", e))?;
                (None, OwnedFd::from(null))
            };
            ([in_r, out_w, err_w], (stdin, out_r, Some(err_r), None))
        };
        let (control, shim_end) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| sys_err("socketpair", e))?;
        let [child_in, child_out, child_err] = child_io;
        let mut cmd = Command::new(&self.shim);
        cmd.arg("exec-session")
            .stdin(Stdio::from(child_in))
            .stdout(Stdio::from(child_out))
            .stderr(Stdio::from(child_err));
        sys::pass_as_fd3(&mut cmd, &shim_end);
        let mut shim = cmd
            .spawn()
            .map_err(|e| Error::io(&self.shim, "spawn shim", e))?;
        // The command's ends now live only in the shim (and, after it, the command): the
        // caller sees EOF when they are gone.
        drop(cmd);
        drop(shim_end);
        let started = self.start_session(&control, SessionSpec { exec, tty: req.tty });
        let pid = match started {
            Ok(pid) => pid,
            Err(e) => {
                drop(control);
                let _ = shim.kill();
                let _ = shim.wait();
                return Err(match e {
                    Error::Container { error, .. } => Error::Container {
                        id: id.to_string(),
                        error,
                    },
                    other => other,
                });
            }
        };
        let (stdin, stdout, stderr, terminal) = (
            session_io.0.take(),
            session_io.1,
            session_io.2.take(),
            session_io.3.take(),
        );
        Ok(ExecSession {
            stdin,
            stdout,
            stderr,
            terminal,
            control,
            shim,
            pid,
        })
    }

    /// Sends the spec and waits for the shim's first answer.
    fn start_session(&self, control: &OwnedFd, spec: SessionSpec) -> Result<i32> {
        let shim_err = |message: String| Error::Shim {
            mode: "exec-session",
            message,
        };
        let body =
            serde_json::to_vec(&spec).map_err(|e| Error::json("shim exec-session request", e))?;
        send(control.as_raw_fd(), &body, MsgFlags::MSG_NOSIGNAL)
            .map_err(|e| shim_err(format!("sending the session spec: {e}")))?;
        let mut fds = [PollFd::new(control.as_fd(), PollFlags::POLLIN)];
        let ms = START_TIMEOUT.as_millis() as u16;
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) => {
                return Err(shim_err(
                    "the shim did not start the command in time".into(),
                ))
            }
            Ok(_) => {}
            Err(e) => return Err(shim_err(format!("waiting for the shim: {e}"))),
        }
        let mut buf = vec![0u8; 64 * 1024];
        let n = recv(control.as_raw_fd(), &mut buf, MsgFlags::empty())
            .map_err(|e| shim_err(format!("reading the shim's answer: {e}")))?;
        match decode_event(&buf[..n]) {
            Some(SessionEvent::Started { pid }) => Ok(pid),
            Some(SessionEvent::Failed(error)) => Err(Error::Container {
                id: String::new(),
                error,
            }),
            other => Err(shim_err(format!(
                "unexpected answer {other:?} ({} bytes)",
                n
            ))),
        }
    }
}

/// A new pty pair, both ends close-on-exec from the start: the agent forks other processes
/// concurrently, and a long-lived one (a container's monitor) that inherited the slave would
/// keep the session's terminal open after its command ended.
fn open_pty() -> nix::Result<(OwnedFd, OwnedFd)> {
    let master: PtyMaster = posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let name = ptsname_r(&master)?;
    let slave = nix::fcntl::open(
        name.as_str(),
        OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    Ok((OwnedFd::from(master), slave))
}
