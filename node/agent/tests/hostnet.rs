//! The node-network pieces against the real kernel, inside a namespace this test makes:
//! the proxy's ruleset loads and replaces itself atomically, a broken one is refused with the
//! line named and leaves the previous rules in force, the namespace is prepared for routing,
//! and the uplink check sees carrier come and go.

use std::path::PathBuf;
use std::process::Command;

use shoal_agent::hostnet::{HostNet, LinkState};
use shoal_agent::proxy::render::{render, NodeNet};
use shoal_agent::proxy::rules::{Affinity, Backend, PortRule, Protocol};
use shoal_agent::proxy::{nft, ProxyConfig};

/// `ip netns add` namespace, deleted on drop (with everything in it).
struct Netns {
    name: String,
}

impl Netns {
    fn new() -> Netns {
        let name = format!("shoal-agent-{:08x}", rand::random::<u32>());
        assert!(Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap()
            .success());
        Netns { name }
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.name))
    }

    fn sh(&self, cmd: &str) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "sh", "-c", cmd])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn eventually(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ok() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn rule(cluster_ip: &str, port: u16, backends: &[&str]) -> PortRule {
    PortRule {
        name: format!("default/web:{port}"),
        cluster_ip: cluster_ip.parse().unwrap(),
        protocol: Protocol::Tcp,
        port,
        affinity: Affinity::None,
        backends: backends
            .iter()
            .map(|ip| Backend {
                ip: ip.parse().unwrap(),
                port: 8080,
            })
            .collect(),
    }
}

#[test]
fn the_ruleset_loads_replaces_itself_and_a_broken_one_changes_nothing() {
    let ns = Netns::new();
    let net = HostNet::new(Some(ns.path()));
    let node = NodeNet {
        pod_cidr: "10.1.2.0/24".parse().unwrap(),
    };
    let first = render(
        &[
            rule("10.96.0.5", 80, &["10.1.2.3", "10.3.0.4"]),
            rule("10.96.0.6", 80, &[]),
        ],
        &node,
    );
    nft::apply(&net, &first).expect("first ruleset loads");
    let listed = ns.sh("nft list table ip shoal");
    assert!(listed.contains("numgen random mod 2"), "{listed}");
    assert!(listed.contains("10.96.0.6 . tcp . 80"), "{listed}");
    // Loaded again (the periodic repair) and replaced: one table, the new content only.
    nft::apply(&net, &first).expect("same ruleset loads again");
    let second = render(&[rule("10.96.0.7", 443, &["10.1.2.9"])], &node);
    nft::apply(&net, &second).expect("second ruleset replaces the first");
    let listed = ns.sh("nft list tables");
    assert_eq!(listed.trim(), "table ip shoal");
    let listed = ns.sh("nft list table ip shoal");
    assert!(listed.contains("10.96.0.7 . tcp . 443"), "{listed}");
    assert!(!listed.contains("10.96.0.5"), "{listed}");

    let broken = second.replace("dnat to 10.1.2.9:8080", "dnat to 10.1.2.999:8080");
    let err = nft::apply(&net, &broken).expect_err("a bad address is refused");
    let message = err.to_string();
    assert!(
        message.contains("ruleset line") && message.contains("10.1.2.999"),
        "{message}"
    );
    let listed = ns.sh("nft list table ip shoal");
    assert!(
        listed.contains("10.96.0.7 . tcp . 443"),
        "previous rules still in force: {listed}"
    );
}

#[test]
fn the_node_network_is_prepared_and_the_uplink_is_watched() {
    let ns = Netns::new();
    let net = HostNet::new(Some(ns.path()));
    // Whether a new namespace starts forwarding depends on the machine (it may inherit the
    // initial namespace's setting): start from off, whatever it was.
    ns.sh("echo 0 > /proc/sys/net/ipv4/ip_forward");
    assert_eq!(ns.sh("cat /proc/sys/net/ipv4/ip_forward").trim(), "0");
    let service_cidr = ProxyConfig::default().service_cidr.parse().unwrap();
    shoal_agent::netsetup::prepare(&net, service_cidr).expect("prepared");
    shoal_agent::netsetup::prepare(&net, service_cidr).expect("idempotent");
    assert_eq!(ns.sh("cat /proc/sys/net/ipv4/ip_forward").trim(), "1");
    let route = ns.sh("ip -4 route get 10.96.0.10");
    assert!(
        route.contains(shoal_agent::netsetup::SERVICE_LINK),
        "{route}"
    );

    assert!(
        matches!(net.link_state("up0"), Ok(LinkState::Down(m)) if m.contains("does not exist"))
    );
    ns.sh("ip link add up0 type veth peer name far0 && ip addr add 10.9.0.1/24 dev up0");
    assert!(matches!(net.link_state("up0"), Ok(LinkState::Down(m)) if m.contains("is down")));
    ns.sh("ip link set up0 up");
    // Operational state follows carrier asynchronously (the kernel's linkwatch).
    eventually(
        "no carrier while the far end is down",
        || matches!(net.link_state("up0"), Ok(LinkState::Down(m)) if m.contains("no carrier")),
    );
    ns.sh("ip link set far0 up");
    eventually("up with carrier", || {
        net.link_state("up0").ok() == Some(LinkState::Up)
    });
    ns.sh("ip link set far0 down");
    eventually(
        "carrier lost again",
        || matches!(net.link_state("up0"), Ok(LinkState::Down(m)) if m.contains("no carrier")),
    );
    assert_eq!(
        net.ipv4_of("up0").unwrap(),
        Some("10.9.0.1".parse().unwrap())
    );
    // The agent's own namespace is untouched: no such link here.
    assert!(matches!(
        HostNet::new(None).link_state("up0"),
        Ok(LinkState::Down(_))
    ));
}

#[test]
fn the_service_range_matches_the_api() {
    let (base, bits) = shoal_api::service_ips::SERVICE_CIDR;
    assert_eq!(
        ProxyConfig::default().service_cidr,
        format!("{base}/{bits}")
    );
}
