//! [`LinuxRuntime`]: real containers via `shoal-shim`, overlayfs, cgroups and
//! network namespaces. See the module docs of [`crate::runtime`].
//!
//! One job per module: [`spec`] resolves what a container runs from its spec and
//! its image (pure); [`sandboxes`] is the pod sandbox plumbing (namespaces, veth,
//! pause process); [`lifecycle`] is the [`Runtime`] operations on containers
//! (start, state, stop, exec, remove) and the deferred deletion of their
//! directories; [`session`] runs interactive exec sessions (a pty or pipes handed to the
//! caller, the shim supervising the command); [`termination`] keeps a container's termination message on the host;
//! [`orphans`] sweeps what no live pod owns (or, tearing a node down, everything). This
//! module holds the configuration, the runtime's handles and the state-file readers they
//! share.

mod lifecycle;
mod orphans;
mod sandboxes;
pub(crate) mod session;
mod spec;
mod termination;

use lifecycle::Trash;

use super::shimcall::{self, find_shim};
use super::{CleanupReport, ExecRequest, ExecResult, Runtime, Stats};
use crate::cgroups::{self, CgroupConfig, CgroupDriver};
use crate::container::{
    ContainerInfo, ContainerRecord, ContainerSpec, ContainerState, ExitFile, ExitReason,
    MountSource, PidFile,
};
use crate::error::{Error, IoCtx, Result};
use crate::image::ImageStore;
use crate::logs::{self, LogConfig, LogReader};
use crate::net::{self, Ipam, NetworkConfig};
use crate::rootfs::Rootfs;
use crate::sandbox::{self, PauseProcess, SandboxInfo, SandboxSpec};
use crate::seccomp::{self, SeccompProfile};
use crate::shim::{BindMount, Confinement, ExecSpec, Reply, RunSpec, SandboxNsSpec};
use crate::sys;
use crate::util::{self, process_alive, read_json_opt, validate_id};
use nix::mount::{umount2, MntFlags};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::HashSet;
use std::fs;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

const NS_NAMES: [&str; 4] = ["net", "ipc", "uts", "pid"];
/// Pause process record of a shared pid namespace, in the sandbox dir.
const PAUSE_FILE: &str = "pause.json";
/// Default of [`RuntimeConfig::seccomp_profile_root`].
pub const DEFAULT_SECCOMP_PROFILE_ROOT: &str = "/var/lib/shoal/seccomp";
const CGROUP_DELETE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Persistent state: images, sandboxes, containers, IP allocations.
    pub state_dir: PathBuf,
    /// Namespace bind mounts; default `<state_dir>/run`.
    pub run_dir: Option<PathBuf>,
    /// Parent of all pod cgroups, e.g. `shoal` -> `shoal/<sandbox>/<container>`.
    pub cgroup_parent: String,
    /// None = detect v1/v2 from the host.
    pub cgroup: Option<CgroupConfig>,
    pub network: NetworkConfig,
    /// None = [`shimcall::find_shim`] (`$SHOAL_SHIM` or next to the executable).
    pub shim_path: Option<PathBuf>,
    /// pids.max for containers that set no limit (fork-bomb protection).
    pub default_pids_limit: Option<u64>,
    pub log: LogConfig,
    /// Host directories under which `MountSource::HostPath` mounts are allowed (the node's
    /// `--allow-host-path`); empty: none.
    pub allow_host_path: Vec<PathBuf>,
    /// Where `Localhost` seccomp profiles live (the node's `--seccomp-profile-root`).
    pub seccomp_profile_root: PathBuf,
    /// Become a child subreaper so monitors (orphaned by the shim's exit) are
    /// reparented to, and reaped by, this process while it runs. Without it
    /// they go to pid 1, which must reap them.
    pub reap_monitors: bool,
    /// Enforce the default device allow-list (v1 devices cgroup).
    pub restrict_devices: bool,
}

impl RuntimeConfig {
    /// True when `path` may be mounted as a hostPath: it lies under an allowed prefix,
    /// compared by whole components after removing `.` and `..` lexically (so `/data2` is
    /// not under `/data`, and `/data/../etc` is not either).
    pub fn host_path_allowed(&self, path: &Path) -> bool {
        host_path_allowed(&self.allow_host_path, path)
    }

    pub fn new(state_dir: impl Into<PathBuf>, network: NetworkConfig) -> Self {
        RuntimeConfig {
            state_dir: state_dir.into(),
            run_dir: None,
            cgroup_parent: "shoal".into(),
            cgroup: None,
            network,
            shim_path: None,
            default_pids_limit: Some(1024),
            log: LogConfig::default(),
            allow_host_path: vec![],
            seccomp_profile_root: PathBuf::from(DEFAULT_SECCOMP_PROFILE_ROOT),
            reap_monitors: true,
            restrict_devices: true,
        }
    }

    /// The cgroup parent for node `node` keeping its state in `state_dir`. The orphan sweep
    /// deletes every pod cgroup under its parent that its own state does not know, so two
    /// runtimes must never share one: the state directory's digest keeps apart two clusters
    /// on one machine whose nodes carry the same (host) name, and a restart with the same
    /// directory finds its pods again.
    pub fn cgroup_parent_for(node: &str, state_dir: &Path) -> String {
        use sha2::{Digest, Sha256};
        // Lexical, not canonical: the directory may not exist yet on the first start.
        let dir = std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
        let digest = Sha256::digest(dir.as_os_str().as_encoded_bytes());
        format!(
            "shoal-{}-{}",
            node.replace(['/', '.'], "-"),
            &hex::encode(digest)[..8]
        )
    }
}

/// [`RuntimeConfig::host_path_allowed`] against the prefix list `allowed`.
pub fn host_path_allowed(allowed: &[PathBuf], path: &Path) -> bool {
    let Some(path) = normalise(path) else {
        return false;
    };
    allowed
        .iter()
        .filter_map(|p| normalise(p))
        .any(|prefix| path.starts_with(prefix))
}

/// An absolute path without `.` and `..`; None for a relative one or one climbing above /.
fn normalise(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir if !out.pop() => return None,
            _ => {}
        }
    }
    Some(out)
}

pub struct LinuxRuntime {
    cfg: RuntimeConfig,
    shim: PathBuf,
    run_dir: PathBuf,
    images: ImageStore,
    cgroups: Box<dyn CgroupDriver>,
    ipam: Ipam,
    bridge_ready: Mutex<bool>,
    trash: Trash,
}

fn ensure_dir(p: &Path) -> Result<()> {
    fs::create_dir_all(p).ctx(p, "mkdir")
}

impl LinuxRuntime {
    pub fn new(cfg: RuntimeConfig) -> Result<LinuxRuntime> {
        cgroups::validate_path(&cfg.cgroup_parent)?;
        let run_dir = cfg
            .run_dir
            .clone()
            .unwrap_or_else(|| cfg.state_dir.join("run"));
        for d in ["sandboxes", "containers"] {
            ensure_dir(&cfg.state_dir.join(d))?;
        }
        ensure_dir(&run_dir)?;
        let shim = match &cfg.shim_path {
            Some(p) => p.clone(),
            None => find_shim().ok_or_else(|| {
                Error::Unsupported(
                    "shoal-shim binary not found (set SHOAL_SHIM or RuntimeConfig::shim_path)"
                        .into(),
                )
            })?,
        };
        let cg = match &cfg.cgroup {
            Some(c) => c.clone(),
            None => cgroups::detect()?,
        };
        if cfg.reap_monitors {
            nix::sys::prctl::set_child_subreaper(true).ctx("prctl", "PR_SET_CHILD_SUBREAPER")?;
        }
        Ok(LinuxRuntime {
            images: ImageStore::open(cfg.state_dir.join("images"))?,
            ipam: Ipam::open(cfg.state_dir.join("ipam"), cfg.network.pod_cidr)?,
            cgroups: cgroups::driver_from(&cg),
            shim,
            run_dir,
            trash: Trash::new(cfg.state_dir.join("trash"))?,
            cfg,
            bridge_ready: Mutex::new(false),
        })
    }

    pub fn images(&self) -> &ImageStore {
        &self.images
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.cfg
    }

    pub fn cgroup_driver(&self) -> &dyn CgroupDriver {
        self.cgroups.as_ref()
    }

    pub fn sandbox_dir(&self, id: &str) -> PathBuf {
        self.cfg.state_dir.join("sandboxes").join(id)
    }

    /// Where pod volume `name` of sandbox `id` lives (what `MountSource::EmptyDir` mounts).
    pub fn volume_dir(&self, id: &str, name: &str) -> PathBuf {
        self.sandbox_dir(id).join("volumes").join(name)
    }

    pub fn container_dir(&self, id: &str) -> PathBuf {
        self.cfg.state_dir.join("containers").join(id)
    }

    fn ns_dir(&self, sandbox_id: &str) -> PathBuf {
        self.run_dir.join(sandbox_id)
    }

    fn pod_cgroup(&self, sandbox_id: &str) -> String {
        format!("{}/{}", self.cfg.cgroup_parent, sandbox_id)
    }

    /// Logs of the current and previous instance of a container.
    pub fn logs(&self, container_id: &str) -> Result<LogReader> {
        Ok(LogReader::new(self.record(container_id)?.log_dir))
    }

    /// Logs by pod and container name (works after the container was removed).
    pub fn logs_by_name(&self, sandbox: &SandboxInfo, container_name: &str) -> LogReader {
        LogReader::new(sandbox.log_dir(container_name))
    }

    pub fn sandbox(&self, id: &str) -> Result<SandboxInfo> {
        validate_id("sandbox", id)?;
        read_json_opt(&self.sandbox_dir(id).join("sandbox.json"))?.ok_or_else(|| Error::NotFound {
            kind: "sandbox",
            id: id.into(),
        })
    }

    fn record(&self, id: &str) -> Result<ContainerRecord> {
        validate_id("container", id)?;
        read_json_opt(&self.container_dir(id).join("container.json"))?.ok_or_else(|| {
            Error::NotFound {
                kind: "container",
                id: id.into(),
            }
        })
    }

    fn pidfile(&self, id: &str) -> Result<Option<PidFile>> {
        read_json_opt(&self.container_dir(id).join("pid.json"))
    }

    fn exitfile(&self, id: &str) -> Result<Option<ExitFile>> {
        read_json_opt(&self.container_dir(id).join("exit.json"))
    }

    /// What the container wrote to its terminationMessagePath (at most 4096 bytes), while
    /// its directory exists; None when it asked for no message file.
    pub fn termination_message(&self, id: &str) -> Result<Option<String>> {
        validate_id("container", id)?;
        termination::read(&self.container_dir(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_are_allowed_only_under_a_prefix_by_whole_components() {
        let allowed = vec![PathBuf::from("/data"), PathBuf::from("/srv/shared/")];
        let ok = |p: &str| host_path_allowed(&allowed, Path::new(p));
        assert!(ok("/data"));
        assert!(ok("/data/logs/x"));
        assert!(ok("/srv/shared/a"));
        assert!(!ok("/data2"));
        assert!(!ok("/data/../etc"));
        assert!(!ok("/etc"));
        assert!(!ok("data/x"));
        assert!(!host_path_allowed(&[], Path::new("/data")));
    }

    #[test]
    fn each_state_directory_gets_a_cgroup_parent_of_its_own_that_survives_a_restart() {
        let a = RuntimeConfig::cgroup_parent_for("vm", Path::new("/var/lib/shoal/a"));
        let b = RuntimeConfig::cgroup_parent_for("vm", Path::new("/var/lib/shoal/b"));
        assert_ne!(
            a, b,
            "two clusters on one host must not sweep each other's pods"
        );
        assert_eq!(
            a,
            RuntimeConfig::cgroup_parent_for("vm", Path::new("/var/lib/shoal/a"))
        );
        assert!(a.starts_with("shoal-vm-"), "{a}");
        let dotted = RuntimeConfig::cgroup_parent_for("node.example/1", Path::new("/x"));
        cgroups::validate_path(&dotted).unwrap();
        assert!(dotted.starts_with("shoal-node-example-1-"), "{dotted}");
    }
}
