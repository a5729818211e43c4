//! Job: pods that run to completion, retried up to a backoff limit.

use serde::{Deserialize, Serialize};

use super::common::{
    immutable, invalid_value, is_zero_i32, non_negative, not_supported, required_msg,
};
use super::template::{validate_selector, validate_selector_unchanged, PodTemplateSpec};
use crate::meta::{find_condition, Condition, ObjectMeta, Time};
use crate::resource::KindInfo;
use crate::selector::LabelSelector;
use crate::status::Cause;

/// Runs pods until a number of them complete successfully.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Job {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: JobSpec,
    #[serde(default)]
    pub status: JobStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    /// Pods running at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<i32>,
    /// Successful pods needed; unset with parallelism set means "until one succeeds"
    /// (the work-queue pattern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Failed pods tolerated before the Job is marked Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    /// Generated from the Job's uid unless manualSelector is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual_selector: Option<bool>,
    #[serde(default)]
    pub template: PodTemplateSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// `NonIndexed` or `Indexed` (each pod gets a completion index 0..completions-1).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub completion_mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// `Complete`, `Failed`, `Suspended`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub active: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub succeeded: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub failed: i32,
    /// Indexed jobs: the completed indexes as ranges, e.g. `1,3-5,7`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub completed_indexes: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<i32>,
}

crate::spec_status_resource!(
    Job,
    KindInfo {
        kind: "Job",
        api_version: "batch/v1",
        plural: "jobs",
        short_names: &[],
        namespaced: true,
        has_status: true,
    }
);

const COMPLETION_MODES: &[&str] = &["NonIndexed", "Indexed"];
/// The label the generated selector uses; the unprefixed forms are kept for old clients.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

impl Job {
    /// Complete or Failed: the Job will start no more pods.
    pub fn is_finished(&self) -> bool {
        ["Complete", "Failed"]
            .iter()
            .any(|t| find_condition(&self.status.conditions, t).is_some_and(Condition::is_true))
    }

    pub fn is_suspended(&self) -> bool {
        self.spec.suspend == Some(true)
    }

    /// Gives the Job a selector no other Job can share, keyed by its uid (Kubernetes'
    /// generateSelector). Needs the uid, so it waits until the API has assigned one.
    fn generate_selector(&mut self) {
        let uid = &self.metadata.uid;
        if self.spec.manual_selector == Some(true) || self.spec.selector.is_some() || uid.is_empty()
        {
            return;
        }
        let labels = &mut self.spec.template.metadata.labels;
        for key in [CONTROLLER_UID_LABEL, "controller-uid"] {
            labels.entry(key.into()).or_insert_with(|| uid.clone());
        }
        for key in [JOB_NAME_LABEL, "job-name"] {
            labels
                .entry(key.into())
                .or_insert_with(|| self.metadata.name.clone());
        }
        let mut selector = LabelSelector::default();
        selector
            .match_labels
            .insert(CONTROLLER_UID_LABEL.into(), uid.clone());
        self.spec.selector = Some(selector);
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let spec = &self.spec;
        let mut causes = Vec::new();
        let counts = [
            ("spec.parallelism", spec.parallelism),
            ("spec.completions", spec.completions),
            ("spec.backoffLimit", spec.backoff_limit),
            (
                "spec.ttlSecondsAfterFinished",
                spec.ttl_seconds_after_finished,
            ),
        ];
        for (at, value) in counts {
            causes.extend(value.and_then(|v| non_negative(v, at)));
        }
        if let Some(deadline) = spec.active_deadline_seconds {
            causes.extend(non_negative(deadline, "spec.activeDeadlineSeconds"));
        }
        if !spec.completion_mode.is_empty() {
            let at = "spec.completionMode";
            causes.extend(not_supported(at, &spec.completion_mode, COMPLETION_MODES));
        }
        if spec.completion_mode == "Indexed" && spec.completions.is_none() {
            causes.push(required_msg(
                "spec.completions",
                "when completion mode is Indexed",
            ));
        }
        if spec.manual_selector == Some(true) || spec.selector.is_some() {
            causes.extend(validate_selector(
                spec.selector.as_ref(),
                &spec.template,
                "spec",
            ));
        }
        causes.extend(
            spec.template
                .validate("spec.template", &["OnFailure", "Never"]),
        );
        causes
    }

    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let (new, before) = (&self.spec, &old.spec);
        let mut causes: Vec<Cause> =
            validate_selector_unchanged(new.selector.as_ref(), before.selector.as_ref(), "spec")
                .into_iter()
                .collect();
        if new.completions != before.completions {
            causes.push(immutable("spec.completions", &new.completions));
        }
        if new.completion_mode != before.completion_mode {
            causes.push(immutable("spec.completionMode", &new.completion_mode));
        }
        if new.template != before.template {
            // The whole template would make an unreadable message; the path says enough.
            causes.push(invalid_value(
                "spec.template",
                "{...}",
                "field is immutable",
            ));
        }
        causes
    }

    fn default_fields(&mut self) {
        let spec = &mut self.spec;
        // Neither set: a single pod that must succeed once.
        if spec.completions.is_none() && spec.parallelism.is_none() {
            spec.completions = Some(1);
        }
        spec.parallelism.get_or_insert(1);
        spec.backoff_limit.get_or_insert(6);
        if spec.completion_mode.is_empty() {
            spec.completion_mode = "NonIndexed".into();
        }
        spec.suspend.get_or_insert(false);
        spec.template.apply_defaults();
        if self.metadata.labels.is_empty() {
            self.metadata.labels = spec.template.metadata.labels.clone();
        }
        self.generate_selector();
    }

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}
