//! Endpoints: the pod addresses behind a Service, written by the endpoints controller.

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::common::{invalid_value, validate_named_port, ObjectReference};
use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;
use crate::validation::{dns1123_label, dns1123_subdomain};

/// The addresses and ports that back a Service, kept by the endpoints controller for Services
/// with a selector.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Endpoints {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subsets: Vec<EndpointSubset>,
}

/// Addresses that all expose the same ports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EndpointSubset {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<EndpointAddress>,
    /// Pods not ready yet (or failing readiness): not load-balanced to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_ready_addresses: Vec<EndpointAddress>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<EndpointPort>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EndpointAddress {
    #[serde(default)]
    pub ip: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The pod behind the address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<ObjectReference>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EndpointPort {
    /// Matches the Service port's name; optional when there is only one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default)]
    pub port: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app_protocol: String,
}

crate::body_resource!(
    Endpoints,
    KindInfo {
        kind: "Endpoints",
        api_version: "v1",
        plural: "endpoints",
        short_names: &["ep"],
        namespaced: true,
        has_status: false,
    }
);

impl EndpointAddress {
    fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        let at = format!("{path}.ip");
        if self.ip.is_empty() {
            causes.push(Cause::required(at));
        } else {
            match self.ip.parse::<IpAddr>() {
                Err(_) => causes.push(invalid_value(&at, &self.ip, "must be a valid IP address")),
                // Traffic to these would never reach a pod (Kubernetes rejects them too).
                Ok(ip) if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() => {
                    let detail = "may not be a loopback, unspecified or multicast address";
                    causes.push(invalid_value(&at, &self.ip, detail));
                }
                Ok(_) => {}
            }
        }
        if !self.hostname.is_empty() {
            if let Err(e) = dns1123_label(&self.hostname) {
                causes.push(invalid_value(
                    &format!("{path}.hostname"),
                    &self.hostname,
                    &e,
                ));
            }
        }
        if let Some(node) = self.node_name.as_deref().filter(|n| !n.is_empty()) {
            if let Err(e) = dns1123_subdomain(node) {
                causes.push(invalid_value(&format!("{path}.nodeName"), node, &e));
            }
        }
        causes
    }
}

impl Endpoints {
    /// Every ready address, across subsets.
    pub fn ready_addresses(&self) -> impl Iterator<Item = &EndpointAddress> {
        self.subsets.iter().flat_map(|s| s.addresses.iter())
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let mut causes = Vec::new();
        for (s, subset) in self.subsets.iter().enumerate() {
            let at = format!("subsets[{s}]");
            let lists = [
                ("addresses", &subset.addresses),
                ("notReadyAddresses", &subset.not_ready_addresses),
            ];
            for (field, addresses) in lists {
                for (i, address) in addresses.iter().enumerate() {
                    causes.extend(address.validate(&format!("{at}.{field}[{i}]")));
                }
            }
            let mut names = BTreeSet::new();
            for (i, port) in subset.ports.iter().enumerate() {
                let port_at = format!("{at}.ports[{i}]");
                causes.extend(validate_named_port(
                    &port_at,
                    &port.name,
                    port.port,
                    &port.protocol,
                    subset.ports.len() > 1,
                    &mut names,
                ));
            }
        }
        causes
    }

    fn validate_update_fields(&self, _old: &Self) -> Vec<Cause> {
        Vec::new()
    }

    fn default_fields(&mut self) {
        for port in self.subsets.iter_mut().flat_map(|s| s.ports.iter_mut()) {
            if port.protocol.is_empty() {
                port.protocol = "TCP".into();
            }
        }
    }

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}
