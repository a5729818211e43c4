//! What a running process holds, for operators and for the chaos suite's checker: the
//! summaries of its informer caches ([`crate::subjects::INSPECT_CACHES`]) and, from a node
//! agent, the sandboxes and containers its runtime really has ([`crate::subjects::agent_request`]
//! with `containers`).
//!
//! Both are read-only views answered from memory or the runtime's own state; neither is a way
//! to change anything. Bodies are msgpack (named fields).

use serde::{Deserialize, Serialize};

/// One informer cache: what it holds, summarised so that two views of the same objects at the
/// same versions compare equal without shipping the objects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheSummary {
    pub kind: String,
    /// The initial list is in.
    pub synced: bool,
    /// The highest state-log revision the cache has applied.
    pub revision: u64,
    pub count: u64,
    /// [`object_digest`] of every cached object, combined by wrapping addition (so the order
    /// objects were seen in does not matter).
    pub digest: u64,
}

impl CacheSummary {
    /// The summary of `objects` (namespace, name, resourceVersion), as a cache holding
    /// exactly them would report it.
    pub fn of<'a>(
        kind: &str,
        objects: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> CacheSummary {
        let mut summary = CacheSummary {
            kind: kind.to_string(),
            synced: true,
            ..Default::default()
        };
        for (namespace, name, rv) in objects {
            summary.count += 1;
            summary.digest = summary
                .digest
                .wrapping_add(object_digest(namespace, name, rv));
        }
        summary
    }

    /// Same objects at the same versions (revision and sync state aside).
    pub fn same_objects(&self, other: &CacheSummary) -> bool {
        self.kind == other.kind && self.count == other.count && self.digest == other.digest
    }
}

/// FNV-1a over `namespace/name@rv`: stable across processes and releases (unlike std's
/// randomly keyed hasher), which is all a digest compared between processes needs.
pub fn object_digest(namespace: &str, name: &str, resource_version: &str) -> u64 {
    fnv1a(
        [namespace, "/", name, "@", resource_version]
            .iter()
            .flat_map(|p| p.bytes()),
    )
}

fn fnv1a(bytes: impl Iterator<Item = u8>) -> u64 {
    bytes.fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One process's answer to [`crate::subjects::INSPECT_CACHES`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessCaches {
    /// Who answers: host name, pid and what the process runs (`shoal-up api,naming`).
    pub process: String,
    pub caches: Vec<CacheSummary>,
}

/// A node agent's answer to `shoal.v1.agent.<node>.containers`: its runtime's sandboxes, each
/// with its containers, as the runtime (not the agent's bookkeeping) sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeContainers {
    pub node: String,
    pub sandboxes: Vec<SandboxView>,
    /// Set when the runtime could not be listed (then `sandboxes` is empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxView {
    /// The pod's uid (a sandbox is named after it).
    pub pod_uid: String,
    pub namespace: String,
    /// The pod's hostname (its name unless `spec.hostname` says otherwise).
    pub hostname: String,
    pub containers: Vec<ContainerView>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerView {
    pub name: String,
    pub id: String,
    /// `running`, `created`, `exited` or `unknown`.
    pub state: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_does_not_depend_on_order_but_on_every_version() {
        let a = CacheSummary::of("Pod", [("d", "a", "1"), ("d", "b", "2")]);
        let b = CacheSummary::of("Pod", [("d", "b", "2"), ("d", "a", "1")]);
        assert!(a.same_objects(&b));
        let newer = CacheSummary::of("Pod", [("d", "a", "1"), ("d", "b", "3")]);
        assert!(!a.same_objects(&newer));
        let fewer = CacheSummary::of("Pod", [("d", "a", "1")]);
        assert!(!a.same_objects(&fewer));
    }

    #[test]
    fn the_digest_is_stable_across_processes() {
        // A fixed value: processes of different builds compare digests with each other.
        // FNV-1a's published value for "a": processes of different builds compare digests.
        assert_eq!(fnv1a("a".bytes()), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(object_digest("d", "a", "1"), object_digest("d", "a", "2"));
        assert_ne!(object_digest("d", "ab", "1"), object_digest("da", "b", "1"));
    }
}
