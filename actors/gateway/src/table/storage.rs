//! The storage kinds' Table columns and cells: PersistentVolume, PersistentVolumeClaim and
//! StorageClass, as a Kubernetes 1.32 cluster prints them.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::{age_since, col, s, Column};

pub(super) fn columns(kind: &str) -> Option<Vec<Column>> {
    let name = col("Name", "string", 0);
    let age = col("Age", "string", 0);
    Some(match kind {
        "PersistentVolume" => vec![
            name,
            col("Capacity", "string", 0),
            col("Access Modes", "string", 0),
            col("Reclaim Policy", "string", 0),
            col("Status", "string", 0),
            col("Claim", "string", 0),
            col("StorageClass", "string", 0),
            col("VolumeAttributesClass", "string", 0),
            col("Reason", "string", 0),
            age,
            col("VolumeMode", "string", 1),
        ],
        "PersistentVolumeClaim" => vec![
            name,
            col("Status", "string", 0),
            col("Volume", "string", 0),
            col("Capacity", "string", 0),
            col("Access Modes", "string", 0),
            col("StorageClass", "string", 0),
            col("VolumeAttributesClass", "string", 0),
            age,
            col("VolumeMode", "string", 1),
        ],
        "StorageClass" => vec![
            name,
            col("Provisioner", "string", 0),
            col("ReclaimPolicy", "string", 0),
            col("VolumeBindingMode", "string", 0),
            col("AllowVolumeExpansion", "string", 0),
            age,
        ],
        _ => return None,
    })
}

/// kubectl's short forms of access modes (`RWO,ROX`).
fn access_modes(o: &Value, pointer: &str) -> String {
    let modes = o.pointer(pointer).and_then(Value::as_array);
    modes
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub(super) fn cells(kind: &str, o: &Value, now: DateTime<Utc>) -> Option<Vec<Value>> {
    let name = json!(s(o, "/metadata/name"));
    let age = age_since(s(o, "/metadata/creationTimestamp"), now);
    Some(match kind {
        "PersistentVolume" => {
            let claim = match (
                s(o, "/spec/claimRef/namespace"),
                s(o, "/spec/claimRef/name"),
            ) {
                (_, "") => String::new(),
                (ns, claim) => format!("{ns}/{claim}"),
            };
            vec![
                name,
                json!(s(o, "/spec/capacity/storage")),
                json!(access_modes(o, "/spec/accessModes")),
                json!(s(o, "/spec/persistentVolumeReclaimPolicy")),
                json!(s(o, "/status/phase")),
                json!(claim),
                json!(s(o, "/spec/storageClassName")),
                json!("<unset>"),
                json!(s(o, "/status/reason")),
                age,
                json!(s(o, "/spec/volumeMode")),
            ]
        }
        "PersistentVolumeClaim" => vec![
            name,
            json!(s(o, "/status/phase")),
            json!(s(o, "/spec/volumeName")),
            json!(s(o, "/status/capacity/storage")),
            json!(access_modes(o, "/status/accessModes")),
            json!(s(o, "/spec/storageClassName")),
            json!("<unset>"),
            age,
            json!(s(o, "/spec/volumeMode")),
        ],
        "StorageClass" => {
            let default = s(
                o,
                "/metadata/annotations/storageclass.kubernetes.io~1is-default-class",
            ) == "true";
            let shown = if default {
                format!("{} (default)", s(o, "/metadata/name"))
            } else {
                s(o, "/metadata/name").to_string()
            };
            let or = |pointer: &str, fallback: &str| match s(o, pointer) {
                "" => fallback.to_string(),
                value => value.to_string(),
            };
            vec![
                json!(shown),
                json!(s(o, "/provisioner")),
                json!(or("/reclaimPolicy", "Delete")),
                json!(or("/volumeBindingMode", "Immediate")),
                json!(o
                    .get("allowVolumeExpansion")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
                    .to_string()),
                age,
            ]
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_and_classes_read_like_kubectl() {
        let now = Utc::now();
        let claim = json!({
            "metadata": {"name": "data-web-0", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"storageClassName": "local-path", "volumeName": "pvc-1"},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
        });
        let row = cells("PersistentVolumeClaim", &claim, now).expect("claim row");
        assert_eq!(
            row[..7],
            [
                json!("data-web-0"),
                json!("Bound"),
                json!("pvc-1"),
                json!("1Gi"),
                json!("RWO"),
                json!("local-path"),
                json!("<unset>")
            ]
        );
        let class = json!({
            "metadata": {"name": "local-path", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "shoal.io/local-path", "volumeBindingMode": "WaitForFirstConsumer"
        });
        let row = cells("StorageClass", &class, now).expect("class row");
        assert_eq!(row[0], "local-path (default)");
        assert_eq!(row[2], "Delete");
        assert_eq!(row[3], "WaitForFirstConsumer");
        assert_eq!(row[4], "false");
    }
}
