//! Container spec, info and state types, and the three state files of a
//! container directory:
//!
//! * `container.json` ([`ContainerRecord`]): written by the runtime before the
//!   shim runs; everything needed to exec into, stop, or clean up the container.
//! * `pid.json` ([`PidFile`]): written by the monitor once the container init is
//!   forked (so a runtime that died mid-start still finds the process).
//! * `exit.json` ([`ExitFile`]): written by the monitor after reaping the init.
//!
//! State is derived from the files, never cached: `exit.json` present → Exited;
//! else init alive (pid + start time match) → Running; else the monitor died
//! without a verdict → Exited with reason Unknown.

use crate::rootfs::Rootfs;
use crate::seccomp::SeccompProfile;
use crate::shim::Confinement;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::SystemTime;

/// Kubernetes-style resources in plain numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub cpu_request_milli: Option<u64>,
    pub cpu_limit_milli: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    /// None = the runtime's default pids limit.
    pub pids_limit: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MountSource {
    /// A pod-level emptyDir volume by name (created under the sandbox dir).
    EmptyDir(String),
    /// A host path; refused unless under one of `RuntimeConfig::allow_host_path`.
    HostPath(PathBuf),
    /// `path` inside the pod volume `volume` (a mount's `subPath`), resolved when the
    /// container starts and refused if it leads out of the volume.
    VolumeSubPath { volume: String, path: String },
    /// A PersistentVolume's directory (and a `subPath` in it, empty for the whole volume).
    /// Allowed under `<state_dir>/volumes`, where the node's provisioner makes volumes;
    /// elsewhere (a volume made by hand) only where hostPath is.
    PersistentVolume { dir: PathBuf, sub_path: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountSpec {
    pub source: MountSource,
    /// Absolute path inside the container.
    pub destination: String,
    pub read_only: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerSpec {
    /// Container name within the pod (log directory, previous-instance logs).
    pub name: String,
    /// Image reference in the runtime's image store.
    pub image: String,
    /// Kubernetes `command`: replaces the image Entrypoint.
    pub command: Option<Vec<String>>,
    /// Kubernetes `args`: replaces the image Cmd.
    pub args: Option<Vec<String>>,
    /// Appended to (and overriding) the image's Env.
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
    /// `uid`, `uid:gid`, `name` or `name:group`; None = image's User (or root).
    pub user: Option<String>,
    pub resources: Resources,
    pub mounts: Vec<MountSpec>,
    /// Capability names (`NET_ADMIN` or `CAP_NET_ADMIN`, `ALL`).
    pub cap_add: Vec<String>,
    pub cap_drop: Vec<String>,
    pub read_only_rootfs: bool,
    /// Kubernetes' `seccompProfile`.
    #[serde(default)]
    pub seccomp: SeccompProfile,
    /// Set no_new_privs: setuid binaries and file capabilities grant nothing (Kubernetes'
    /// `allowPrivilegeEscalation: false`).
    #[serde(default)]
    pub no_new_privs: bool,
    /// Refuse to start a process that would run as uid 0 (Kubernetes' `runAsNonRoot`).
    #[serde(default)]
    pub run_as_non_root: bool,
    /// Where the container may write a termination message (Kubernetes'
    /// `terminationMessagePath`); the runtime keeps the file on the host so it can be read
    /// after the container exits.
    #[serde(default)]
    pub termination_message_path: Option<String>,
}

impl ContainerSpec {
    pub fn new(name: impl Into<String>, image: impl Into<String>) -> Self {
        ContainerSpec {
            name: name.into(),
            image: image.into(),
            ..Default::default()
        }
    }

    /// Set `command` (builder style).
    pub fn command<S: Into<String>>(mut self, argv: impl IntoIterator<Item = S>) -> Self {
        self.command = Some(argv.into_iter().map(Into::into).collect());
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerInfo {
    pub id: String,
    pub sandbox_id: String,
    pub name: String,
    pub image: String,
    /// Host pid of the container's init (pid 1 in its namespace).
    pub pid: i32,
    pub monitor_pid: i32,
    pub started_at: SystemTime,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExitReason {
    Completed,
    Error,
    OOMKilled,
    /// The monitor vanished without recording an exit (e.g. it was SIGKILLed).
    Unknown,
}

impl ExitReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            ExitReason::Completed => "Completed",
            ExitReason::Error => "Error",
            ExitReason::OOMKilled => "OOMKilled",
            ExitReason::Unknown => "ContainerStatusUnknown",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ContainerState {
    /// Accepted but not started yet (only the hollow runtime reports this).
    Created,
    Running {
        pid: i32,
        started_at: SystemTime,
    },
    Exited {
        /// 128+signal when killed by a signal (Kubernetes convention).
        exit_code: i32,
        signal: Option<i32>,
        reason: ExitReason,
        started_at: SystemTime,
        finished_at: SystemTime,
    },
}

impl ContainerState {
    pub fn is_running(&self) -> bool {
        matches!(self, ContainerState::Running { .. })
    }
    pub fn is_exited(&self) -> bool {
        matches!(self, ContainerState::Exited { .. })
    }
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            ContainerState::Exited { exit_code, .. } => Some(*exit_code),
            _ => None,
        }
    }
    pub fn reason(&self) -> Option<ExitReason> {
        match self {
            ContainerState::Exited { reason, .. } => Some(*reason),
            _ => None,
        }
    }
}

/// `container.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainerRecord {
    pub id: String,
    pub sandbox_id: String,
    pub name: String,
    pub image: String,
    pub cgroup: String,
    pub rootfs: Rootfs,
    pub env: Vec<String>,
    pub user: Option<String>,
    pub working_dir: String,
    /// Effective capability names after add/drop.
    pub caps: Vec<String>,
    /// Applied to the init and to every process exec'd into the container.
    #[serde(default)]
    pub confinement: Confinement,
    pub log_dir: PathBuf,
    pub created_at_ns: u64,
}

/// `pid.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PidFile {
    pub pid: i32,
    /// /proc/PID/stat starttime, to detect pid reuse.
    pub start_time: u64,
    pub monitor_pid: i32,
    pub monitor_start_time: u64,
    pub started_at_ns: u64,
}

/// `exit.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitFile {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub finished_at_ns: u64,
    pub oom_killed: bool,
}

impl ExitFile {
    pub fn state(&self, started_at: SystemTime) -> ContainerState {
        let code = self
            .exit_code
            .unwrap_or_else(|| 128 + self.signal.unwrap_or(0));
        let reason = if self.oom_killed {
            ExitReason::OOMKilled
        } else if code == 0 {
            ExitReason::Completed
        } else {
            ExitReason::Error
        };
        ContainerState::Exited {
            exit_code: code,
            signal: self.signal,
            reason,
            started_at,
            finished_at: crate::util::from_ns(self.finished_at_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_reasons() {
        let t = SystemTime::UNIX_EPOCH;
        let f = |code, sig, oom| ExitFile {
            exit_code: code,
            signal: sig,
            finished_at_ns: 1,
            oom_killed: oom,
        };
        assert_eq!(
            f(Some(0), None, false).state(t).reason(),
            Some(ExitReason::Completed)
        );
        assert_eq!(f(Some(3), None, false).state(t).exit_code(), Some(3));
        assert_eq!(
            f(None, Some(9), true).state(t).reason(),
            Some(ExitReason::OOMKilled)
        );
        assert_eq!(f(None, Some(15), false).state(t).exit_code(), Some(143));
    }
}
