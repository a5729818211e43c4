//! Facts about this machine for the Node object: capacity, addresses, system info.

use std::collections::BTreeMap;

use bus_schemas::kinds::node::{NodeAddress, NodeSystemInfo};
use bus_schemas::quantity::Quantity;

pub struct MachineFacts {
    pub cpus: u64,
    pub memory_bytes: u64,
    pub kernel: String,
    pub os_image: String,
    pub hostname: String,
    pub machine_id: String,
}

/// The machine's primary IPv4 address: the source address of the default route's interface,
/// read from the kernel's tables (nothing is sent anywhere).
pub fn primary_ipv4() -> Option<String> {
    let routes = std::fs::read_to_string("/proc/net/route").ok()?;
    let iface = routes
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[1] == "00000000")
        .map(|f| f[0].to_string())?;
    let out = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "dev", &iface])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let addr = text
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)?;
    Some(addr.split('/').next()?.to_string())
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_string()
}

impl MachineFacts {
    pub fn probe() -> MachineFacts {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get() as u64)
            .unwrap_or(1);
        let memory_kib = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| {
                v.split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
            })
            .unwrap_or(0);
        let os_image = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_else(|| "Linux".into());
        MachineFacts {
            cpus,
            memory_bytes: memory_kib * 1024,
            kernel: read("/proc/sys/kernel/osrelease"),
            os_image,
            hostname: read("/proc/sys/kernel/hostname"),
            machine_id: read("/etc/machine-id"),
        }
    }

    /// A fixed, plausible machine for hollow nodes.
    pub fn hollow() -> MachineFacts {
        MachineFacts {
            cpus: 8,
            memory_bytes: 32 << 30,
            kernel: "hollow".into(),
            os_image: "Shoal hollow node".into(),
            hostname: "hollow".into(),
            machine_id: String::new(),
        }
    }

    pub fn capacity(&self, max_pods: u32) -> BTreeMap<String, Quantity> {
        BTreeMap::from([
            ("cpu".to_string(), Quantity::from_value(self.cpus as i128)),
            ("memory".to_string(), bytes(self.memory_bytes)),
            ("pods".to_string(), Quantity::from_value(max_pods as i128)),
        ])
    }

    /// Capacity minus what the system and the agent keep for themselves.
    pub fn allocatable(&self, max_pods: u32) -> BTreeMap<String, Quantity> {
        let reserved_cpu_milli = 100;
        let reserved_mem = (self.memory_bytes / 20).min(1 << 30);
        BTreeMap::from([
            (
                "cpu".to_string(),
                Quantity::from_milli((self.cpus as i128 * 1000 - reserved_cpu_milli).max(0)),
            ),
            (
                "memory".to_string(),
                bytes(self.memory_bytes.saturating_sub(reserved_mem)),
            ),
            ("pods".to_string(), Quantity::from_value(max_pods as i128)),
        ])
    }

    pub fn system_info(&self, hollow: bool) -> NodeSystemInfo {
        NodeSystemInfo {
            machine_id: self.machine_id.clone(),
            kernel_version: self.kernel.clone(),
            os_image: self.os_image.clone(),
            container_runtime_version: if hollow {
                "hollow://0.1".into()
            } else {
                "shoal://0.1".into()
            },
            kubelet_version: format!("shoal-{}", env!("CARGO_PKG_VERSION")),
            operating_system: "linux".into(),
            architecture: std::env::consts::ARCH
                .replace("x86_64", "amd64")
                .replace("aarch64", "arm64"),
            ..Default::default()
        }
    }

    pub fn addresses(&self, internal_ip: &str, node_name: &str) -> Vec<NodeAddress> {
        let mut out = Vec::new();
        if !internal_ip.is_empty() {
            out.push(NodeAddress {
                type_: "InternalIP".into(),
                address: internal_ip.into(),
            });
        }
        out.push(NodeAddress {
            type_: "Hostname".into(),
            address: node_name.into(),
        });
        out
    }
}

fn bytes(n: u64) -> Quantity {
    // Whole KiB print as Ki, like the kubelet reports memory.
    Quantity::parse(&format!("{}Ki", n / 1024)).unwrap_or_else(|_| Quantity::from_value(n as i128))
}

/// Resource pressure as the kubelet reports it: the conditions that make a node a poor place
/// for more pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pressure {
    pub memory: bool,
    pub disk: bool,
    pub pids: bool,
}

impl Pressure {
    /// Under 5 % of memory available, under 10 % of the state disk free, or over 90 % of
    /// pid_max in use.
    pub fn probe(state_dir: Option<&std::path::Path>) -> Pressure {
        let meminfo = read("/proc/meminfo");
        let field = |name: &str| {
            meminfo
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| {
                    v.split_whitespace()
                        .next()
                        .and_then(|n| n.parse::<u64>().ok())
                })
        };
        let memory = match (field("MemAvailable:"), field("MemTotal:")) {
            (Some(avail), Some(total)) if total > 0 => avail * 100 / total < 5,
            _ => false,
        };
        let disk = state_dir
            .and_then(|dir| nix::sys::statvfs::statvfs(dir).ok())
            .map(|st| {
                let total = st.blocks() as u128;
                total > 0 && (st.blocks_available() as u128) * 100 / total < 10
            })
            .unwrap_or(false);
        let pid_max: u64 = read("/proc/sys/kernel/pid_max").parse().unwrap_or(u64::MAX);
        let threads: u64 = read("/proc/loadavg")
            .split_whitespace()
            .nth(3)
            .and_then(|f| f.split('/').nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        Pressure {
            memory,
            disk,
            pids: threads.saturating_mul(10) > pid_max.saturating_mul(9),
        }
    }
}
