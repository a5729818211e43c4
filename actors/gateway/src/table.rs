//! Server-side printing: `meta.k8s.io/v1` Tables with the columns a Kubernetes 1.32 cluster
//! prints per kind (priority 1 columns are the `-o wide` ones). kubectl 1.32 has no column
//! printers of its own for these kinds, so without this it shows only NAME and AGE.
//!
//! The rows are `shoal_tables`', the same as `shoal get` prints: each object is decoded into
//! its bus-schemas type and asked for its cells. This module only keeps the columns a Table
//! carries and wraps them in Kubernetes' shape.
//!
//! Why Tables are serialised from typed rows and not built as a `serde_json::Value`: a list
//! page is the gateway's largest answer (`kubectl get pods -A` reads every pod this way), and
//! the Value tree (msgpack → Value → typed for the cells → Value → JSON) cost about twice the
//! bus path's whole list. A page the API answered is decoded once into its kind's type
//! ([`typed_rows`]); cells and metadata are written from it by serde straight into the
//! response bytes ([`encode`]). Objects only at hand as JSON (a single reply, a watch event)
//! take [`value_rows`], which reads the same cells.

use bus_schemas::ObjectMeta;
use chrono::{DateTime, Utc};
use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::Value;
use shoal_tables::{Cell, Column};

/// One row of a Table: the object's cells and the metadata kubectl reads namespaces and
/// labels from (`-A`, `--show-labels`).
#[derive(Serialize)]
pub struct TableRow<M: Serialize> {
    #[serde(serialize_with = "cells_json")]
    cells: Vec<Cell>,
    object: PartialObjectMetadata<M>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PartialObjectMetadata<M: Serialize> {
    kind: &'static str,
    api_version: &'static str,
    metadata: M,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Table<'a, M: Serialize> {
    kind: &'static str,
    api_version: &'static str,
    metadata: TableMeta<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    column_definitions: Option<Vec<ColumnDefinition>>,
    rows: &'a [TableRow<M>],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TableMeta<'a> {
    resource_version: &'a str,
    #[serde(rename = "continue", skip_serializing_if = "str::is_empty")]
    continue_token: &'a str,
}

#[derive(Serialize)]
struct ColumnDefinition {
    name: &'static str,
    #[serde(rename = "type")]
    type_: &'static str,
    format: &'static str,
    description: &'static str,
    priority: u8,
}

impl ColumnDefinition {
    fn of(column: &Column) -> ColumnDefinition {
        ColumnDefinition {
            name: column.name,
            type_: column.type_.api_name(),
            format: if column.name == "Name" { "name" } else { "" },
            description: column.description,
            priority: u8::from(column.wide),
        }
    }
}

/// Cells as a Table carries them: JSON strings, numbers and booleans as their columns say.
fn cells_json<S: Serializer>(cells: &[Cell], serializer: S) -> Result<S::Ok, S::Error> {
    let mut seq = serializer.serialize_seq(Some(cells.len()))?;
    for cell in cells {
        match cell {
            Cell::Text(text) => seq.serialize_element(text)?,
            Cell::Integer(n) => seq.serialize_element(n)?,
            Cell::Boolean(b) => seq.serialize_element(b)?,
        }
    }
    seq.end()
}

fn row<M: Serialize>(cells: Vec<Cell>, metadata: M) -> TableRow<M> {
    TableRow {
        cells,
        object: PartialObjectMetadata {
            kind: "PartialObjectMetadata",
            api_version: "meta.k8s.io/v1",
            metadata,
        },
    }
}

/// Rows of objects decoded as their kind: the list path.
pub fn typed_rows<K: shoal_tables::Row>(
    objects: &[K],
    now: DateTime<Utc>,
) -> Vec<TableRow<&ObjectMeta>> {
    objects
        .iter()
        .map(|o| row(o.cells(now), o.meta()))
        .collect()
}

/// Rows of objects at hand as JSON. An object that does not decode as its kind (none should:
/// the API checked it) keeps its name and age, and is logged.
pub fn value_rows<'a>(
    kind: &str,
    objects: &'a [Value],
    now: DateTime<Utc>,
) -> Vec<TableRow<&'a Value>> {
    static EMPTY: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let empty = EMPTY.get_or_init(|| Value::Object(Default::default()));
    objects
        .iter()
        .map(|o| {
            let cells = shoal_tables::cells(kind, o, now).unwrap_or_else(|problem| {
                tracing::warn!(%problem, "cannot read an object for its table row");
                shoal_tables::undecodable_cells(kind, o, now)
            });
            row(cells, o.get("metadata").unwrap_or(empty))
        })
        .collect()
}

/// A Table of `rows` of one kind, as JSON bytes. `with_columns` is false for watch events
/// after the first, as upstream sends them.
pub fn encode<M: Serialize>(
    kind: &str,
    rows: &[TableRow<M>],
    resource_version: &str,
    continue_token: &str,
    with_columns: bool,
) -> Vec<u8> {
    let table = Table {
        kind: "Table",
        api_version: "meta.k8s.io/v1",
        metadata: TableMeta {
            resource_version,
            continue_token,
        },
        column_definitions: with_columns.then(|| {
            shoal_tables::columns(kind)
                .iter()
                .map(ColumnDefinition::of)
                .collect()
        }),
        rows,
    };
    // Serialising these types cannot fail: every map key is a string.
    serde_json::to_vec(&table).unwrap_or_default()
}

/// A Table of objects at hand as JSON.
pub fn table(
    kind: &str,
    objects: &[Value],
    resource_version: &str,
    continue_token: &str,
    with_columns: bool,
) -> Vec<u8> {
    let rows = value_rows(kind, objects, Utc::now());
    encode(kind, &rows, resource_version, continue_token, with_columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table_value(kind: &str, objects: &[Value], rv: &str, with_columns: bool) -> Value {
        serde_json::from_slice(&table(kind, objects, rv, "", with_columns)).unwrap()
    }

    fn row_cells(kind: &str, object: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let rows = value_rows(kind, std::slice::from_ref(object), now);
        let cells = serde_json::to_value(&rows[0]).unwrap()["cells"].clone();
        cells.as_array().unwrap().clone()
    }

    #[test]
    fn every_row_has_one_cell_per_column() {
        let obj = json!({"metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        for info in bus_schemas::kinds::KINDS {
            let t = table_value(info.kind, std::slice::from_ref(&obj), "7", true);
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
        let t = table_value("Pod", &[pod], "9", true);
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

    #[test]
    fn typed_pages_print_as_the_same_table_as_json_objects() {
        let pod: bus_schemas::kinds::Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "d", "uid": "u1", "resourceVersion": "12",
                         "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "web", "uid": "u0", "controller": true}]},
            "spec": {"containers": [{"name": "a", "image": "busybox"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}}}]}
        }))
        .unwrap();
        // What the API stores and a JSON list carries: the typed object's own serialisation.
        let stored = serde_json::to_value(&pod).unwrap();
        let now = Utc::now();
        let typed = typed_rows(std::slice::from_ref(&pod), now);
        let typed: Value =
            serde_json::from_slice(&encode("Pod", &typed, "12", "d/web-1", true)).unwrap();
        let values = value_rows("Pod", std::slice::from_ref(&stored), now);
        let values: Value =
            serde_json::from_slice(&encode("Pod", &values, "12", "d/web-1", true)).unwrap();
        assert_eq!(typed, values);
        assert_eq!(typed["rows"][0]["cells"][1], "1/1");
        assert_eq!(
            typed["rows"][0]["object"]["metadata"]["labels"]["app"],
            "web"
        );
        assert_eq!(
            typed["rows"][0]["object"]["metadata"]["ownerReferences"][0]["name"],
            "web"
        );
        assert_eq!(typed["metadata"]["continue"], "d/web-1");
    }

    #[test]
    fn watch_events_after_the_first_carry_no_column_definitions() {
        let obj = json!({"metadata": {"name": "x"}});
        let first = table_value("Pod", std::slice::from_ref(&obj), "3", true);
        let later = table_value("Pod", std::slice::from_ref(&obj), "3", false);
        assert!(first["columnDefinitions"].is_array());
        assert!(later.get("columnDefinitions").is_none());
        assert!(later["metadata"].get("continue").is_none());
    }
}
