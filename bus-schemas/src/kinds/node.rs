//! Node: a machine running the node agent, with its capacity, taints and health.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::affinity::TAINT_EFFECTS;
use super::common::{immutable, invalid_value, is_default, is_false, not_supported, parse_cidr};
use crate::meta::{find_condition, Condition, ObjectMeta, Time};
use crate::quantity::Quantity;
use crate::resource::KindInfo;
use crate::status::Cause;
use crate::validation::{label_key, label_value};

/// A machine that runs pods, registered by its node agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Node {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: NodeSpec,
    #[serde(default)]
    pub status: NodeStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    #[serde(default, rename = "podCIDR", skip_serializing_if = "String::is_empty")]
    pub pod_cidr: String,
    #[serde(default, rename = "podCIDRs", skip_serializing_if = "Vec::is_empty")]
    pub pod_cidrs: Vec<String>,
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "String::is_empty"
    )]
    pub provider_id: String,
    /// Cordoned: the scheduler places no new pods here.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unschedulable: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    #[serde(default)]
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[serde(default)]
    pub effect: String,
    /// When a NoExecute taint was added, so tolerationSeconds can be counted from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<Time>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    /// Capacity minus what the system reserves: what the scheduler may hand out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,
    /// `Ready`, `MemoryPressure`, `DiskPressure`, `PIDPressure`, `NetworkUnavailable`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<NodeAddress>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub daemon_endpoints: NodeDaemonEndpoints,
    #[serde(default, skip_serializing_if = "is_default")]
    pub node_info: NodeSystemInfo,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ContainerImage>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeAddress {
    /// `Hostname`, `InternalIP`, `ExternalIP`, `InternalDNS` or `ExternalDNS`.
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub address: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeDaemonEndpoints {
    #[serde(default, skip_serializing_if = "is_default")]
    pub kubelet_endpoint: DaemonEndpoint,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "PascalCase")]
pub struct DaemonEndpoint {
    /// Kubernetes spells this one `Port`.
    #[serde(default)]
    pub port: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeSystemInfo {
    #[serde(
        default,
        rename = "machineID",
        skip_serializing_if = "String::is_empty"
    )]
    pub machine_id: String,
    #[serde(
        default,
        rename = "systemUUID",
        skip_serializing_if = "String::is_empty"
    )]
    pub system_uuid: String,
    #[serde(default, rename = "bootID", skip_serializing_if = "String::is_empty")]
    pub boot_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub os_image: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_runtime_version: String,
    /// The Shoal node agent's version, in Kubernetes' field.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubelet_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operating_system: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub architecture: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContainerImage {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    #[serde(default, skip_serializing_if = "super::common::is_zero_i64")]
    pub size_bytes: i64,
}

crate::spec_status_resource!(
    Node,
    KindInfo {
        kind: "Node",
        api_version: "v1",
        plural: "nodes",
        short_names: &["no"],
        namespaced: false,
        has_status: true,
    }
);

const ADDRESS_TYPES: &[&str] = &[
    "Hostname",
    "InternalIP",
    "ExternalIP",
    "InternalDNS",
    "ExternalDNS",
];

impl Node {
    /// The Ready condition is True: the node agent is healthy and heartbeating.
    pub fn is_ready(&self) -> bool {
        find_condition(&self.status.conditions, "Ready").is_some_and(Condition::is_true)
    }

    /// Not cordoned (taints are judged separately, against each pod's tolerations).
    pub fn is_schedulable(&self) -> bool {
        !self.spec.unschedulable
    }

    /// The first address of a type (`InternalIP`, `Hostname`, …).
    pub fn address(&self, type_: &str) -> Option<&str> {
        self.status
            .addresses
            .iter()
            .find(|a| a.type_ == type_)
            .map(|a| a.address.as_str())
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let mut causes = Vec::new();
        let mut seen = BTreeSet::new();
        for (i, taint) in self.spec.taints.iter().enumerate() {
            let at = format!("spec.taints[{i}]");
            if taint.key.is_empty() {
                causes.push(Cause::required(format!("{at}.key")));
            } else if let Err(e) = label_key(&taint.key) {
                causes.push(invalid_value(&format!("{at}.key"), &taint.key, &e));
            }
            if let Err(e) = label_value(&taint.value) {
                causes.push(invalid_value(&format!("{at}.value"), &taint.value, &e));
            }
            if taint.effect.is_empty() {
                causes.push(Cause::required(format!("{at}.effect")));
            } else {
                causes.extend(not_supported(
                    &format!("{at}.effect"),
                    &taint.effect,
                    TAINT_EFFECTS,
                ));
            }
            // A key may carry several effects, but each (key, effect) only once.
            if !seen.insert((taint.key.as_str(), taint.effect.as_str())) {
                let value = format!("{}:{}", taint.key, taint.effect);
                causes.push(Cause::duplicate(at, &value));
            }
        }
        if !self.spec.pod_cidr.is_empty() {
            if let Err(e) = parse_cidr(&self.spec.pod_cidr) {
                causes.push(invalid_value("spec.podCIDR", &self.spec.pod_cidr, &e));
            }
        }
        for (i, cidr) in self.spec.pod_cidrs.iter().enumerate() {
            if let Err(e) = parse_cidr(cidr) {
                causes.push(invalid_value(&format!("spec.podCIDRs[{i}]"), cidr, &e));
            }
        }
        if let Some(first) = self.spec.pod_cidrs.first() {
            if !self.spec.pod_cidr.is_empty() && *first != self.spec.pod_cidr {
                let detail = "must match spec.podCIDR, which is its first entry";
                causes.push(invalid_value("spec.podCIDRs[0]", first, detail));
            }
        }
        for (i, address) in self.status.addresses.iter().enumerate() {
            let at = format!("status.addresses[{i}].type");
            causes.extend(not_supported(&at, &address.type_, ADDRESS_TYPES));
        }
        causes
    }

    /// podCIDR(s) and providerID are assigned once: routes and cloud state hang off them.
    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let mut causes = Vec::new();
        if !old.spec.pod_cidr.is_empty() && self.spec.pod_cidr != old.spec.pod_cidr {
            causes.push(immutable("spec.podCIDR", &self.spec.pod_cidr));
        }
        if !old.spec.pod_cidrs.is_empty() && self.spec.pod_cidrs != old.spec.pod_cidrs {
            causes.push(immutable("spec.podCIDRs", &self.spec.pod_cidrs));
        }
        if !old.spec.provider_id.is_empty() && self.spec.provider_id != old.spec.provider_id {
            causes.push(immutable("spec.providerID", &self.spec.provider_id));
        }
        causes
    }

    fn default_fields(&mut self) {
        // A node that reports only capacity reserves nothing (Kubernetes' SetDefaults_NodeStatus).
        if self.status.allocatable.is_empty() && !self.status.capacity.is_empty() {
            self.status.allocatable = self.status.capacity.clone();
        }
        if self.spec.pod_cidrs.is_empty() && !self.spec.pod_cidr.is_empty() {
            self.spec.pod_cidrs = vec![self.spec.pod_cidr.clone()];
        }
    }

    fn kind_field_value(&self, field: &str) -> Option<String> {
        match field {
            "spec.unschedulable" => Some(self.spec.unschedulable.to_string()),
            _ => None,
        }
    }
}
