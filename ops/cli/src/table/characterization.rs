//! `shoal get`'s tables, pinned byte for byte: every kind's fixture objects rendered in every
//! layout (plain, `-o wide`, `--show-labels`, `-A`, and several kinds in one `get`), compared
//! with `testdata/get.golden`. Table rendering is a pure function of the objects and a clock,
//! so the clock is fixed.
//!
//! After an intended change of output, rewrite the golden file with
//! `SHOAL_BLESS=1 cargo nextest run -p shoal-cli characterization` and review its diff.

use std::fmt::Write;

use bus_schemas::kinds::{lookup, KINDS};
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::build_at;

const GOLDEN_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/table/testdata/get.golden");

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-02T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn fixtures() -> Value {
    serde_json::from_str(include_str!("testdata/objects.json")).expect("fixtures parse")
}

fn objects_of(fixtures: &Value, kind: &str) -> Vec<Value> {
    fixtures[kind]
        .as_array()
        .unwrap_or_else(|| panic!("no fixtures for {kind}"))
        .clone()
}

/// What `shoal get KINDS` prints for these flags: one table per kind with objects, a blank
/// line between kinds, names qualified as `kind/name` when several kinds are asked for.
fn get_output(
    fixtures: &Value,
    kinds: &[&str],
    wide: bool,
    all_namespaces: bool,
    show_labels: bool,
) -> String {
    let mut out = String::new();
    let multiple_kinds = kinds.len() > 1;
    for (i, name) in kinds.iter().enumerate() {
        let info = lookup(name).unwrap();
        let objects = objects_of(fixtures, info.kind);
        if multiple_kinds && i > 0 {
            out.push('\n');
        }
        let namespaced_column = all_namespaces && info.namespaced;
        let mut table = build_at(
            info.kind,
            &objects,
            wide,
            namespaced_column,
            show_labels,
            now(),
        );
        assert!(
            table.problems.is_empty(),
            "fixtures must decode as their kind: {:?}",
            table.problems
        );
        if multiple_kinds {
            table.qualify_names(&info.singular(), namespaced_column);
        }
        out.push_str(&table.render(true));
    }
    out
}

fn every_layout() -> String {
    let fixtures = fixtures();
    let mut out = String::new();
    let layouts = [
        ("", false, false, false),
        ("-o wide", true, false, false),
        ("--show-labels", false, false, true),
        ("-A", false, true, false),
        ("-A -o wide --show-labels", true, true, true),
    ];
    let mut cases: Vec<Vec<&str>> = KINDS.iter().map(|k| vec![k.kind]).collect();
    cases.push(vec!["deploy", "rs", "po"]);
    cases.push(vec!["svc", "ep", "no"]);
    for kinds in &cases {
        for (flags, wide, all_namespaces, show_labels) in layouts {
            writeln!(out, "$ shoal get {} {flags}", kinds.join(",")).unwrap();
            out.push_str(&get_output(
                &fixtures,
                kinds,
                wide,
                all_namespaces,
                show_labels,
            ));
            out.push('\n');
        }
    }
    // `get -w` prints each changed object as a row without headers.
    let pod = objects_of(&fixtures, "Pod").remove(0);
    writeln!(out, "$ shoal get po -w (one event)").unwrap();
    out.push_str(&build_at("Pod", &[pod], false, false, false, now()).render(false));
    out
}

#[test]
fn every_kind_and_layout_prints_as_before() {
    let actual = every_layout();
    if std::env::var_os("SHOAL_BLESS").is_some() {
        std::fs::write(GOLDEN_PATH, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(GOLDEN_PATH).unwrap();
    if actual != expected {
        for (i, (a, e)) in actual.lines().zip(expected.lines()).enumerate() {
            assert_eq!(
                a,
                e,
                "first difference at line {} of the golden file",
                i + 1
            );
        }
        assert_eq!(
            actual.lines().count(),
            expected.lines().count(),
            "line count"
        );
        assert_eq!(actual, expected);
    }
}
