//! Automatic rollback (a Shoal extension): a Deployment with `autoRollback` whose rollout
//! passed its progress deadline goes back to the newest revision that once completed.
//!
//! Manual undo needs nothing here: the CLI copies an old ReplicaSet's template back, and
//! that ReplicaSet becomes the current one again (see [`super::history`]).

use std::ops::ControlFlow;

use bus_schemas::meta::find_condition;

use super::history::revision_of;
use super::{strip_hash, DeployAction, Rollout, COMPLETE_ANNOTATION};
use crate::events::WARNING;

/// Breaks with a rollback action when one is due: the template change brings the
/// Deployment back with a new generation, so nothing else is decided this time.
pub(super) fn auto_rollback(r: &mut Rollout) -> ControlFlow<()> {
    let d = r.d;
    let deadline_exceeded = find_condition(&d.status.conditions, "Progressing")
        .is_some_and(|c| c.status == "False" && c.reason == "ProgressDeadlineExceeded");
    if d.spec.auto_rollback != Some(true)
        || !deadline_exceeded
        || d.spec.paused
        || d.status.observed_generation != d.metadata.generation
    {
        return ControlFlow::Continue(());
    }
    let target = r
        .olds
        .iter()
        .filter(|rs| rs.metadata.annotations.contains_key(COMPLETE_ANNOTATION))
        .max_by_key(|rs| revision_of(rs));
    let Some(target) = target else {
        return ControlFlow::Continue(());
    };
    let revision = revision_of(target).to_string();
    r.actions.push(DeployAction::Rollback {
        template: Box::new(strip_hash(&target.spec.template)),
        revision: revision.clone(),
    });
    r.events.push((
        WARNING,
        "DeploymentRollback",
        format!(
            "Rolled back deployment {} to revision {revision}: progress deadline exceeded",
            d.metadata.name
        ),
    ));
    ControlFlow::Break(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::fixtures::stalled_rollout;
    use super::super::{decide, DeployAction};
    use crate::podutil;

    #[test]
    fn rolls_back_to_the_last_complete_revision_after_the_deadline() {
        let (mut d, good, bad) = stalled_rollout();
        let dec = decide(
            &d,
            &[Arc::new(good.clone()), bad.clone()],
            1,
            podutil::now(),
        );
        d.status = dec.status;
        let dec = decide(&d, &[Arc::new(good.clone()), bad], 1, podutil::now());
        match &dec.actions[0] {
            DeployAction::Rollback { template, revision } => {
                assert_eq!(template.spec.containers[0].image, "v1");
                assert_eq!(revision, "1");
            }
            other => panic!("{other:?}"),
        }
    }
}
