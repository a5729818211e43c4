//! A private multi-host network for tests and benchmarks, made only of network namespaces:
//! a "fabric" namespace holding a bridge (the switch), and one namespace per host, each
//! with a veth into that bridge, an address in a random /24, a random /24 pod CIDR, and a
//! route to every other host's pod CIDR via that host's fabric address ("a route per node
//! pod CIDR", as a cloud's route table would hold).
//!
//! Nothing is added to the namespace the caller runs in: every address, route and link lives
//! in a namespace this module created, and dropping the [`Fabric`] deletes them all (the pod
//! bridges and veths a runtime created inside the hosts go with their namespaces).

use crate::error::{Error, Result};
use crate::net::Ipv4Cidr;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Name of each host's link into the fabric, inside the host's namespace.
pub const UPLINK: &str = "uplink0";
const FABRIC_BRIDGE: &str = "fabric0";

/// One host: a network namespace wired into the fabric.
#[derive(Debug, Clone)]
pub struct FabricHost {
    /// `ip netns` name; the namespace file is [`FabricHost::netns_path`].
    pub netns: String,
    /// The host's address on the fabric.
    pub address: Ipv4Addr,
    /// The pod address range this host's node owns.
    pub pod_cidr: Ipv4Cidr,
    /// The host's end of its fabric link (inside the host namespace): [`UPLINK`].
    pub uplink: String,
    /// The fabric's end of the link (inside the fabric namespace): cut it to isolate the host.
    pub fabric_port: String,
}

impl FabricHost {
    pub fn netns_path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.netns))
    }
}

pub struct Fabric {
    /// `ip netns` name of the switch namespace.
    pub netns: String,
    pub subnet: Ipv4Cidr,
    pub hosts: Vec<FabricHost>,
}

fn random_u32() -> u32 {
    rand::random()
}

/// Runs `ip ARGS…`; the error names the command and carries iproute2's message.
pub fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io("ip", "spawn ip (iproute2)", e))?;
    if out.status.success() {
        return Ok(());
    }
    Err(Error::Network(format!(
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// Distinct random /24s inside 10.0.0.0/8, avoiding 10.96.0.0/16 (Service addresses).
fn random_subnets(n: usize) -> Vec<Ipv4Cidr> {
    let mut picked: Vec<Ipv4Cidr> = Vec::new();
    while picked.len() < n {
        let r = random_u32();
        let (b, c) = ((r >> 8) as u8, r as u8);
        if b == 96 {
            continue;
        }
        let cidr = Ipv4Cidr {
            network: Ipv4Addr::new(10, b, c, 0),
            prefix: 24,
        };
        if !picked.contains(&cidr) {
            picked.push(cidr);
        }
    }
    picked
}

impl Fabric {
    /// Builds the fabric with `hosts` hosts. On any failure what was made so far is removed.
    pub fn new(hosts: usize) -> Result<Fabric> {
        let tag = format!("{:08x}", random_u32());
        let mut subnets = random_subnets(hosts + 1);
        let subnet = subnets.remove(0);
        let mut fabric = Fabric {
            netns: format!("fabric-{tag}"),
            subnet,
            hosts: Vec::new(),
        };
        ip(&["netns", "add", &fabric.netns])?;
        let ns = fabric.netns.clone();
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        ip(&["-n", &ns, "link", "add", FABRIC_BRIDGE, "type", "bridge"])?;
        ip(&["-n", &ns, "link", "set", FABRIC_BRIDGE, "up"])?;
        for (i, pod_cidr) in subnets.into_iter().enumerate() {
            let host = FabricHost {
                netns: format!("host-{tag}-{i}"),
                address: Ipv4Addr::from(u32::from(subnet.network) + 10 + i as u32),
                pod_cidr,
                uplink: UPLINK.to_string(),
                fabric_port: format!("host{i}"),
            };
            // Pushed before it is wired, so a failure below still deletes its namespace.
            ip(&["netns", "add", &host.netns])?;
            fabric.hosts.push(host.clone());
            fabric.wire(&host)?;
        }
        for host in &fabric.hosts {
            for other in fabric.hosts.iter().filter(|o| o.netns != host.netns) {
                ip(&[
                    "-n",
                    &host.netns,
                    "route",
                    "add",
                    &other.pod_cidr.to_string(),
                    "via",
                    &other.address.to_string(),
                    "dev",
                    &host.uplink,
                ])?;
            }
        }
        Ok(fabric)
    }

    fn wire(&self, host: &FabricHost) -> Result<()> {
        let h = host.netns.as_str();
        ip(&["-n", h, "link", "set", "lo", "up"])?;
        ip(&[
            "-n",
            &self.netns,
            "link",
            "add",
            &host.fabric_port,
            "type",
            "veth",
            "peer",
            "name",
            &host.uplink,
            "netns",
            h,
        ])?;
        ip(&[
            "-n",
            &self.netns,
            "link",
            "set",
            &host.fabric_port,
            "master",
            FABRIC_BRIDGE,
        ])?;
        ip(&["-n", &self.netns, "link", "set", &host.fabric_port, "up"])?;
        let addr = format!("{}/{}", host.address, self.subnet.prefix);
        ip(&["-n", h, "addr", "add", &addr, "dev", &host.uplink])?;
        ip(&["-n", h, "link", "set", &host.uplink, "up"])
    }

    /// Cuts host `i` off the fabric (its switch port goes down: the host sees no carrier).
    pub fn cut(&self, i: usize) -> Result<()> {
        self.set_fabric_port(i, "down")
    }

    /// Reconnects host `i`.
    pub fn restore(&self, i: usize) -> Result<()> {
        self.set_fabric_port(i, "up")
    }

    fn set_fabric_port(&self, i: usize, state: &str) -> Result<()> {
        ip(&[
            "-n",
            &self.netns,
            "link",
            "set",
            &self.hosts[i].fabric_port,
            state,
        ])
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        for host in &self.hosts {
            if let Err(e) = ip(&["netns", "del", &host.netns]) {
                eprintln!("test fabric cleanup: {e}");
            }
        }
        if let Err(e) = ip(&["netns", "del", &self.netns]) {
            eprintln!("test fabric cleanup: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_are_distinct_and_avoid_service_addresses() {
        let nets = random_subnets(50);
        for (i, a) in nets.iter().enumerate() {
            assert_ne!(a.network.octets()[1], 96);
            assert!(nets[i + 1..].iter().all(|b| b != a));
        }
    }
}
