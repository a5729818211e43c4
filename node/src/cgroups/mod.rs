//! Cgroup driver: pod and container cgroups, limits, stats, OOM counts, deletion.
//!
//! Paths are relative to the hierarchy root, e.g. `shoal/<sandbox>/<container>`.
//!
//! NOTE (why not cgroups-rs): the drivers write cgroupfs files directly. On v1,
//! `cgroups_rs::Cgroup::new` creates the group in every mounted hierarchy
//! (cpuset, blkio, freezer, ...), which costs a mkdir plus setup writes per
//! hierarchy on the container-start hot path, and cpuset needs cpus/mems copied
//! down; we only need cpu, cpuacct, memory, pids and devices, each a handful of
//! one-line files (measured 1.5–1.7x slower per group on a v1 host: see
//! docs/architecture.md, "Node agent"). Writing them directly also keeps the
//! error messages pointing at the file.
//! Detection uses statfs(2) (CGROUP2_SUPER_MAGIC), same as cgroups-rs's
//! `hierarchies::is_cgroup2_unified_mode`.

mod fake;
mod v1;
mod v2;

pub use fake::FakeDriver;
pub use v1::V1Driver;
pub use v2::V2Driver;

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// CFS period used for cpu limits (Kubernetes default).
pub const CPU_PERIOD_US: u64 = 100_000;
/// Kubernetes' minimum cpu.shares.
pub const MIN_SHARES: u64 = 2;
pub const MAX_SHARES: u64 = 262_144;

/// Kubernetes `MilliCPUToShares`: requests -> cpu.shares (v1).
pub fn milli_cpu_to_shares(milli: u64) -> u64 {
    if milli == 0 {
        return MIN_SHARES;
    }
    (milli * 1024 / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// Kubernetes `MilliCPUToQuota`: limits -> cfs quota for the given period.
pub fn milli_cpu_to_quota(milli: u64, period_us: u64) -> u64 {
    // 1ms is the kernel's minimum quota.
    (milli * period_us / 1000).max(1000)
}

/// The v1 shares -> v2 weight mapping used by runc/crun/Kubernetes.
pub fn shares_to_weight(shares: u64) -> u64 {
    let s = shares.clamp(MIN_SHARES, MAX_SHARES);
    1 + ((s - 2) * 9999) / 262_142
}

/// Limits applied to one cgroup, in plain numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupResources {
    /// cpu.shares (v1) / converted to cpu.weight (v2).
    pub cpu_shares: Option<u64>,
    /// CFS quota in µs per [`CPU_PERIOD_US`]; None = unlimited.
    pub cpu_quota_us: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    pub pids_limit: Option<u64>,
    /// Restrict device access to the container default set (v1 devices cgroup;
    /// on v2 this needs an eBPF program and is not implemented: see caps).
    pub restrict_devices: bool,
}

impl CgroupResources {
    /// From Kubernetes-style resources (cpu in millicores, memory in bytes).
    pub fn from_k8s(
        cpu_request_milli: Option<u64>,
        cpu_limit_milli: Option<u64>,
        memory_limit_bytes: Option<u64>,
        pids_limit: Option<u64>,
    ) -> CgroupResources {
        // Kubernetes: with no request but a limit, request defaults to the limit.
        let req = cpu_request_milli.or(cpu_limit_milli);
        CgroupResources {
            cpu_shares: Some(milli_cpu_to_shares(req.unwrap_or(0))),
            cpu_quota_us: cpu_limit_milli.map(|m| milli_cpu_to_quota(m, CPU_PERIOD_US)),
            memory_limit_bytes,
            pids_limit,
            restrict_devices: false,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupStats {
    pub cpu_usage_ns: u64,
    pub memory_usage_bytes: u64,
    /// usage minus inactive file cache (what the kubelet evicts on).
    pub memory_working_set_bytes: u64,
    pub pids_current: u64,
}

/// Serializable description of a driver, so the shim and monitor processes can
/// rebuild the same driver the runtime uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CgroupConfig {
    /// controller name -> mount point of its hierarchy.
    V1 {
        mounts: BTreeMap<String, PathBuf>,
    },
    V2 {
        root: PathBuf,
    },
    Fake,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
    Fake,
}

pub trait CgroupDriver: Send + Sync + std::fmt::Debug {
    fn version(&self) -> CgroupVersion;
    fn config(&self) -> CgroupConfig;
    /// Create `path` (and parents) and apply `res`. Idempotent.
    fn create(&self, path: &str, res: &CgroupResources) -> Result<()>;
    /// Files a process writes its pid (or "0" for itself) into to join `path`.
    fn procs_files(&self, path: &str) -> Vec<PathBuf>;
    fn add_pid(&self, path: &str, pid: i32) -> Result<()> {
        for f in self.procs_files(path) {
            std::fs::write(&f, pid.to_string()).map_err(|e| Error::io(&f, "join cgroup", e))?;
        }
        Ok(())
    }
    /// Pids in `path` itself (not descendants).
    fn pids(&self, path: &str) -> Result<Vec<i32>>;
    fn stats(&self, path: &str) -> Result<CgroupStats>;
    /// OOM kills recorded in `path` (v1 memory.oom_control, v2 memory.events).
    fn oom_kill_count(&self, path: &str) -> Result<u64>;
    fn exists(&self, path: &str) -> bool;
    /// Names of child cgroups of `path`.
    fn children(&self, path: &str) -> Result<Vec<String>>;
    /// Kill every process in `path` and its descendants, then remove them all,
    /// retrying EBUSY until `timeout`. Idempotent (missing cgroup is success).
    fn delete(&self, path: &str, timeout: Duration) -> Result<()>;
}

/// Rebuild a driver from its config.
pub fn driver_from(config: &CgroupConfig) -> Box<dyn CgroupDriver> {
    match config {
        CgroupConfig::V1 { mounts } => Box::new(V1Driver::new(mounts.clone())),
        CgroupConfig::V2 { root } => Box::new(V2Driver::new(root.clone())),
        CgroupConfig::Fake => Box::new(FakeDriver::default()),
    }
}

/// Detect the host's cgroup setup: unified v2 if /sys/fs/cgroup is cgroup2,
/// otherwise v1 controllers found in /proc/self/mountinfo (a hybrid host's
/// controller-less /sys/fs/cgroup/unified is ignored).
pub fn detect() -> Result<CgroupConfig> {
    let root = PathBuf::from("/sys/fs/cgroup");
    if let Ok(st) = nix::sys::statfs::statfs(&root) {
        if st.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC {
            return Ok(CgroupConfig::V2 { root });
        }
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Error::io("/proc/self/mountinfo", "read", e))?;
    let mut mounts = BTreeMap::new();
    for line in info.lines() {
        // "... mountpoint opts ... - fstype source superopts"
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let mut post = post.split(' ');
        if post.next() != Some("cgroup") {
            continue;
        }
        let superopts = post.nth(1).unwrap_or("");
        let Some(mp) = pre.split(' ').nth(4) else {
            continue;
        };
        for opt in superopts.split(',') {
            if v1::CONTROLLERS.contains(&opt) {
                mounts
                    .entry(opt.to_string())
                    .or_insert_with(|| PathBuf::from(mp));
            }
        }
    }
    if mounts.contains_key("memory") && mounts.contains_key("cpu") {
        Ok(CgroupConfig::V1 { mounts })
    } else {
        Err(Error::Unsupported(
            "no cgroup2 at /sys/fs/cgroup and no v1 cpu+memory controllers mounted".into(),
        ))
    }
}

pub(crate) fn validate_path(path: &str) -> Result<()> {
    if path.is_empty()
        || path.starts_with('/')
        || path
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(Error::Cgroup {
            path: path.into(),
            message: "cgroup path must be relative without '.'/'..' components".into(),
        });
    }
    Ok(())
}

pub(crate) fn read_u64(p: &std::path::Path) -> Result<u64> {
    let s = std::fs::read_to_string(p).map_err(|e| Error::io(p, "read", e))?;
    let s = s.trim();
    if s == "max" {
        return Ok(u64::MAX);
    }
    s.parse().map_err(|_| Error::Cgroup {
        path: p.display().to_string(),
        message: format!("not a number: {s:?}"),
    })
}

/// Value of `key` in a flat-keyed file like memory.stat / memory.events.
pub(crate) fn read_keyed(p: &std::path::Path, key: &str) -> Result<u64> {
    let s = std::fs::read_to_string(p).map_err(|e| Error::io(p, "read", e))?;
    Ok(s.lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0))
}

pub(crate) fn write_file(p: &std::path::Path, v: &str) -> Result<()> {
    std::fs::write(p, v).map_err(|e| Error::io(p, "write", e))
}

pub(crate) fn read_pids(p: &std::path::Path) -> Result<Vec<i32>> {
    match std::fs::read_to_string(p) {
        Ok(s) => Ok(s.lines().filter_map(|l| l.trim().parse().ok()).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(vec![]),
        Err(e) => Err(Error::io(p, "read", e)),
    }
}

/// rmdir with EBUSY retries until `deadline`; missing dir is success.
pub(crate) fn rmdir_retry(
    dir: &std::path::Path,
    deadline: std::time::Instant,
    mut before_retry: impl FnMut(),
) -> Result<()> {
    use backon::{BlockingRetryable, ExponentialBuilder};
    // Back-off, not a test sync: the kernel frees the cgroup once the killed tasks are
    // fully reaped, which we cannot wait on directly.
    let while_busy = ExponentialBuilder::default()
        .with_min_delay(Duration::from_micros(200))
        .with_max_delay(Duration::from_millis(20))
        .without_max_times();
    let rmdir = || match std::fs::remove_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        done => done,
    };
    rmdir
        .retry(while_busy)
        .when(|e| e.raw_os_error() == Some(libc::EBUSY) && std::time::Instant::now() < deadline)
        .notify(|_, _| before_retry())
        .call()
        .map_err(|e| Error::io(dir, "rmdir cgroup", e))
}

/// Recursively list child directories, deepest first.
pub(crate) fn subdirs_deepest_first(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                out.extend(subdirs_deepest_first(&e.path()));
                out.push(e.path());
            }
        }
    }
    out
}

pub(crate) fn kill_all(pids: &[i32]) {
    for &p in pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_formulas() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(100), 102);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_quota(500, CPU_PERIOD_US), 50_000);
        assert_eq!(milli_cpu_to_quota(1, CPU_PERIOD_US), 1000);
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(262_144), 10_000);
        let r = CgroupResources::from_k8s(None, Some(250), Some(1 << 20), Some(64));
        assert_eq!(r.cpu_shares, Some(256));
        assert_eq!(r.cpu_quota_us, Some(25_000));
    }

    #[test]
    fn path_validation() {
        assert!(validate_path("shoal/a/b").is_ok());
        assert!(validate_path("/shoal").is_err());
        assert!(validate_path("shoal/../x").is_err());
        assert!(validate_path("shoal//x").is_err());
    }
}
