//! PersistentVolume (v1, cluster-scoped): a piece of storage on a node or elsewhere, made by
//! hand or by a provisioner, and bound to at most one claim.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::affinity::NodeSelector;
use super::common::{forbidden, immutable, not_supported, required_msg, ObjectReference};
use super::pod_spec::HostPathVolumeSource;
use crate::meta::{ObjectMeta, Time};
use crate::quantity::Quantity;
use crate::resource::KindInfo;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolume {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PersistentVolumeSpec,
    #[serde(default)]
    pub status: PersistentVolumeStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeSpec {
    /// `storage`: how much the volume holds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_modes: Vec<String>,
    /// `Retain` (the default for volumes made by hand) or `Delete`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub persistent_volume_reclaim_policy: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub storage_class_name: String,
    /// A directory on the node (the source the local-path provisioner writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<HostPathVolumeSource>,
    /// A local disk or directory; needs `nodeAffinity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalVolumeSource>,
    /// The nodes that can reach the volume: the scheduler places its claim's pods there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<VolumeNodeAffinity>,
    /// The claim this volume is bound to (or reserved for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_options: Vec<String>,
    /// `Filesystem` (the default; the only mode served).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub volume_mode: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LocalVolumeSource {
    #[serde(default)]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_type: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct VolumeNodeAffinity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<NodeSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeStatus {
    /// `Pending`, `Available`, `Bound`, `Released` or `Failed`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_phase_transition_time: Option<Time>,
}

crate::spec_status_resource!(
    PersistentVolume,
    KindInfo {
        kind: "PersistentVolume",
        api_version: "v1",
        plural: "persistentvolumes",
        short_names: &["pv"],
        namespaced: false,
        has_status: true,
    }
);

pub const ACCESS_MODES: &[&str] = &[
    "ReadWriteOnce",
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOncePod",
];
pub const PHASES: &[&str] = &["Pending", "Available", "Bound", "Released", "Failed"];
const RECLAIM_POLICIES: &[&str] = &["Retain", "Delete"];

/// Access modes: at least one, each known, and `ReadWriteOncePod` alone.
pub(crate) fn validate_access_modes(modes: &[String], path: &str) -> Vec<Cause> {
    if modes.is_empty() {
        return vec![required_msg(path, "at least 1 access mode is required")];
    }
    let mut causes: Vec<Cause> = modes
        .iter()
        .enumerate()
        .filter_map(|(i, m)| not_supported(&format!("{path}[{i}]"), m, ACCESS_MODES))
        .collect();
    if modes.len() > 1 && modes.iter().any(|m| m == "ReadWriteOncePod") {
        causes.push(forbidden(
            path,
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    causes
}

/// `storage` is required and must be positive.
pub(crate) fn validate_storage(
    resources: &BTreeMap<String, Quantity>,
    path: &str,
) -> Option<Cause> {
    let at = format!("{path}[storage]");
    match resources.get("storage") {
        None => Some(Cause::required(at)),
        Some(q) if q.milli_value() <= 0 => Some(super::common::invalid_value(
            &at,
            q.to_string(),
            "must be greater than zero",
        )),
        Some(_) => None,
    }
}

/// The node label that holds the node's name (set by every node agent).
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

impl PersistentVolume {
    pub fn phase(&self) -> &str {
        &self.status.phase
    }

    pub fn capacity(&self) -> Option<&Quantity> {
        self.spec.capacity.get("storage")
    }

    /// The directory that holds the volume's data on its node.
    pub fn path(&self) -> Option<&str> {
        self.spec
            .host_path
            .as_ref()
            .map(|h| h.path.as_str())
            .or(self.spec.local.as_ref().map(|l| l.path.as_str()))
    }

    /// The node selector a pod's node must match to reach the volume.
    pub fn required_nodes(&self) -> Option<&NodeSelector> {
        self.spec.node_affinity.as_ref()?.required.as_ref()
    }

    /// The one node the volume is pinned to: `spec.nodeAffinity.required` is exactly one
    /// term holding exactly one requirement, `kubernetes.io/hostname In [<node>]` (what a
    /// node-local provisioner writes) or the field `metadata.name In [<node>]`. Any other
    /// affinity, or none, may let more than one node reach the volume, so no single node
    /// owns it.
    pub fn pinned_node(&self) -> Option<&str> {
        let [term] = self.required_nodes()?.node_selector_terms.as_slice() else {
            return None;
        };
        let (requirement, key) = match (
            term.match_expressions.as_slice(),
            term.match_fields.as_slice(),
        ) {
            ([label], []) => (label, HOSTNAME_LABEL),
            ([], [field]) => (field, "metadata.name"),
            _ => return None,
        };
        match requirement.values.as_slice() {
            [node] if requirement.key == key && requirement.operator == "In" => Some(node.as_str()),
            _ => None,
        }
    }

    /// Whether the volume is bound (or reserved) for the claim with this namespace, name and
    /// uid; a claimRef without uid is a reservation by name.
    pub fn claimed_by(&self, namespace: &str, name: &str, uid: &str) -> bool {
        self.spec.claim_ref.as_ref().is_some_and(|r| {
            r.namespace == namespace && r.name == name && (r.uid.is_empty() || r.uid == uid)
        })
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let spec = &self.spec;
        let mut causes = Vec::new();
        causes.extend(validate_storage(&spec.capacity, "spec.capacity"));
        causes.extend(validate_access_modes(
            &spec.access_modes,
            "spec.accessModes",
        ));
        causes.extend(not_supported(
            "spec.persistentVolumeReclaimPolicy",
            &spec.persistent_volume_reclaim_policy,
            RECLAIM_POLICIES,
        ));
        match (&spec.host_path, &spec.local) {
            (None, None) => causes.push(required_msg("spec", "must specify a volume type")),
            (Some(_), Some(_)) => causes.push(forbidden(
                "spec.local",
                "may not specify more than 1 volume type",
            )),
            _ => {}
        }
        for (path, at) in [
            (
                spec.host_path.as_ref().map(|h| &h.path),
                "spec.hostPath.path",
            ),
            (spec.local.as_ref().map(|l| &l.path), "spec.local.path"),
        ] {
            match path {
                Some(p) if p.is_empty() => causes.push(Cause::required(at)),
                Some(p) if !p.starts_with('/') || p.split('/').any(|part| part == "..") => causes
                    .push(super::common::invalid_value(
                        at,
                        p,
                        "must be an absolute path without '..'",
                    )),
                _ => {}
            }
        }
        if spec.local.is_some() && self.required_nodes().is_none() {
            causes.push(Cause::required("spec.nodeAffinity"));
        }
        if let Some(selector) = self.required_nodes() {
            causes.extend(selector.validate("spec.nodeAffinity.required"));
        }
        if !spec.volume_mode.is_empty() {
            causes.extend(not_supported(
                "spec.volumeMode",
                &spec.volume_mode,
                &["Filesystem"],
            ));
        }
        if !self.status.phase.is_empty() {
            causes.extend(not_supported("status.phase", &self.status.phase, PHASES));
        }
        causes
    }

    /// The source and node affinity say where the data is: changing them would strand it.
    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let (new, before) = (&self.spec, &old.spec);
        let mut causes = Vec::new();
        if new.host_path != before.host_path {
            causes.push(immutable("spec.hostPath", &new.host_path));
        }
        if new.local != before.local {
            causes.push(immutable("spec.local", &new.local));
        }
        if before.node_affinity.is_some() && new.node_affinity != before.node_affinity {
            causes.push(immutable("spec.nodeAffinity", &new.node_affinity));
        }
        if new.volume_mode != before.volume_mode {
            causes.push(immutable("spec.volumeMode", &new.volume_mode));
        }
        causes
    }

    fn default_fields(&mut self) {
        if self.spec.persistent_volume_reclaim_policy.is_empty() {
            self.spec.persistent_volume_reclaim_policy = "Retain".into();
        }
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
            "spec.storageClassName" => Some(self.spec.storage_class_name.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Resource;

    fn local_pv() -> PersistentVolume {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv-1"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "local": {"path": "/var/lib/shoal/volumes/pv-1"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}}
            }
        }))
        .expect("pv")
    }

    #[test]
    fn a_volume_is_pinned_only_by_one_exact_node_requirement() {
        let mut pv = local_pv();
        assert_eq!(pv.pinned_node(), Some("node-a"));
        let with = |affinity: serde_json::Value| {
            let mut pv = local_pv();
            pv.spec.node_affinity = serde_json::from_value(affinity).expect("affinity");
            pv.pinned_node().map(str::to_string)
        };
        let term =
            |req: serde_json::Value| serde_json::json!({"required": {"nodeSelectorTerms": [req]}});
        let host = |op: &str, values: serde_json::Value| serde_json::json!({"key": HOSTNAME_LABEL, "operator": op, "values": values});
        assert_eq!(
            with(term(
                serde_json::json!({"matchExpressions": [host("In", serde_json::json!(["n1"]))]})
            )),
            Some("n1".into())
        );
        for loose in [
            term(
                serde_json::json!({"matchExpressions": [host("In", serde_json::json!(["n1", "n2"]))]}),
            ),
            term(
                serde_json::json!({"matchExpressions": [host("NotIn", serde_json::json!(["n1"]))]}),
            ),
            term(serde_json::json!({"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["n1"]}]})),
            term(
                serde_json::json!({"matchExpressions": [host("In", serde_json::json!(["n1"]))],
                                    "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}),
            ),
            serde_json::json!({"required": {"nodeSelectorTerms": [
                {"matchExpressions": [host("In", serde_json::json!(["n1"]))]},
                {"matchExpressions": [host("In", serde_json::json!(["n2"]))]}]}}),
        ] {
            assert_eq!(with(loose.clone()), None, "{loose}");
        }
        pv.spec.node_affinity = None;
        assert_eq!(pv.pinned_node(), None);
    }

    #[test]
    fn a_local_volume_needs_capacity_modes_and_affinity() {
        let mut pv = local_pv();
        pv.apply_defaults();
        assert!(pv.validate_kind().is_empty(), "{:?}", pv.validate_kind());
        assert_eq!(pv.spec.persistent_volume_reclaim_policy, "Retain");
        assert_eq!(pv.path(), Some("/var/lib/shoal/volumes/pv-1"));
        let node = pv.required_nodes().expect("affinity");
        assert!(node.matches(&BTreeMap::new(), "node-a"));
        assert!(!node.matches(&BTreeMap::new(), "node-b"));

        pv.spec.capacity.clear();
        pv.spec.access_modes = vec!["ReadWriteSometimes".into()];
        pv.spec.node_affinity = None;
        let fields: Vec<String> = pv.validate_kind().into_iter().map(|c| c.field).collect();
        assert_eq!(
            fields,
            [
                "spec.capacity[storage]",
                "spec.accessModes[0]",
                "spec.nodeAffinity"
            ]
        );
    }

    #[test]
    fn where_the_data_is_cannot_change() {
        let mut old = local_pv();
        old.apply_defaults();
        let mut moved = old.clone();
        moved.spec.local = Some(LocalVolumeSource {
            path: "/elsewhere".into(),
            fs_type: None,
        });
        assert_eq!(moved.validate_update(&old)[0].field, "spec.local");
        let mut bound = old.clone();
        bound.spec.claim_ref = Some(ObjectReference {
            namespace: "default".into(),
            name: "data".into(),
            ..Default::default()
        });
        assert!(bound.validate_update(&old).is_empty());
        assert!(bound.claimed_by("default", "data", "any-uid"));
    }
}
