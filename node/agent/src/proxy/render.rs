//! Proxy rules → one nft script that replaces the table `ip shoal` in a single transaction
//! (`nft -f` applies a whole file atomically: connections see the old rules or the new, never
//! a table half rebuilt). Pure.
//!
//! Packet path of a new connection to ClusterIP:port:
//! - `filter-prerouting` / `filter-output` (before NAT): a Service port with no ready
//!   backend is refused — TCP reset, or ICMP port unreachable — instead of timing out.
//! - `nat-prerouting` (from pods) / `nat-output` (from the host itself): one verdict-map
//!   lookup on (address, protocol, port) jumps to that port's chain, which DNATs to a backend
//!   picked by `numgen random` (or `jhash ip saddr` with ClientIP affinity). Conntrack keeps
//!   the choice for the rest of the connection and rewrites the replies.
//! - `nat-postrouting`: a pod's connection DNATed to a pod on this node's bridge is SNATed
//!   to the bridge address, so the reply comes back through the host (to be un-DNATed)
//!   instead of straight to the client over the bridge. The match is by addresses (pod CIDR
//!   to pod CIDR): with br_netfilter such a packet may be bridged rather than routed, and
//!   its output interface is then the bridge port, not the bridge.

use std::fmt::Write;
use std::net::Ipv4Addr;

use shoal_node::net::Ipv4Cidr;

use super::rules::{Affinity, Backend, PortRule, Protocol};

pub const TABLE: &str = "shoal";

/// This node's pod network, for the hairpin rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeNet {
    pub pod_cidr: Ipv4Cidr,
}

impl NodeNet {
    fn gateway(&self) -> Ipv4Addr {
        self.pod_cidr.gateway()
    }
}

/// Text safe inside an nft double-quoted comment (names are DNS labels already; this keeps
/// a malformed object from breaking the script).
fn comment(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || "./:-_".contains(*c))
        .take(120)
        .collect()
}

fn key(r: &PortRule) -> String {
    format!("{} . {} . {}", r.cluster_ip, r.protocol.nft(), r.port)
}

fn target(b: &Backend) -> String {
    format!("{} . {}", b.ip, b.port)
}

/// A stable per-port hash seed, so ClientIP affinity survives re-applying the same rules.
fn seed(r: &PortRule) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for byte in key(r).bytes() {
        h = (h ^ byte as u32).wrapping_mul(0x0100_0193);
    }
    h
}

fn dnat(r: &PortRule) -> String {
    let proto = r.protocol.nft();
    let n = r.backends.len();
    if n == 1 {
        let b = &r.backends[0];
        return format!("meta l4proto {proto} dnat to {}:{}", b.ip, b.port);
    }
    let picker = match r.affinity {
        Affinity::None => format!("numgen random mod {n}"),
        Affinity::ClientIp => format!("jhash ip saddr mod {n} seed 0x{:08x}", seed(r)),
    };
    let map: Vec<String> = r
        .backends
        .iter()
        .enumerate()
        .map(|(i, b)| format!("{i} : {}", target(b)))
        .collect();
    format!(
        "meta l4proto {proto} dnat to {picker} map {{ {} }}",
        map.join(", ")
    )
}

fn elements(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!("\t\telements = {{ {} }}\n", items.join(", "))
    }
}

/// The whole script. `rules` must hold each (ClusterIP, protocol, port) once (see
/// [`super::rules::all_rules`]).
pub fn render(rules: &[PortRule], node: &NodeNet) -> String {
    let mut served = Vec::new();
    let mut refused = Vec::new();
    let mut chains = String::new();
    for r in rules {
        if r.backends.is_empty() {
            refused.push(key(r));
            continue;
        }
        let chain = format!("svc-{}", served.len());
        served.push(format!("{} : goto {chain}", key(r)));
        let _ = write!(
            chains,
            "\tchain {chain} {{\n\t\t{} comment \"{}\"\n\t}}\n",
            dnat(r),
            comment(&r.name)
        );
    }
    let pods = node.pod_cidr;
    let mut s = String::new();
    // Creating the table first makes the delete valid on a node that never had it.
    let _ = writeln!(
        s,
        "table ip {TABLE}\ndelete table ip {TABLE}\ntable ip {TABLE} {{"
    );
    let _ = write!(
        s,
        "\tset no-endpoints {{\n\t\ttype ipv4_addr . inet_proto . inet_service\n{}\t}}\n",
        elements(&refused)
    );
    let _ = write!(
        s,
        "\tmap service-ports {{\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n{}\t}}\n",
        elements(&served)
    );
    // Filter chains run before NAT (dstnat - 10), on new connections only.
    s.push_str(
        "\tchain filter-prerouting {\n\t\ttype filter hook prerouting priority -110; policy accept;\n\t\tct state new jump reject-no-endpoints\n\t}\n",
    );
    s.push_str(
        "\tchain filter-output {\n\t\ttype filter hook output priority -110; policy accept;\n\t\tct state new jump reject-no-endpoints\n\t}\n",
    );
    let _ = write!(
        s,
        "\tchain reject-no-endpoints {{\n\t\tip daddr . meta l4proto . th dport @no-endpoints meta l4proto {tcp} reject with tcp reset\n\t\tip daddr . meta l4proto . th dport @no-endpoints reject with icmp type port-unreachable\n\t}}\n",
        tcp = Protocol::Tcp.nft()
    );
    s.push_str(
        "\tchain nat-prerouting {\n\t\ttype nat hook prerouting priority -100; policy accept;\n\t\tjump services\n\t}\n",
    );
    s.push_str(
        "\tchain nat-output {\n\t\ttype nat hook output priority -100; policy accept;\n\t\tjump services\n\t}\n",
    );
    s.push_str(
        "\tchain services {\n\t\tip daddr . meta l4proto . th dport vmap @service-ports\n\t}\n",
    );
    let _ = write!(
        s,
        "\tchain nat-postrouting {{\n\t\ttype nat hook postrouting priority 100; policy accept;\n\t\tct status dnat ip saddr {pods} ip daddr {pods} snat to {gw} comment \"hairpin\"\n\t}}\n",
        gw = node.gateway()
    );
    s.push_str(&chains);
    s.push_str("}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(ip: &str, proto: Protocol, port: u16, backends: &[(&str, u16)]) -> PortRule {
        PortRule {
            name: format!("default/svc-{port}:{port}"),
            cluster_ip: ip.parse().unwrap(),
            protocol: proto,
            port,
            affinity: Affinity::None,
            backends: backends
                .iter()
                .map(|(ip, port)| Backend {
                    ip: ip.parse().unwrap(),
                    port: *port,
                })
                .collect(),
        }
    }

    fn node() -> NodeNet {
        NodeNet {
            pod_cidr: "10.1.2.0/24".parse().unwrap(),
        }
    }

    #[test]
    fn replaces_the_table_in_one_script() {
        let text = render(&[], &node());
        assert!(text.starts_with("table ip shoal\ndelete table ip shoal\ntable ip shoal {\n"));
        assert!(
            !text.contains("elements"),
            "empty sets list no elements: {text}"
        );
        assert!(text
            .contains("ct status dnat ip saddr 10.1.2.0/24 ip daddr 10.1.2.0/24 snat to 10.1.2.1"));
        assert_eq!(text.matches('{').count(), text.matches('}').count());
    }

    #[test]
    fn spreads_over_ready_backends_and_refuses_ports_without_any() {
        let rules = [
            rule(
                "10.96.0.5",
                Protocol::Tcp,
                80,
                &[("10.1.2.3", 8080), ("10.3.0.4", 8080)],
            ),
            rule("10.96.0.6", Protocol::Udp, 53, &[("10.1.2.9", 5353)]),
            rule("10.96.0.7", Protocol::Tcp, 443, &[]),
        ];
        let text = render(&rules, &node());
        assert!(text.contains(
            "elements = { 10.96.0.5 . tcp . 80 : goto svc-0, 10.96.0.6 . udp . 53 : goto svc-1 }"
        ), "{text}");
        assert!(
            text.contains("elements = { 10.96.0.7 . tcp . 443 }"),
            "{text}"
        );
        assert!(text.contains(
            "meta l4proto tcp dnat to numgen random mod 2 map { 0 : 10.1.2.3 . 8080, 1 : 10.3.0.4 . 8080 } comment \"default/svc-80:80\""
        ), "{text}");
        assert!(
            text.contains("meta l4proto udp dnat to 10.1.2.9:5353"),
            "{text}"
        );
        assert!(!text.contains("svc-2"), "a refused port has no chain");
    }

    #[test]
    fn client_ip_affinity_hashes_the_source_with_a_stable_seed() {
        let mut r = rule(
            "10.96.0.5",
            Protocol::Tcp,
            80,
            &[("10.1.2.3", 8080), ("10.1.2.4", 8080), ("10.1.2.5", 8080)],
        );
        r.affinity = Affinity::ClientIp;
        let a = render(std::slice::from_ref(&r), &node());
        assert!(a.contains("dnat to jhash ip saddr mod 3 seed 0x"), "{a}");
        assert_eq!(a, render(&[r], &node()), "same rules, same script");
    }

    #[test]
    fn comments_cannot_break_the_script() {
        let mut r = rule("10.96.0.5", Protocol::Tcp, 80, &[("10.1.2.3", 80)]);
        r.name = "ns/we\"ird\n}name:80".into();
        let text = render(&[r], &node());
        assert!(text.contains("comment \"ns/weirdname:80\""), "{text}");
    }
}
