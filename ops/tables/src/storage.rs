//! Rows of the storage kinds: PersistentVolumes, PersistentVolumeClaims and StorageClasses,
//! with kubectl's columns and its abbreviations of access modes.

use bus_schemas::kinds::{PersistentVolume, PersistentVolumeClaim, StorageClass};
use bus_schemas::Time;

use super::cells::age;
use super::{Cell, Column, Row};

/// kubectl's short forms (`RWO,ROX`), in the order the object lists them.
pub fn access_modes_text(modes: &[String]) -> String {
    modes
        .iter()
        .map(|m| match m.as_str() {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Volume attributes classes are not served: kubectl prints this for a field left unset.
const UNSET: &str = "<unset>";

impl Row for PersistentVolume {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Capacity"),
        Column::normal("Access Modes"),
        Column::normal("Reclaim Policy"),
        Column::normal("Status"),
        Column::normal("Claim"),
        Column::normal("StorageClass"),
        Column::normal("VolumeAttributesClass"),
        Column::normal("Reason"),
        Column::normal("Age"),
        Column::wide("VolumeMode"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        let claim = self
            .spec
            .claim_ref
            .as_ref()
            .map(|r| format!("{}/{}", r.namespace, r.name))
            .unwrap_or_default();
        vec![
            self.metadata.name.as_str().into(),
            self.capacity()
                .map(|q| q.to_string())
                .unwrap_or_default()
                .into(),
            access_modes_text(&self.spec.access_modes).into(),
            self.spec.persistent_volume_reclaim_policy.as_str().into(),
            self.status.phase.as_str().into(),
            claim.into(),
            self.spec.storage_class_name.as_str().into(),
            UNSET.into(),
            self.status.reason.as_str().into(),
            age(self.metadata.creation_timestamp, now).into(),
            self.spec.volume_mode.as_str().into(),
        ]
    }
}

impl Row for PersistentVolumeClaim {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Status"),
        Column::normal("Volume"),
        Column::normal("Capacity"),
        Column::normal("Access Modes"),
        Column::normal("StorageClass"),
        Column::normal("VolumeAttributesClass"),
        Column::normal("Age"),
        Column::wide("VolumeMode"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        // Like kubectl, capacity and modes are what the bound volume gives, not the request.
        let capacity = self
            .status
            .capacity
            .get("storage")
            .map(|q| q.to_string())
            .unwrap_or_default();
        vec![
            self.metadata.name.as_str().into(),
            self.status.phase.as_str().into(),
            self.spec.volume_name.as_str().into(),
            capacity.into(),
            access_modes_text(&self.status.access_modes).into(),
            self.class().into(),
            UNSET.into(),
            age(self.metadata.creation_timestamp, now).into(),
            self.spec.volume_mode.as_str().into(),
        ]
    }
}

impl Row for StorageClass {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Provisioner"),
        Column::normal("ReclaimPolicy"),
        Column::normal("VolumeBindingMode"),
        Column::normal("AllowVolumeExpansion"),
        Column::normal("Age"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        let name = if self.is_default() {
            format!("{} (default)", self.metadata.name)
        } else {
            self.metadata.name.clone()
        };
        vec![
            name.into(),
            self.provisioner.as_str().into(),
            self.reclaim_policy().into(),
            self.volume_binding_mode
                .as_deref()
                .unwrap_or("Immediate")
                .into(),
            // A string column upstream, not a boolean one.
            self.allow_volume_expansion
                .unwrap_or(false)
                .to_string()
                .into(),
            age(self.metadata.creation_timestamp, now).into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_as_kubectl_prints_them() {
        let now = chrono::Utc::now();
        let created = Some(now - chrono::Duration::seconds(30));
        let mut class = StorageClass::local_path();
        class.metadata.creation_timestamp = created;
        assert_eq!(
            class.cells(now),
            [
                "local-path (default)",
                "shoal.io/local-path",
                "Delete",
                "WaitForFirstConsumer",
                "true",
                "30s"
            ]
        );
        let mut claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data-web-0", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
                     "volumeName": "pvc-1", "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                       "capacity": {"storage": "1Gi"}}
        }))
        .expect("claim");
        claim.metadata.creation_timestamp = created;
        assert_eq!(
            claim.cells(now)[..8],
            [
                "data-web-0",
                "Bound",
                "pvc-1",
                "1Gi",
                "RWO,ROX",
                "local-path",
                "<unset>",
                "30s"
            ]
        );
        let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pvc-1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "local-path",
                     "claimRef": {"namespace": "default", "name": "data-web-0"}},
            "status": {"phase": "Bound"}
        }))
        .expect("pv");
        assert_eq!(
            pv.cells(now)[..8],
            [
                "pvc-1",
                "1Gi",
                "RWO",
                "Delete",
                "Bound",
                "default/data-web-0",
                "local-path",
                "<unset>"
            ]
        );
    }
}
