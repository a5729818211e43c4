//! The records each object puts into the cluster domain. Pure functions of the objects.
//!
//! - A Service `web` in `default` always makes `web.default.svc.<domain>` exist. With a
//!   ClusterIP that name holds an A record of it, and each named port `http`/TCP an SRV record
//!   at `_http._tcp.web.default.svc.<domain>` pointing at the Service name. A headless Service
//!   (`clusterIP: None`) instead holds one A record per *ready* endpoint address, each endpoint
//!   gets a name of its own (`<hostname or a-b-c-d>.web.default.svc.<domain>`) and the SRV
//!   records point at those. An ExternalName Service is a CNAME.
//! - A pod with an IP makes `a-b-c-d.<ns>.pod.<domain>` exist, so that name answers only
//!   for addresses some pod really has (Kubernetes' "pods verified" mode).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use bus_schemas::kinds::{Endpoints, Pod, Service};
use shoal_bus::ObjectKey;

use crate::names::{dashed, Domain};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordData {
    A(Ipv4Addr),
    Srv(Srv),
    /// An absolute name outside the index (no trailing dot).
    Cname(String),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Srv {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    pub target: String,
    /// The target's address, sent along in the additional section so clients need no second
    /// query.
    pub glue: Option<Ipv4Addr>,
}

/// What puts records into the index: one Service (with its Endpoints), or one pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    Service(ObjectKey),
    Pod(ObjectKey),
}

/// The names a source makes exist, each with the records it puts there (possibly none: a
/// Service selecting nothing still exists).
pub type Contribution = BTreeMap<String, Vec<RecordData>>;

/// SRV weight when all targets are equal: RFC 2782 picks among equal weights uniformly.
const SRV_WEIGHT: u16 = 100;

pub fn service(domain: &Domain, svc: &Service, endpoints: Option<&Endpoints>) -> Contribution {
    let (ns, name) = (&svc.metadata.namespace, &svc.metadata.name);
    let owner = domain.service(ns, name);
    let mut out = Contribution::new();
    out.insert(owner.clone(), Vec::new());
    if svc.spec.type_ == "ExternalName" {
        let target = svc.spec.external_name.trim_end_matches('.');
        if !target.is_empty() {
            out.insert(owner, vec![RecordData::Cname(target.to_ascii_lowercase())]);
        }
        return out;
    }
    if svc.is_headless() {
        if let Some(ep) = endpoints {
            headless(domain, ns, name, &owner, ep, &mut out);
        }
        return out;
    }
    let cluster_ip = svc.spec.cluster_ip.parse::<Ipv4Addr>().ok();
    if let Some(ip) = cluster_ip {
        out.entry(owner.clone())
            .or_default()
            .push(RecordData::A(ip));
    }
    for port in &svc.spec.ports {
        let Ok(number) = u16::try_from(port.port) else {
            continue;
        };
        if port.name.is_empty() {
            continue;
        }
        let srv_owner = domain.service_port(&port.name, &protocol(&port.protocol), ns, name);
        out.entry(srv_owner).or_default().push(RecordData::Srv(Srv {
            priority: 0,
            weight: SRV_WEIGHT,
            port: number,
            target: owner.clone(),
            glue: cluster_ip,
        }));
    }
    out
}

fn headless(
    domain: &Domain,
    ns: &str,
    name: &str,
    owner: &str,
    ep: &Endpoints,
    out: &mut Contribution,
) {
    for subset in &ep.subsets {
        // Only ready addresses are published (the endpoints controller already moves
        // not-ready pods here when the Service asks for publishNotReadyAddresses).
        for address in &subset.addresses {
            let Ok(ip) = address.ip.parse::<Ipv4Addr>() else {
                continue;
            };
            let host = if address.hostname.is_empty() {
                dashed(ip)
            } else {
                address.hostname.to_ascii_lowercase()
            };
            let host_name = domain.endpoint(&host, ns, name);
            out.entry(owner.to_string())
                .or_default()
                .push(RecordData::A(ip));
            out.entry(host_name.clone())
                .or_default()
                .push(RecordData::A(ip));
            for port in &subset.ports {
                let Ok(number) = u16::try_from(port.port) else {
                    continue;
                };
                if port.name.is_empty() {
                    continue;
                }
                let srv_owner =
                    domain.service_port(&port.name, &protocol(&port.protocol), ns, name);
                out.entry(srv_owner).or_default().push(RecordData::Srv(Srv {
                    priority: 0,
                    weight: SRV_WEIGHT,
                    port: number,
                    target: host_name.clone(),
                    glue: Some(ip),
                }));
            }
        }
    }
}

fn protocol(p: &str) -> String {
    if p.is_empty() {
        "tcp".into()
    } else {
        p.to_ascii_lowercase()
    }
}

pub fn pod(domain: &Domain, pod: &Pod) -> Contribution {
    let mut out = Contribution::new();
    // A finished pod's address may already belong to a new pod.
    if pod.metadata.namespace.is_empty() || pod.is_terminal() {
        return out;
    }
    let ips = std::iter::once(pod.status.pod_ip.as_str())
        .chain(pod.status.pod_ips.iter().map(|p| p.ip.as_str()));
    for ip in ips.filter_map(|ip| ip.parse::<Ipv4Addr>().ok()) {
        out.insert(
            domain.pod(&pod.metadata.namespace, ip),
            vec![RecordData::A(ip)],
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain() -> Domain {
        Domain::new("cluster.local").unwrap()
    }

    fn svc(json: serde_json::Value) -> Service {
        serde_json::from_value(json).unwrap()
    }

    fn a(ip: &str) -> RecordData {
        RecordData::A(ip.parse().unwrap())
    }

    #[test]
    fn cluster_ip_service_has_its_ip_and_srv_per_named_port() {
        let s = svc(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.5", "ports": [
                {"name": "http", "port": 80, "protocol": "TCP"},
                {"name": "dns", "port": 53, "protocol": "UDP"}]}
        }));
        let c = service(&domain(), &s, None);
        assert_eq!(c["web.default.svc.cluster.local"], vec![a("10.96.0.5")]);
        let srv = &c["_http._tcp.web.default.svc.cluster.local"];
        assert_eq!(
            srv,
            &vec![RecordData::Srv(Srv {
                priority: 0,
                weight: 100,
                port: 80,
                target: "web.default.svc.cluster.local".into(),
                glue: Some("10.96.0.5".parse().unwrap()),
            })]
        );
        assert!(c.contains_key("_dns._udp.web.default.svc.cluster.local"));
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn headless_service_lists_ready_addresses_only() {
        let s = svc(serde_json::json!({
            "metadata": {"name": "db", "namespace": "prod"},
            "spec": {"clusterIP": "None", "ports": [{"name": "pg", "port": 5432}]}
        }));
        let ep: Endpoints = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db", "namespace": "prod"},
            "subsets": [{
                "addresses": [{"ip": "10.244.0.1", "hostname": "db-0"}, {"ip": "10.244.0.2"}],
                "notReadyAddresses": [{"ip": "10.244.0.3"}],
                "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}]
            }]
        }))
        .unwrap();
        let c = service(&domain(), &s, Some(&ep));
        assert_eq!(
            c["db.prod.svc.cluster.local"],
            vec![a("10.244.0.1"), a("10.244.0.2")]
        );
        assert_eq!(c["db-0.db.prod.svc.cluster.local"], vec![a("10.244.0.1")]);
        assert_eq!(
            c["10-244-0-2.db.prod.svc.cluster.local"],
            vec![a("10.244.0.2")]
        );
        assert!(!c.keys().any(|k| k.contains("10-244-0-3")));
        let srv = &c["_pg._tcp.db.prod.svc.cluster.local"];
        assert_eq!(srv.len(), 2);
        // Without Endpoints the name still exists, with no records.
        let bare = service(&domain(), &s, None);
        assert_eq!(bare.len(), 1);
        assert!(bare["db.prod.svc.cluster.local"].is_empty());
    }

    #[test]
    fn external_name_is_a_cname() {
        let s = svc(serde_json::json!({
            "metadata": {"name": "ext", "namespace": "default"},
            "spec": {"type": "ExternalName", "externalName": "Example.COM."}
        }));
        let c = service(&domain(), &s, None);
        assert_eq!(
            c["ext.default.svc.cluster.local"],
            vec![RecordData::Cname("example.com".into())]
        );
    }

    #[test]
    fn pods_are_named_by_address_unless_finished() {
        let mut p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns1"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"podIP": "10.244.1.9", "phase": "Running"}
        }))
        .unwrap();
        let c = pod(&domain(), &p);
        assert_eq!(c["10-244-1-9.ns1.pod.cluster.local"], vec![a("10.244.1.9")]);
        p.status.phase = "Succeeded".into();
        assert!(pod(&domain(), &p).is_empty());
    }
}
