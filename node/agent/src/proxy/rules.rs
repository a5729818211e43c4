//! Services + Endpoints → what the proxy must do for each ClusterIP port: the ready backends
//! to spread new connections over (none: reject), and how to pick one. Pure.

use std::net::Ipv4Addr;

use bus_schemas::kinds::endpoints::EndpointSubset;
use bus_schemas::kinds::intstr::IntOrString;
use bus_schemas::kinds::service::ServicePort;
use bus_schemas::kinds::{Endpoints, Service};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// A Service or endpoint port's protocol; empty means TCP, as the API defaults it.
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "" | "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// The name nft uses for the protocol.
    pub fn nft(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Backend {
    pub ip: Ipv4Addr,
    pub port: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affinity {
    None,
    /// The same client address always lands on the same backend, while the backend set
    /// stays the same (a hash of the address, so there is no timeout to honour).
    ClientIp,
}

/// One ClusterIP port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortRule {
    /// `namespace/name:port` (the port's name, or its number when unnamed): for comments and
    /// log lines.
    pub name: String,
    pub cluster_ip: Ipv4Addr,
    pub protocol: Protocol,
    pub port: u16,
    pub affinity: Affinity,
    /// Ready backends, sorted and without duplicates. Empty: connections are refused.
    pub backends: Vec<Backend>,
}

/// A Service (or one of its ports) the proxy cannot serve, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Skipped {
    pub service: String,
    pub reason: String,
}

fn port_number(n: i32) -> Option<u16> {
    u16::try_from(n).ok().filter(|p| *p != 0)
}

/// The backend port of one subset for a Service port. Endpoint ports carry the Service
/// port's name (the endpoints controller already resolved a named targetPort against each
/// pod's container ports), so the match is by name and protocol; a subset that lists no
/// ports at all (hand-written Endpoints) falls back to a numeric targetPort.
fn subset_port(sp: &ServicePort, protocol: Protocol, subset: &EndpointSubset) -> Option<u16> {
    if subset.ports.is_empty() {
        return match &sp.target_port {
            IntOrString::Int(0) => port_number(sp.port),
            IntOrString::Int(n) => port_number(*n),
            IntOrString::String(_) => None,
        };
    }
    subset
        .ports
        .iter()
        .find(|p| p.name == sp.name && Protocol::parse(&p.protocol) == Some(protocol))
        .and_then(|p| port_number(p.port))
}

/// The proxy rules of one Service. Headless and ExternalName Services, and Services whose
/// ClusterIP is not allocated yet, have none (and are not "skipped": there is nothing to do).
pub fn service_rules(
    svc: &Service,
    endpoints: Option<&Endpoints>,
    skipped: &mut Vec<Skipped>,
) -> Vec<PortRule> {
    let spec = &svc.spec;
    let key = format!("{}/{}", svc.metadata.namespace, svc.metadata.name);
    if svc.is_headless() || spec.type_ == "ExternalName" || spec.cluster_ip.is_empty() {
        return Vec::new();
    }
    let Ok(cluster_ip) = spec.cluster_ip.parse::<Ipv4Addr>() else {
        skipped.push(Skipped {
            service: key,
            reason: format!("clusterIP {:?} is not an IPv4 address", spec.cluster_ip),
        });
        return Vec::new();
    };
    let affinity = if spec.session_affinity == "ClientIP" {
        Affinity::ClientIp
    } else {
        Affinity::None
    };
    let mut rules = Vec::new();
    for sp in &spec.ports {
        let label = if sp.name.is_empty() {
            sp.port.to_string()
        } else {
            sp.name.clone()
        };
        let name = format!("{key}:{label}");
        let (Some(protocol), Some(port)) = (Protocol::parse(&sp.protocol), port_number(sp.port))
        else {
            skipped.push(Skipped {
                service: name,
                reason: format!("unsupported port {}/{}", sp.port, sp.protocol),
            });
            continue;
        };
        let mut backends: Vec<Backend> = endpoints
            .map(|ep| ep.subsets.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|subset| Some((subset, subset_port(sp, protocol, subset)?)))
            .flat_map(|(subset, port)| {
                subset.addresses.iter().filter_map(move |a| {
                    Some(Backend {
                        ip: a.ip.parse().ok()?,
                        port,
                    })
                })
            })
            .collect();
        backends.sort();
        backends.dedup();
        rules.push(PortRule {
            name,
            cluster_ip,
            protocol,
            port,
            affinity,
            backends,
        });
    }
    rules
}

/// Every Service's rules, ordered by (ClusterIP, protocol, port) so equal inputs render
/// equal rulesets. A second Service claiming the same ClusterIP port is skipped.
pub fn all_rules<'a>(
    services: impl IntoIterator<Item = (&'a Service, Option<&'a Endpoints>)>,
) -> (Vec<PortRule>, Vec<Skipped>) {
    let mut skipped = Vec::new();
    let mut rules: Vec<PortRule> = services
        .into_iter()
        .flat_map(|(svc, ep)| service_rules(svc, ep, &mut skipped))
        .collect();
    rules.sort_by(|a, b| {
        (a.cluster_ip, a.protocol, a.port, &a.name).cmp(&(
            b.cluster_ip,
            b.protocol,
            b.port,
            &b.name,
        ))
    });
    let mut unique: Vec<PortRule> = Vec::with_capacity(rules.len());
    for rule in rules {
        match unique.last() {
            Some(prev)
                if (prev.cluster_ip, prev.protocol, prev.port)
                    == (rule.cluster_ip, rule.protocol, rule.port) =>
            {
                skipped.push(Skipped {
                    reason: format!(
                        "{}:{}/{} is already served for {}",
                        rule.cluster_ip,
                        rule.port,
                        rule.protocol.nft(),
                        prev.name
                    ),
                    service: rule.name,
                });
            }
            _ => unique.push(rule),
        }
    }
    skipped.sort();
    (unique, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: serde_json::Value) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": spec
        }))
        .unwrap()
    }

    fn ep(subsets: serde_json::Value) -> Endpoints {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "subsets": subsets
        }))
        .unwrap()
    }

    fn b(ip: &str, port: u16) -> Backend {
        Backend {
            ip: ip.parse().unwrap(),
            port,
        }
    }

    #[test]
    fn ready_addresses_only_with_ports_resolved_by_name() {
        let s = svc(serde_json::json!({
            "clusterIP": "10.96.0.5",
            "ports": [
                {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                {"name": "dns", "port": 53, "targetPort": 5353, "protocol": "UDP"}
            ]
        }));
        let e = ep(serde_json::json!([
            {"addresses": [{"ip": "10.1.0.3"}, {"ip": "10.1.0.2"}],
             "notReadyAddresses": [{"ip": "10.1.0.9"}],
             "ports": [{"name": "http", "port": 8080, "protocol": "TCP"},
                       {"name": "dns", "port": 5353, "protocol": "UDP"}]},
            {"addresses": [{"ip": "10.2.0.7"}],
             "ports": [{"name": "http", "port": 9090, "protocol": "TCP"}]}
        ]));
        let mut skipped = Vec::new();
        let rules = service_rules(&s, Some(&e), &mut skipped);
        assert!(skipped.is_empty());
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].name, "default/web:http");
        assert_eq!((rules[0].protocol, rules[0].port), (Protocol::Tcp, 80));
        assert_eq!(
            rules[0].backends,
            vec![
                b("10.1.0.2", 8080),
                b("10.1.0.3", 8080),
                b("10.2.0.7", 9090)
            ]
        );
        assert_eq!((rules[1].protocol, rules[1].port), (Protocol::Udp, 53));
        assert_eq!(
            rules[1].backends,
            vec![b("10.1.0.2", 5353), b("10.1.0.3", 5353)],
            "the second subset serves no dns port"
        );
        assert_eq!(rules[0].affinity, Affinity::None);
    }

    #[test]
    fn no_endpoints_means_no_backends_and_portless_subsets_use_numeric_target() {
        let s = svc(serde_json::json!({
            "clusterIP": "10.96.0.6", "sessionAffinity": "ClientIP",
            "ports": [{"port": 80, "targetPort": 8080}]
        }));
        let mut skipped = Vec::new();
        let rules = service_rules(&s, None, &mut skipped);
        assert_eq!(rules.len(), 1);
        assert!(rules[0].backends.is_empty());
        assert_eq!(rules[0].name, "default/web:80");
        assert_eq!(rules[0].affinity, Affinity::ClientIp);
        let e = ep(serde_json::json!([{"addresses": [{"ip": "10.1.0.2"}]}]));
        let rules = service_rules(&s, Some(&e), &mut skipped);
        assert_eq!(rules[0].backends, vec![b("10.1.0.2", 8080)]);
    }

    #[test]
    fn headless_external_unallocated_and_bad_services() {
        let mut skipped = Vec::new();
        for spec in [
            serde_json::json!({"clusterIP": "None", "ports": [{"port": 80}]}),
            serde_json::json!({"type": "ExternalName", "externalName": "example.com"}),
            serde_json::json!({"ports": [{"port": 80}]}),
        ] {
            assert!(service_rules(&svc(spec), None, &mut skipped).is_empty());
        }
        assert!(skipped.is_empty());
        let bad = svc(serde_json::json!({"clusterIP": "fd00::1", "ports": [{"port": 80}]}));
        assert!(service_rules(&bad, None, &mut skipped).is_empty());
        let odd = svc(serde_json::json!({"clusterIP": "10.96.0.7",
            "ports": [{"port": 80, "protocol": "ICMP"}, {"port": 81}]}));
        let rules = service_rules(&odd, None, &mut skipped);
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].port, 81);
        assert_eq!(skipped.len(), 2, "{skipped:?}");
    }

    #[test]
    fn all_rules_are_ordered_and_a_duplicate_clusterip_port_is_skipped() {
        let mut a = svc(serde_json::json!({"clusterIP": "10.96.0.9", "ports": [{"port": 80}]}));
        a.metadata.name = "a".into();
        let mut z = svc(serde_json::json!({"clusterIP": "10.96.0.2", "ports": [{"port": 80}]}));
        z.metadata.name = "z".into();
        let mut dup = a.clone();
        dup.metadata.name = "dup".into();
        let (rules, skipped) = all_rules([(&a, None), (&z, None), (&dup, None)]);
        let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["default/z:80", "default/a:80"]);
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].service, "default/dup:80");
    }
}
