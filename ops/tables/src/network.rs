//! Rows of how pods are reached: Services and their Endpoints.

use bus_schemas::kinds::{Endpoints, Service};
use bus_schemas::Time;

use super::cells::{age, map_text, or_none};
use super::{Cell, Column, Row};

/// kubectl shows this many endpoints, then counts the rest.
const ENDPOINTS_SHOWN: usize = 3;

impl Row for Service {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Type"),
        Column::normal("Cluster-IP"),
        Column::normal("External-IP"),
        Column::normal("Port(s)"),
        Column::normal("Age"),
        Column::wide("Selector"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        vec![
            self.metadata.name.as_str().into(),
            or_none(&self.spec.type_).into(),
            or_none(&self.spec.cluster_ip).into(),
            "<none>".into(),
            service_ports(self).into(),
            age(self.metadata.creation_timestamp, now).into(),
            map_text(&self.spec.selector).into(),
        ]
    }
}

/// `80/TCP,53/UDP`, `80:30080/TCP` with a node port; a port without a protocol is TCP,
/// Kubernetes' default.
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
            match p.node_port {
                0 => format!("{}/{protocol}", p.port),
                node_port => format!("{}:{node_port}/{protocol}", p.port),
            }
        })
        .collect();
    or_none(&parts.join(","))
}

impl Row for Endpoints {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Endpoints"),
        Column::normal("Age"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        vec![
            self.metadata.name.as_str().into(),
            endpoints_text(self).into(),
            age(self.metadata.creation_timestamp, now).into(),
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
