//! Template hashing and ReplicaSet naming: each template gets a ReplicaSet named
//! `<deployment>-<hash>`, whose selector and template carry `pod-template-hash: <hash>` so
//! two templates' pods never select each other.

use std::ops::ControlFlow;
use std::time::Duration;

use bus_schemas::kinds::{Deployment, PodTemplateSpec, ReplicaSet};

use super::{history, strategy, DeployAction, Rollout, HASH_LABEL, REVISION_ANNOTATION};
use crate::events::NORMAL;
use crate::podutil;

/// FNV-1a over the template's canonical JSON (maps are ordered) and the collision count,
/// rendered with Kubernetes' "safe" alphabet (no vowels, no look-alike digits).
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let json = serde_json::to_string(template).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    feed(json.as_bytes());
    if let Some(c) = collision_count {
        feed(&c.to_le_bytes());
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut out = String::new();
    let mut h = hash;
    for _ in 0..10 {
        out.push(ALPHABET[(h % ALPHABET.len() as u64) as usize] as char);
        h /= ALPHABET.len() as u64;
    }
    out
}

/// A template without the hash label (what the Deployment's template would be).
pub fn strip_hash(template: &PodTemplateSpec) -> PodTemplateSpec {
    let mut t = template.clone();
    t.metadata.labels.remove(HASH_LABEL);
    t
}

/// The new ReplicaSet for a Deployment at `hash`, with `replicas`.
pub fn new_replica_set(d: &Deployment, hash: &str, replicas: i32, revision: i64) -> ReplicaSet {
    let mut rs = ReplicaSet::default();
    rs.metadata.name = format!("{}-{}", d.metadata.name, hash);
    rs.metadata.namespace = d.metadata.namespace.clone();
    rs.metadata.owner_references = vec![podutil::controller_ref(d)];
    rs.metadata.labels = d.spec.template.metadata.labels.clone();
    rs.metadata.labels.insert(HASH_LABEL.into(), hash.into());
    rs.metadata
        .annotations
        .insert(REVISION_ANNOTATION.into(), revision.to_string());
    rs.spec.replicas = Some(replicas);
    rs.spec.min_ready_seconds = d.spec.min_ready_seconds;
    let mut selector = d.spec.selector.clone().unwrap_or_default();
    selector.match_labels.insert(HASH_LABEL.into(), hash.into());
    rs.spec.selector = Some(selector);
    rs.spec.template = d.spec.template.clone();
    rs.spec
        .template
        .metadata
        .labels
        .insert(HASH_LABEL.into(), hash.into());
    rs
}

/// Creates the ReplicaSet for the current template, at the size the strategy allows now
/// (Recreate: none until the old pods are gone). Breaks on a hash collision: the status
/// then carries the next collision count, and the next look tries the next hash.
pub(super) fn create_new(
    r: &mut Rollout,
    all: &[std::sync::Arc<ReplicaSet>],
    old_pods_running: usize,
) -> ControlFlow<()> {
    let d = r.d;
    let hash = template_hash(&d.spec.template, d.status.collision_count);
    let name = format!("{}-{hash}", d.metadata.name);
    if r.live.iter().any(|rs| rs.metadata.name == name)
        || all.iter().any(|rs| rs.metadata.name == name)
    {
        // Same name, different template: a hash collision.
        r.status.collision_count = Some(r.status.collision_count.unwrap_or(0) + 1);
        r.requeue_after = Some(Duration::from_millis(100));
        return ControlFlow::Break(());
    }
    if let Some(initial) = strategy::initial_replicas(r, old_pods_running) {
        let rs = new_replica_set(d, &hash, initial, history::next_revision(r));
        r.events.push((
            NORMAL,
            "ScalingReplicaSet",
            format!("Scaled up replica set {} to {initial}", rs.metadata.name),
        ));
        r.new_spec = Some(initial);
        r.new_rs = Some(rs.clone());
        r.actions.push(DeployAction::CreateReplicaSet(Box::new(rs)));
        r.created = true;
        r.progress = true;
    }
    ControlFlow::Continue(())
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{deployment, rs_of};
    use super::super::{decide, DeployAction, HASH_LABEL, REVISION_ANNOTATION};
    use super::*;

    #[test]
    fn hash_is_stable_and_template_sensitive() {
        let d = deployment(3, "v1");
        assert_eq!(
            template_hash(&d.spec.template, None),
            template_hash(&d.spec.template, None)
        );
        assert_ne!(
            template_hash(&d.spec.template, None),
            template_hash(&deployment(3, "v2").spec.template, None)
        );
        assert_ne!(
            template_hash(&d.spec.template, None),
            template_hash(&d.spec.template, Some(1))
        );
    }

    #[test]
    fn creates_new_replicaset_with_revision() {
        let d = deployment(3, "v2");
        let old = rs_of(&d, "v1", 3, 3, 4);
        let dec = decide(&d, &[old], 3, podutil::now());
        let DeployAction::CreateReplicaSet(rs) = &dec.actions[0] else {
            panic!("{:?}", dec.actions)
        };
        assert_eq!(rs.metadata.annotations[REVISION_ANNOTATION], "5");
        assert_eq!(rs.spec.replicas, Some(1));
        assert!(rs
            .spec
            .selector
            .as_ref()
            .unwrap()
            .match_labels
            .contains_key(HASH_LABEL));
        assert!(dec.actions.iter().any(|a| matches!(
            a,
            DeployAction::UpdateReplicaSet {
                replicas: Some(2),
                ..
            }
        )));
    }
}
