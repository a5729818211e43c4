//! Inter-pod affinity and anti-affinity by topology key, computed once per scheduling attempt
//! (kube-scheduler's PreFilter) so that checking a node is a few label lookups.
//!
//! Only a pod that has pod (anti-)affinity terms pays for a pass over the cached pods; every
//! other pod only checks the (usually few) pods that carry required anti-affinity.

use std::collections::{BTreeMap, HashMap, HashSet};

use bus_schemas::kinds::affinity::PodAffinityTerm;
use bus_schemas::kinds::Pod;

use crate::cache::ClusterCache;

/// The namespaces a term applies to: its list, or the owning pod's namespace; an empty
/// namespaceSelector means every namespace.
// NOTE: a non-empty namespaceSelector needs Namespace labels, which this scheduler does not
// cache; such terms fall back to their namespace list (or the pod's namespace).
fn term_matches(term: &PodAffinityTerm, term_owner_ns: &str, candidate: &Pod) -> bool {
    let ns = &candidate.metadata.namespace;
    let all_namespaces = term
        .namespace_selector
        .as_ref()
        .is_some_and(|s| s.is_empty());
    let ns_ok = all_namespaces
        || if term.namespaces.is_empty() {
            ns == term_owner_ns
        } else {
            term.namespaces.iter().any(|n| n == ns)
        };
    // A null selector matches nothing, as in Kubernetes.
    ns_ok
        && term
            .label_selector
            .as_ref()
            .is_some_and(|s| s.matches(&candidate.metadata.labels))
}

/// Topology values per term.
#[derive(Debug, Default, Clone)]
pub struct AffinityState {
    /// Per required affinity term: its topology key and the values where matching pods run.
    required: Vec<(String, HashSet<String>)>,
    /// No existing pod matches any required term, but the pod matches its own terms: the
    /// first pod of a group may go anywhere (Kubernetes' rule).
    first_of_group: bool,
    /// Per required anti-affinity term: topology key and values where matching pods run.
    anti: Vec<(String, HashSet<String>)>,
    /// (topology key, value) pairs where an existing pod's required anti-affinity forbids
    /// this pod.
    existing_anti: HashSet<(String, String)>,
    /// Preferred terms: weight per (topology key, value), negative for anti-affinity.
    preferred: HashMap<(String, String), i64>,
}

/// Why a node fails inter-pod affinity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AffinityFailure {
    Affinity,
    AntiAffinity,
    ExistingAntiAffinity,
}

impl AffinityState {
    /// Computes the state for `pod`, or None when neither it nor any existing pod has terms
    /// (the common case, which costs nothing).
    pub fn compute(pod: &Pod, cache: &ClusterCache) -> Option<AffinityState> {
        let affinity = pod.spec.affinity.as_ref();
        let pa = affinity.and_then(|a| a.pod_affinity.as_ref());
        let anti = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        let req_aff = pa
            .map(|a| &a.required_during_scheduling_ignored_during_execution[..])
            .unwrap_or(&[]);
        let pref_aff = pa
            .map(|a| &a.preferred_during_scheduling_ignored_during_execution[..])
            .unwrap_or(&[]);
        let req_anti = anti
            .map(|a| &a.required_during_scheduling_ignored_during_execution[..])
            .unwrap_or(&[]);
        let pref_anti = anti
            .map(|a| &a.preferred_during_scheduling_ignored_during_execution[..])
            .unwrap_or(&[]);
        let own_terms = !(req_aff.is_empty()
            && pref_aff.is_empty()
            && req_anti.is_empty()
            && pref_anti.is_empty());
        let mut existing = cache.anti_affinity_pods().peekable();
        if !own_terms && existing.peek().is_none() {
            return None;
        }
        let mut state = AffinityState {
            required: req_aff
                .iter()
                .map(|t| (t.topology_key.clone(), HashSet::new()))
                .collect(),
            anti: req_anti
                .iter()
                .map(|t| (t.topology_key.clone(), HashSet::new()))
                .collect(),
            ..Default::default()
        };
        let node_label = |node: &str, key: &str| -> Option<String> {
            cache.node(node).and_then(|n| n.labels().get(key).cloned())
        };
        let ns = &pod.metadata.namespace;

        for entry in existing {
            let Some(terms) = entry
                .pod
                .spec
                .affinity
                .as_ref()
                .and_then(|a| a.pod_anti_affinity.as_ref())
            else {
                continue;
            };
            for term in &terms.required_during_scheduling_ignored_during_execution {
                if term_matches(term, &entry.pod.metadata.namespace, pod) {
                    if let Some(v) = node_label(&entry.node, &term.topology_key) {
                        state.existing_anti.insert((term.topology_key.clone(), v));
                    }
                }
            }
        }

        if own_terms {
            let mut any_match = false;
            for (_, entry) in cache.pods().filter(|(_, e)| e.counts()) {
                let other = &entry.pod;
                for (i, term) in req_aff.iter().enumerate() {
                    if term_matches(term, ns, other) {
                        any_match = true;
                        if let Some(v) = node_label(&entry.node, &term.topology_key) {
                            state.required[i].1.insert(v);
                        }
                    }
                }
                for (i, term) in req_anti.iter().enumerate() {
                    if term_matches(term, ns, other) {
                        if let Some(v) = node_label(&entry.node, &term.topology_key) {
                            state.anti[i].1.insert(v);
                        }
                    }
                }
                for (w, sign) in pref_aff
                    .iter()
                    .map(|w| (w, 1))
                    .chain(pref_anti.iter().map(|w| (w, -1)))
                {
                    let term = &w.pod_affinity_term;
                    if term_matches(term, ns, other) {
                        if let Some(v) = node_label(&entry.node, &term.topology_key) {
                            *state
                                .preferred
                                .entry((term.topology_key.clone(), v))
                                .or_default() += sign * i64::from(w.weight);
                        }
                    }
                }
            }
            state.first_of_group = !any_match
                && !req_aff.is_empty()
                && req_aff.iter().all(|t| term_matches(t, ns, pod));
        }
        Some(state)
    }

    /// Checks one node's labels.
    pub fn check(&self, labels: &BTreeMap<String, String>) -> Result<(), AffinityFailure> {
        // kube-scheduler's order: the pod's affinity, its anti-affinity, then existing pods'.
        if !self.first_of_group {
            for (key, values) in &self.required {
                if !labels.get(key).is_some_and(|v| values.contains(v)) {
                    return Err(AffinityFailure::Affinity);
                }
            }
        }
        for (key, values) in &self.anti {
            if labels.get(key).is_some_and(|v| values.contains(v)) {
                return Err(AffinityFailure::AntiAffinity);
            }
        }
        for (key, value) in &self.existing_anti {
            if labels.get(key) == Some(value) {
                return Err(AffinityFailure::ExistingAntiAffinity);
            }
        }
        Ok(())
    }

    /// The summed preferred weights a node's labels earn (may be negative).
    pub fn preference(&self, labels: &BTreeMap<String, String>) -> i64 {
        self.preferred
            .iter()
            .filter(|((k, v), _)| labels.get(k) == Some(v))
            .map(|(_, w)| *w)
            .sum()
    }

    pub fn has_preferences(&self) -> bool {
        !self.preferred.is_empty()
    }
}
