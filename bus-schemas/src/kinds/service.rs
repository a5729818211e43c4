//! Service: a stable virtual IP (or DNS name) in front of the pods a selector picks.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::common::{
    forbidden, immutable, in_range, invalid_value, is_default, is_false, is_zero_i32,
    not_supported, validate_label_map, validate_named_port,
};
use super::intstr::IntOrString;
use crate::meta::{Condition, ObjectMeta};
use crate::resource::KindInfo;
use crate::status::Cause;
use crate::validation::dns1123_subdomain;

/// A stable virtual IP and DNS name for a set of pods, chosen by label.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Service {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ServiceSpec,
    #[serde(default)]
    pub status: ServiceStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// The ports the Service exposes, each forwarded to a port of the selected pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ServicePort>,
    /// Pods with all these labels back the Service. Empty: endpoints are managed by hand.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub selector: BTreeMap<String, String>,
    /// Allocated by the API when empty; `None` makes the Service headless.
    #[serde(
        default,
        rename = "clusterIP",
        skip_serializing_if = "String::is_empty"
    )]
    pub cluster_ip: String,
    #[serde(default, rename = "clusterIPs", skip_serializing_if = "Vec::is_empty")]
    pub cluster_ips: Vec<String>,
    /// `ClusterIP` or `ExternalName` in Shoal; `NodePort` and `LoadBalancer` are rejected.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// The DNS name an ExternalName Service is a CNAME for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub external_name: String,
    /// `None` or `ClientIP`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session_affinity: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity_config: Option<SessionAffinityConfig>,
    /// Publish addresses of pods that are not ready (peer discovery for stateful sets).
    #[serde(default, skip_serializing_if = "is_false")]
    pub publish_not_ready_addresses: bool,
    /// Accepted for manifests exported from Kubernetes; Shoal is IPv4 single-stack.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_families: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ip_family_policy: String,
    /// `Cluster` or `Local`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub internal_traffic_policy: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// Required when the Service has more than one port; DNS SRV records use it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app_protocol: String,
    /// The port the Service listens on.
    #[serde(default)]
    pub port: i32,
    /// The pods' port, by number or by container port name; defaults to `port`.
    #[serde(default, skip_serializing_if = "IntOrString::is_zero")]
    pub target_port: IntOrString,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub node_port: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionAffinityConfig {
    #[serde(default, rename = "clientIP", skip_serializing_if = "Option::is_none")]
    pub client_ip: Option<ClientIpConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClientIpConfig {
    /// 1-86400; 10800 (3 hours) by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    #[serde(default, skip_serializing_if = "is_default")]
    pub load_balancer: LoadBalancerStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<LoadBalancerIngress>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerIngress {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ip: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
}

crate::spec_status_resource!(
    Service,
    KindInfo {
        kind: "Service",
        api_version: "v1",
        plural: "services",
        short_names: &["svc"],
        namespaced: true,
        has_status: true,
    }
);

/// The clusterIP value that makes a Service headless: DNS returns the pod IPs directly.
pub const CLUSTER_IP_NONE: &str = "None";
const SUPPORTED_TYPES: &[&str] = &["ClusterIP", "ExternalName"];
const SESSION_AFFINITIES: &[&str] = &["None", "ClientIP"];
const DEFAULT_CLIENT_IP_TIMEOUT_SECONDS: i32 = 10800;
const MAX_CLIENT_IP_TIMEOUT_SECONDS: i32 = 86400;

impl Service {
    pub fn is_headless(&self) -> bool {
        self.spec.cluster_ip == CLUSTER_IP_NONE
    }

    /// Whether the Service selects pods with `labels` (an empty selector selects none: such
    /// Services have hand-written Endpoints).
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.spec.selector.is_empty()
            && self
                .spec
                .selector
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
    }

    /// Keeps the allocated clusterIP(s) when an update leaves them empty, as Kubernetes'
    /// patchAllocatedValues does: a re-applied manifest never names the allocated IP.
    /// Call before `validate_update`.
    pub fn carry_allocated_from(&mut self, old: &Service) {
        if self.spec.cluster_ip.is_empty() && self.spec.type_ != "ExternalName" {
            self.spec.cluster_ip.clone_from(&old.spec.cluster_ip);
            if self.spec.cluster_ips.is_empty() {
                self.spec.cluster_ips.clone_from(&old.spec.cluster_ips);
            }
        }
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let spec = &self.spec;
        let mut causes = Vec::new();
        let external = spec.type_ == "ExternalName";
        if !spec.type_.is_empty() {
            causes.extend(not_supported("spec.type", &spec.type_, SUPPORTED_TYPES));
        }
        if external {
            if spec.external_name.is_empty() {
                causes.push(Cause::required("spec.externalName"));
            } else if let Err(e) = dns1123_subdomain(spec.external_name.trim_end_matches('.')) {
                causes.push(invalid_value("spec.externalName", &spec.external_name, &e));
            }
            if !spec.cluster_ip.is_empty() {
                causes.push(forbidden(
                    "spec.clusterIP",
                    "may not be set for ExternalName services",
                ));
            }
        } else if !spec.external_name.is_empty() {
            causes.push(forbidden(
                "spec.externalName",
                "may only be set for ExternalName services",
            ));
        }
        causes.extend(validate_cluster_ips(spec));
        if spec.ports.is_empty() && !external && !self.is_headless() {
            causes.push(Cause::required("spec.ports"));
        }
        causes.extend(validate_ports(&spec.ports));
        causes.extend(validate_label_map(&spec.selector, "spec.selector"));

        if !spec.session_affinity.is_empty() {
            let at = "spec.sessionAffinity";
            causes.extend(not_supported(
                at,
                &spec.session_affinity,
                SESSION_AFFINITIES,
            ));
        }
        if let Some(config) = &spec.session_affinity_config {
            let at = "spec.sessionAffinityConfig";
            if spec.session_affinity != "ClientIP" {
                causes.push(forbidden(
                    at,
                    "must not be set when `sessionAffinity` is not ClientIP",
                ));
            }
            let timeout = config.client_ip.as_ref().and_then(|c| c.timeout_seconds);
            if let Some(timeout) = timeout {
                let at = format!("{at}.clientIP.timeoutSeconds");
                causes.extend(in_range(timeout, 1, MAX_CLIENT_IP_TIMEOUT_SECONDS, &at));
            }
        }
        for (i, family) in spec.ip_families.iter().enumerate() {
            causes.extend(not_supported(
                &format!("spec.ipFamilies[{i}]"),
                family,
                &["IPv4"],
            ));
        }
        if !spec.ip_family_policy.is_empty() {
            let at = "spec.ipFamilyPolicy";
            causes.extend(not_supported(at, &spec.ip_family_policy, &["SingleStack"]));
        }
        if !spec.internal_traffic_policy.is_empty() {
            let at = "spec.internalTrafficPolicy";
            causes.extend(not_supported(
                at,
                &spec.internal_traffic_policy,
                &["Cluster", "Local"],
            ));
        }
        causes
    }

    /// The clusterIP is the Service's identity for every client that cached it.
    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let mut causes = Vec::new();
        let both_cluster = self.spec.type_ != "ExternalName" && old.spec.type_ != "ExternalName";
        if both_cluster
            && !old.spec.cluster_ip.is_empty()
            && self.spec.cluster_ip != old.spec.cluster_ip
        {
            causes.push(immutable("spec.clusterIP", &self.spec.cluster_ip));
        }
        causes
    }

    fn default_fields(&mut self) {
        let spec = &mut self.spec;
        if spec.type_.is_empty() {
            spec.type_ = "ClusterIP".into();
        }
        if spec.session_affinity.is_empty() {
            spec.session_affinity = "None".into();
        }
        if spec.session_affinity == "ClientIP" {
            let config = spec
                .session_affinity_config
                .get_or_insert_with(Default::default);
            let client = config.client_ip.get_or_insert_with(Default::default);
            client
                .timeout_seconds
                .get_or_insert(DEFAULT_CLIENT_IP_TIMEOUT_SECONDS);
        }
        for port in &mut spec.ports {
            if port.protocol.is_empty() {
                port.protocol = "TCP".into();
            }
            if port.target_port.is_zero() {
                port.target_port = IntOrString::Int(port.port);
            }
        }
        if spec.cluster_ips.is_empty() && !spec.cluster_ip.is_empty() {
            spec.cluster_ips = vec![spec.cluster_ip.clone()];
        }
    }

    fn kind_field_value(&self, field: &str) -> Option<String> {
        match field {
            "spec.clusterIP" => Some(self.spec.cluster_ip.clone()),
            "spec.type" => Some(self.spec.type_.clone()),
            _ => None,
        }
    }
}

fn validate_cluster_ip(value: &str, path: &str) -> Option<Cause> {
    let ok = value.is_empty() || value == CLUSTER_IP_NONE || value.parse::<Ipv4Addr>().is_ok();
    (!ok).then(|| invalid_value(path, value, "must be empty, 'None' or a valid IPv4 address"))
}

fn validate_cluster_ips(spec: &ServiceSpec) -> Vec<Cause> {
    let mut causes: Vec<Cause> = validate_cluster_ip(&spec.cluster_ip, "spec.clusterIP")
        .into_iter()
        .collect();
    for (i, ip) in spec.cluster_ips.iter().enumerate() {
        causes.extend(validate_cluster_ip(ip, &format!("spec.clusterIPs[{i}]")));
    }
    if spec.cluster_ips.len() > 1 {
        causes.push(invalid_value(
            "spec.clusterIPs",
            &spec.cluster_ips,
            "may hold at most one IP (single-stack)",
        ));
    }
    if let Some(first) = spec.cluster_ips.first() {
        if *first != spec.cluster_ip {
            causes.push(invalid_value(
                "spec.clusterIPs[0]",
                first,
                "must match `clusterIP`",
            ));
        }
    }
    causes
}

fn validate_ports(ports: &[ServicePort]) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut names = BTreeSet::new();
    let mut port_protocols = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let at = format!("spec.ports[{i}]");
        causes.extend(validate_named_port(
            &at,
            &port.name,
            port.port,
            &port.protocol,
            ports.len() > 1,
            &mut names,
        ));
        if !port.target_port.is_zero() {
            causes.extend(port.target_port.validate_port(&format!("{at}.targetPort")));
        }
        if port.node_port != 0 {
            causes.push(forbidden(
                &format!("{at}.nodePort"),
                "may not be used when `type` is 'ClusterIP'",
            ));
        }
        if !port_protocols.insert((port.port, port.protocol.as_str())) {
            let value = format!("{}/{}", port.port, port.protocol);
            causes.push(Cause::duplicate(at, &value));
        }
    }
    causes
}
