//! How values read in a cell, shared by every kind's row: ages, `<none>`, label maps and
//! selectors.

use std::collections::BTreeMap;

use bus_schemas::selector::LabelSelector;
use bus_schemas::Time;

/// kubectl prints `<none>` where a value is missing, so that columns never look shifted.
pub fn or_none(text: &str) -> String {
    if text.is_empty() {
        "<none>".into()
    } else {
        text.to_string()
    }
}

/// kubectl's short ages: 45s, 5m12s, 17m, 3h20m, 5h, 2d3h, 12d; `<unknown>` without a time.
pub fn age(since: Option<Time>, now: Time) -> String {
    let Some(since) = since else {
        return "<unknown>".into();
    };
    let secs = (now - since).num_seconds().max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{m}m{}s", s % 60),
        s if s < 3 * 3600 => format!("{m}m"),
        s if s < 8 * 3600 => format!("{h}h{}m", m % 60),
        s if s < 2 * 86400 => format!("{h}h"),
        s if s < 8 * 86400 => format!("{d}d{}h", h % 24),
        _ => format!("{d}d"),
    }
}

/// `app=web,tier=front`, as labels, node selectors and Service selectors print.
pub fn map_text(map: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
    or_none(&parts.join(","))
}

/// A workload's selector as `shoal get` prints it: its labels, then its expressions as
/// `key Operator (a,b)`.
pub fn selector_text(selector: Option<&LabelSelector>) -> String {
    let Some(selector) = selector else {
        return "<none>".into();
    };
    let labels = selector
        .match_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"));
    let expressions = selector
        .match_expressions
        .iter()
        .map(|e| format!("{} {} ({})", e.key, e.operator, e.values.join(",")));
    let parts: Vec<String> = labels.chain(expressions).collect();
    or_none(&parts.join(","))
}

/// A workload's selector as a Kubernetes server prints it: the selector grammar, requirements
/// sorted by key (`app=web,!canary,tier in (edge,front)`). One that does not convert (an
/// operator the grammar lacks) prints as `shoal get` prints it.
pub fn selector_grammar(selector: Option<&LabelSelector>) -> String {
    let Some(selector) = selector else {
        return "<none>".into();
    };
    match selector.to_selector() {
        Ok(grammar) => or_none(&grammar.to_string()),
        Err(_) => selector_text(Some(selector)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;

    fn at(text: &str) -> Time {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&chrono::Utc)
    }

    #[test]
    fn ages_read_like_kubectl() {
        let now = at("2026-01-02T00:00:00Z");
        assert_eq!(age(Some(at("2026-01-01T23:59:15Z")), now), "45s");
        assert_eq!(age(Some(at("2026-01-01T23:54:48Z")), now), "5m12s");
        assert_eq!(age(Some(at("2026-01-01T21:00:00Z")), now), "3h0m");
        assert_eq!(age(Some(at("2025-12-20T00:00:00Z")), now), "13d");
        assert_eq!(age(Some(at("2026-01-03T00:00:00Z")), now), "0s");
        assert_eq!(age(None, now), "<unknown>");
    }

    #[test]
    fn an_empty_selector_prints_none() {
        assert_eq!(selector_text(None), "<none>");
        assert_eq!(selector_text(Some(&LabelSelector::default())), "<none>");
        assert_eq!(map_text(&BTreeMap::new()), "<none>");
        assert_eq!(selector_grammar(None), "<none>");
        assert_eq!(selector_grammar(Some(&LabelSelector::default())), "<none>");
    }

    #[test]
    fn selectors_print_in_both_forms() {
        let selector: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "edge"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert_eq!(
            selector_text(Some(&selector)),
            "app=web,tier In (front,edge),canary DoesNotExist ()"
        );
        assert_eq!(
            selector_grammar(Some(&selector)),
            "app=web,!canary,tier in (edge,front)"
        );
    }
}
