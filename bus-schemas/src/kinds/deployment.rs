//! Deployment: declarative rollouts of a pod template through ReplicaSets.

use serde::{Deserialize, Serialize};

use super::common::{
    forbidden, invalid_value, is_default, is_false, is_zero_i32, is_zero_i64, non_negative,
    not_supported,
};
use super::intstr::IntOrString;
use super::template::{validate_selector, validate_selector_unchanged, PodTemplateSpec};
use crate::meta::{Condition, ObjectMeta};
use crate::resource::KindInfo;
use crate::selector::LabelSelector;
use crate::status::Cause;

/// Declarative updates of a set of identical pods: a Deployment owns ReplicaSets and rolls pods
/// from one template to the next.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DeploymentSpec,
    #[serde(default)]
    pub status: DeploymentStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeploymentSpec {
    /// The number of pods wanted; 1 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The label query the Deployment's pods match; it must match the template's labels and
    /// cannot change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The pod every replica is made from; changing it starts a rollout.
    #[serde(default)]
    pub template: PodTemplateSpec,
    /// How a changed template replaces running pods: `RollingUpdate` (the default) or
    /// `Recreate`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub strategy: DeploymentStrategy,
    /// Seconds a new pod must stay ready before it counts as available.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub min_ready_seconds: i32,
    /// Old ReplicaSets kept for rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// While true, template changes do not start a rollout.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// After this long without progress the rollout is reported failed (ProgressDeadlineExceeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
    /// Shoal extension (Nomad's `auto_revert`), not in Kubernetes: when a rollout exceeds its
    /// progress deadline, roll back to the last revision that became available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_rollback: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStrategy {
    /// `RollingUpdate` or `Recreate`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateDeployment>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateDeployment {
    /// Pods that may be unavailable during the update: a count or a percentage, rounded down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Pods above the desired count during the update: a count or a percentage, rounded up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStatus {
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub ready_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub available_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub unavailable_replicas: i32,
    /// `Available`, `Progressing`, `ReplicaFailure`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Bumped when a ReplicaSet name (template hash) collides, to make a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
}

crate::spec_status_resource!(
    Deployment,
    KindInfo {
        kind: "Deployment",
        api_version: "apps/v1",
        plural: "deployments",
        short_names: &["deploy"],
        namespaced: true,
        has_status: true,
    }
);

const STRATEGY_TYPES: &[&str] = &["RollingUpdate", "Recreate"];
const DEFAULT_MAX_SURGE: &str = "25%";
const DEFAULT_MAX_UNAVAILABLE: &str = "25%";

impl Deployment {
    /// Desired replicas (unset counts as 1, the default).
    pub fn replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }

    /// (maxSurge, maxUnavailable) as pod counts for the desired replicas, as Kubernetes'
    /// ResolveFenceposts: surge rounds up, unavailable down, and both 0 would stall the
    /// rollout so unavailable becomes 1. Recreate has no budget: (0, 0).
    pub fn rollout_budget(&self) -> (i32, i32) {
        let Some(rolling) = &self.spec.strategy.rolling_update else {
            return (0, 0);
        };
        if self.spec.strategy.type_ == "Recreate" {
            return (0, 0);
        }
        let replicas = self.replicas();
        let resolve = |v: &Option<IntOrString>, default: &str, up: bool| {
            let v = v.clone().unwrap_or_else(|| default.into());
            v.scaled_value(replicas, up).unwrap_or(0)
        };
        let surge = resolve(&rolling.max_surge, DEFAULT_MAX_SURGE, true);
        let unavailable = resolve(&rolling.max_unavailable, DEFAULT_MAX_UNAVAILABLE, false);
        if surge == 0 && unavailable == 0 {
            (0, 1)
        } else {
            (surge, unavailable)
        }
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let spec = &self.spec;
        let mut causes = Vec::new();
        if let Some(replicas) = spec.replicas {
            causes.extend(non_negative(replicas, "spec.replicas"));
        }
        causes.extend(non_negative(spec.min_ready_seconds, "spec.minReadySeconds"));
        if let Some(limit) = spec.revision_history_limit {
            causes.extend(non_negative(limit, "spec.revisionHistoryLimit"));
        }
        if let Some(deadline) = spec.progress_deadline_seconds {
            let at = "spec.progressDeadlineSeconds";
            if deadline <= spec.min_ready_seconds {
                causes.push(invalid_value(
                    at,
                    deadline,
                    "must be greater than minReadySeconds",
                ));
            }
        }
        causes.extend(validate_selector(
            spec.selector.as_ref(),
            &spec.template,
            "spec",
        ));
        causes.extend(spec.template.validate("spec.template", &["Always"]));
        causes.extend(validate_strategy(&spec.strategy));
        causes
    }

    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let (new, old) = (self.spec.selector.as_ref(), old.spec.selector.as_ref());
        validate_selector_unchanged(new, old, "spec")
            .into_iter()
            .collect()
    }

    fn default_fields(&mut self) {
        let spec = &mut self.spec;
        spec.replicas.get_or_insert(1);
        spec.revision_history_limit.get_or_insert(10);
        spec.progress_deadline_seconds.get_or_insert(600);
        if spec.strategy.type_.is_empty() {
            spec.strategy.type_ = "RollingUpdate".into();
        }
        if spec.strategy.type_ == "RollingUpdate" {
            let rolling = spec
                .strategy
                .rolling_update
                .get_or_insert_with(Default::default);
            rolling
                .max_unavailable
                .get_or_insert_with(|| DEFAULT_MAX_UNAVAILABLE.into());
            rolling
                .max_surge
                .get_or_insert_with(|| DEFAULT_MAX_SURGE.into());
        }
        spec.template.apply_defaults();
    }

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}

fn validate_strategy(strategy: &DeploymentStrategy) -> Vec<Cause> {
    let mut causes = Vec::new();
    if !strategy.type_.is_empty() {
        causes.extend(not_supported(
            "spec.strategy.type",
            &strategy.type_,
            STRATEGY_TYPES,
        ));
    }
    let Some(rolling) = &strategy.rolling_update else {
        return causes;
    };
    let at = "spec.strategy.rollingUpdate";
    if strategy.type_ == "Recreate" {
        causes.push(forbidden(
            at,
            "may not be specified when strategy `type` is 'Recreate'",
        ));
        return causes;
    }
    let (unavailable, surge) = (rolling.max_unavailable.as_ref(), rolling.max_surge.as_ref());
    causes.extend(validate_rolling_budget(unavailable, surge, false, at));
    causes
}

/// maxUnavailable at most 100%, and not both zero: a rollout must be able to move.
/// Shared with DaemonSet, whose rollingUpdate has the same two fields.
pub(crate) fn validate_rolling_budget(
    max_unavailable: Option<&IntOrString>,
    max_surge: Option<&IntOrString>,
    surge_unset_is_zero: bool,
    path: &str,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let unavailable_at = format!("{path}.maxUnavailable");
    if let Some(v) = max_unavailable {
        causes.extend(v.validate_int_or_percent(&unavailable_at, true));
    }
    if let Some(v) = max_surge {
        causes.extend(v.validate_int_or_percent(&format!("{path}.maxSurge"), false));
    }
    let zero = |v: &IntOrString| v.as_int() == Some(0) || v.percent() == Some(0);
    let surge_zero = max_surge.map_or(surge_unset_is_zero, zero);
    if let Some(unavailable) = max_unavailable.filter(|v| zero(v)) {
        if surge_zero {
            let detail = "may not be 0 when `maxSurge` is 0";
            causes.push(invalid_value(
                &unavailable_at,
                unavailable.to_string(),
                detail,
            ));
        }
    }
    causes
}
