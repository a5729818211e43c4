//! `shoal get` and `kubectl get` through the gateway print the same columns: for every kind,
//! the gateway's Table columns of priority 0 and 1 are, upper-cased as kubectl prints them,
//! `shoal get`'s plain and `-o wide` headers. The only exceptions are the columns
//! `shoal_tables` marks as one printer's, and they are listed here, so that a new one is a
//! decision someone reads rather than drift.

use bus_schemas::kinds::KINDS;
use serde_json::{json, Value};
use shoal_tables::ShownIn;

use super::build_at;

/// (kind, header, the printer that shows it): the columns a Kubernetes 1.32 API server
/// sends that `shoal get` has never printed, those it prints that a server does not, and
/// SELECTOR, which each prints its own way (`tier In (a,b)` here, the selector grammar there).
const ONE_PRINTER_COLUMNS: &[(&str, &str, ShownIn)] = &[
    ("ReplicaSet", "SELECTOR", ShownIn::ShoalGet),
    ("ReplicaSet", "SELECTOR", ShownIn::KubernetesTable),
    ("Deployment", "SELECTOR", ShownIn::ShoalGet),
    ("Deployment", "SELECTOR", ShownIn::KubernetesTable),
    ("CronJob", "SELECTOR", ShownIn::ShoalGet),
    ("CronJob", "SELECTOR", ShownIn::KubernetesTable),
    ("Node", "EXTERNAL-IP", ShownIn::KubernetesTable),
    ("Node", "CONTAINER-RUNTIME", ShownIn::KubernetesTable),
    ("Node", "POD-CIDR", ShownIn::ShoalGet),
    ("Pod", "READINESS GATES", ShownIn::KubernetesTable),
    ("DaemonSet", "CONTAINERS", ShownIn::KubernetesTable),
    ("DaemonSet", "IMAGES", ShownIn::KubernetesTable),
    ("DaemonSet", "SELECTOR", ShownIn::KubernetesTable),
    ("Job", "CONTAINERS", ShownIn::KubernetesTable),
    ("Job", "IMAGES", ShownIn::KubernetesTable),
    ("Job", "SELECTOR", ShownIn::KubernetesTable),
    ("Event", "SUBOBJECT", ShownIn::KubernetesTable),
    ("Event", "SOURCE", ShownIn::KubernetesTable),
    ("Event", "FIRST SEEN", ShownIn::KubernetesTable),
    ("Event", "COUNT", ShownIn::KubernetesTable),
    ("Event", "NAME", ShownIn::KubernetesTable),
    (
        "PriorityClass",
        "PREEMPTION-POLICY",
        ShownIn::KubernetesTable,
    ),
];

fn one_printer(kind: &str, header: &str) -> bool {
    ONE_PRINTER_COLUMNS
        .iter()
        .any(|&(k, h, _)| k == kind && h == header)
}

/// The gateway's column names of this priority, as kubectl prints them.
fn gateway_headers(table: &Value, priority: u64) -> Vec<String> {
    table["columnDefinitions"]
        .as_array()
        .expect("a Table with columns")
        .iter()
        .filter(|c| c["priority"] == priority)
        .map(|c| c["name"].as_str().unwrap_or("").to_uppercase())
        .collect()
}

#[test]
fn the_gateway_and_shoal_get_print_the_same_headers_for_every_kind() {
    let object = json!({"metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"}});
    let now = chrono::Utc::now();
    for info in KINDS {
        let kind = info.kind;
        let gateway =
            shoal_gateway::table::table(kind, std::slice::from_ref(&object), "1", "", true);
        let plain = build_at(kind, &[], false, false, false, now).headers;
        let wide = build_at(kind, &[], true, false, false, now).headers;
        assert!(wide.starts_with(&plain), "{kind}: wide columns come last");
        let wide_only: Vec<String> = wide[plain.len()..].to_vec();
        let shared = |headers: Vec<String>| -> Vec<String> {
            headers
                .into_iter()
                .filter(|h| !one_printer(kind, h))
                .collect()
        };
        assert_eq!(
            gateway_headers(&gateway, 0),
            plain,
            "{kind}: normal columns"
        );
        assert_eq!(
            shared(gateway_headers(&gateway, 1)),
            shared(wide_only),
            "{kind}: wide columns"
        );
    }
}

#[test]
fn the_listed_one_printer_columns_are_exactly_those_the_rows_declare() {
    let mut declared: Vec<(&'static str, String, ShownIn)> = Vec::new();
    for info in KINDS {
        for column in shoal_tables::columns(info.kind) {
            if column.shown_in != ShownIn::Both {
                declared.push((info.kind, column.header(), column.shown_in));
            }
        }
    }
    let mut listed: Vec<(&str, String, ShownIn)> = ONE_PRINTER_COLUMNS
        .iter()
        .map(|&(k, h, s)| (k, h.to_string(), s))
        .collect();
    let key = |(kind, header, shown_in): &(&'static str, String, ShownIn)| {
        (*kind, header.clone(), *shown_in as u8)
    };
    declared.sort_by_key(key);
    listed.sort_by_key(key);
    assert_eq!(declared, listed);
}
