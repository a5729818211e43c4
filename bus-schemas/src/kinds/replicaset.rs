//! ReplicaSet: keeps N identical pods running; Deployments drive rollouts through them.

use serde::{Deserialize, Serialize};

use super::common::{is_zero_i32, is_zero_i64, non_negative};
use super::template::{validate_selector, validate_selector_unchanged, PodTemplateSpec};
use crate::meta::{Condition, ObjectMeta};
use crate::resource::KindInfo;
use crate::selector::LabelSelector;
use crate::status::Cause;

/// Keeps a number of identical pods running; Deployments manage them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSet {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ReplicaSetSpec,
    #[serde(default)]
    pub status: ReplicaSetStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// How long a new pod must be ready before it counts as available.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub min_ready_seconds: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub template: PodTemplateSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetStatus {
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub fully_labeled_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub ready_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub available_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// `ReplicaFailure`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

crate::spec_status_resource!(
    ReplicaSet,
    KindInfo {
        kind: "ReplicaSet",
        api_version: "apps/v1",
        plural: "replicasets",
        short_names: &["rs"],
        namespaced: true,
        has_status: true,
    }
);

impl ReplicaSet {
    /// Desired replicas (unset counts as 1, the default).
    pub fn replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let spec = &self.spec;
        let mut causes = Vec::new();
        if let Some(replicas) = spec.replicas {
            causes.extend(non_negative(replicas, "spec.replicas"));
        }
        causes.extend(non_negative(spec.min_ready_seconds, "spec.minReadySeconds"));
        causes.extend(validate_selector(
            spec.selector.as_ref(),
            &spec.template,
            "spec",
        ));
        causes.extend(spec.template.validate("spec.template", &["Always"]));
        causes
    }

    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let (new, old) = (self.spec.selector.as_ref(), old.spec.selector.as_ref());
        validate_selector_unchanged(new, old, "spec")
            .into_iter()
            .collect()
    }

    fn default_fields(&mut self) {
        self.spec.replicas.get_or_insert(1);
        self.spec.template.apply_defaults();
    }

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}
