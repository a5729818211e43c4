//! StatefulSet (apps/v1): pods with stable names `NAME-0…N-1` and stable DNS names through a
//! headless Service, created, updated and removed in ordinal order.

use serde::{Deserialize, Serialize};

use super::common::{
    forbidden, immutable, invalid_value, is_zero_i32, is_zero_i64, non_negative, not_supported,
};
use super::intstr::IntOrString;
use super::persistent_volume_claim::PersistentVolumeClaim;
use super::pod_spec::{PersistentVolumeClaimVolumeSource, Volume};
use super::template::{validate_selector, validate_selector_unchanged, PodTemplateSpec};
use crate::meta::{Condition, ObjectMeta};
use crate::resource::KindInfo;
use crate::selector::LabelSelector;
use crate::status::Cause;

/// Pods with stable names and ordinal identities, created, updated and removed in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StatefulSet {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: StatefulSetSpec,
    #[serde(default)]
    pub status: StatefulSetStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub template: PodTemplateSpec,
    /// Claims each pod gets, named `<template>-<pod>`, created before the pod and kept when
    /// it is deleted or rescheduled; a container mounts one by the template's name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,
    /// The headless Service that gives each pod its DNS name (`NAME-0.SERVICE.NS.svc…`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_name: String,
    /// `OrderedReady` (one at a time, each Running and Ready before the next) or `Parallel`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_management_policy: String,
    #[serde(default)]
    pub update_strategy: StatefulSetUpdateStrategy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub min_ready_seconds: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim_retention_policy: Option<RetentionPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordinals: Option<Ordinals>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetUpdateStrategy {
    /// `RollingUpdate` or `OnDelete`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateStatefulSet>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateStatefulSet {
    /// Ordinals below this keep the current revision: a canary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RetentionPolicy {
    /// `Retain` or `Delete`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub when_deleted: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub when_scaled: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Ordinals {
    #[serde(default)]
    pub start: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetStatus {
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub ready_replicas: i32,
    /// Pods at the current revision.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub current_replicas: i32,
    /// Pods at the update revision.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub available_replicas: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

crate::spec_status_resource!(
    StatefulSet,
    KindInfo {
        kind: "StatefulSet",
        api_version: "apps/v1",
        plural: "statefulsets",
        short_names: &["sts"],
        namespaced: true,
        has_status: true,
    }
);

const POLICIES: &[&str] = &["OrderedReady", "Parallel"];
const UPDATE_TYPES: &[&str] = &["RollingUpdate", "OnDelete"];
const RETENTION: &[&str] = &["Retain", "Delete"];
/// Label on every pod: its own name, so a Service can select exactly one pod.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// Label on every pod: its ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// Label on every pod and ControllerRevision-like history: the revision it was made from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

impl StatefulSet {
    pub fn replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }

    pub fn is_parallel(&self) -> bool {
        self.spec.pod_management_policy == "Parallel"
    }

    /// The first ordinal (`spec.ordinals.start`, 0 by default).
    pub fn first_ordinal(&self) -> i32 {
        self.spec.ordinals.as_ref().map_or(0, |o| o.start)
    }

    /// RollingUpdate's partition (0 when unset); None for OnDelete.
    pub fn partition(&self) -> Option<i32> {
        let strategy = &self.spec.update_strategy;
        (strategy.type_ != "OnDelete").then(|| {
            strategy
                .rolling_update
                .as_ref()
                .and_then(|r| r.partition)
                .unwrap_or(0)
        })
    }

    /// Pods that may be down at once during a rolling update (at least 1).
    pub fn max_unavailable(&self) -> i32 {
        let value = self
            .spec
            .update_strategy
            .rolling_update
            .as_ref()
            .and_then(|r| r.max_unavailable.clone())
            .unwrap_or(IntOrString::Int(1));
        value
            .scaled_value(self.replicas(), false)
            .unwrap_or(1)
            .max(1)
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
        if let Some(o) = &spec.ordinals {
            causes.extend(non_negative(o.start, "spec.ordinals.start"));
        }
        if !spec.pod_management_policy.is_empty() {
            causes.extend(not_supported(
                "spec.podManagementPolicy",
                &spec.pod_management_policy,
                POLICIES,
            ));
        }
        let strategy = &spec.update_strategy;
        if !strategy.type_.is_empty() {
            causes.extend(not_supported(
                "spec.updateStrategy.type",
                &strategy.type_,
                UPDATE_TYPES,
            ));
        }
        if let Some(rolling) = &strategy.rolling_update {
            let at = "spec.updateStrategy.rollingUpdate";
            if strategy.type_ == "OnDelete" {
                causes.push(forbidden(
                    at,
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
            if let Some(p) = rolling.partition {
                causes.extend(non_negative(p, &format!("{at}.partition")));
            }
            if let Some(m) = &rolling.max_unavailable {
                let path = format!("{at}.maxUnavailable");
                causes.extend(m.validate_int_or_percent(&path, true));
                if m.as_int() == Some(0) || m.percent() == Some(0) {
                    causes.push(invalid_value(
                        &path,
                        m.to_string(),
                        "must be greater than 0",
                    ));
                }
            }
        }
        if let Some(policy) = &spec.persistent_volume_claim_retention_policy {
            let at = "spec.persistentVolumeClaimRetentionPolicy";
            for (field, value) in [
                ("whenDeleted", &policy.when_deleted),
                ("whenScaled", &policy.when_scaled),
            ] {
                if !value.is_empty() {
                    causes.extend(not_supported(&format!("{at}.{field}"), value, RETENTION));
                }
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, claim) in spec.volume_claim_templates.iter().enumerate() {
            let at = format!("spec.volumeClaimTemplates[{i}]");
            let name = &claim.metadata.name;
            if name.is_empty() {
                causes.push(Cause::required(format!("{at}.metadata.name")));
            } else if let Err(e) = crate::validation::dns1123_label(name) {
                causes.push(invalid_value(&format!("{at}.metadata.name"), name, &e));
            } else if !names.insert(name.clone()) {
                causes.push(Cause::new(
                    "FieldValueDuplicate",
                    format!("{at}.metadata.name"),
                    format!("Duplicate value: {name:?}"),
                ));
            }
            causes.extend(claim.validate_template(&at));
        }
        causes.extend(validate_selector(
            spec.selector.as_ref(),
            &spec.template,
            "spec",
        ));
        // Containers mount the claims by template name, as if the template had the volumes.
        let with_claims = self.template_with_claims(&spec.template);
        causes.extend(with_claims.validate("spec.template", &["Always"]));
        causes
    }

    /// What Kubernetes lets change: replicas, template, updateStrategy, minReadySeconds,
    /// the retention policy, ordinals and revisionHistoryLimit. The rest names the pods, their
    /// DNS and their storage, so it is fixed for the set's life.
    /// The claim name of `template` for the pod with this ordinal: `<template>-<set>-<ordinal>`.
    pub fn claim_name(&self, template: &PersistentVolumeClaim, ordinal: i32) -> String {
        format!(
            "{}-{}-{ordinal}",
            template.metadata.name, self.metadata.name
        )
    }

    /// `template` with a volume per claim template, named after it (replacing a volume of
    /// that name, as Kubernetes does). Claim names are filled in per pod by the controller;
    /// here they are the template names.
    pub fn template_with_claims(&self, template: &PodTemplateSpec) -> PodTemplateSpec {
        let mut template = template.clone();
        for claim in &self.spec.volume_claim_templates {
            let name = &claim.metadata.name;
            let volume = Volume {
                name: name.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: name.clone(),
                    read_only: false,
                }),
                ..Default::default()
            };
            let volumes = &mut template.spec.volumes;
            match volumes.iter_mut().find(|v| &v.name == name) {
                Some(existing) => *existing = volume,
                None => volumes.push(volume),
            }
        }
        template
    }

    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let (new, before) = (&self.spec, &old.spec);
        let mut causes: Vec<Cause> =
            validate_selector_unchanged(new.selector.as_ref(), before.selector.as_ref(), "spec")
                .into_iter()
                .collect();
        if new.service_name != before.service_name {
            causes.push(immutable("spec.serviceName", &new.service_name));
        }
        if new.pod_management_policy != before.pod_management_policy {
            causes.push(immutable(
                "spec.podManagementPolicy",
                &new.pod_management_policy,
            ));
        }
        if new.volume_claim_templates != before.volume_claim_templates {
            causes.push(invalid_value(
                "spec.volumeClaimTemplates",
                "[...]",
                "field is immutable",
            ));
        }
        causes
    }

    fn default_fields(&mut self) {
        let spec = &mut self.spec;
        spec.replicas.get_or_insert(1);
        spec.revision_history_limit.get_or_insert(10);
        if spec.pod_management_policy.is_empty() {
            spec.pod_management_policy = "OrderedReady".into();
        }
        if spec.update_strategy.type_.is_empty() {
            spec.update_strategy.type_ = "RollingUpdate".into();
        }
        if spec.update_strategy.type_ == "RollingUpdate" {
            let rolling = spec
                .update_strategy
                .rolling_update
                .get_or_insert_with(Default::default);
            rolling.partition.get_or_insert(0);
        }
        let policy = spec
            .persistent_volume_claim_retention_policy
            .get_or_insert_with(Default::default);
        for value in [&mut policy.when_deleted, &mut policy.when_scaled] {
            if value.is_empty() {
                *value = "Retain".into();
            }
        }
        spec.template.apply_defaults();
    }

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}
