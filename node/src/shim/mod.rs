//! `shoal-shim`: the single-threaded helper that does all namespace, mount and
//! fork work for the multi-threaded runtime.
//!
//! Protocol: `shoal-shim <mode>` reads one JSON request on stdin and writes one
//! JSON [`Reply`] on stdout, then exits. Modes:
//!
//! * `run` ([`RunSpec`]): fork the per-container monitor (which setsid()s and
//!   outlives the shim: the runtime reaps the shim, so the monitor is orphaned —
//!   a double fork), the monitor joins the pod's net/ipc/uts namespaces,
//!   unshares a pid namespace (or joins the pod's shared one) and forks the
//!   container init ([`init`]). Errors from any step before exec come back over
//!   a CLOEXEC pipe as a [`StepError`]; EOF without an error means exec
//!   succeeded.
//! * `exec` ([`ExecSpec`]): join a running container's namespaces and cgroup,
//!   run a command, and reply with its exit code and output.
//! * `exec-session` ([`SessionSpec`], on the control socket the caller passes as fd 3): run
//!   an interactive command in a running container on the stdio the caller passes (a pty's
//!   slave or pipes), report [`SessionEvent`]s, and kill the command's process group when the
//!   caller lets go ([`session`]).
//! * `sandbox` ([`SandboxNsSpec`]): create and bind-mount the pod's net/ipc/uts
//!   namespaces and wire up the veth pair.
//!   With `pause_file` set it also forks the pod's pause process, PID 1 of a
//!   new pid namespace shared by the pod's containers (`shareProcessNamespace`).
//! * `pause`: the pause process itself (exec'd by `sandbox`): sleeps, reaping
//!   orphans, until killed.
//! * `netns-exec <ns-path> <argv...>`: exec a command inside a network
//!   namespace (used to delete veths in the node namespace).

mod caps;
mod confine;
mod exec;
mod init;
mod monitor;
mod mounts;
mod namespaces;
mod sandbox;
mod session;
mod user;

use crate::cgroups::CgroupConfig;
use crate::container::PidFile;
use crate::error::StepError;
use crate::logs::LogConfig;
use crate::rootfs::Rootfs;
use crate::sandbox::PauseProcess;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::path::PathBuf;

pub use caps::{effective_caps, DEFAULT_CAPS};

/// What a container's processes are held to beyond their user and capabilities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    pub no_new_privs: bool,
    /// None: unconfined.
    pub seccomp: Option<crate::seccomp::Profile>,
}

impl Default for Confinement {
    /// What containers recorded before confinement was configurable ran with.
    fn default() -> Self {
        Confinement {
            no_new_privs: true,
            seccomp: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BindMount {
    pub source: PathBuf,
    /// Absolute path inside the container.
    pub destination: String,
    pub read_only: bool,
}

/// Request for `shoal-shim run`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSpec {
    pub container_id: String,
    pub container_dir: PathBuf,
    pub rootfs: Rootfs,
    pub netns: PathBuf,
    pub ipcns: PathBuf,
    pub utsns: PathBuf,
    /// The pod's shared pid namespace: the monitor joins it (setns) instead of
    /// unsharing a new one, so the init is not pid 1.
    #[serde(default)]
    pub pidns: Option<PathBuf>,
    pub cgroup: CgroupConfig,
    pub cgroup_path: String,
    pub mounts: Vec<BindMount>,
    pub argv: Vec<String>,
    pub env: Vec<String>,
    pub cwd: String,
    pub user: Option<String>,
    pub caps: Vec<String>,
    pub log_dir: PathBuf,
    pub log: LogConfig,
    pub read_only_rootfs: bool,
    pub confinement: Confinement,
}

/// Request for `shoal-shim exec`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecSpec {
    pub pid: i32,
    pub start_time: u64,
    pub cgroup_procs: Vec<PathBuf>,
    pub argv: Vec<String>,
    pub env: Vec<String>,
    pub cwd: String,
    pub user: Option<String>,
    pub caps: Vec<String>,
    pub confinement: Confinement,
    pub timeout_ms: u64,
    /// Output beyond this many bytes per stream is dropped.
    pub max_output: usize,
}

/// Request for `shoal-shim exec-session` (the first message on its control socket).
/// `exec.timeout_ms` and `exec.max_output` do not apply: a session lasts while its caller
/// holds it, and its output is streamed, not collected.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionSpec {
    pub exec: ExecSpec,
    /// Fd 0 is a terminal: make it the command's controlling terminal.
    pub tty: bool,
}

/// What `shoal-shim exec-session` reports on its control socket, one JSON message each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SessionEvent {
    /// The command was exec'd; `pid` is its pid on the host.
    Started { pid: i32 },
    /// It could not be started (nothing runs).
    Failed(StepError),
    /// It ended: on its own, or killed (with its process group) because the caller let go
    /// (`error` says so). `exit_code` is 128+signal when a signal killed it.
    Exited {
        exit_code: i32,
        signal: Option<i32>,
        error: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecReply {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub timed_out: bool,
}

/// Request for `shoal-shim sandbox`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxNsSpec {
    pub ns_dir: PathBuf,
    pub hostname: String,
    /// Node namespace holding the bridge; None = the shim's own.
    pub node_netns: Option<PathBuf>,
    pub bridge: String,
    pub gateway: Ipv4Addr,
    pub prefix: u8,
    pub ensure_bridge: bool,
    pub host_veth: String,
    pub ip: Ipv4Addr,
    pub mtu: Option<u32>,
    /// Also create a shared pid namespace held by a pause process, bind-mount
    /// it at `<ns_dir>/pid`, and record the pause process in this file.
    #[serde(default)]
    pub pause_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Reply {
    Started(PidFile),
    Exec(ExecReply),
    Done,
    /// `sandbox` with a shared pid namespace: its pause process.
    Pause(PauseProcess),
    Failed(StepError),
}

/// Messages on the internal monitor/init -> shim pipe, one JSON line each
/// (each well under PIPE_BUF, so writes are atomic).
#[derive(Debug, Clone, Serialize, Deserialize)]
enum PipeMsg {
    Started(PidFile),
    Failed(StepError),
}

fn send(w: &mut impl Write, msg: &PipeMsg) {
    if let Ok(mut line) = serde_json::to_vec(msg) {
        line.push(b'\n');
        let _ = w.write_all(&line);
    }
}

fn read_request<T: DeserializeOwned>() -> Result<T, StepError> {
    let mut buf = Vec::new();
    std::io::stdin()
        .read_to_end(&mut buf)
        .map_err(|e| StepError::io("config", &e, "read request"))?;
    serde_json::from_slice(&buf)
        .map_err(|e| StepError::new("config", format!("parse request: {e}")))
}

fn reply(r: &Reply) {
    let out = serde_json::to_vec(r).unwrap_or_else(|_| {
        b"{\"Failed\":{\"step\":\"reply\",\"errno\":0,\"message\":\"serialize\"}}".to_vec()
    });
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(&out);
    let _ = stdout.flush();
}

/// Entry point of the `shoal-shim` binary.
pub fn main() -> ! {
    let args: Vec<String> = std::env::args().collect();
    let code = match args.get(1).map(String::as_str) {
        Some("run") => {
            let r = match read_request::<RunSpec>() {
                Ok(spec) => monitor::start(&spec),
                Err(e) => Reply::Failed(e),
            };
            reply(&r);
            0
        }
        Some("exec") => {
            let r = match read_request::<ExecSpec>() {
                Ok(spec) => exec::exec(&spec),
                Err(e) => Reply::Failed(e),
            };
            reply(&r);
            0
        }
        Some("exec-session") => session::main(),
        Some("sandbox") => {
            let r = match read_request::<SandboxNsSpec>() {
                Ok(spec) => match sandbox::create(&spec) {
                    Ok(None) => Reply::Done,
                    Ok(Some(p)) => Reply::Pause(p),
                    Err(e) => Reply::Failed(e),
                },
                Err(e) => Reply::Failed(e),
            };
            reply(&r);
            0
        }
        Some("pause") => sandbox::pause(),
        Some("netns-exec") if args.len() >= 4 => sandbox::netns_exec(&args[2], &args[3..]),
        _ => {
            eprintln!(
                "usage: shoal-shim run|exec|sandbox (JSON request on stdin) | exec-session (fd 3) | pause | netns-exec NS CMD..."
            );
            2
        }
    };
    std::process::exit(code)
}
