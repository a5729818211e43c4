//! Server-side printing: `meta.k8s.io/v1` Tables with the columns a Kubernetes 1.32 cluster
//! prints per kind (priority 1 columns are the `-o wide` ones). kubectl 1.32 has no column
//! printers of its own for these kinds, so without this it shows only NAME and AGE.
//!
//! The rows are `shoal_tables`', the same as `shoal get` prints: each object is decoded into
//! its bus-schemas type and asked for its cells. This module only keeps the columns a Table
//! carries and wraps them in Kubernetes' shape.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use shoal_tables::{Cell, Column};

fn column_definition(column: &Column) -> Value {
    json!({
        "name": column.name,
        "type": column.type_.api_name(),
        "format": if column.name == "Name" { "name" } else { "" },
        "description": column.description,
        "priority": u8::from(column.wide),
    })
}

/// One object's cells, only those of the columns a Table carries. An object that does not
/// decode as its kind (none should: the API checked it) keeps its name and age, and is logged.
fn row_cells(kind: &str, object: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let cells = shoal_tables::cells(kind, object, now).unwrap_or_else(|problem| {
        tracing::warn!(%problem, "cannot read an object for its table row");
        shoal_tables::undecodable_cells(kind, object, now)
    });
    cells.iter().map(Cell::to_json).collect()
}

/// The `PartialObjectMetadata` kubectl reads namespaces and labels from (`-A`,
/// `--show-labels`).
fn partial_metadata(o: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": o.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A Table of `objects` of one kind. `with_columns` is false for watch events after the
/// first, as upstream sends them.
pub fn table(
    kind: &str,
    objects: &[Value],
    resource_version: &str,
    continue_token: &str,
    with_columns: bool,
) -> Value {
    let now = Utc::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| json!({"cells": row_cells(kind, o, now), "object": partial_metadata(o)}))
        .collect();
    let mut metadata = json!({"resourceVersion": resource_version});
    if !continue_token.is_empty() {
        metadata["continue"] = json!(continue_token);
    }
    let mut table = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "rows": rows,
    });
    if with_columns {
        let columns = shoal_tables::columns(kind)
            .iter()
            .map(column_definition)
            .collect();
        table["columnDefinitions"] = Value::Array(columns);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_has_one_cell_per_column() {
        let obj = json!({"metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        for info in bus_schemas::kinds::KINDS {
            let t = table(info.kind, std::slice::from_ref(&obj), "7", "", true);
            let columns = t["columnDefinitions"].as_array().unwrap().len();
            let cells = t["rows"][0]["cells"].as_array().unwrap().len();
            assert_eq!(columns, cells, "{}", info.kind);
        }
    }

    #[test]
    fn pod_rows_read_like_kubectl() {
        let pod = json!({
            "metadata": {"name": "web-1", "namespace": "d", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        });
        let t = table("Pod", &[pod], "9", "", true);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "web-1");
        assert_eq!(cells[1], "1/2");
        assert_eq!(cells[2], "CrashLoopBackOff");
        assert_eq!(cells[3], "3");
        assert_eq!(cells[6], "n1");
        assert_eq!(t["rows"][0]["object"]["metadata"]["namespace"], "d");
        assert_eq!(t["metadata"]["resourceVersion"], "9");
    }

    #[test]
    fn claims_and_classes_read_like_kubectl() {
        let now = Utc::now();
        let claim = json!({
            "metadata": {"name": "data-web-0", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"storageClassName": "local-path", "volumeName": "pvc-1"},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
        });
        let row = row_cells("PersistentVolumeClaim", &claim, now);
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
        let row = row_cells("StorageClass", &class, now);
        assert_eq!(row[0], "local-path (default)");
        assert_eq!(row[2], "Delete");
        assert_eq!(row[3], "WaitForFirstConsumer");
        assert_eq!(row[4], "false");
    }
}
