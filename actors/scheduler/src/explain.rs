//! The "0/5 nodes are available: …" message: every reason with the number of nodes that
//! gave it, most frequent first (ties by reason text), so people see the main obstacle first.

use std::collections::HashMap;

use crate::filter::Reason;

/// Renders the message for `total` nodes and the per-reason node counts.
pub fn message(total: usize, reasons: &HashMap<Reason, usize>) -> String {
    let mut items: Vec<(usize, String)> = reasons
        .iter()
        .filter(|(r, _)| **r != Reason::CacheBehind)
        .map(|(r, n)| (*n, r.to_string()))
        .collect();
    items.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    if total == 0 {
        return "0/0 nodes are available: no nodes available to schedule pods.".into();
    }
    let parts: Vec<String> = items.iter().map(|(n, r)| format!("{n} {r}")).collect();
    if parts.is_empty() {
        return format!("0/{total} nodes are available.");
    }
    format!("0/{total} nodes are available: {}.", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reasons_like_kube_scheduler() {
        let reasons = HashMap::from([
            (Reason::Unschedulable, 1),
            (Reason::Insufficient("memory".into()), 2),
        ]);
        assert_eq!(
            message(3, &reasons),
            "0/3 nodes are available: 2 Insufficient memory, 1 node(s) were unschedulable."
        );
        let reasons = HashMap::from([
            (
                Reason::Taint {
                    key: "dedicated".into(),
                    value: "gpu".into(),
                },
                2,
            ),
            (Reason::Insufficient("cpu".into()), 3),
        ]);
        assert_eq!(
            message(5, &reasons),
            "0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}."
        );
        let all = HashMap::from([
            (Reason::NotReady, 1),
            (Reason::NodeAffinity, 1),
            (Reason::TooManyPods, 1),
            (Reason::PodAffinity, 1),
            (Reason::PodAntiAffinity, 1),
            (Reason::ExistingAntiAffinity, 1),
            (Reason::CacheBehind, 1),
        ]);
        assert_eq!(
            message(7, &all),
            "0/7 nodes are available: 1 Too many pods, 1 node(s) didn't match Pod's node affinity/selector, \
             1 node(s) didn't match pod affinity rules, 1 node(s) didn't match pod anti-affinity rules, \
             1 node(s) didn't satisfy existing pods anti-affinity rules, 1 node(s) were not ready."
        );
        assert_eq!(
            message(0, &HashMap::new()),
            "0/0 nodes are available: no nodes available to schedule pods."
        );
    }
}
