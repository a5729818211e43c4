//! The per-container monitor (conmon's job): parent of the container init,
//! forwards its stdout/stderr into log files, records the exit in `exit.json`.
//!
//! Exit detection inside the monitor uses a pidfd for the init in the same
//! poll(2) set as the two log pipes, so there is no polling interval and no
//! SIGCHLD handler.

use super::namespaces;
use super::{init, send, PipeMsg, Reply, RunSpec};
use crate::container::{ExitFile, PidFile};
use crate::error::StepError;
use crate::logs::{LogWriter, Stream};
use crate::sys::{self, Forked};
use crate::util;
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sched::CloneFlags;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{pipe2, setsid, Pid};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsFd, OwnedFd};

/// Shim side of `run`: fork the monitor, wait for "started" or an error.
pub(super) fn start(spec: &RunSpec) -> Reply {
    let (rd, wr) = match pipe2(OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => return Reply::Failed(StepError::sys("monitor", e, "pipe2")),
    };
    match sys::fork() {
        Err(e) => Reply::Failed(StepError::sys("monitor", e, "fork monitor")),
        Ok(Forked::Child) => {
            drop(rd);
            let code = monitor(spec, wr);
            std::process::exit(code)
        }
        Ok(Forked::Parent(_monitor)) => {
            drop(wr);
            // EOF arrives when the monitor has reported and the init has either
            // exec'd (CLOEXEC closes its copy) or died after reporting an error.
            let mut started = None;
            let mut failed = None;
            for line in BufReader::new(File::from(rd)).lines().map_while(Result::ok) {
                match serde_json::from_str::<PipeMsg>(&line) {
                    Ok(PipeMsg::Started(p)) => started = Some(p),
                    Ok(PipeMsg::Failed(e)) => failed = failed.or(Some(e)),
                    Err(_) => {}
                }
            }
            match (failed, started) {
                (Some(e), _) => Reply::Failed(e),
                (None, Some(p)) => Reply::Started(p),
                (None, None) => Reply::Failed(StepError::new(
                    "monitor",
                    "monitor exited without reporting (see monitor.log)",
                )),
            }
        }
    }
}

fn monitor(spec: &RunSpec, report: OwnedFd) -> i32 {
    let mut report = File::from(report);
    let _ = setsid();
    // Detach from the shim's stdio: the runtime reads the shim's stdout to EOF,
    // which must not wait for this long-lived process.
    if let Ok(null) = File::options().read(true).write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
    }
    if let Ok(log) = File::options()
        .create(true)
        .append(true)
        .open(spec.container_dir.join("monitor.log"))
    {
        let _ = nix::unistd::dup2_stderr(&log);
    }
    let (pid, out_r, err_r) = match spawn_init(spec, &report) {
        Ok(v) => v,
        Err(e) => {
            send(&mut report, &PipeMsg::Failed(e));
            return 1;
        }
    };
    let me = std::process::id() as i32;
    let pidfile = PidFile {
        pid,
        start_time: util::proc_start_time(pid).map(|s| s.0).unwrap_or(0),
        monitor_pid: me,
        monitor_start_time: util::proc_start_time(me).map(|s| s.0).unwrap_or(0),
        started_at_ns: util::now_ns(),
    };
    if let Err(e) = util::write_json_atomic(&spec.container_dir.join("pid.json"), &pidfile) {
        eprintln!("monitor: write pid.json: {e}");
    }
    send(&mut report, &PipeMsg::Started(pidfile));
    drop(report);
    supervise(spec, pid, out_r, err_r);
    0
}

fn spawn_init(spec: &RunSpec, report: &File) -> Result<(i32, OwnedFd, OwnedFd), StepError> {
    let (out_r, out_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| StepError::sys("logs", e, "pipe2"))?;
    let (err_r, err_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| StepError::sys("logs", e, "pipe2"))?;
    for (path, flag) in [
        (&spec.netns, CloneFlags::CLONE_NEWNET),
        (&spec.ipcns, CloneFlags::CLONE_NEWIPC),
        (&spec.utsns, CloneFlags::CLONE_NEWUTS),
    ] {
        namespaces::join_path(path, flag, "join pod namespace")?;
    }
    match &spec.pidns {
        // setns(2) CLONE_NEWPID: like unshare, it only changes the namespace
        // of the caller's next children, so the init forked below joins the
        // pod's shared namespace (whose pid 1 is the pause process).
        Some(path) => {
            namespaces::join_path(path, CloneFlags::CLONE_NEWPID, "join pod pid namespace")?
        }
        // The next child becomes pid 1 of a fresh pid namespace.
        None => namespaces::unshare(
            CloneFlags::CLONE_NEWPID,
            "unshare pid",
            "unshare(CLONE_NEWPID)",
        )?,
    }
    match sys::fork().map_err(|e| StepError::sys("fork init", e, "fork"))? {
        Forked::Child => {
            drop(out_r);
            drop(err_r);
            // On success this never returns (the workload is exec'd and the
            // CLOEXEC report pipe closes); on failure the typed error goes back
            // to the shim, not to the container's log.
            let err = init::run(spec, out_w, err_w);
            let mut w = report;
            send(&mut w, &PipeMsg::Failed(err));
            std::process::exit(127)
        }
        Forked::Parent(pid) => Ok((pid, out_r, err_r)),
    }
}

fn supervise(spec: &RunSpec, pid: i32, out_r: OwnedFd, err_r: OwnedFd) {
    let mut logw = match LogWriter::open(&spec.log_dir, spec.log) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("monitor: {e}; container output will be discarded");
            None
        }
    };
    let pidfd = sys::pidfd_open(pid).ok();
    let mut streams: Vec<(Stream, Option<File>)> = vec![
        (Stream::Stdout, Some(File::from(out_r))),
        (Stream::Stderr, Some(File::from(err_r))),
    ];
    let mut status: Option<WaitStatus> = None;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let open: Vec<usize> = (0..streams.len())
            .filter(|&i| streams[i].1.is_some())
            .collect();
        if status.is_some() || open.is_empty() {
            break;
        }
        let mut fds: Vec<PollFd> = open
            .iter()
            .map(|&i| PollFd::new(streams[i].1.as_ref().unwrap().as_fd(), PollFlags::POLLIN))
            .collect();
        if let Some(p) = &pidfd {
            fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
        }
        if let Err(e) = poll(&mut fds, PollTimeout::NONE) {
            if e == nix::errno::Errno::EINTR {
                continue;
            }
            eprintln!("monitor: poll: {e}");
            break;
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().map(|r| !r.is_empty()).unwrap_or(false))
            .collect();
        drop(fds);
        for (k, &i) in open.iter().enumerate() {
            if ready[k] {
                pump(&mut streams[i], &mut logw, &mut buf);
            }
        }
        if pidfd.is_some() && *ready.last().unwrap_or(&false) {
            status = waitpid(Pid::from_raw(pid), None).ok();
        }
    }
    if status.is_none() {
        // Both pipes closed (or no pidfd): the init is exiting; block for it.
        status = waitpid(Pid::from_raw(pid), None).ok();
    }
    // When a pid namespace's init dies the kernel kills and reaps everything in
    // it first, so the pipes now hold the last output followed by EOF. In a
    // shared pod pid namespace the init is not pid 1: its leftover processes
    // (which may hold the pipes open) are killed through the container cgroup,
    // as runc does, and reaped by the pause process.
    if spec.pidns.is_some() {
        kill_leftovers(spec);
    }
    for s in streams.iter_mut() {
        while s.1.is_some() {
            pump(s, &mut logw, &mut buf);
        }
    }
    if let Some(w) = logw.as_mut() {
        let _ = w.flush_partial();
    }
    let (exit_code, signal) = match status {
        Some(WaitStatus::Exited(_, c)) => (Some(c), None),
        Some(WaitStatus::Signaled(_, s, _)) => (None, Some(s as i32)),
        _ => (Some(255), None),
    };
    let oom = crate::cgroups::driver_from(&spec.cgroup)
        .oom_kill_count(&spec.cgroup_path)
        .unwrap_or(0)
        > 0;
    let exit = ExitFile {
        exit_code,
        signal,
        finished_at_ns: util::now_ns(),
        oom_killed: oom,
    };
    if let Err(e) = util::write_json_atomic(&spec.container_dir.join("exit.json"), &exit) {
        eprintln!("monitor: write exit.json: {e}");
    }
}

fn kill_leftovers(spec: &RunSpec) {
    let driver = crate::cgroups::driver_from(&spec.cgroup);
    for _ in 0..100 {
        match driver.pids(&spec.cgroup_path) {
            Ok(pids) if !pids.is_empty() => crate::cgroups::kill_all(&pids),
            _ => return,
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    eprintln!(
        "monitor: processes left in {} after init exit",
        spec.cgroup_path
    );
}

/// Read once from a stream into the log; closes it on EOF/error.
fn pump(s: &mut (Stream, Option<File>), logw: &mut Option<LogWriter>, buf: &mut [u8]) {
    let Some(f) = s.1.as_mut() else { return };
    match f.read(buf) {
        Ok(0) | Err(_) => s.1 = None,
        Ok(n) => {
            if let Some(w) = logw.as_mut() {
                if let Err(e) = w.write(s.0, &buf[..n]) {
                    eprintln!("monitor: {e}");
                }
            }
        }
    }
}
