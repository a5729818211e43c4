//! `shoal get`'s tables: kubectl's layout (`-o wide`, `-A`, `--show-labels`, `--no-headers`)
//! of the rows `shoal_tables` computes per kind, which the gateway's server-side Tables are
//! made of too.
//!
//! # Layout
//! - this module: [`Table`] (which columns show, the NAMESPACE and LABELS columns, padding)
//!   and [`build`], from a kind's objects.
//! - `characterization` (tests): every kind in every layout, byte for byte, against
//!   `testdata/get.golden`.
//! - `parity` (tests): every kind's headers here equal the gateway's Table columns (priority
//!   0 and 1), but for the columns `shoal_tables` marks as one printer's.

#[cfg(test)]
mod characterization;
#[cfg(test)]
mod parity;

use bus_schemas::Time;
use chrono::Utc;
use serde_json::Value;
use shoal_tables::{Column, RowError};

pub use shoal_tables::pod_status;

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
    let all_columns = shoal_tables::columns(kind);
    let shown = |column: &Column| wide || !column.wide;
    let mut headers: Vec<String> = Vec::new();
    if namespaced_column {
        headers.push("NAMESPACE".into());
    }
    headers.extend(all_columns.iter().filter(|c| shown(c)).map(Column::header));
    if show_labels {
        headers.push("LABELS".into());
    }
    let mut table = Table::new(headers, Vec::with_capacity(objects.len()));
    for object in objects {
        let all_cells = shoal_tables::cells(kind, object, now).unwrap_or_else(|problem| {
            table.problems.push(problem);
            shoal_tables::undecodable_cells(kind, object, now)
        });
        let metadata = shoal_tables::metadata_of(object);
        let mut row = Vec::with_capacity(table.headers.len());
        if namespaced_column {
            row.push(metadata.namespace.clone());
        }
        row.extend(
            all_columns
                .iter()
                .zip(all_cells)
                .filter(|(column, _)| shown(column))
                .map(|(_, cell)| cell.to_string()),
        );
        if show_labels {
            row.push(shoal_tables::map_text(&metadata.labels));
        }
        table.rows.push(row);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;
    use serde_json::json;

    fn now() -> Time {
        DateTime::parse_from_rfc3339("2026-01-02T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
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
