//! PersistentVolumeClaim (v1): a pod's request for storage, bound to one PersistentVolume.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{forbidden, not_supported};
use super::persistent_volume::{validate_access_modes, validate_storage};
use crate::meta::ObjectMeta;
use crate::quantity::Quantity;
use crate::resource::KindInfo;
use crate::selector::LabelSelector;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaim {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PersistentVolumeClaimSpec,
    #[serde(default)]
    pub status: PersistentVolumeClaimStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_modes: Vec<String>,
    #[serde(default)]
    pub resources: VolumeResourceRequirements,
    /// Unset: the cluster's default class is filled in at creation. Empty: no class (only
    /// volumes without a class may bind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// The volume this claim is bound to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub volume_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// `Filesystem` (the default; the only mode served).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub volume_mode: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct VolumeResourceRequirements {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimStatus {
    /// `Pending`, `Bound` or `Lost`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
}

crate::spec_status_resource!(
    PersistentVolumeClaim,
    KindInfo {
        kind: "PersistentVolumeClaim",
        api_version: "v1",
        plural: "persistentvolumeclaims",
        short_names: &["pvc"],
        namespaced: true,
        has_status: true,
    }
);

/// The node the scheduler chose for a WaitForFirstConsumer claim: that node's provisioner
/// makes the volume.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// The provisioner expected to make the claim's volume, as Kubernetes' binder records it.
pub const STORAGE_PROVISIONER_ANNOTATION: &str = "volume.kubernetes.io/storage-provisioner";
pub const PHASES: &[&str] = &["Pending", "Bound", "Lost"];

impl PersistentVolumeClaim {
    pub fn phase(&self) -> &str {
        &self.status.phase
    }

    pub fn is_bound(&self) -> bool {
        self.status.phase == "Bound" && !self.spec.volume_name.is_empty()
    }

    pub fn request(&self) -> Option<&Quantity> {
        self.spec.resources.requests.get("storage")
    }

    pub fn selected_node(&self) -> Option<&str> {
        self.metadata
            .annotations
            .get(SELECTED_NODE_ANNOTATION)
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }

    /// The class name, empty when the claim has none.
    pub fn class(&self) -> &str {
        self.spec.storage_class_name.as_deref().unwrap_or("")
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let mut causes = self.validate_spec("spec");
        if !self.status.phase.is_empty() {
            causes.extend(not_supported("status.phase", &self.status.phase, PHASES));
        }
        causes
    }

    /// A StatefulSet's claim template at `path` (`spec.volumeClaimTemplates[0]`): the
    /// spec rules of a claim.
    pub fn validate_template(&self, path: &str) -> Vec<Cause> {
        self.validate_spec(&format!("{path}.spec"))
    }

    fn validate_spec(&self, path: &str) -> Vec<Cause> {
        let spec = &self.spec;
        let mut causes = validate_access_modes(&spec.access_modes, &format!("{path}.accessModes"));
        causes.extend(validate_storage(
            &spec.resources.requests,
            &format!("{path}.resources.requests"),
        ));
        if !spec.volume_mode.is_empty() {
            causes.extend(not_supported(
                &format!("{path}.volumeMode"),
                &spec.volume_mode,
                &["Filesystem"],
            ));
        }
        causes
    }

    /// Kubernetes' rule: after creation only the storage request may grow; the binder may
    /// fill an empty volumeName and a class left unset.
    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let (new, before) = (&self.spec, &old.spec);
        let mut causes = Vec::new();
        if let (Some(now), Some(was)) = (self.request(), old.request()) {
            if now.milli_value() < was.milli_value() {
                causes.push(forbidden(
                    "spec.resources.requests[storage]",
                    &format!("field can not be less than previous value ({was})"),
                ));
            }
        }
        let mut comparable = new.clone();
        comparable.resources.requests = before.resources.requests.clone();
        if before.volume_name.is_empty() {
            comparable.volume_name.clear();
        }
        if before.storage_class_name.is_none() {
            comparable.storage_class_name = None;
        }
        if comparable != *before {
            causes.push(forbidden(
                "spec",
                "spec is immutable after creation except resources.requests for bound claims",
            ));
        }
        causes
    }

    fn default_fields(&mut self) {
        if self.spec.volume_mode.is_empty() {
            self.spec.volume_mode = "Filesystem".into();
        }
        if self.status.phase.is_empty() {
            self.status.phase = "Pending".into();
        }
    }

    fn kind_field_value(&self, field: &str) -> Option<String> {
        match field {
            "status.phase" => Some(self.status.phase.clone()),
            "spec.volumeName" => Some(self.spec.volume_name.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Resource;

    fn claim(storage: &str) -> PersistentVolumeClaim {
        let mut claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data-web-0", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": storage}}}
        }))
        .expect("claim");
        claim.apply_defaults();
        claim
    }

    #[test]
    fn a_claim_needs_a_storage_request_and_known_modes() {
        assert!(claim("1Gi").validate_kind().is_empty());
        let mut bad = claim("1Gi");
        bad.spec.resources.requests.clear();
        bad.spec.access_modes = vec!["ReadWriteOnce".into(), "Sometimes".into()];
        let fields: Vec<String> = bad.validate_kind().into_iter().map(|c| c.field).collect();
        assert_eq!(
            fields,
            ["spec.accessModes[1]", "spec.resources.requests[storage]"]
        );
        let zero = claim("0");
        assert_eq!(
            zero.validate_kind()[0].field,
            "spec.resources.requests[storage]"
        );
    }

    #[test]
    fn only_a_larger_request_and_the_binding_may_change() {
        let old = claim("1Gi");
        assert!(claim("2Gi").validate_update(&old).is_empty());
        let smaller = claim("512Mi");
        assert_eq!(
            smaller.validate_update(&old)[0].field,
            "spec.resources.requests[storage]"
        );
        let mut bound = old.clone();
        bound.spec.volume_name = "pvc-1".into();
        bound.spec.storage_class_name = Some("local-path".into());
        assert!(bound.validate_update(&old).is_empty());
        let mut rebound = bound.clone();
        rebound.spec.volume_name = "pvc-2".into();
        assert_eq!(rebound.validate_update(&bound)[0].field, "spec");
        let mut modes = old.clone();
        modes.spec.access_modes = vec!["ReadWriteMany".into()];
        assert_eq!(modes.validate_update(&old)[0].field, "spec");
    }
}
