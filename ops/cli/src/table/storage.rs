//! Rows of the storage kinds: PersistentVolumes, PersistentVolumeClaims and StorageClasses,
//! with kubectl's columns and its abbreviations of access modes.

use bus_schemas::kinds::{PersistentVolume, PersistentVolumeClaim, StorageClass};
use bus_schemas::Time;

use super::cells::age;
use super::{Column, Row};

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
        Column::normal("NAME"),
        Column::normal("CAPACITY"),
        Column::normal("ACCESS MODES"),
        Column::normal("RECLAIM POLICY"),
        Column::normal("STATUS"),
        Column::normal("CLAIM"),
        Column::normal("STORAGECLASS"),
        Column::normal("VOLUMEATTRIBUTESCLASS"),
        Column::normal("REASON"),
        Column::normal("AGE"),
        Column::wide("VOLUMEMODE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        let claim = self
            .spec
            .claim_ref
            .as_ref()
            .map(|r| format!("{}/{}", r.namespace, r.name))
            .unwrap_or_default();
        vec![
            self.metadata.name.clone(),
            self.capacity().map(|q| q.to_string()).unwrap_or_default(),
            access_modes_text(&self.spec.access_modes),
            self.spec.persistent_volume_reclaim_policy.clone(),
            self.status.phase.clone(),
            claim,
            self.spec.storage_class_name.clone(),
            UNSET.into(),
            self.status.reason.clone(),
            age(self.metadata.creation_timestamp, now),
            self.spec.volume_mode.clone(),
        ]
    }
}

impl Row for PersistentVolumeClaim {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("STATUS"),
        Column::normal("VOLUME"),
        Column::normal("CAPACITY"),
        Column::normal("ACCESS MODES"),
        Column::normal("STORAGECLASS"),
        Column::normal("VOLUMEATTRIBUTESCLASS"),
        Column::normal("AGE"),
        Column::wide("VOLUMEMODE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        // Like kubectl, capacity and modes are what the bound volume gives, not the request.
        let capacity = self
            .status
            .capacity
            .get("storage")
            .map(|q| q.to_string())
            .unwrap_or_default();
        vec![
            self.metadata.name.clone(),
            self.status.phase.clone(),
            self.spec.volume_name.clone(),
            capacity,
            access_modes_text(&self.status.access_modes),
            self.class().to_string(),
            UNSET.into(),
            age(self.metadata.creation_timestamp, now),
            self.spec.volume_mode.clone(),
        ]
    }
}

impl Row for StorageClass {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("PROVISIONER"),
        Column::normal("RECLAIMPOLICY"),
        Column::normal("VOLUMEBINDINGMODE"),
        Column::normal("ALLOWVOLUMEEXPANSION"),
        Column::normal("AGE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        let name = if self.is_default() {
            format!("{} (default)", self.metadata.name)
        } else {
            self.metadata.name.clone()
        };
        vec![
            name,
            self.provisioner.clone(),
            self.reclaim_policy().to_string(),
            self.volume_binding_mode
                .clone()
                .unwrap_or_else(|| "Immediate".into()),
            self.allow_volume_expansion.unwrap_or(false).to_string(),
            age(self.metadata.creation_timestamp, now),
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
