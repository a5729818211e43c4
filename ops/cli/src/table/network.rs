//! Rows of how pods are reached: Services and their Endpoints.

use bus_schemas::kinds::{Endpoints, Service};
use bus_schemas::Time;

use super::cells::{age, map_text, or_none};
use super::{Column, Row};

/// kubectl shows this many endpoints, then counts the rest.
const ENDPOINTS_SHOWN: usize = 3;

impl Row for Service {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("TYPE"),
        Column::normal("CLUSTER-IP"),
        Column::normal("EXTERNAL-IP"),
        Column::normal("PORT(S)"),
        Column::normal("AGE"),
        Column::wide("SELECTOR"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        vec![
            self.metadata.name.clone(),
            or_none(&self.spec.type_),
            or_none(&self.spec.cluster_ip),
            "<none>".into(),
            service_ports(self),
            age(self.metadata.creation_timestamp, now),
            map_text(&self.spec.selector),
        ]
    }
}

/// `80/TCP,53/UDP`; a port without a protocol is TCP, Kubernetes' default.
fn service_ports(svc: &Service) -> String {
    let parts: Vec<String> = svc
        .spec
        .ports
        .iter()
        .map(|p| {
            let protocol = if p.protocol.is_empty() {
                "TCP"
            } else {
                &p.protocol
            };
            format!("{}/{protocol}", p.port)
        })
        .collect();
    or_none(&parts.join(","))
}

impl Row for Endpoints {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("ENDPOINTS"),
        Column::normal("AGE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        vec![
            self.metadata.name.clone(),
            endpoints_text(self),
            age(self.metadata.creation_timestamp, now),
        ]
    }
}

/// Ready addresses as `ip:port`, every port of their subset; the first few, then `+ N more...`.
fn endpoints_text(endpoints: &Endpoints) -> String {
    let mut parts = Vec::new();
    for subset in &endpoints.subsets {
        for address in &subset.addresses {
            if subset.ports.is_empty() {
                parts.push(address.ip.clone());
            }
            for port in &subset.ports {
                parts.push(format!("{}:{}", address.ip, port.port));
            }
        }
    }
    let mut text = or_none(&parts[..parts.len().min(ENDPOINTS_SHOWN)].join(","));
    let more = parts.len().saturating_sub(ENDPOINTS_SHOWN);
    if more > 0 {
        text.push_str(&format!(" + {more} more..."));
    }
    text
}
