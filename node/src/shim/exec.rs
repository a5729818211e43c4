//! `shoal-shim exec`: run a command inside a running container (its cgroup and
//! ipc/uts/net/pid/mnt namespaces), collecting output with a deadline.

use super::namespaces;
use super::{confine, send, user, ExecReply, ExecSpec, PipeMsg, Reply};
use crate::error::StepError;
use crate::sys::{self, Forked};
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sched::CloneFlags;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{pipe2, Pid};
use std::convert::Infallible;
use std::ffi::CString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

pub(super) fn exec(spec: &ExecSpec) -> Reply {
    match run(spec) {
        Ok(r) => Reply::Exec(r),
        Err(e) => Reply::Failed(e),
    }
}

/// The running container's cgroups, opened while the shim still sees the host's cgroup
/// filesystem; the forked command joins them itself ([`ContainerCgroups::join`]).
///
/// The shim stays outside them on purpose. Killing a container SIGKILLs every process in
/// its cgroup; a shim in there would die before reaping its command, whose zombie then
/// passes to the node agent (a subreaper that reaps only its monitors). A pid namespace's
/// init cannot finish exiting while a process of its namespace is unreaped, so the
/// container would outlive its SIGKILL, and a pod killed during an exec probe or a preStop
/// hook would hang in termination.
pub(super) struct ContainerCgroups(Vec<(File, std::path::PathBuf)>);

impl ContainerCgroups {
    /// Moves the calling process into the container's cgroups: called by the forked
    /// command before it runs anything.
    pub(super) fn join(&self) -> Result<(), StepError> {
        use std::io::Write;
        for (file, path) in &self.0 {
            (&*file)
                .write_all(b"0")
                .map_err(|e| StepError::io("cgroup", &e, path.display().to_string()))?;
        }
        Ok(())
    }
}

/// Joins the running container's ipc/uts/net/pid/mnt namespaces (the next child forked
/// runs inside them: the pid namespace applies to children only) and opens its cgroups for
/// that child to join.
pub(super) fn enter_container(spec: &ExecSpec) -> Result<ContainerCgroups, StepError> {
    if !crate::util::process_alive(spec.pid, spec.start_time) {
        return Err(StepError::new("exec", "container is not running"));
    }
    // Open every namespace before joining any: after setns(mnt) /proc is the
    // container's and our host pid means nothing there.
    let mut ns = Vec::new();
    for (name, flag) in [
        ("ipc", CloneFlags::CLONE_NEWIPC),
        ("uts", CloneFlags::CLONE_NEWUTS),
        ("net", CloneFlags::CLONE_NEWNET),
        ("pid", CloneFlags::CLONE_NEWPID),
        ("mnt", CloneFlags::CLONE_NEWNS),
    ] {
        let p = format!("/proc/{}/ns/{name}", spec.pid);
        let f = namespaces::open(std::path::Path::new(&p), "join namespace")?;
        ns.push((f, flag, name));
    }
    let mut cgroups = Vec::new();
    for f in &spec.cgroup_procs {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(f)
            .map_err(|e| StepError::io("cgroup", &e, f.display().to_string()))?;
        cgroups.push((file, f.clone()));
    }
    for (f, flag, name) in &ns {
        namespaces::join(f, *flag, "join namespace", *name)?;
    }
    Ok(ContainerCgroups(cgroups))
}

fn run(spec: &ExecSpec) -> Result<ExecReply, StepError> {
    let cgroups = enter_container(spec)?;
    let (out_r, out_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| StepError::sys("exec", e, "pipe2"))?;
    let (err_r, err_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| StepError::sys("exec", e, "pipe2"))?;
    let (rep_r, rep_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| StepError::sys("exec", e, "pipe2"))?;
    let child = match sys::fork().map_err(|e| StepError::sys("exec", e, "fork"))? {
        Forked::Child => {
            drop((out_r, err_r, rep_r));
            let e = match child(spec, &cgroups, out_w, err_w) {
                Ok(never) => match never {},
                Err(e) => e,
            };
            let mut w = File::from(rep_w);
            send(&mut w, &PipeMsg::Failed(e));
            std::process::exit(127)
        }
        Forked::Parent(pid) => pid,
    };
    drop((out_w, err_w, rep_w));
    let (status, stdout, stderr, timed_out) = collect(spec, child, out_r, err_r)?;
    for line in BufReader::new(File::from(rep_r))
        .lines()
        .map_while(Result::ok)
    {
        if let Ok(PipeMsg::Failed(e)) = serde_json::from_str::<PipeMsg>(&line) {
            return Err(e);
        }
    }
    let exit_code = match status {
        WaitStatus::Exited(_, c) => c,
        WaitStatus::Signaled(_, s, _) => 128 + s as i32,
        _ => 255,
    };
    Ok(ExecReply {
        exit_code,
        stdout,
        stderr,
        timed_out,
    })
}

type Collected = (WaitStatus, Vec<u8>, Vec<u8>, bool);

fn collect(
    spec: &ExecSpec,
    child: i32,
    out_r: OwnedFd,
    err_r: OwnedFd,
) -> Result<Collected, StepError> {
    let deadline = Instant::now() + Duration::from_millis(spec.timeout_ms.max(1));
    let pidfd = sys::pidfd_open(child).map_err(|e| StepError::io("exec", &e, "pidfd_open"))?;
    let mut files = [Some(File::from(out_r)), Some(File::from(err_r))];
    let mut bufs = [Vec::new(), Vec::new()];
    let mut timed_out = false;
    let mut exited = false;
    let mut chunk = vec![0u8; 64 * 1024];
    // Until the child exits and both pipes hit EOF (a background process that
    // inherited the pipes can keep them open: stop at the child's exit then).
    while files.iter().any(Option::is_some) && !(exited && timed_out) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() && !timed_out {
            timed_out = true;
            let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
        }
        let mut fds: Vec<PollFd> = Vec::new();
        let mut idx = Vec::new();
        for (i, f) in files.iter().enumerate() {
            if let Some(f) = f {
                fds.push(PollFd::new(f.as_fd(), PollFlags::POLLIN));
                idx.push(i);
            }
        }
        if !exited {
            fds.push(PollFd::new(pidfd.as_fd(), PollFlags::POLLIN));
        }
        let ms = if timed_out {
            100
        } else {
            left.as_millis().min(60_000) as u16 + 1
        };
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) if exited || timed_out => break,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(StepError::sys("exec", e, "poll")),
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        for (k, &i) in idx.iter().enumerate() {
            if !ready[k] {
                continue;
            }
            let f = files[i].as_mut().unwrap();
            match f.read(&mut chunk) {
                Ok(0) | Err(_) => files[i] = None,
                Ok(n) => {
                    let room = spec.max_output.saturating_sub(bufs[i].len());
                    bufs[i].extend_from_slice(&chunk[..n.min(room)]);
                }
            }
        }
        if !exited && ready.get(idx.len()).copied().unwrap_or(false) {
            exited = true;
        }
    }
    if !exited {
        // Output closed before exit: still bounded by the deadline.
        let left = deadline.saturating_duration_since(Instant::now());
        let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
        if poll(
            &mut fds,
            PollTimeout::from(left.as_millis().min(60_000) as u16),
        )
        .unwrap_or(0)
            == 0
        {
            timed_out = true;
            let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
        }
    }
    let status =
        waitpid(Pid::from_raw(child), None).map_err(|e| StepError::sys("exec", e, "waitpid"))?;
    let [out, err] = bufs;
    Ok((status, out, err, timed_out))
}

fn child(
    spec: &ExecSpec,
    cgroups: &ContainerCgroups,
    out_w: OwnedFd,
    err_w: OwnedFd,
) -> Result<Infallible, StepError> {
    cgroups.join()?;
    // Die with the shim (e.g. the runtime kills it on its own timeout). The
    // usual getppid() re-check after prctl does not work here: our parent is
    // outside the container's pid namespace, so getppid() is 0 either way.
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| StepError::sys("exec", e, "pdeathsig"))?;
    let null = File::open("/dev/null").map_err(|e| StepError::io("stdio", &e, "/dev/null"))?;
    nix::unistd::dup2_stdin(&null).map_err(|e| StepError::sys("stdio", e, "dup2"))?;
    nix::unistd::dup2_stdout(&out_w).map_err(|e| StepError::sys("stdio", e, "dup2"))?;
    nix::unistd::dup2_stderr(&err_w).map_err(|e| StepError::sys("stdio", e, "dup2"))?;
    drop((null, out_w, err_w));
    exec_command(spec)
}

/// The end of every exec'd process' setup, its stdio in place: the container's user,
/// working directory, capabilities and environment, then execve. Returns only on failure.
pub(super) fn exec_command(spec: &ExecSpec) -> Result<Infallible, StepError> {
    let ids = user::resolve(
        spec.user.as_deref(),
        Path::new("/etc/passwd"),
        Path::new("/etc/group"),
    )?;
    let cwd = if spec.cwd.is_empty() {
        "/"
    } else {
        spec.cwd.as_str()
    };
    nix::unistd::chdir(cwd).map_err(|e| StepError::sys("workdir", e, cwd))?;
    let path_env = spec.env.iter().find_map(|e| e.strip_prefix("PATH="));
    let argv0 = spec
        .argv
        .first()
        .ok_or_else(|| StepError::new("exec", "no command specified"))?;
    let exe = user::lookup_executable(argv0, path_env)?;
    let to_c = |v: &[String]| -> Result<Vec<CString>, StepError> {
        v.iter()
            .map(|s| {
                CString::new(s.as_str())
                    .map_err(|_| StepError::new("config", "NUL byte in argv/env"))
            })
            .collect()
    };
    let argv = to_c(&spec.argv)?;
    let envp = to_c(&spec.env)?;
    let exe_c = CString::new(exe.as_os_str().as_encoded_bytes())
        .map_err(|_| StepError::new("exec", "NUL in path"))?;
    confine::finish(&spec.caps, &ids, &spec.confinement)?;
    let e = nix::unistd::execve(&exe_c, &argv, &envp).unwrap_err();
    Err(StepError::sys("exec", e, format!("exec {}", exe.display())))
}
