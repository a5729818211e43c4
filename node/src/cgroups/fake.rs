//! In-memory driver for unit tests of code that uses a [`CgroupDriver`].

use super::*;
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct FakeDriver {
    groups: Mutex<HashMap<String, (CgroupResources, Vec<i32>)>>,
}

impl FakeDriver {
    /// Resources applied to `path`, if it exists.
    pub fn resources(&self, path: &str) -> Option<CgroupResources> {
        self.groups.lock().unwrap().get(path).map(|g| g.0.clone())
    }
}

impl CgroupDriver for FakeDriver {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::Fake
    }
    fn config(&self) -> CgroupConfig {
        CgroupConfig::Fake
    }
    fn create(&self, path: &str, res: &CgroupResources) -> Result<()> {
        validate_path(path)?;
        self.groups
            .lock()
            .unwrap()
            .insert(path.to_string(), (res.clone(), vec![]));
        Ok(())
    }
    fn procs_files(&self, _path: &str) -> Vec<PathBuf> {
        vec![]
    }
    fn add_pid(&self, path: &str, pid: i32) -> Result<()> {
        let mut g = self.groups.lock().unwrap();
        let e = g.get_mut(path).ok_or_else(|| Error::Cgroup {
            path: path.into(),
            message: "no such cgroup".into(),
        })?;
        e.1.push(pid);
        Ok(())
    }
    fn pids(&self, path: &str) -> Result<Vec<i32>> {
        Ok(self
            .groups
            .lock()
            .unwrap()
            .get(path)
            .map(|g| g.1.clone())
            .unwrap_or_default())
    }
    fn stats(&self, path: &str) -> Result<CgroupStats> {
        Ok(CgroupStats {
            pids_current: self.pids(path)?.len() as u64,
            ..Default::default()
        })
    }
    fn oom_kill_count(&self, _path: &str) -> Result<u64> {
        Ok(0)
    }
    fn exists(&self, path: &str) -> bool {
        self.groups.lock().unwrap().contains_key(path)
    }
    fn children(&self, path: &str) -> Result<Vec<String>> {
        let prefix = format!("{path}/");
        let mut v: Vec<String> = self
            .groups
            .lock()
            .unwrap()
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .filter(|rest| !rest.contains('/'))
            .map(str::to_string)
            .collect();
        v.sort();
        Ok(v)
    }
    fn delete(&self, path: &str, _timeout: Duration) -> Result<()> {
        let prefix = format!("{path}/");
        self.groups
            .lock()
            .unwrap()
            .retain(|k, _| k != path && !k.starts_with(&prefix));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_driver_tracks_groups() {
        let d = FakeDriver::default();
        d.create("shoal/p1", &CgroupResources::default()).unwrap();
        d.create(
            "shoal/p1/c1",
            &CgroupResources::from_k8s(Some(100), None, Some(1), None),
        )
        .unwrap();
        d.add_pid("shoal/p1/c1", 42).unwrap();
        assert_eq!(d.children("shoal/p1").unwrap(), vec!["c1".to_string()]);
        assert_eq!(d.stats("shoal/p1/c1").unwrap().pids_current, 1);
        assert_eq!(d.resources("shoal/p1/c1").unwrap().cpu_shares, Some(102));
        d.delete("shoal/p1", Duration::from_secs(1)).unwrap();
        assert!(!d.exists("shoal/p1/c1"));
    }

    #[test]
    fn v2_driver_writes_limit_files() {
        // A plain directory stands in for a cgroup2 mount: create() only writes files.
        let tmp = tempfile::tempdir().unwrap();
        let d = V2Driver::new(tmp.path().to_path_buf());
        d.create(
            "shoal/p",
            &CgroupResources::from_k8s(Some(1000), Some(500), Some(1 << 20), Some(64)),
        )
        .unwrap();
        let dir = tmp.path().join("shoal/p");
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.weight")).unwrap(),
            "39"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.max")).unwrap(),
            "50000 100000"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.max")).unwrap(),
            "1048576"
        );
        assert_eq!(std::fs::read_to_string(dir.join("pids.max")).unwrap(), "64");
        std::fs::write(dir.join("memory.events"), "low 0\noom 2\noom_kill 1\n").unwrap();
        assert_eq!(d.oom_kill_count("shoal/p").unwrap(), 1);
    }

    #[test]
    fn v2_stats_read_cpu_in_microseconds_and_working_set() {
        let tmp = tempfile::tempdir().unwrap();
        let d = V2Driver::new(tmp.path().to_path_buf());
        let dir = tmp.path().join("shoal/p");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("cpu.stat"),
            "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n",
        )
        .unwrap();
        std::fs::write(dir.join("memory.current"), "10485760\n").unwrap();
        std::fs::write(dir.join("memory.stat"), "anon 1\ninactive_file 4194304\n").unwrap();
        // No pids.current: the pids controller is not always delegated.
        let s = d.stats("shoal/p").unwrap();
        assert_eq!(s.cpu_usage_ns, 1_500_000_000);
        assert_eq!(s.memory_working_set_bytes, 6 << 20);
        assert_eq!(s.pids_current, 0);
    }
}
