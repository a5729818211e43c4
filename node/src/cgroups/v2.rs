//! cgroup v2 (unified hierarchy).

use super::*;
use std::path::Path;
use std::time::Instant;

#[derive(Debug, Clone)]
pub struct V2Driver {
    root: PathBuf,
}

impl V2Driver {
    pub fn new(root: PathBuf) -> Self {
        V2Driver { root }
    }

    fn dir(&self, path: &str) -> PathBuf {
        self.root.join(path)
    }

    /// Controllers must be enabled in every ancestor's subtree_control before a
    /// child can use them ("no internal processes" rule: only for ancestors we own).
    fn enable_controllers(&self, path: &str) -> Result<()> {
        let mut cur = self.root.clone();
        let comps: Vec<&str> = path.split('/').collect();
        for c in &comps {
            let ctl = cur.join("cgroup.subtree_control");
            if let Ok(enabled) = std::fs::read_to_string(&ctl) {
                let want: Vec<&str> = ["cpu", "memory", "pids"]
                    .into_iter()
                    .filter(|c| !enabled.split_whitespace().any(|e| e == *c))
                    .collect();
                if !want.is_empty() {
                    let line: Vec<String> = want.iter().map(|c| format!("+{c}")).collect();
                    // Ignore errors: a controller unavailable here just means
                    // its limits will fail to apply below with a clear path.
                    let _ = std::fs::write(&ctl, line.join(" "));
                }
            }
            cur = cur.join(c);
            if !cur.is_dir() {
                std::fs::create_dir(&cur).map_err(|e| Error::io(&cur, "mkdir cgroup", e))?;
            }
        }
        Ok(())
    }
}

impl CgroupDriver for V2Driver {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V2
    }

    fn config(&self) -> CgroupConfig {
        CgroupConfig::V2 {
            root: self.root.clone(),
        }
    }

    fn create(&self, path: &str, res: &CgroupResources) -> Result<()> {
        validate_path(path)?;
        self.enable_controllers(path)?;
        let d = self.dir(path);
        if let Some(shares) = res.cpu_shares {
            write_file(&d.join("cpu.weight"), &shares_to_weight(shares).to_string())?;
        }
        if let Some(q) = res.cpu_quota_us {
            write_file(&d.join("cpu.max"), &format!("{q} {CPU_PERIOD_US}"))?;
        }
        if let Some(limit) = res.memory_limit_bytes {
            write_file(&d.join("memory.max"), &limit.to_string())?;
            let swap = d.join("memory.swap.max");
            if swap.exists() {
                write_file(&swap, "0")?;
            }
        }
        if let Some(limit) = res.pids_limit {
            write_file(&d.join("pids.max"), &limit.to_string())?;
        }
        Ok(())
    }

    fn procs_files(&self, path: &str) -> Vec<PathBuf> {
        vec![self.dir(path).join("cgroup.procs")]
    }

    fn pids(&self, path: &str) -> Result<Vec<i32>> {
        read_pids(&self.dir(path).join("cgroup.procs"))
    }

    fn stats(&self, path: &str) -> Result<CgroupStats> {
        let d = self.dir(path);
        let usage = read_u64(&d.join("memory.current"))?;
        let inactive = read_keyed(&d.join("memory.stat"), "inactive_file")?;
        Ok(CgroupStats {
            cpu_usage_ns: read_keyed(&d.join("cpu.stat"), "usage_usec")? * 1000,
            memory_usage_bytes: usage,
            memory_working_set_bytes: usage.saturating_sub(inactive),
            // Without the pids controller delegated there is no pids.current; usage still counts.
            pids_current: read_u64(&d.join("pids.current")).unwrap_or(0),
        })
    }

    fn oom_kill_count(&self, path: &str) -> Result<u64> {
        read_keyed(&self.dir(path).join("memory.events"), "oom_kill")
    }

    fn exists(&self, path: &str) -> bool {
        self.dir(path).is_dir()
    }

    fn children(&self, path: &str) -> Result<Vec<String>> {
        let mut v = Vec::new();
        if let Ok(rd) = std::fs::read_dir(self.dir(path)) {
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    v.push(e.file_name().to_string_lossy().into_owned());
                }
            }
        }
        v.sort();
        Ok(v)
    }

    fn delete(&self, path: &str, timeout: Duration) -> Result<()> {
        validate_path(path)?;
        let root = self.dir(path);
        if !root.is_dir() {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        let kill = |d: &Path| {
            // cgroup.kill (5.14+) kills the whole subtree atomically, including
            // tasks forked while we iterate; fall back to per-pid SIGKILL.
            if std::fs::write(d.join("cgroup.kill"), "1").is_err() {
                for sub in subdirs_deepest_first(d)
                    .iter()
                    .chain(std::iter::once(&d.to_path_buf()))
                {
                    if let Ok(p) = read_pids(&sub.join("cgroup.procs")) {
                        kill_all(&p);
                    }
                }
            }
        };
        kill(&root);
        for d in subdirs_deepest_first(&root)
            .into_iter()
            .chain(std::iter::once(root.clone()))
        {
            rmdir_retry(&d, deadline, || kill(&d))?;
        }
        Ok(())
    }
}
