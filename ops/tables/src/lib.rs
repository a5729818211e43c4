//! kubectl's table rows, one implementation for every printer: `shoal get` renders them as
//! text, the Kubernetes gateway sends them as `meta.k8s.io/v1` Tables (server-side printing,
//! which is all kubectl 1.32 shows for these kinds beyond NAME and AGE).
//!
//! # Layout
//! - this module: [`Column`] (name, type, `-o wide` or not, which printers show it), [`Cell`],
//!   the [`Row`] trait, and the dispatch from a kind name to its row ([`columns`], [`cells`],
//!   [`undecodable_cells`] for an object that does not decode as its kind).
//! - `cells`: how values read in a cell (ages, `<none>`, label maps, selectors).
//! - `workloads`: Pod, ReplicaSet, Deployment, DaemonSet and Job rows.
//! - `batch`: the CronJob row.
//! - `stateful`: StatefulSet and ControllerRevision rows.
//! - `network`: Service and Endpoints rows.
//! - `cluster`: Namespace, Node, Lease, PriorityClass and Event rows.
//! - `autoscaling`: the HorizontalPodAutoscaler and VerticalPodAutoscaler rows, and HPA metrics as kubectl words them
//!   (`cpu: 73%/60%`), which `shoal describe hpa` reads too.
//! - `config`: ConfigMap and Secret rows.
//! - `storage`: PersistentVolume, PersistentVolumeClaim and StorageClass rows.
//!
//! Each kind's row is `Row::COLUMNS` and `Row::cells` (every column, wide ones included, in
//! that order), from the kind's bus-schemas type and a clock. Both printers show exactly
//! these columns, those a Kubernetes 1.32 API server sends: `shoal get -o wide` and
//! `kubectl get -o wide` through the gateway print the same headers and cells.

mod autoscaling;
mod batch;
mod cells;
mod cluster;
mod config;
mod network;
mod stateful;
mod storage;
mod workloads;

use std::fmt;

use bus_schemas::{with_kind, ObjectMeta, Resource, Time};
use chrono::{DateTime, Utc};
use serde_json::Value;

pub use autoscaling::{metric_values, metrics_with_status, targets};
pub use cells::{age, map_text};
pub use workloads::pod_status;

/// A column's type, as a Kubernetes API server declares it in a Table's `columnDefinitions`
/// (kubectl aligns and sorts by it). Cells of an integer or boolean column are JSON numbers
/// or booleans there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    String,
    Integer,
    Boolean,
}

impl ColumnType {
    /// The name a Table's column definition carries.
    pub fn api_name(self) -> &'static str {
        match self {
            ColumnType::String => "string",
            ColumnType::Integer => "integer",
            ColumnType::Boolean => "boolean",
        }
    }
}

/// One column of a kind's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// As a Kubernetes API server names it (`Up-to-date`); kubectl and `shoal get` print it
    /// upper-cased.
    pub name: &'static str,
    pub type_: ColumnType,
    /// What the column shows, for a Table's column definition; upstream's are long prose
    /// that kubectl never prints, so they are left empty.
    pub description: &'static str,
    /// Shown only with `-o wide` (priority 1 in a Kubernetes Table).
    pub wide: bool,
}

impl Column {
    pub const fn normal(name: &'static str) -> Self {
        Column {
            name,
            type_: ColumnType::String,
            description: "",
            wide: false,
        }
    }

    pub const fn wide(name: &'static str) -> Self {
        Column {
            wide: true,
            ..Column::normal(name)
        }
    }

    pub const fn integer(self) -> Self {
        Column {
            type_: ColumnType::Integer,
            ..self
        }
    }

    pub const fn boolean(self) -> Self {
        Column {
            type_: ColumnType::Boolean,
            ..self
        }
    }

    /// The header kubectl and `shoal get` print.
    pub fn header(&self) -> String {
        self.name.to_uppercase()
    }
}

/// One cell: text, or a number or flag where the column's type says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    Text(String),
    Integer(i64),
    Boolean(bool),
}

impl Cell {
    /// The cell as a Table row carries it.
    pub fn to_json(&self) -> Value {
        match self {
            Cell::Text(text) => Value::from(text.as_str()),
            Cell::Integer(n) => Value::from(*n),
            Cell::Boolean(b) => Value::from(*b),
        }
    }

    /// Whether the cell is of the kind its column declares (text fits a string column only).
    pub fn fits(&self, type_: ColumnType) -> bool {
        matches!(
            (self, type_),
            (Cell::Text(_), ColumnType::String)
                | (Cell::Integer(_), ColumnType::Integer)
                | (Cell::Boolean(_), ColumnType::Boolean)
        )
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Text(text) => f.write_str(text),
            Cell::Integer(n) => write!(f, "{n}"),
            Cell::Boolean(b) => write!(f, "{b}"),
        }
    }
}

/// A cell equals the text it prints as: `Cell::Integer(2) == "2"`, as a reader of the table
/// sees it.
impl PartialEq<&str> for Cell {
    fn eq(&self, text: &&str) -> bool {
        match self {
            Cell::Text(own) => own == text,
            Cell::Integer(n) => text.parse() == Ok(*n),
            Cell::Boolean(b) => text.parse() == Ok(*b),
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Cell::Text(text)
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        Cell::Text(text.to_string())
    }
}

impl From<i64> for Cell {
    fn from(n: i64) -> Self {
        Cell::Integer(n)
    }
}

impl From<i32> for Cell {
    fn from(n: i32) -> Self {
        Cell::Integer(n.into())
    }
}

impl From<usize> for Cell {
    fn from(n: usize) -> Self {
        Cell::Integer(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<bool> for Cell {
    fn from(b: bool) -> Self {
        Cell::Boolean(b)
    }
}

/// A kind that prints as one table row per object.
pub trait Row: Resource {
    /// Every column, `-o wide` ones and those of one printer only included, in kubectl's
    /// order.
    const COLUMNS: &'static [Column];

    /// One cell per entry of [`Row::COLUMNS`], in that order; `now` is what ages are measured
    /// against.
    fn cells(&self, now: Time) -> Vec<Cell>;
}

/// Why an object could not be read as its kind: the field and what was wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{kind} {name}: {field}: {message}")]
pub struct RowError {
    pub kind: String,
    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub name: String,
    /// The field path, as in `spec.containers[0].restartCount`.
    pub field: String,
    pub message: String,
}

/// Kinds without a row print their name and age.
pub const UNKNOWN_KIND_COLUMNS: &[Column] = &[Column::normal("Name"), Column::normal("Age")];

/// The columns of `kind`'s table, wide ones and those of one printer only included.
pub fn columns(kind: &str) -> &'static [Column] {
    with_kind!(kind, K => K::COLUMNS, _ => UNKNOWN_KIND_COLUMNS)
}

/// The cells of one object, one per entry of [`columns`] of its kind.
pub fn cells(kind: &str, object: &Value, now: Time) -> Result<Vec<Cell>, RowError> {
    with_kind!(
        kind,
        K => decode::<K>(kind, object).map(|typed| typed.cells(now)),
        _ => Ok(vec![untyped_name(object).into(), untyped_age(object, now).into()])
    )
}

fn decode<K: Row>(kind: &str, object: &Value) -> Result<K, RowError> {
    serde_path_to_error::deserialize(object).map_err(|e| RowError {
        kind: kind.to_string(),
        name: untyped_qualified_name(object),
        field: e.path().to_string(),
        message: e.inner().to_string(),
    })
}

/// Cells of an object that failed to decode: what its metadata still tells, and a marker in
/// every column that would have needed the rest.
pub fn undecodable_cells(kind: &str, object: &Value, now: Time) -> Vec<Cell> {
    columns(kind)
        .iter()
        .map(|c| match c.name {
            "Name" => untyped_name(object).into(),
            "Age" => untyped_age(object, now).into(),
            _ => "<invalid>".into(),
        })
        .collect()
}

/// The metadata the NAMESPACE and LABELS columns read; a best effort for an object whose
/// metadata does not decode either.
pub fn metadata_of(object: &Value) -> ObjectMeta {
    object
        .get("metadata")
        .and_then(|m| serde_json::from_value(m.clone()).ok())
        .unwrap_or_else(|| ObjectMeta {
            name: untyped_name(object),
            namespace: untyped_str(object, "/metadata/namespace").to_string(),
            ..Default::default()
        })
}

fn untyped_str<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn untyped_name(object: &Value) -> String {
    untyped_str(object, "/metadata/name").to_string()
}

fn untyped_qualified_name(object: &Value) -> String {
    match untyped_str(object, "/metadata/namespace") {
        "" => untyped_name(object),
        namespace => format!("{namespace}/{}", untyped_name(object)),
    }
}

fn untyped_age(object: &Value, now: Time) -> String {
    let created = DateTime::parse_from_rfc3339(untyped_str(object, "/metadata/creationTimestamp"))
        .ok()
        .map(|t| t.with_timezone(&Utc));
    age(created, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::kinds::KINDS;
    use serde_json::json;

    fn now() -> Time {
        DateTime::parse_from_rfc3339("2026-01-02T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn every_kind_has_a_row_whose_cells_match_its_columns_in_number_and_type() {
        for info in KINDS {
            let columns = columns(info.kind);
            assert_ne!(columns, UNKNOWN_KIND_COLUMNS, "{} has no row", info.kind);
            let minimal = json!({"metadata": {"name": "x"}, "value": 1});
            let cells = cells(info.kind, &minimal, now()).unwrap();
            assert_eq!(cells.len(), columns.len(), "{}", info.kind);
            for (column, cell) in columns.iter().zip(&cells) {
                assert!(
                    cell.fits(column.type_),
                    "{} {}: {cell:?} in a {:?} column",
                    info.kind,
                    column.name,
                    column.type_
                );
            }
        }
    }

    #[test]
    fn an_object_that_does_not_decode_says_where_and_keeps_its_name_and_age() {
        let bad = json!({"metadata": {"name": "bad", "namespace": "default",
            "creationTimestamp": "2026-01-01T23:59:15Z"}, "spec": {"replicas": "two"}});
        let problem = cells("ReplicaSet", &bad, now()).unwrap_err().to_string();
        assert!(
            problem.starts_with("ReplicaSet default/bad: spec.replicas: invalid type: string"),
            "{problem}"
        );
        let shown: Vec<String> = undecodable_cells("ReplicaSet", &bad, now())
            .iter()
            .map(Cell::to_string)
            .collect();
        assert_eq!(shown[..3], ["bad", "<invalid>", "<invalid>"]);
        assert_eq!(shown[4], "45s");
    }

    #[test]
    fn cells_of_integer_and_boolean_columns_are_json_numbers_and_booleans() {
        let class = json!({"metadata": {"name": "high"}, "value": 1000, "globalDefault": true});
        let row: Vec<Value> = cells("PriorityClass", &class, now())
            .unwrap()
            .iter()
            .map(Cell::to_json)
            .collect();
        assert_eq!(row[..3], [json!("high"), json!(1000), json!(true)]);
    }

    #[test]
    fn unknown_kinds_print_name_and_age() {
        let object =
            json!({"metadata": {"name": "w", "creationTimestamp": "2026-01-01T23:59:15Z"}});
        let row = cells("Widget", &object, now()).unwrap();
        assert_eq!(row, [Cell::from("w"), Cell::from("45s")]);
        assert_eq!(columns("Widget"), UNKNOWN_KIND_COLUMNS);
    }
}
