//! `shoal get`'s tables: kubectl's columns for every kind, computed from typed objects.
//!
//! # Layout
//! - this module: [`Column`] and the [`Row`] trait, the dispatch from a kind name to its row
//!   ([`columns`], [`cells`]), and [`Table`] (`-o wide`, `-A`, `--show-labels`, rendering).
//! - `cells`: how values read in a cell (ages, `<none>`, label maps, selectors).
//! - `workloads`: Pod, ReplicaSet, Deployment, DaemonSet and Job rows.
//! - `batch`: the CronJob row.
//! - `stateful`: StatefulSet and ControllerRevision rows.
//! - `network`: Service and Endpoints rows.
//! - `cluster`: Namespace, Node, Lease, PriorityClass and Event rows.
//! - `autoscaling`: the HorizontalPodAutoscaler row.
//! - `config`: ConfigMap and Secret rows.
//! - `storage`: PersistentVolume, PersistentVolumeClaim and StorageClass rows.
//! - `characterization` (tests): every kind in every layout, byte for byte, against
//!   `testdata/get.golden`.
//!
//! Each kind's row is `Row::COLUMNS` (headers, `-o wide` ones marked) and `Row::cells` (every
//! column, wide ones included, in that order), from the kind's bus-schemas type and a clock.
//! That is all another printer needs: a Kubernetes Table is the same columns with `wide` as
//! priority 1. The row modules depend only on bus-schemas and chrono, so they can move into a
//! library crate unchanged when a second crate prints tables.

mod autoscaling;
mod batch;
mod cells;
mod cluster;
mod config;
mod network;
mod stateful;
mod storage;
mod workloads;

#[cfg(test)]
mod characterization;

use bus_schemas::{with_kind, ObjectMeta, Resource, Time};
use chrono::{DateTime, Utc};
use serde_json::Value;

pub use cells::age;
pub use workloads::pod_status;

/// One column of a kind's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub header: &'static str,
    /// Shown only with `-o wide` (priority 1 in a Kubernetes Table).
    pub wide: bool,
}

impl Column {
    pub const fn normal(header: &'static str) -> Self {
        Column {
            header,
            wide: false,
        }
    }

    pub const fn wide(header: &'static str) -> Self {
        Column { header, wide: true }
    }
}

/// A kind that prints as one table row per object.
pub trait Row: Resource {
    /// Every column, `-o wide` ones included, in kubectl's order.
    const COLUMNS: &'static [Column];

    /// One cell per entry of [`Row::COLUMNS`], in that order; `now` is what ages are measured
    /// against.
    fn cells(&self, now: Time) -> Vec<String>;
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

/// Kinds this CLI does not know print their name and age.
const UNKNOWN_KIND_COLUMNS: &[Column] = &[Column::normal("NAME"), Column::normal("AGE")];

/// The columns of `kind`'s table, wide ones included.
pub fn columns(kind: &str) -> &'static [Column] {
    with_kind!(kind, K => K::COLUMNS, _ => UNKNOWN_KIND_COLUMNS)
}

/// The cells of one object, one per entry of [`columns`] of its kind.
pub fn cells(kind: &str, object: &Value, now: Time) -> Result<Vec<String>, RowError> {
    with_kind!(
        kind,
        K => decode::<K>(kind, object).map(|typed| typed.cells(now)),
        _ => Ok(vec![untyped_name(object), untyped_age(object, now)])
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
fn undecodable_cells(columns: &[Column], object: &Value, now: Time) -> Vec<String> {
    columns
        .iter()
        .map(|c| match c.header {
            "NAME" => untyped_name(object),
            "AGE" => untyped_age(object, now),
            _ => "<invalid>".into(),
        })
        .collect()
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

/// The metadata the NAMESPACE and LABELS columns read; a best effort for an object whose
/// metadata does not decode either.
fn metadata_of(object: &Value) -> ObjectMeta {
    object
        .get("metadata")
        .and_then(|m| serde_json::from_value(m.clone()).ok())
        .unwrap_or_else(|| ObjectMeta {
            name: untyped_name(object),
            namespace: untyped_str(object, "/metadata/namespace").to_string(),
            ..Default::default()
        })
}

pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Objects that did not decode as their kind; their rows hold `<invalid>` markers.
    pub problems: Vec<RowError>,
}

impl Table {
    pub fn new(headers: Vec<String>, rows: Vec<Vec<String>>) -> Self {
        Table {
            headers,
            rows,
            problems: Vec::new(),
        }
    }

    /// Prints the table, and each object that could not be read to stderr.
    pub fn print(&self, with_headers: bool) {
        print!("{}", self.render(with_headers));
        for problem in &self.problems {
            eprintln!("warning: cannot read {problem}");
        }
    }

    /// The table as kubectl lays it out: columns padded to their widest cell, three spaces apart.
    pub fn render(&self, with_headers: bool) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.len()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::new();
            for (i, cell) in cells.iter().enumerate() {
                if i + 1 == cells.len() {
                    out.push_str(cell);
                } else {
                    out.push_str(&format!("{:<w$}   ", cell, w = widths[i]));
                }
            }
            out.trim_end().to_string()
        };
        let mut text = String::new();
        if with_headers {
            text.push_str(&line(&self.headers));
            text.push('\n');
        }
        for row in &self.rows {
            text.push_str(&line(row));
            text.push('\n');
        }
        text
    }

    /// `get deploy,rs` names each object `kind/name`, as kubectl does when several kinds share
    /// one output.
    pub fn qualify_names(&mut self, singular: &str, namespaced_column: bool) {
        let col = usize::from(namespaced_column);
        for row in &mut self.rows {
            row[col] = format!("{singular}/{}", row[col]);
        }
    }
}

/// Builds the table of one kind.
pub fn build(
    kind: &str,
    objects: &[Value],
    wide: bool,
    namespaced_column: bool,
    show_labels: bool,
) -> Table {
    build_at(
        kind,
        objects,
        wide,
        namespaced_column,
        show_labels,
        Utc::now(),
    )
}

/// [`build`] with the clock that AGE and DURATION are measured against.
pub fn build_at(
    kind: &str,
    objects: &[Value],
    wide: bool,
    namespaced_column: bool,
    show_labels: bool,
    now: Time,
) -> Table {
    let all_columns = columns(kind);
    let shown = |index: usize| wide || !all_columns[index].wide;
    let mut headers: Vec<String> = Vec::new();
    if namespaced_column {
        headers.push("NAMESPACE".into());
    }
    headers.extend(
        (0..all_columns.len())
            .filter(|&i| shown(i))
            .map(|i| all_columns[i].header.to_string()),
    );
    if show_labels {
        headers.push("LABELS".into());
    }
    let mut table = Table::new(headers, Vec::with_capacity(objects.len()));
    for object in objects {
        let all_cells = cells(kind, object, now).unwrap_or_else(|problem| {
            table.problems.push(problem);
            undecodable_cells(all_columns, object, now)
        });
        let metadata = metadata_of(object);
        let mut row = Vec::with_capacity(table.headers.len());
        if namespaced_column {
            row.push(metadata.namespace.clone());
        }
        row.extend(
            all_cells
                .into_iter()
                .enumerate()
                .filter(|&(i, _)| shown(i))
                .map(|(_, cell)| cell),
        );
        if show_labels {
            row.push(cells::map_text(&metadata.labels));
        }
        table.rows.push(row);
    }
    table
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
    fn every_kind_has_a_row_whose_cells_match_its_columns() {
        for info in KINDS {
            let columns = columns(info.kind);
            assert_ne!(columns, UNKNOWN_KIND_COLUMNS, "{} has no row", info.kind);
            let minimal = json!({"metadata": {"name": "x"}, "value": 1});
            let cells = cells(info.kind, &minimal, now()).unwrap();
            assert_eq!(cells.len(), columns.len(), "{}", info.kind);
        }
    }

    #[test]
    fn an_object_that_does_not_decode_keeps_its_name_and_age_and_says_where() {
        let good = json!({"metadata": {"name": "good", "namespace": "default",
            "creationTimestamp": "2026-01-01T23:59:15Z"}, "spec": {"replicas": 2}});
        let bad = json!({"metadata": {"name": "bad", "namespace": "default",
            "creationTimestamp": "2026-01-01T23:59:15Z", "labels": {"app": "web"}},
            "spec": {"replicas": "two"}});
        let table = build_at("ReplicaSet", &[good, bad], true, true, true, now());
        assert_eq!(
            table.rows[1],
            [
                "default",
                "bad",
                "<invalid>",
                "<invalid>",
                "<invalid>",
                "45s",
                "<invalid>",
                "<invalid>",
                "<invalid>",
                "app=web"
            ]
        );
        assert_eq!(table.rows[0][..3], ["default", "good", "2"]);
        assert_eq!(table.problems.len(), 1);
        let problem = table.problems[0].to_string();
        assert!(
            problem.starts_with("ReplicaSet default/bad: spec.replicas: invalid type: string"),
            "{problem}"
        );
    }

    #[test]
    fn an_object_without_metadata_still_gets_a_row() {
        let table = build_at("Pod", &[json!("not an object")], false, true, true, now());
        assert_eq!(table.rows[0].len(), table.headers.len());
        assert_eq!(table.rows[0][1], "");
        assert_eq!(table.problems.len(), 1);
    }

    #[test]
    fn unknown_kinds_print_name_and_age() {
        let object =
            json!({"metadata": {"name": "w", "creationTimestamp": "2026-01-01T23:59:15Z"}});
        let table = build_at("Widget", &[object], false, false, false, now());
        assert_eq!(table.headers, ["NAME", "AGE"]);
        assert_eq!(table.rows[0], ["w", "45s"]);
    }
}
