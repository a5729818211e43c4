//! Shared fixtures for the real-container tests: a private node network
//! namespace (holding the test's bridge), a unique bridge name, pod CIDR and
//! cgroup parent, a temp state dir, and the busybox image. Everything is
//! removed by `Drop`, also when the test fails.
#![allow(dead_code)]

use shoal_node::cgroups::CgroupDriver;
use shoal_node::net::{Ipv4Cidr, NetworkConfig};
use shoal_node::{
    ContainerInfo, ContainerSpec, ContainerState, LinuxRuntime, Runtime, RuntimeConfig,
    SandboxInfo, SandboxSpec,
};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const IMAGE: &str = "shoal.test/busybox:1";

pub fn rand_hex(n: usize) -> String {
    (0..n)
        .map(|_| format!("{:x}", rand::random::<u8>() % 16))
        .collect()
}

/// `ip netns add` namespace, deleted on drop (deleting it deletes the bridge too).
pub struct NetnsGuard {
    pub name: String,
    pub path: PathBuf,
}

impl NetnsGuard {
    pub fn new() -> NetnsGuard {
        let name = format!("shn{}", rand_hex(8));
        let st = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("run ip");
        assert!(st.success(), "ip netns add {name}");
        let g = NetnsGuard {
            path: PathBuf::from(format!("/run/netns/{name}")),
            name,
        };
        let st = Command::new("ip")
            .args(["-n", &g.name, "link", "set", "lo", "up"])
            .status()
            .unwrap();
        assert!(st.success());
        g
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

pub struct Env {
    pub rt: LinuxRuntime,
    pub bridge: String,
    pub cidr: Ipv4Cidr,
    pub cgroup_parent: String,
    pub node_ns: NetnsGuard,
    pub tmp: tempfile::TempDir,
}

pub fn shim_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_shoal-shim"))
}

impl Env {
    pub fn new() -> Env {
        Self::with(|_| {})
    }

    pub fn with(tweak: impl FnOnce(&mut RuntimeConfig)) -> Env {
        let tmp = tempfile::Builder::new()
            .prefix("shoal-test-")
            .tempdir()
            .unwrap();
        let node_ns = NetnsGuard::new();
        let bridge = format!("sht{}", rand_hex(8));
        let cidr: Ipv4Cidr = format!(
            "10.{}.{}.0/24",
            1 + rand::random::<u8>() % 250,
            rand::random::<u8>()
        )
        .parse()
        .unwrap();
        let cgroup_parent = format!("shoaltest-{}", rand_hex(10));
        let mut net = NetworkConfig::new(&bridge, cidr);
        net.host_netns = Some(node_ns.path.clone());
        let mut cfg = RuntimeConfig::new(tmp.path().join("state"), net);
        cfg.shim_path = Some(shim_path());
        cfg.cgroup_parent = cgroup_parent.clone();
        tweak(&mut cfg);
        let rt = LinuxRuntime::new(cfg).expect("runtime");
        let layout = tmp.path().join("busybox-oci");
        let (name, tag) = IMAGE.rsplit_once(':').unwrap();
        shoal_node::testimage::build_busybox_layout(&layout, name, tag).unwrap();
        rt.images().import(&layout).unwrap();
        Env {
            rt,
            bridge,
            cidr,
            cgroup_parent,
            node_ns,
            tmp,
        }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    pub fn sandbox(&self, name: &str) -> SandboxInfo {
        let id = format!("{name}-{}", rand_hex(6));
        self.rt
            .create_sandbox(&SandboxSpec::new(id, name, "default"))
            .expect("create sandbox")
    }

    pub fn spec(&self, name: &str, argv: &[&str]) -> ContainerSpec {
        ContainerSpec::new(name, IMAGE).command(argv.iter().copied())
    }

    pub fn run(&self, sb: &SandboxInfo, name: &str, argv: &[&str]) -> ContainerInfo {
        self.rt
            .start_container(sb, &self.spec(name, argv))
            .expect("start container")
    }

    pub fn wait_exit(&self, id: &str) -> ContainerState {
        let st = self.rt.wait_container(id, Duration::from_secs(60)).unwrap();
        assert!(st.is_exited(), "container {id} did not exit: {st:?}");
        st
    }

    /// Mount points under this test's temp dir (must be empty after cleanup).
    pub fn mounts_under_tmp(&self) -> Vec<String> {
        mounts_under(self.tmp.path())
    }
}

pub fn mounts_under(p: &Path) -> Vec<String> {
    let prefix = p.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
        .filter(|m| m.starts_with(&prefix))
        .collect()
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Err(e) = self.rt.cleanup_orphans(&HashSet::new()) {
            eprintln!("cleanup_orphans: {e}");
        }
        let _ = self
            .rt
            .cgroup_driver()
            .delete(&self.cgroup_parent, Duration::from_secs(10));
        for m in self.mounts_under_tmp().iter().rev() {
            let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// Poll `f` until it returns Some or the deadline passes.
pub fn poll_until<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn exec_ok(env: &Env, id: &str, argv: &[&str]) -> String {
    let r = env
        .rt
        .exec(
            id,
            &shoal_node::ExecRequest::new(argv.iter().copied(), Duration::from_secs(20)),
        )
        .expect("exec");
    assert_eq!(
        r.exit_code,
        0,
        "exec {argv:?}: stderr {}",
        String::from_utf8_lossy(&r.stderr)
    );
    String::from_utf8_lossy(&r.stdout).into_owned()
}

pub fn driver(env: &Env) -> &dyn CgroupDriver {
    env.rt.cgroup_driver()
}
