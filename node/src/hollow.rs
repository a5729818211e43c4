//! **For scale tests only.** [`HollowRuntime`] implements [`Runtime`] without
//! touching the kernel, so thousands of simulated nodes fit in one process.
//!
//! There are no threads and no timers to fire: every record stores timestamps
//! and state is computed when asked (a container is `Created` until its start
//! delay has passed, then `Running` until stopped). Records are a few compact
//! fields (~150 bytes per container), so a node with 100 pods stays far below
//! the 2 MiB per-node budget. `wait_container` does not block: hollow
//! containers only exit when stopped.

use crate::container::{ContainerInfo, ContainerSpec, ContainerState, ExitReason};
use crate::error::{Error, Result, StepError};
use crate::net::Ipv4Cidr;
use crate::runtime::{CleanupReport, ExecRequest, ExecResult, Runtime, Stats};
use crate::sandbox::{SandboxInfo, SandboxSpec};
use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

#[derive(Debug, Clone)]
pub struct HollowConfig {
    /// Time from start_container until the container reports Running.
    pub start_delay: Duration,
    /// Probability in [0, 1] that start_container fails (RunContainerError).
    pub failure_rate: f64,
    /// Seed of the failure RNG, so runs are reproducible.
    pub seed: u64,
    pub pod_cidr: Ipv4Cidr,
}

impl Default for HollowConfig {
    fn default() -> Self {
        HollowConfig {
            start_delay: Duration::ZERO,
            failure_rate: 0.0,
            seed: 1,
            pod_cidr: Ipv4Cidr {
                network: Ipv4Addr::new(10, 244, 0, 0),
                prefix: 16,
            },
        }
    }
}

struct Sandbox {
    name: Box<str>,
    namespace: Box<str>,
    ip: u32,
    created_at: SystemTime,
}

struct Container {
    sandbox: Box<str>,
    name: Box<str>,
    image: Box<str>,
    pid: i32,
    start_at: SystemTime,
    exit: Option<(i32, SystemTime)>,
}

struct Inner {
    sandboxes: HashMap<Box<str>, Sandbox>,
    containers: HashMap<Box<str>, Container>,
    next_ip: u32,
    next_id: u64,
    rng: u64,
}

pub struct HollowRuntime {
    cfg: HollowConfig,
    inner: Mutex<Inner>,
}

impl HollowRuntime {
    pub fn new(cfg: HollowConfig) -> Self {
        HollowRuntime {
            inner: Mutex::new(Inner {
                sandboxes: HashMap::new(),
                containers: HashMap::new(),
                next_ip: *cfg.pod_cidr.pod_range().start(),
                next_id: 1,
                rng: cfg.seed | 1,
            }),
            cfg,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn info(&self, id: &str, s: &Sandbox) -> SandboxInfo {
        SandboxInfo {
            id: id.to_string(),
            name: s.name.to_string(),
            namespace: s.namespace.to_string(),
            ip: Ipv4Addr::from(s.ip),
            gateway: self.cfg.pod_cidr.gateway(),
            prefix: self.cfg.pod_cidr.prefix,
            host_veth: String::new(),
            netns_path: PathBuf::new(),
            ipc_ns_path: PathBuf::new(),
            uts_ns_path: PathBuf::new(),
            pid_ns_path: None,
            pause: None,
            cgroup: String::new(),
            dir: PathBuf::new(),
            created_at: s.created_at,
        }
    }
}

/// xorshift64*: tiny, deterministic, good enough for failure injection.
fn next_f64(state: &mut u64) -> f64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
}

fn not_found(kind: &'static str, id: &str) -> Error {
    Error::NotFound {
        kind,
        id: id.to_string(),
    }
}

fn state(c: &Container) -> ContainerState {
    let now = SystemTime::now();
    match c.exit {
        Some((code, at)) => ContainerState::Exited {
            exit_code: code,
            signal: (code > 128).then_some(code - 128),
            reason: if code == 0 {
                ExitReason::Completed
            } else {
                ExitReason::Error
            },
            started_at: c.start_at,
            finished_at: at,
        },
        None if now < c.start_at => ContainerState::Created,
        None => ContainerState::Running {
            pid: c.pid,
            started_at: c.start_at,
        },
    }
}

impl Runtime for HollowRuntime {
    fn create_sandbox(&self, spec: &SandboxSpec) -> Result<SandboxInfo> {
        let mut g = self.lock();
        if g.sandboxes.contains_key(spec.id.as_str()) {
            return Err(Error::AlreadyExists {
                kind: "sandbox",
                id: spec.id.clone(),
            });
        }
        let range = self.cfg.pod_cidr.pod_range();
        if g.next_ip > *range.end() {
            g.next_ip = *range.start();
        }
        let ip = g.next_ip;
        g.next_ip += 1;
        let s = Sandbox {
            name: spec.name.as_str().into(),
            namespace: spec.namespace.as_str().into(),
            ip,
            created_at: SystemTime::now(),
        };
        let info = self.info(&spec.id, &s);
        g.sandboxes.insert(spec.id.as_str().into(), s);
        Ok(info)
    }

    fn remove_sandbox(&self, id: &str) -> Result<()> {
        let mut g = self.lock();
        g.sandboxes.remove(id);
        g.containers.retain(|_, c| &*c.sandbox != id);
        Ok(())
    }

    fn list_sandboxes(&self) -> Result<Vec<SandboxInfo>> {
        let g = self.lock();
        Ok(g.sandboxes.iter().map(|(id, s)| self.info(id, s)).collect())
    }

    fn start_container(
        &self,
        sandbox: &SandboxInfo,
        spec: &ContainerSpec,
    ) -> Result<ContainerInfo> {
        let mut g = self.lock();
        if !g.sandboxes.contains_key(sandbox.id.as_str()) {
            return Err(not_found("sandbox", &sandbox.id));
        }
        if self.cfg.failure_rate > 0.0 && next_f64(&mut g.rng) < self.cfg.failure_rate {
            return Err(Error::Container {
                id: spec.name.clone(),
                error: StepError::new("exec", "hollow runtime: injected start failure"),
            });
        }
        let n = g.next_id;
        g.next_id += 1;
        let id = format!("{}-{n:x}", spec.name);
        let start_at = SystemTime::now() + self.cfg.start_delay;
        let pid = 1000 + (n % 4_000_000) as i32;
        g.containers.insert(
            id.as_str().into(),
            Container {
                sandbox: sandbox.id.as_str().into(),
                name: spec.name.as_str().into(),
                image: spec.image.as_str().into(),
                pid,
                start_at,
                exit: None,
            },
        );
        Ok(ContainerInfo {
            id,
            sandbox_id: sandbox.id.clone(),
            name: spec.name.clone(),
            image: spec.image.clone(),
            pid,
            monitor_pid: 0,
            started_at: start_at,
        })
    }

    fn container_state(&self, id: &str) -> Result<ContainerState> {
        let g = self.lock();
        g.containers
            .get(id)
            .map(state)
            .ok_or_else(|| not_found("container", id))
    }

    fn wait_container(&self, id: &str, _timeout: Duration) -> Result<ContainerState> {
        self.container_state(id)
    }

    fn stop_container(&self, id: &str, grace: Duration) -> Result<ContainerState> {
        let mut g = self.lock();
        let c = g
            .containers
            .get_mut(id)
            .ok_or_else(|| not_found("container", id))?;
        if c.exit.is_none() {
            let code = if grace.is_zero() { 137 } else { 143 };
            c.exit = Some((code, SystemTime::now()));
        }
        Ok(state(c))
    }

    fn remove_container(&self, id: &str) -> Result<()> {
        self.lock().containers.remove(id);
        Ok(())
    }

    fn list_containers(&self) -> Result<Vec<ContainerInfo>> {
        let g = self.lock();
        Ok(g.containers
            .iter()
            .map(|(id, c)| ContainerInfo {
                id: id.to_string(),
                sandbox_id: c.sandbox.to_string(),
                name: c.name.to_string(),
                image: c.image.to_string(),
                pid: c.pid,
                monitor_pid: 0,
                started_at: c.start_at,
            })
            .collect())
    }

    fn exec(&self, id: &str, _req: &ExecRequest) -> Result<ExecResult> {
        match self.container_state(id)? {
            ContainerState::Running { .. } => Ok(ExecResult {
                exit_code: 0,
                stdout: vec![],
                stderr: vec![],
                timed_out: false,
            }),
            _ => Err(Error::InvalidSpec(format!("container {id} is not running"))),
        }
    }

    fn container_stats(&self, id: &str) -> Result<Stats> {
        let running = self.container_state(id)?.is_running();
        Ok(Stats {
            pids_current: running as u64,
            ..Default::default()
        })
    }

    fn sandbox_stats(&self, id: &str) -> Result<Stats> {
        let g = self.lock();
        if !g.sandboxes.contains_key(id) {
            return Err(not_found("sandbox", id));
        }
        Ok(Stats::default())
    }

    fn cleanup_orphans(&self, keep: &HashSet<String>) -> Result<CleanupReport> {
        let mut g = self.lock();
        let mut report = CleanupReport::default();
        let gone: Vec<Box<str>> = g
            .sandboxes
            .keys()
            .filter(|k| !keep.contains(&***k))
            .cloned()
            .collect();
        for id in gone {
            g.sandboxes.remove(&id);
            report.sandboxes.push(id.to_string());
        }
        let live: HashSet<Box<str>> = g.sandboxes.keys().cloned().collect();
        let dead: Vec<Box<str>> = g
            .containers
            .iter()
            .filter(|(_, c)| !live.contains(&c.sandbox))
            .map(|(k, _)| k.clone())
            .collect();
        for id in dead {
            g.containers.remove(&id);
            report.containers.push(id.to_string());
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_without_kernel() {
        let rt = HollowRuntime::new(HollowConfig {
            start_delay: Duration::from_secs(3600),
            ..Default::default()
        });
        let sb = rt
            .create_sandbox(&SandboxSpec::new("p1", "pod", "ns"))
            .unwrap();
        let c = rt
            .start_container(&sb, &ContainerSpec::new("app", "busybox"))
            .unwrap();
        assert_eq!(rt.container_state(&c.id).unwrap(), ContainerState::Created);
        let st = rt.stop_container(&c.id, Duration::from_secs(1)).unwrap();
        assert_eq!(st.exit_code(), Some(143));
        rt.cleanup_orphans(&HashSet::new()).unwrap();
        assert!(rt.list_containers().unwrap().is_empty());
    }

    #[test]
    fn failure_injection_is_deterministic() {
        let run = || {
            let rt = HollowRuntime::new(HollowConfig {
                failure_rate: 0.5,
                seed: 42,
                ..Default::default()
            });
            let sb = rt
                .create_sandbox(&SandboxSpec::new("p", "pod", "ns"))
                .unwrap();
            (0..100)
                .map(|_| {
                    rt.start_container(&sb, &ContainerSpec::new("c", "i"))
                        .is_ok()
                })
                .collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        let ok = a.iter().filter(|x| **x).count();
        assert!((25..75).contains(&ok), "{ok} of 100 succeeded at rate 0.5");
    }
}
