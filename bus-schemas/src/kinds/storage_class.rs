//! StorageClass (storage.k8s.io/v1): how claims of a class get their volumes — which
//! provisioner makes them, when (at once or once a pod needs one) and what happens to them
//! when their claim goes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{immutable, not_supported};
use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StorageClass {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Who makes this class's volumes (`shoal.io/local-path`).
    #[serde(default)]
    pub provisioner: String,
    /// Provisioner-specific settings, passed as they are.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// `Delete` (the default) or `Retain`: what becomes of a provisioned volume whose claim
    /// is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_policy: Option<String>,
    /// `Immediate` (the default) or `WaitForFirstConsumer`: the latter provisions only once
    /// the scheduler has placed a pod that uses the claim, on that pod's node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_binding_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_volume_expansion: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_options: Vec<String>,
}

crate::body_resource!(
    StorageClass,
    KindInfo {
        kind: "StorageClass",
        api_version: "storage.k8s.io/v1",
        plural: "storageclasses",
        short_names: &["sc"],
        namespaced: false,
        has_status: false,
    }
);

/// The annotation that makes a class the one claims without `storageClassName` get.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
pub const RECLAIM_POLICIES: &[&str] = &["Retain", "Delete"];
pub const BINDING_IMMEDIATE: &str = "Immediate";
pub const BINDING_WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
const BINDING_MODES: &[&str] = &[BINDING_IMMEDIATE, BINDING_WAIT_FOR_FIRST_CONSUMER];

/// The provisioner every node agent runs: a directory under the node's state dir.
pub const LOCAL_PATH_PROVISIONER: &str = "shoal.io/local-path";
/// The class every cluster has, and the default one.
pub const LOCAL_PATH_CLASS: &str = "local-path";

impl StorageClass {
    /// Whether the annotation marks it as the default class.
    pub fn is_default(&self) -> bool {
        self.metadata
            .annotations
            .get(DEFAULT_CLASS_ANNOTATION)
            .is_some_and(|v| v == "true")
    }

    pub fn waits_for_first_consumer(&self) -> bool {
        self.volume_binding_mode.as_deref() == Some(BINDING_WAIT_FOR_FIRST_CONSUMER)
    }

    pub fn reclaim_policy(&self) -> &str {
        self.reclaim_policy.as_deref().unwrap_or("Delete")
    }

    /// The class `shoal up` creates in every cluster: local directories, bound where the
    /// first pod lands, deleted with their claim.
    pub fn local_path() -> StorageClass {
        let mut class = StorageClass {
            provisioner: LOCAL_PATH_PROVISIONER.into(),
            reclaim_policy: Some("Delete".into()),
            volume_binding_mode: Some(BINDING_WAIT_FOR_FIRST_CONSUMER.into()),
            allow_volume_expansion: Some(true),
            ..Default::default()
        };
        class.metadata.name = LOCAL_PATH_CLASS.into();
        class
            .metadata
            .annotations
            .insert(DEFAULT_CLASS_ANNOTATION.into(), "true".into());
        class
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let mut causes = Vec::new();
        if self.provisioner.is_empty() {
            causes.push(Cause::required("provisioner"));
        }
        if let Some(policy) = &self.reclaim_policy {
            causes.extend(not_supported("reclaimPolicy", policy, RECLAIM_POLICIES));
        }
        if let Some(mode) = &self.volume_binding_mode {
            causes.extend(not_supported("volumeBindingMode", mode, BINDING_MODES));
        }
        causes
    }

    /// As in Kubernetes, only expansion, mount options and metadata may change: the rest
    /// decided how existing volumes were made.
    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let mut causes = Vec::new();
        if self.provisioner != old.provisioner {
            causes.push(immutable("provisioner", &self.provisioner));
        }
        if self.parameters != old.parameters {
            causes.push(immutable("parameters", &self.parameters));
        }
        if self.reclaim_policy != old.reclaim_policy {
            causes.push(immutable("reclaimPolicy", &self.reclaim_policy));
        }
        if self.volume_binding_mode != old.volume_binding_mode {
            causes.push(immutable("volumeBindingMode", &self.volume_binding_mode));
        }
        causes
    }

    fn default_fields(&mut self) {
        self.reclaim_policy.get_or_insert_with(|| "Delete".into());
        self.volume_binding_mode
            .get_or_insert_with(|| BINDING_IMMEDIATE.into());
    }

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Resource;

    #[test]
    fn local_path_is_the_default_and_waits_for_a_consumer() {
        let mut class = StorageClass::local_path();
        class.apply_defaults();
        assert!(class.validate_kind().is_empty());
        assert!(class.is_default());
        assert!(class.waits_for_first_consumer());
        assert_eq!(class.reclaim_policy(), "Delete");
    }

    #[test]
    fn bad_modes_and_changed_provisioner_are_refused_with_paths() {
        let mut class = StorageClass::local_path();
        class.volume_binding_mode = Some("Later".into());
        class.reclaim_policy = Some("Recycle".into());
        class.provisioner.clear();
        let fields: Vec<String> = class.validate_kind().into_iter().map(|c| c.field).collect();
        assert_eq!(
            fields,
            ["provisioner", "reclaimPolicy", "volumeBindingMode"]
        );
        let old = StorageClass::local_path();
        let mut next = old.clone();
        next.provisioner = "example.com/nfs".into();
        next.allow_volume_expansion = Some(false);
        let causes = next.validate_update(&old);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "provisioner");
    }
}
