//! Orphan cleanup: after a restart the agent passes the sandboxes its pods still
//! own, and everything else this node's runtime left behind goes (sandboxes,
//! containers, cgroups, IPs, namespace mounts).

use super::*;

impl LinuxRuntime {
    pub(super) fn sweep_orphans(&self, keep: &HashSet<String>) -> Result<CleanupReport> {
        let mut report = CleanupReport::default();
        for sid in self.sandbox_ids()? {
            if !keep.contains(&sid) {
                self.remove_sandbox(&sid)?;
                report.sandboxes.push(sid);
            }
        }
        let live: HashSet<String> = self.sandbox_ids()?.into_iter().collect();
        for cid in self.container_ids()? {
            let orphan = match self.record(&cid) {
                Ok(rec) => !live.contains(&rec.sandbox_id),
                Err(_) => true,
            };
            if orphan {
                self.remove_container(&cid)?;
                report.containers.push(cid);
            }
        }
        for child in self.cgroups.children(&self.cfg.cgroup_parent)? {
            if !live.contains(&child) && validate_id("sandbox", &child).is_ok() {
                self.cgroups
                    .delete(&self.pod_cgroup(&child), CGROUP_DELETE_TIMEOUT)?;
                report.cgroups.push(child);
            }
        }
        for (ip, owner) in self.ipam.allocations()? {
            if !live.contains(&owner) {
                self.ipam.release(ip, &owner)?;
                report.ips.push(ip.to_string());
            }
        }
        if let Ok(rd) = fs::read_dir(&self.run_dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !live.contains(&name) && validate_id("sandbox", &name).is_ok() {
                    self.release_namespaces(&name)?;
                }
            }
        }
        Ok(report)
    }
}

impl LinuxRuntime {
    /// Removes every sandbox and container this runtime holds, carrying on past failures
    /// and returning them: for whoever tears a node down for good (a test's cleanup), where
    /// one stuck sandbox must not leave the others' monitors and containers running.
    pub fn remove_all(&self) -> Vec<Error> {
        let mut failures = Vec::new();
        match self.sandbox_ids() {
            Ok(ids) => {
                for sid in ids {
                    if let Err(e) = self.remove_sandbox(&sid) {
                        failures.push(e);
                    }
                }
            }
            Err(e) => failures.push(e),
        }
        match self.container_ids() {
            Ok(ids) => {
                for cid in ids {
                    if let Err(e) = self.remove_container(&cid) {
                        failures.push(e);
                    }
                }
            }
            Err(e) => failures.push(e),
        }
        // The parent is this runtime's alone (see `RuntimeConfig::cgroup_parent_for`): left
        // behind, every torn-down node would leave an empty cgroup per controller.
        if failures.is_empty() {
            if let Err(e) = self
                .cgroups
                .delete(&self.cfg.cgroup_parent, CGROUP_DELETE_TIMEOUT)
            {
                failures.push(e);
            }
        }
        failures
    }
}
