//! PriorityClass: a named priority that pods reference; higher values schedule (and preempt)
//! first.

use serde::{Deserialize, Serialize};

use super::common::{forbidden, immutable, is_false, not_supported};
use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;

/// Maps a name to a scheduling priority that pods refer to by priorityClassName.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PriorityClass {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Required (no serde default): a class without a value is meaningless.
    pub value: i32,
    /// The priority of pods that name no class. At most one class may be the default.
    #[serde(default, skip_serializing_if = "is_false")]
    pub global_default: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `PreemptLowerPriority` or `Never`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preemption_policy: String,
}

crate::body_resource!(
    PriorityClass,
    KindInfo {
        kind: "PriorityClass",
        api_version: "scheduling.k8s.io/v1",
        plural: "priorityclasses",
        short_names: &["pc"],
        namespaced: false,
        has_status: false,
    }
);

/// Values above this are reserved for the system classes, so no user workload outranks them.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;
pub const SYSTEM_PRIORITY_CLASS_PREFIX: &str = "system-";
/// The classes Shoal creates itself, with their values (as in Kubernetes).
pub const SYSTEM_PRIORITY_CLASSES: &[(&str, i32)] = &[
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];
const PREEMPTION_POLICIES: &[&str] = &["PreemptLowerPriority", "Never"];

impl PriorityClass {
    fn validate_fields(&self) -> Vec<Cause> {
        let mut causes = Vec::new();
        let name = &self.metadata.name;
        if name.starts_with(SYSTEM_PRIORITY_CLASS_PREFIX) {
            let known = SYSTEM_PRIORITY_CLASSES
                .iter()
                .any(|(n, v)| n == name && *v == self.value);
            if !known {
                let detail = "priority class names with 'system-' prefix are reserved for \
                              system use (with their fixed values)";
                causes.push(forbidden("metadata.name", detail));
            }
        } else if self.value > HIGHEST_USER_DEFINABLE_PRIORITY {
            let detail = format!(
                "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
            );
            causes.push(forbidden("value", &detail));
        }
        if !self.preemption_policy.is_empty() {
            causes.extend(not_supported(
                "preemptionPolicy",
                &self.preemption_policy,
                PREEMPTION_POLICIES,
            ));
        }
        causes
    }

    /// Pods carry the resolved value, so changing it would silently split old and new pods.
    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let mut causes = Vec::new();
        if self.value != old.value {
            causes.push(immutable("value", &self.value));
        }
        if self.preemption_policy != old.preemption_policy {
            causes.push(immutable("preemptionPolicy", &self.preemption_policy));
        }
        causes
    }

    fn default_fields(&mut self) {
        if self.preemption_policy.is_empty() {
            self.preemption_policy = "PreemptLowerPriority".into();
        }
    }

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}
