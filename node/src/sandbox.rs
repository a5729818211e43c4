//! Pod sandbox types and the per-pod files containers bind-mount
//! (`/etc/hosts`, `/etc/resolv.conf`, `/etc/hostname`).
//!
//! A sandbox is: a network namespace (veth `eth0` on the node bridge, one pod
//! IP), shared IPC and UTS namespaces (hostname = pod name), all three persisted
//! as bind mounts of `/proc/<pid>/ns/*` under the run dir so they outlive the
//! process that created them; optionally (`share_process_namespace`) a PID
//! namespace shared by all containers, held by a pause process and persisted
//! the same way; a pod cgroup; and a directory for volumes and logs.
//! The kernel work is done by `shoal-shim sandbox` (see [`crate::shim`]).

use crate::cgroups::CgroupResources;
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::SystemTime;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DnsConfig {
    pub nameservers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

impl DnsConfig {
    /// Kubernetes ClusterFirst DNS for a pod in `namespace`.
    pub fn cluster_first(namespace: &str, nameserver: &str, cluster_domain: &str) -> DnsConfig {
        DnsConfig {
            nameservers: vec![nameserver.to_string()],
            searches: vec![
                format!("{namespace}.svc.{cluster_domain}"),
                format!("svc.{cluster_domain}"),
                cluster_domain.to_string(),
            ],
            options: vec!["ndots:5".into()],
        }
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        for n in &self.nameservers {
            s.push_str(&format!("nameserver {n}\n"));
        }
        if !self.searches.is_empty() {
            s.push_str(&format!("search {}\n", self.searches.join(" ")));
        }
        if !self.options.is_empty() {
            s.push_str(&format!("options {}\n", self.options.join(" ")));
        }
        s
    }
}

/// Pod-level cgroup limits. Kubernetes sets pod limits to the sum of the
/// containers' limits only when every container has one; [`PodResources::sum`]
/// implements that rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodResources {
    pub cpu_request_milli: Option<u64>,
    pub cpu_limit_milli: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    pub pids_limit: Option<u64>,
}

impl PodResources {
    /// Sum container (request, cpu limit, memory limit) triples.
    pub fn sum<'a>(
        containers: impl IntoIterator<Item = &'a crate::container::Resources>,
    ) -> PodResources {
        let mut req = 0;
        let mut cpu: Option<u64> = Some(0);
        let mut mem: Option<u64> = Some(0);
        let mut any = false;
        for c in containers {
            any = true;
            req += c.cpu_request_milli.unwrap_or(0);
            cpu = cpu.zip(c.cpu_limit_milli).map(|(a, b)| a + b);
            mem = mem.zip(c.memory_limit_bytes).map(|(a, b)| a + b);
        }
        PodResources {
            cpu_request_milli: Some(req),
            cpu_limit_milli: cpu.filter(|_| any),
            memory_limit_bytes: mem.filter(|_| any),
            pids_limit: None,
        }
    }

    pub(crate) fn cgroup(&self, default_pids: Option<u64>) -> CgroupResources {
        CgroupResources::from_k8s(
            self.cpu_request_milli,
            self.cpu_limit_milli,
            self.memory_limit_bytes,
            self.pids_limit.or(default_pids),
        )
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// Unique id (e.g. the pod UID); used in paths and cgroup names.
    pub id: String,
    /// Pod name: the hostname inside the pod.
    pub name: String,
    pub namespace: String,
    pub dns: DnsConfig,
    pub resources: PodResources,
    /// Extra /etc/hosts entries (ip, names).
    pub host_aliases: Vec<(String, Vec<String>)>,
    /// Kubernetes `shareProcessNamespace`: all containers of the pod share one
    /// PID namespace, held by a per-pod pause process (its PID 1).
    #[serde(default)]
    pub share_process_namespace: bool,
}

impl SandboxSpec {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        namespace: impl Into<String>,
    ) -> Self {
        let namespace = namespace.into();
        SandboxSpec {
            id: id.into(),
            name: name.into(),
            dns: DnsConfig::cluster_first(&namespace, "10.96.0.10", "cluster.local"),
            namespace,
            ..Default::default()
        }
    }
}

/// The long-lived process that is PID 1 of a pod's shared PID namespace
/// (`shoal-shim pause`): it only reaps orphans. Killing it kills everything in
/// the namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseProcess {
    /// Host pid.
    pub pid: i32,
    /// /proc/PID/stat starttime, to detect pid reuse.
    pub start_time: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxInfo {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub ip: Ipv4Addr,
    pub gateway: Ipv4Addr,
    pub prefix: u8,
    pub host_veth: String,
    pub netns_path: PathBuf,
    pub ipc_ns_path: PathBuf,
    pub uts_ns_path: PathBuf,
    /// The pod's shared PID namespace (bind mount), when
    /// [`SandboxSpec::share_process_namespace`] is set.
    #[serde(default)]
    pub pid_ns_path: Option<PathBuf>,
    /// The pause process holding [`SandboxInfo::pid_ns_path`] (its PID 1).
    #[serde(default)]
    pub pause: Option<PauseProcess>,
    /// Relative cgroup path of the pod.
    pub cgroup: String,
    /// Per-pod directory: hosts, resolv.conf, volumes/, logs/.
    pub dir: PathBuf,
    pub created_at: SystemTime,
}

impl SandboxInfo {
    pub fn hosts_path(&self) -> PathBuf {
        self.dir.join("hosts")
    }
    pub fn resolv_path(&self) -> PathBuf {
        self.dir.join("resolv.conf")
    }
    pub fn hostname_path(&self) -> PathBuf {
        self.dir.join("hostname")
    }
    /// Directory of emptyDir volume `name` (created on first use).
    pub fn volume_dir(&self, name: &str) -> PathBuf {
        self.dir.join("volumes").join(name)
    }
    pub fn log_dir(&self, container_name: &str) -> PathBuf {
        self.dir.join("logs").join(container_name)
    }
}

pub(crate) fn render_hosts(spec: &SandboxSpec, ip: Ipv4Addr) -> String {
    let mut s = String::from(
        "# Kubernetes-managed hosts file (shoal).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    );
    s.push_str(&format!("{ip}\t{}\n", spec.name));
    for (aip, names) in &spec.host_aliases {
        s.push_str(&format!("{aip}\t{}\n", names.join(" ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::Resources;

    #[test]
    fn resolv_and_hosts() {
        let d = DnsConfig::cluster_first("web", "10.96.0.10", "cluster.local");
        assert_eq!(
            d.render(),
            "nameserver 10.96.0.10\nsearch web.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
        );
        let spec = SandboxSpec::new("id", "pod-a", "web");
        assert!(render_hosts(&spec, Ipv4Addr::new(10, 0, 0, 5)).contains("10.0.0.5\tpod-a\n"));
    }

    #[test]
    fn pod_limits_only_when_all_set() {
        let a = Resources {
            cpu_limit_milli: Some(100),
            memory_limit_bytes: Some(10),
            ..Default::default()
        };
        let b = Resources {
            cpu_limit_milli: Some(200),
            memory_limit_bytes: None,
            ..Default::default()
        };
        let p = PodResources::sum([&a, &a]);
        assert_eq!(
            (p.cpu_limit_milli, p.memory_limit_bytes),
            (Some(200), Some(20))
        );
        let p = PodResources::sum([&a, &b]);
        assert_eq!((p.cpu_limit_milli, p.memory_limit_bytes), (Some(300), None));
    }
}
