//! `shoal get` and `kubectl get` through the gateway print the same columns: for every kind,
//! the gateway's Table columns of priority 0 and 1 are, upper-cased as kubectl prints them,
//! `shoal get`'s plain and `-o wide` headers, with no exception.

use bus_schemas::kinds::KINDS;
use serde_json::{json, Value};

use super::build_at;

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
        let gateway: Value = serde_json::from_slice(&shoal_gateway::table::table(
            kind,
            std::slice::from_ref(&object),
            "1",
            "",
            true,
        ))
        .expect("the gateway writes a Table as JSON");
        let plain = build_at(kind, &[], false, false, false, now).headers;
        let wide = build_at(kind, &[], true, false, false, now).headers;
        assert!(wide.starts_with(&plain), "{kind}: wide columns come last");
        assert_eq!(
            gateway_headers(&gateway, 0),
            plain,
            "{kind}: normal columns"
        );
        assert_eq!(
            gateway_headers(&gateway, 1),
            wide[plain.len()..].to_vec(),
            "{kind}: wide columns"
        );
    }
}
