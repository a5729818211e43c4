//! `shoal-shim sandbox`: create the pod's net/ipc/uts namespaces, persist them
//! as bind mounts, and wire the veth pair; optionally start the pause process
//! holding a shared pid namespace. `shoal-shim pause`: that process.
//!
//! NOTE (iproute2 vs netlink): the wiring is two `ip -batch` runs (node side:
//! bridge + veth pair with the peer created directly inside the pod namespace;
//! pod side: lo, eth0 address, default route), about 1-2 ms each. A netlink
//! crate would save those few ms but `rtnetlink` needs an async runtime inside
//! this deliberately single-threaded process and `netlink-packet-route` alone
//! means hand-assembling messages; iproute2 is the reference implementation,
//! its error messages are clear, and the sandbox budget (150 ms p99 pod start)
//! leaves plenty of room. The per-container hot path runs no `ip` at all.

use super::namespaces;
use super::SandboxNsSpec;
use crate::error::StepError;
use crate::sandbox::PauseProcess;
use crate::sys::{self, Forked};
use crate::util;
use nix::mount::{mount, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::fs::File;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

fn enter_netns(path: &std::path::Path, step: &str) -> Result<(), StepError> {
    namespaces::join_path(path, CloneFlags::CLONE_NEWNET, step)
}

fn ip_batch(step: &str, batch: &str) -> Result<(), StepError> {
    let mut child = Command::new("ip")
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| StepError::io(step, &e, "spawn ip (iproute2)"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(batch.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| StepError::io(step, &e, "wait for ip"))?;
    if !out.status.success() {
        return Err(StepError::new(
            step,
            format!(
                "ip -batch failed: {} (commands: {})",
                String::from_utf8_lossy(&out.stderr).trim(),
                batch.trim().replace('\n', "; ")
            ),
        ));
    }
    Ok(())
}

fn bridge_exists(name: &str) -> bool {
    nix::net::if_::if_nametoindex(name).is_ok()
}

pub(super) fn create(spec: &SandboxNsSpec) -> Result<Option<PauseProcess>, StepError> {
    if let Some(p) = &spec.node_netns {
        enter_netns(p, "node netns")?;
    }
    let node_ns = File::open("/proc/thread-self/ns/net")
        .map_err(|e| StepError::io("node netns", &e, "open own netns"))?;
    std::fs::create_dir_all(&spec.ns_dir)
        .map_err(|e| StepError::io("persist namespace", &e, spec.ns_dir.display().to_string()))?;
    let names = ["net", "ipc", "uts"];
    for n in names {
        let p = spec.ns_dir.join(n);
        File::create(&p)
            .map_err(|e| StepError::io("persist namespace", &e, p.display().to_string()))?;
    }
    namespaces::unshare(
        CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS,
        "unshare",
        "net|ipc|uts",
    )?;
    nix::unistd::sethostname(&spec.hostname)
        .map_err(|e| StepError::sys("hostname", e, spec.hostname.clone()))?;
    for n in names {
        let src = format!("/proc/self/ns/{n}");
        let dst = spec.ns_dir.join(n);
        mount(
            Some(src.as_str()),
            &dst,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| StepError::sys("persist namespace", e, dst.display().to_string()))?;
    }

    namespaces::join(
        &node_ns,
        CloneFlags::CLONE_NEWNET,
        "node netns",
        "return to node netns",
    )?;
    let mtu = spec.mtu.map(|m| format!(" mtu {m}")).unwrap_or_default();
    let mut host = String::new();
    if spec.ensure_bridge {
        if !bridge_exists(&spec.bridge) {
            // Another sandbox may race us to create it: losing is fine.
            let _ = ip_batch(
                "bridge",
                &format!("link add name {} type bridge{mtu}\n", spec.bridge),
            );
        }
        host.push_str(&format!(
            "addr replace {}/{} dev {}\nlink set {} up\n",
            spec.gateway, spec.prefix, spec.bridge, spec.bridge
        ));
    }
    // Hairpin: with br_netfilter active (the default in a new namespace), a pod's connection
    // to a Service that is DNATed back to the same pod is bridged out of the port it came in
    // on, which the bridge drops unless the port allows it.
    host.push_str(&format!(
        "link add {veth}{mtu} type veth peer name eth0{mtu} netns {ns}\nlink set {veth} master {br}\nlink set {veth} type bridge_slave hairpin on\nlink set {veth} up\n",
        veth = spec.host_veth,
        ns = spec.ns_dir.join("net").display(),
        br = spec.bridge,
    ));
    ip_batch("host veth", &host)?;

    enter_netns(&spec.ns_dir.join("net"), "pod netns")?;
    ip_batch(
        "pod network",
        &format!(
            "link set lo up\naddr add {ip}/{p} dev eth0\nlink set eth0 up\nroute add default via {gw} dev eth0\n",
            ip = spec.ip,
            p = spec.prefix,
            gw = spec.gateway
        ),
    )?;
    // Last step, so no later failure can leave an unrecorded pause process.
    match &spec.pause_file {
        Some(f) => start_pause(spec, f).map(Some),
        None => Ok(None),
    }
}

/// Fork the pod's pause process as PID 1 of a new pid namespace (it also sits
/// in the pod's net/ipc/uts namespaces, which this process is in now), record
/// it in `pause_file` and bind-mount its pid namespace at `<ns_dir>/pid`. The
/// pause process outlives the shim (like a monitor) and is killed by the
/// runtime's `remove_sandbox`.
fn start_pause(spec: &SandboxNsSpec, pause_file: &Path) -> Result<PauseProcess, StepError> {
    let step = "pause";
    let exe = std::env::current_exe().map_err(|e| StepError::io(step, &e, "current_exe"))?;
    // unshare(2) CLONE_NEWPID: the caller stays put; its next child is PID 1
    // of the new namespace.
    namespaces::unshare(CloneFlags::CLONE_NEWPID, step, "unshare(CLONE_NEWPID)")?;
    let pid = match sys::fork().map_err(|e| StepError::sys(step, e, "fork pause"))? {
        Forked::Child => {
            let _ = nix::unistd::setsid();
            // Detach from the shim's stdio: the runtime reads it to EOF.
            if let Ok(null) = File::options().read(true).write(true).open("/dev/null") {
                let _ = nix::unistd::dup2_stdin(&null);
                let _ = nix::unistd::dup2_stdout(&null);
                let _ = nix::unistd::dup2_stderr(&null);
            }
            // exec closes every inherited (CLOEXEC) descriptor.
            let _ = Command::new(&exe).arg("pause").exec();
            std::process::exit(127)
        }
        Forked::Parent(pid) => pid,
    };
    let kill_pause = || {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        let _ = waitpid(Pid::from_raw(pid), None);
    };
    let rec = PauseProcess {
        pid,
        start_time: util::proc_start_time(pid).map(|s| s.0).unwrap_or(0),
    };
    if let Err(e) = util::write_json_atomic(pause_file, &rec) {
        kill_pause();
        return Err(StepError::new(step, format!("record pause process: {e}")));
    }
    let dst = spec.ns_dir.join("pid");
    let src = format!("/proc/{pid}/ns/pid");
    let persisted = File::create(&dst)
        .map_err(|e| StepError::io("persist namespace", &e, dst.display().to_string()))
        .and_then(|_| {
            mount(
                Some(src.as_str()),
                &dst,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(|e| StepError::sys("persist namespace", e, dst.display().to_string()))
        });
    if let Err(e) = persisted {
        kill_pause();
        return Err(e);
    }
    Ok(rec)
}

/// `shoal-shim pause`: PID 1 of a pod's shared pid namespace. Sleeps until
/// killed, reaping the orphans the kernel reparents to it. SIGCHLD is blocked
/// and consumed with sigwait(2), so no wakeup is lost between a reap pass and
/// the next wait. As a namespace init it ignores every signal it has no handler
/// for except SIGKILL/SIGSTOP from an ancestor namespace (pid_namespaces(7)).
pub(super) fn pause() -> ! {
    let mut set = SigSet::empty();
    set.add(Signal::SIGCHLD);
    let _ = set.thread_block();
    loop {
        while let Ok(st) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            if st == WaitStatus::StillAlive {
                break;
            }
        }
        let _ = set.wait();
    }
}

/// `shoal-shim netns-exec NS CMD...`: exec CMD inside network namespace NS.
pub(super) fn netns_exec(ns: &str, argv: &[String]) -> i32 {
    if let Err(e) = enter_netns(std::path::Path::new(ns), "netns-exec") {
        eprintln!("{e}");
        return 125;
    }
    let e = Command::new(&argv[0]).args(&argv[1..]).exec();
    eprintln!("netns-exec: {}: {e}", argv[0]);
    127
}
