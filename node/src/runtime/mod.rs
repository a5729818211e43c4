//! The [`Runtime`] trait the node agent programs against, its configuration
//! and result types, and the real implementation [`LinuxRuntime`].
//!
//! The API is synchronous: every call does bounded blocking work (spawning the
//! shim, a few file reads/writes) and the agent is expected to call it from
//! `tokio::task::spawn_blocking`. Implementations are `Send + Sync`; calls for
//! different containers may run concurrently.
//!
//! # Exit detection and supervision
//!
//! Each container has a monitor process (see [`crate::shim`]) that is the
//! container init's parent and writes `exit.json` when it exits. The runtime
//! never caches state: [`Runtime::container_state`] reads the container's state
//! files (cheap: a stat/open and a /proc read), so polling it every second for
//! thousands of containers is fine. [`Runtime::wait_container`] blocks on a
//! pidfd of the monitor (poll(2), no busy loop) and is what `stop` uses. After
//! an agent restart, a new `LinuxRuntime` on the same state dir lists the same
//! containers with the same pids: nothing is restarted.

mod linux;
mod shimcall;

pub use linux::session::{decode_event, resize, ExecSession, SessionRequest};
pub use linux::{host_path_allowed, LinuxRuntime, RuntimeConfig, DEFAULT_SECCOMP_PROFILE_ROOT};

use crate::cgroups::CgroupStats;
use crate::container::{ContainerInfo, ContainerSpec, ContainerState};
use crate::error::Result;
use crate::sandbox::{SandboxInfo, SandboxSpec};
use std::collections::HashSet;
use std::time::Duration;

/// Resource usage of a container or a whole pod.
pub type Stats = CgroupStats;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecRequest {
    pub argv: Vec<String>,
    /// Added to the container's environment (overriding same names).
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
}

impl ExecRequest {
    pub fn new<S: Into<String>>(argv: impl IntoIterator<Item = S>, timeout: Duration) -> Self {
        ExecRequest {
            argv: argv.into_iter().map(Into::into).collect(),
            env: vec![],
            timeout,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecResult {
    /// 128+signal when killed by a signal (137 after a timeout).
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub timed_out: bool,
}

/// What [`Runtime::cleanup_orphans`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    pub sandboxes: Vec<String>,
    pub containers: Vec<String>,
    pub cgroups: Vec<String>,
    pub ips: Vec<String>,
}

pub trait Runtime: Send + Sync {
    /// Create the pod sandbox (namespaces, network, cgroup, files). On failure
    /// everything created so far is removed.
    fn create_sandbox(&self, spec: &SandboxSpec) -> Result<SandboxInfo>;
    /// Remove a sandbox and all its containers: mounts, cgroups, netns, veth,
    /// IP. Idempotent; tolerates half-created sandboxes.
    fn remove_sandbox(&self, id: &str) -> Result<()>;
    fn list_sandboxes(&self) -> Result<Vec<SandboxInfo>>;

    /// Start a container in `sandbox`; returns once the workload is exec'd (or
    /// with a typed error naming the failed step).
    fn start_container(&self, sandbox: &SandboxInfo, spec: &ContainerSpec)
        -> Result<ContainerInfo>;
    fn container_state(&self, id: &str) -> Result<ContainerState>;
    /// Block until the container exits or `timeout` passes; returns the state.
    fn wait_container(&self, id: &str, timeout: Duration) -> Result<ContainerState>;
    /// SIGTERM, wait up to `grace`, then SIGKILL. Idempotent.
    fn stop_container(&self, id: &str, grace: Duration) -> Result<ContainerState>;
    /// Kill if needed and delete the container's cgroup and rootfs. Logs stay
    /// with the sandbox (for `previous`). Idempotent.
    fn remove_container(&self, id: &str) -> Result<()>;
    fn list_containers(&self) -> Result<Vec<ContainerInfo>>;
    fn exec(&self, id: &str, req: &ExecRequest) -> Result<ExecResult>;
    fn container_stats(&self, id: &str) -> Result<Stats>;
    fn sandbox_stats(&self, id: &str) -> Result<Stats>;
    /// Remove every sandbox not in `keep`, containers without a sandbox, and
    /// stray cgroups and IP allocations.
    fn cleanup_orphans(&self, keep: &HashSet<String>) -> Result<CleanupReport>;
}
