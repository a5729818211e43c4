//! DaemonSet: one pod on every (matching) node.

use serde::{Deserialize, Serialize};

use super::common::{forbidden, is_default, is_zero_i32, is_zero_i64, non_negative, not_supported};
use super::deployment::validate_rolling_budget;
use super::intstr::IntOrString;
use super::template::{validate_selector, validate_selector_unchanged, PodTemplateSpec};
use crate::meta::{Condition, ObjectMeta};
use crate::resource::KindInfo;
use crate::selector::LabelSelector;
use crate::status::Cause;

/// Runs one pod of a template on every eligible node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DaemonSet {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DaemonSetSpec,
    #[serde(default)]
    pub status: DaemonSetStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub template: PodTemplateSpec,
    #[serde(default, skip_serializing_if = "is_default")]
    pub update_strategy: DaemonSetUpdateStrategy,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub min_ready_seconds: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetUpdateStrategy {
    /// `RollingUpdate` or `OnDelete` (new pods only when old ones are deleted by hand).
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateDaemonSet>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateDaemonSet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Nodes that may briefly run an old and a new pod side by side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetStatus {
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub current_number_scheduled: i32,
    /// Nodes running the daemon pod that should not.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub number_misscheduled: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub desired_number_scheduled: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub number_ready: i32,
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_number_scheduled: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub number_available: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub number_unavailable: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

crate::spec_status_resource!(
    DaemonSet,
    KindInfo {
        kind: "DaemonSet",
        api_version: "apps/v1",
        plural: "daemonsets",
        short_names: &["ds"],
        namespaced: true,
        has_status: true,
    }
);

const UPDATE_STRATEGY_TYPES: &[&str] = &["RollingUpdate", "OnDelete"];

impl DaemonSet {
    fn validate_fields(&self) -> Vec<Cause> {
        let spec = &self.spec;
        let mut causes = Vec::new();
        causes.extend(non_negative(spec.min_ready_seconds, "spec.minReadySeconds"));
        if let Some(limit) = spec.revision_history_limit {
            causes.extend(non_negative(limit, "spec.revisionHistoryLimit"));
        }
        causes.extend(validate_selector(
            spec.selector.as_ref(),
            &spec.template,
            "spec",
        ));
        causes.extend(spec.template.validate("spec.template", &["Always"]));

        let strategy = &spec.update_strategy;
        if !strategy.type_.is_empty() {
            let at = "spec.updateStrategy.type";
            causes.extend(not_supported(at, &strategy.type_, UPDATE_STRATEGY_TYPES));
        }
        if let Some(rolling) = &strategy.rolling_update {
            let at = "spec.updateStrategy.rollingUpdate";
            if strategy.type_ == "OnDelete" {
                causes.push(forbidden(
                    at,
                    "may not be specified when strategy `type` is 'OnDelete'",
                ));
            } else {
                let (unavailable, surge) =
                    (rolling.max_unavailable.as_ref(), rolling.max_surge.as_ref());
                causes.extend(validate_rolling_budget(unavailable, surge, true, at));
            }
        }
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
        if spec.update_strategy.type_.is_empty() {
            spec.update_strategy.type_ = "RollingUpdate".into();
        }
        if spec.update_strategy.type_ == "RollingUpdate" {
            let rolling = spec
                .update_strategy
                .rolling_update
                .get_or_insert_with(Default::default);
            rolling.max_unavailable.get_or_insert(IntOrString::Int(1));
            rolling.max_surge.get_or_insert(IntOrString::Int(0));
        }
        spec.revision_history_limit.get_or_insert(10);
        spec.template.apply_defaults();
    }

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}
