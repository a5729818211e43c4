//! VerticalPodAutoscaler (autoscaling.k8s.io/v1): recommends container requests from observed
//! usage, and (by update mode) applies them to new pods or replaces pods far from them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{at_least, invalid_value, not_supported, required_msg};
use super::hpa::CrossVersionObjectReference;
use crate::meta::{Condition, ObjectMeta};
use crate::quantity::Quantity;
use crate::resource::KindInfo;
use crate::status::Cause;

/// Pod annotation written at admission: what the API changed, per container.
pub const UPDATES_ANNOTATION: &str = "vpaUpdates";
/// Pod annotation written at admission: the containers the recommendation was matched against.
pub const OBSERVED_CONTAINERS_ANNOTATION: &str = "vpaObservedContainers";
/// The condition the recommender sets once it has written a recommendation.
pub const RECOMMENDATION_PROVIDED: &str = "RecommendationProvided";
/// A container policy whose name is this applies to every container without its own.
pub const ANY_CONTAINER: &str = "*";

pub const UPDATE_MODES: &[&str] = &["Off", "Initial", "Recreate", "Auto"];
const CONTAINER_MODES: &[&str] = &["Auto", "Off"];
const CONTROLLED_VALUES: &[&str] = &["RequestsAndLimits", "RequestsOnly"];
/// The resources the recommender understands.
pub const RESOURCES: &[&str] = &["cpu", "memory"];

/// Recommends, and optionally applies, CPU and memory requests for a workload's containers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct VerticalPodAutoscaler {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: VerticalPodAutoscalerSpec,
    #[serde(default)]
    pub status: VerticalPodAutoscalerStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct VerticalPodAutoscalerSpec {
    /// The workload whose pods are sized (Deployment, ReplicaSet, StatefulSet, DaemonSet,
    /// Job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<CrossVersionObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<PodUpdatePolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_policy: Option<PodResourcePolicy>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodUpdatePolicy {
    /// `Off` (recommend only), `Initial` (set at pod creation), `Recreate` (also replace
    /// pods far from the recommendation) or `Auto` (today the same as `Recreate`, as
    /// upstream). Defaults to `Auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_mode: Option<String>,
    /// Pods are replaced only while the workload has at least this many live replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodResourcePolicy {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_policies: Vec<ContainerResourcePolicy>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContainerResourcePolicy {
    /// A container's name, or `*` for every container without its own policy.
    #[serde(default)]
    pub container_name: String,
    /// `Auto` (default) or `Off` (no recommendation for this container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub min_allowed: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub max_allowed: BTreeMap<String, Quantity>,
    /// The resources recommended; cpu and memory when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controlled_resources: Option<Vec<String>>,
    /// `RequestsAndLimits` (default: limits keep their ratio to requests) or `RequestsOnly`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controlled_values: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct VerticalPodAutoscalerStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<RecommendedPodResources>,
    /// `RecommendationProvided`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RecommendedPodResources {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_recommendations: Vec<RecommendedContainerResources>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RecommendedContainerResources {
    #[serde(default)]
    pub container_name: String,
    /// The recommended requests, within the container policy's bounds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub target: BTreeMap<String, Quantity>,
    /// Below this the container is likely starved (also capped by policy).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lower_bound: BTreeMap<String, Quantity>,
    /// Above this the request is likely wasted (also capped by policy).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub upper_bound: BTreeMap<String, Quantity>,
    /// The target before the policy's min and max were applied.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub uncapped_target: BTreeMap<String, Quantity>,
}

crate::spec_status_resource!(
    VerticalPodAutoscaler,
    KindInfo {
        kind: "VerticalPodAutoscaler",
        api_version: "autoscaling.k8s.io/v1",
        plural: "verticalpodautoscalers",
        short_names: &["vpa"],
        namespaced: true,
        has_status: true,
    }
);

impl VerticalPodAutoscaler {
    /// The effective update mode (unset is `Auto`, as upstream).
    pub fn update_mode(&self) -> &str {
        self.spec
            .update_policy
            .as_ref()
            .and_then(|p| p.update_mode.as_deref())
            .unwrap_or("Auto")
    }

    /// Whether new pods get the recommendation at admission.
    pub fn sets_initial(&self) -> bool {
        matches!(self.update_mode(), "Initial" | "Recreate" | "Auto")
    }

    /// Whether running pods far from the recommendation are replaced.
    pub fn recreates(&self) -> bool {
        matches!(self.update_mode(), "Recreate" | "Auto")
    }

    /// The policy for a container: its own, else the `*` one.
    pub fn container_policy(&self, container: &str) -> Option<&ContainerResourcePolicy> {
        let policies = self
            .spec
            .resource_policy
            .as_ref()
            .map(|p| p.container_policies.as_slice())
            .unwrap_or_default();
        policies
            .iter()
            .find(|p| p.container_name == container)
            .or_else(|| policies.iter().find(|p| p.container_name == ANY_CONTAINER))
    }

    /// The current recommendation for a container.
    pub fn recommendation_for(&self, container: &str) -> Option<&RecommendedContainerResources> {
        self.status
            .recommendation
            .as_ref()?
            .container_recommendations
            .iter()
            .find(|r| r.container_name == container)
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let spec = &self.spec;
        let mut causes = Vec::new();
        match &spec.target_ref {
            None => causes.push(required_msg(
                "spec.targetRef",
                "the workload whose pods are sized",
            )),
            Some(target) => causes.extend(target.validate("spec.targetRef")),
        }
        if let Some(policy) = &spec.update_policy {
            if let Some(mode) = &policy.update_mode {
                causes.extend(not_supported(
                    "spec.updatePolicy.updateMode",
                    mode,
                    UPDATE_MODES,
                ));
            }
            if let Some(min) = policy.min_replicas {
                causes.extend(at_least(min, 1, "spec.updatePolicy.minReplicas"));
            }
        }
        let policies = spec
            .resource_policy
            .as_ref()
            .map(|p| p.container_policies.as_slice())
            .unwrap_or_default();
        let mut seen = std::collections::HashSet::new();
        for (i, policy) in policies.iter().enumerate() {
            let at = format!("spec.resourcePolicy.containerPolicies[{i}]");
            causes.extend(policy.validate(&at));
            if !policy.container_name.is_empty() && !seen.insert(policy.container_name.as_str()) {
                causes.push(Cause::duplicate(
                    format!("{at}.containerName"),
                    &policy.container_name,
                ));
            }
        }
        causes
    }

    fn validate_update_fields(&self, _old: &Self) -> Vec<Cause> {
        Vec::new()
    }

    fn default_fields(&mut self) {
        let policy = self.spec.update_policy.get_or_insert_with(Default::default);
        policy.update_mode.get_or_insert_with(|| "Auto".into());
    }

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}

impl ContainerResourcePolicy {
    /// Whether the recommender sizes this container (mode unset or `Auto`).
    pub fn is_auto(&self) -> bool {
        self.mode.as_deref().unwrap_or("Auto") == "Auto"
    }

    /// Whether limits follow requests in proportion (the default).
    pub fn scales_limits(&self) -> bool {
        self.controlled_values
            .as_deref()
            .unwrap_or("RequestsAndLimits")
            == "RequestsAndLimits"
    }

    /// Whether the recommender sizes `resource` for this container.
    pub fn controls(&self, resource: &str) -> bool {
        match &self.controlled_resources {
            None => RESOURCES.contains(&resource),
            Some(list) => list.iter().any(|r| r == resource),
        }
    }

    fn validate(&self, at: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        if self.container_name.is_empty() {
            causes.push(Cause::required(format!("{at}.containerName")));
        }
        if let Some(mode) = &self.mode {
            causes.extend(not_supported(&format!("{at}.mode"), mode, CONTAINER_MODES));
        }
        if let Some(values) = &self.controlled_values {
            causes.extend(not_supported(
                &format!("{at}.controlledValues"),
                values,
                CONTROLLED_VALUES,
            ));
        }
        for (j, resource) in self.controlled_resources.iter().flatten().enumerate() {
            causes.extend(not_supported(
                &format!("{at}.controlledResources[{j}]"),
                resource,
                RESOURCES,
            ));
        }
        for (field, list) in [
            ("minAllowed", &self.min_allowed),
            ("maxAllowed", &self.max_allowed),
        ] {
            for (resource, q) in list {
                let path = format!("{at}.{field}[{resource}]");
                causes.extend(not_supported(&path, resource, RESOURCES));
                if q.is_negative() {
                    causes.push(invalid_value(
                        &path,
                        q.to_string(),
                        "must be greater than or equal to 0",
                    ));
                }
            }
        }
        for (resource, min) in &self.min_allowed {
            if let Some(max) = self.max_allowed.get(resource) {
                if min.milli_value() > max.milli_value() {
                    causes.push(invalid_value(
                        &format!("{at}.maxAllowed[{resource}]"),
                        max.to_string(),
                        &format!("must be greater than or equal to minAllowed[{resource}] ({min})"),
                    ));
                }
            }
        }
        causes
    }
}
