//! History: every template a Deployment had is a ReplicaSet whose revision annotation says
//! which rollout it was. The current one carries the newest revision (and so does the
//! Deployment); fully scaled-down old ones beyond `revisionHistoryLimit` go.

use std::collections::BTreeMap;

use bus_schemas::kinds::ReplicaSet;

use super::{spec_replicas, DeployAction, Rollout, REVISION_ANNOTATION};

pub fn revision_of(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .get(REVISION_ANNOTATION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

pub(super) fn next_revision(r: &Rollout) -> i64 {
    r.max_revision + 1
}

/// An existing ReplicaSet that became current again (undo, or a template changed back)
/// takes the newest revision.
pub(super) fn promote_new(r: &mut Rollout) {
    let Some(rs) = &r.new_rs else { return };
    if revision_of(rs) < r.max_revision || revision_of(rs) == 0 {
        let mut annotations = BTreeMap::new();
        annotations.insert(
            REVISION_ANNOTATION.to_string(),
            next_revision(r).to_string(),
        );
        r.actions.push(DeployAction::UpdateReplicaSet {
            name: rs.metadata.name.clone(),
            replicas: None,
            annotations,
        });
        r.progress = true;
    }
}

/// The Deployment carries its current ReplicaSet's revision, including one just assigned.
pub(super) fn stamp_deployment(r: &mut Rollout) {
    let Some(rs) = &r.new_rs else { return };
    let revision = r
        .actions
        .iter()
        .find_map(|a| match a {
            DeployAction::UpdateReplicaSet {
                name, annotations, ..
            } if *name == rs.metadata.name => annotations.get(REVISION_ANNOTATION).cloned(),
            _ => None,
        })
        .unwrap_or_else(|| revision_of(rs).to_string());
    if r.d.metadata.annotations.get(REVISION_ANNOTATION) != Some(&revision) {
        r.actions.push(DeployAction::SetRevision(revision));
    }
}

/// Fully scaled-down old ReplicaSets beyond the history limit go, oldest revision first.
pub(super) fn prune(r: &mut Rollout) {
    let Some(limit) = r.d.spec.revision_history_limit else {
        return;
    };
    let mut idle: Vec<&ReplicaSet> = r
        .olds
        .iter()
        .zip(&r.old_specs)
        .filter(|(rs, spec)| **spec == 0 && spec_replicas(rs) == 0 && rs.status.replicas == 0)
        .map(|(rs, _)| *rs)
        .collect();
    idle.sort_by_key(|rs| std::cmp::Reverse(revision_of(rs)));
    for rs in idle
        .into_iter()
        .skip(usize::try_from(limit.max(0)).unwrap_or(0))
    {
        r.actions
            .push(DeployAction::DeleteReplicaSet(rs.metadata.name.clone()));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::fixtures::{deployment, rs_of};
    use super::super::{decide, DeployAction};
    use super::*;
    use crate::podutil;

    #[test]
    fn old_replicasets_beyond_history_are_deleted() {
        let d = deployment(1, "v4");
        let cur = rs_of(&d, "v4", 1, 1, 4);
        let olds: Vec<Arc<ReplicaSet>> = (1..4)
            .map(|i| rs_of(&d, &format!("v{i}"), 0, 0, i))
            .collect();
        let mut all = olds.clone();
        all.push(cur);
        let dec = decide(&d, &all, 0, podutil::now());
        let deleted: Vec<&DeployAction> = dec
            .actions
            .iter()
            .filter(|a| matches!(a, DeployAction::DeleteReplicaSet(_)))
            .collect();
        assert_eq!(
            deleted,
            vec![&DeployAction::DeleteReplicaSet(
                olds[0].metadata.name.clone()
            )]
        );
    }
}
