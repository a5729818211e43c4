//! The per-node allocation record that serialises binds across scheduler instances.
//!
//! NOTE: why a record per node. A bind is a CAS on the *pod*, so two schedulers (Omega's
//! shared-state model) could each bind a different pod to the same nearly-full node without
//! any write conflicting. Every bind to node N therefore first CAS-writes N's allocation
//! record — a Lease named after the node in namespace [`ALLOCATION_NAMESPACE`] — and only then
//! binds the pod. The Node object itself is not used: its status is rewritten every few
//! seconds by the node agent, so CAS on it would conflict with heartbeats all day long.
//!
//! The record holds, in the annotation [`ANNOTATION_LEDGER`], the binds *in flight*: pods a
//! scheduler admitted to N that some reader may not yet see bound in its pod cache, each with
//! its requests. A scheduler deciding for N counts: pods its cache shows bound to N (plus its
//! own assumed pods) plus ledger entries it does not see bound there. Entries are pruned by
//! whoever writes next once their pod is visibly bound (anywhere), terminal or gone (or,
//! for the entry's own writer, once its bind failed; for others, after a TTL); the
//! record's `podsRevision` then says "every pruned bind is at or below this pod-log revision",
//! and a reader whose pod cache is older than that treats the node as not yet decidable. So a
//! decision is always made against (cache ∪ ledger) ⊇ everything admitted to N, and the CAS on
//! the record's resourceVersion makes sure nothing was admitted since. A conflict means
//! another scheduler admitted something: refresh the record and decide again.

use std::collections::BTreeMap;

use bus_schemas::kinds::Lease;
use serde::{Deserialize, Serialize};

use crate::resources::Resources;

/// Where the allocation records live (created at start-up, idempotently).
pub use bus_schemas::wellknown::ALLOCATION_NAMESPACE;
/// The JSON ledger of in-flight binds.
pub const ANNOTATION_LEDGER: &str = "shoal.io/allocation";
/// How many binds went through this record (for people reading it).
pub const ANNOTATION_BINDS: &str = "shoal.io/binds";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ledger {
    /// Every bind pruned from `pending` is visible in a pod cache at this revision.
    #[serde(default)]
    pub pods_revision: u64,
    #[serde(default)]
    pub pending: Vec<LedgerEntry>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerEntry {
    /// `namespace/name` of the pod.
    pub pod: String,
    #[serde(default)]
    pub uid: String,
    /// The pod-log revision at which the writer's cache held this pod (so a reader at or
    /// past it knows whether the pod still exists).
    #[serde(default)]
    pub seen_at: u64,
    #[serde(default)]
    pub requests: BTreeMap<String, i64>,
    /// The scheduler instance that wrote the entry: it alone knows whether its bind is
    /// still in flight, so it ignores (and prunes) its own entries for pods it no longer
    /// binds.
    #[serde(default)]
    pub writer: String,
    /// When it was written (unix milliseconds, the writer's clock): other schedulers treat an
    /// entry whose pod is still unbound after [`ENTRY_TTL_MS`] as a bind that failed (its
    /// writer may have crashed). Writers never send a bind later than [`BIND_WINDOW`] after
    /// the entry was written, so the TTL leaves a wide margin for clock skew.
    #[serde(default)]
    pub at_ms: i64,
}

/// How long other schedulers honour an entry whose pod is still unbound.
pub const ENTRY_TTL_MS: i64 = 60_000;
/// How long after its entry was written a bind may still be sent.
pub const BIND_WINDOW: std::time::Duration = std::time::Duration::from_secs(15);

/// The record as the scheduler keeps it: its version and the parsed ledger.
#[derive(Debug, Clone, Default)]
pub struct AllocationView {
    /// The record's resourceVersion; 0 when the record does not exist yet.
    pub revision: u64,
    pub ledger: Ledger,
    /// The pending entries' requests, parsed, in ledger order.
    pub pending: Vec<Resources>,
    pub binds: u64,
}

impl AllocationView {
    /// Reads a record; an unreadable ledger counts as empty but keeps the revision, so the
    /// CAS still serialises (bad data must not stop scheduling on that node).
    pub fn from_lease(lease: &Lease) -> AllocationView {
        let meta = &lease.metadata;
        let ledger: Ledger = meta
            .annotations
            .get(ANNOTATION_LEDGER)
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or_default();
        let pending = ledger
            .pending
            .iter()
            .map(|e| Resources::from_ints(&e.requests))
            .collect();
        AllocationView {
            revision: meta.revision().unwrap_or(0),
            binds: meta
                .annotations
                .get(ANNOTATION_BINDS)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
            ledger,
            pending,
        }
    }
}

/// Builds the next version of node `node`'s record: `current` (None: create it) with the
/// ledger replaced.
pub fn next_record(node: &str, current: Option<&Lease>, ledger: &Ledger, binds: u64) -> Lease {
    let mut lease = current.cloned().unwrap_or_else(|| {
        let mut l = Lease::default();
        l.metadata.namespace = ALLOCATION_NAMESPACE.into();
        l.metadata.name = node.into();
        l
    });
    let text = serde_json::to_string(ledger).unwrap_or_default();
    lease
        .metadata
        .annotations
        .insert(ANNOTATION_LEDGER.into(), text);
    lease
        .metadata
        .annotations
        .insert(ANNOTATION_BINDS.into(), binds.to_string());
    lease
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip() {
        let ledger = Ledger {
            pods_revision: 7,
            pending: vec![LedgerEntry {
                pod: "default/a".into(),
                uid: "u".into(),
                seen_at: 5,
                requests: BTreeMap::from([("cpu".to_string(), 250)]),
                writer: "s1".into(),
                at_ms: 1,
            }],
        };
        let mut lease = next_record("n1", None, &ledger, 3);
        lease.metadata.resource_version = "42".into();
        let view = AllocationView::from_lease(&lease);
        assert_eq!(view.revision, 42);
        assert_eq!(view.binds, 3);
        assert_eq!(view.ledger, ledger);
        assert_eq!(view.pending[0].milli_cpu, 250);

        lease
            .metadata
            .annotations
            .insert(ANNOTATION_LEDGER.into(), "{not json".into());
        let view = AllocationView::from_lease(&lease);
        assert!(view.pending.is_empty());
        assert_eq!(view.revision, 42);
    }
}
