//! cgroup v1: one directory per used hierarchy (cpu, cpuacct, memory, pids,
//! devices — co-mounted hierarchies are visited once).

use super::*;
use std::path::Path;
use std::time::Instant;

pub(crate) const CONTROLLERS: &[&str] = &["cpu", "cpuacct", "memory", "pids", "devices"];

/// Devices a container may use (runc's default allow list): null, zero, full,
/// tty, random, urandom, console/ptmx, pts.
const DEVICE_ALLOW: &[&str] = &[
    "c 1:3 rwm",
    "c 1:5 rwm",
    "c 1:7 rwm",
    "c 1:8 rwm",
    "c 1:9 rwm",
    "c 5:0 rwm",
    "c 5:1 rwm",
    "c 5:2 rwm",
    "c 136:* rwm",
    "c *:* m",
    "b *:* m",
];

#[derive(Debug, Clone)]
pub struct V1Driver {
    mounts: BTreeMap<String, PathBuf>,
}

impl V1Driver {
    pub fn new(mounts: BTreeMap<String, PathBuf>) -> Self {
        V1Driver { mounts }
    }

    fn dir(&self, controller: &str, path: &str) -> Option<PathBuf> {
        self.mounts.get(controller).map(|m| m.join(path))
    }

    /// Distinct hierarchy dirs for `path` (co-mounted controllers share one).
    fn dirs(&self, path: &str) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.mounts.values().map(|m| m.join(path)).collect();
        v.sort();
        v.dedup();
        v
    }
}

impl CgroupDriver for V1Driver {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V1
    }

    fn config(&self) -> CgroupConfig {
        CgroupConfig::V1 {
            mounts: self.mounts.clone(),
        }
    }

    fn create(&self, path: &str, res: &CgroupResources) -> Result<()> {
        validate_path(path)?;
        for d in self.dirs(path) {
            std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, "mkdir cgroup", e))?;
        }
        if let Some(cpu) = self.dir("cpu", path) {
            if let Some(shares) = res.cpu_shares {
                write_file(&cpu.join("cpu.shares"), &shares.to_string())?;
            }
            if let Some(q) = res.cpu_quota_us {
                write_file(&cpu.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
                write_file(&cpu.join("cpu.cfs_quota_us"), &q.to_string())?;
            }
        }
        if let (Some(mem), Some(limit)) = (self.dir("memory", path), res.memory_limit_bytes) {
            write_file(&mem.join("memory.limit_in_bytes"), &limit.to_string())?;
            // Without this a host with swap would page the container out instead
            // of OOM-killing it (memsw exists only with swap accounting enabled).
            let memsw = mem.join("memory.memsw.limit_in_bytes");
            if memsw.exists() {
                write_file(&memsw, &limit.to_string())?;
            }
        }
        if let (Some(pids), Some(limit)) = (self.dir("pids", path), res.pids_limit) {
            write_file(&pids.join("pids.max"), &limit.to_string())?;
        }
        if res.restrict_devices {
            if let Some(dev) = self.dir("devices", path) {
                write_file(&dev.join("devices.deny"), "a")?;
                for rule in DEVICE_ALLOW {
                    write_file(&dev.join("devices.allow"), rule)?;
                }
            }
        }
        Ok(())
    }

    fn procs_files(&self, path: &str) -> Vec<PathBuf> {
        self.dirs(path)
            .into_iter()
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    fn pids(&self, path: &str) -> Result<Vec<i32>> {
        let d = self
            .dir("pids", path)
            .or_else(|| self.dir("memory", path))
            .ok_or_else(|| Error::Cgroup {
                path: path.into(),
                message: "no pids or memory hierarchy".into(),
            })?;
        read_pids(&d.join("cgroup.procs"))
    }

    fn stats(&self, path: &str) -> Result<CgroupStats> {
        let mut s = CgroupStats::default();
        if let Some(d) = self.dir("cpuacct", path) {
            s.cpu_usage_ns = read_u64(&d.join("cpuacct.usage"))?;
        }
        if let Some(d) = self.dir("memory", path) {
            s.memory_usage_bytes = read_u64(&d.join("memory.usage_in_bytes"))?;
            let inactive = read_keyed(&d.join("memory.stat"), "total_inactive_file")?;
            s.memory_working_set_bytes = s.memory_usage_bytes.saturating_sub(inactive);
        }
        if let Some(d) = self.dir("pids", path) {
            s.pids_current = read_u64(&d.join("pids.current"))?;
        }
        Ok(s)
    }

    fn oom_kill_count(&self, path: &str) -> Result<u64> {
        match self.dir("memory", path) {
            Some(d) => read_keyed(&d.join("memory.oom_control"), "oom_kill"),
            None => Ok(0),
        }
    }

    fn exists(&self, path: &str) -> bool {
        self.dirs(path).iter().any(|d| d.is_dir())
    }

    fn children(&self, path: &str) -> Result<Vec<String>> {
        let mut names = std::collections::BTreeSet::new();
        for d in self.dirs(path) {
            if let Ok(rd) = std::fs::read_dir(&d) {
                for e in rd.flatten() {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        names.insert(e.file_name().to_string_lossy().into_owned());
                    }
                }
            }
        }
        Ok(names.into_iter().collect())
    }

    fn delete(&self, path: &str, timeout: Duration) -> Result<()> {
        validate_path(path)?;
        let deadline = Instant::now() + timeout;
        let kill_tree = |root: &Path| {
            for d in subdirs_deepest_first(root)
                .iter()
                .chain(std::iter::once(&root.to_path_buf()))
            {
                if let Ok(p) = read_pids(&d.join("cgroup.procs")) {
                    kill_all(&p);
                }
            }
        };
        if let Some(pids_dir) = self.dir("pids", path).or_else(|| self.dir("memory", path)) {
            kill_tree(&pids_dir);
        }
        for root in self.dirs(path) {
            for d in subdirs_deepest_first(&root)
                .into_iter()
                .chain(std::iter::once(root.clone()))
            {
                rmdir_retry(&d, deadline, || kill_tree(&d))?;
            }
        }
        Ok(())
    }
}
