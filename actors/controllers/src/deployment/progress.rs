//! Progress and conditions: the status counts from what the ReplicaSets report, the
//! `Available` condition, the `Progressing` condition with its deadline, and the ReplicaSets'
//! `ReplicaFailure`.

use std::collections::BTreeMap;
use std::time::Duration;

use bus_schemas::kinds::ReplicaSet;
use bus_schemas::meta::{find_condition, Condition, Time};

use super::{DeployAction, Rollout, COMPLETE_ANNOTATION};
use crate::events::WARNING;
use crate::podutil;

fn condition(type_: &str, status: &str, reason: &str, message: String, now: Time) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_update_time: Some(now),
        last_transition_time: Some(now),
        ..Default::default()
    }
}

/// Replaces a condition; keeps lastTransitionTime when the status is unchanged, and
/// lastUpdateTime too unless `touch`.
fn put_condition(conds: &mut Vec<Condition>, mut new: Condition, touch: bool) {
    if let Some(old) = conds.iter_mut().find(|c| c.type_ == new.type_) {
        if old.status == new.status {
            new.last_transition_time = old.last_transition_time;
            if !touch && old.reason == new.reason {
                new.last_update_time = old.last_update_time;
            }
        }
        *old = new;
    } else {
        conds.push(new);
    }
}

/// Status counts from what the ReplicaSets report; a change in them is progress.
pub(super) fn count_replicas(r: &mut Rollout) {
    let sum = |f: &dyn Fn(&ReplicaSet) -> i32| r.live.iter().map(|rs| f(rs)).sum::<i32>();
    let new_status = |f: &dyn Fn(&ReplicaSet) -> i32| r.new_rs.as_ref().map(f).unwrap_or(0);
    let status = &mut r.status;
    let before = (
        status.replicas,
        status.updated_replicas,
        status.ready_replicas,
        status.available_replicas,
    );
    status.replicas = sum(&|rs| rs.status.replicas);
    status.updated_replicas = new_status(&|rs| rs.status.replicas);
    status.ready_replicas = sum(&|rs| rs.status.ready_replicas);
    status.available_replicas = sum(&|rs| rs.status.available_replicas);
    status.unavailable_replicas = (r.replicas - status.available_replicas).max(0);
    status.observed_generation = r.d.metadata.generation;
    let after = (
        status.replicas,
        status.updated_replicas,
        status.ready_replicas,
        status.available_replicas,
    );
    r.progress |= before != after;
}

pub(super) fn set_available(r: &mut Rollout, now: Time) {
    let (_, max_unavailable) = r.budget;
    let min_available = r.replicas - max_unavailable;
    let available = if r.status.available_replicas >= min_available.min(r.replicas) {
        condition(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
            now,
        )
    } else {
        condition(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
            now,
        )
    };
    put_condition(&mut r.status.conditions, available, false);
}

/// `ReplicaFailure` as the ReplicaSets report it (see [`crate::replica_failure`]): a
/// Deployment whose pods are refused says why, and the condition goes when theirs does.
pub(super) fn set_replica_failure(r: &mut Rollout, now: Time) {
    let sets = r.new_rs.iter().chain(r.olds.iter().copied());
    let conditions = sets.map(|rs| rs.status.conditions.as_slice());
    match crate::replica_failure::of_replicasets(conditions, now) {
        Some(failure) => {
            let unchanged = find_condition(&r.status.conditions, &failure.type_).is_some_and(|c| {
                c.status == failure.status
                    && c.reason == failure.reason
                    && c.message == failure.message
            });
            if !unchanged {
                put_condition(&mut r.status.conditions, failure, true);
            }
        }
        None => crate::replica_failure::clear(&mut r.status.conditions),
    }
}

/// `Progressing`: paused, complete (the new ReplicaSet is then marked as a rollback
/// target), progressing, or past its deadline. Looks again when the deadline falls.
pub(super) fn set_progressing(r: &mut Rollout, now: Time) {
    let new_name = r
        .new_rs
        .as_ref()
        .map(|rs| rs.metadata.name.clone())
        .unwrap_or_default();
    if r.d.spec.paused {
        let c = condition(
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused".into(),
            now,
        );
        put_condition(&mut r.status.conditions, c, false);
    } else if is_complete(r) {
        let msg = format!("ReplicaSet \"{new_name}\" has successfully progressed.");
        let c = condition("Progressing", "True", "NewReplicaSetAvailable", msg, now);
        put_condition(&mut r.status.conditions, c, false);
        mark_complete(r);
    } else {
        note_progress(r, &new_name, now);
        check_deadline(r, &new_name, now);
    }
}

fn is_complete(r: &Rollout) -> bool {
    let (replicas, status) = (r.replicas, &r.status);
    r.new_rs.is_some()
        && r.new_spec == Some(replicas)
        && status.updated_replicas == replicas
        && status.replicas == replicas
        && status.available_replicas == replicas
        && r.old_specs.iter().all(|s| *s == 0)
}

fn mark_complete(r: &mut Rollout) {
    let Some(rs) = &r.new_rs else { return };
    if !rs.metadata.annotations.contains_key(COMPLETE_ANNOTATION) {
        let mut annotations = BTreeMap::new();
        annotations.insert(COMPLETE_ANNOTATION.to_string(), "true".to_string());
        r.actions.push(DeployAction::UpdateReplicaSet {
            name: rs.metadata.name.clone(),
            replicas: None,
            annotations,
        });
    }
}

/// Touches `Progressing` when something moved (which restarts the deadline), or when it
/// is missing or says a finished rollout is complete; never revives an exceeded deadline
/// by itself.
fn note_progress(r: &mut Rollout, new_name: &str, now: Time) {
    let current = find_condition(&r.status.conditions, "Progressing").cloned();
    let exceeded = current
        .as_ref()
        .is_some_and(|c| c.reason == "ProgressDeadlineExceeded");
    if r.progress
        || current.is_none()
        || (!exceeded
            && current
                .as_ref()
                .is_some_and(|c| c.reason == "NewReplicaSetAvailable"))
    {
        let (reason, msg) =
            if r.progress && matches!(r.actions.first(), Some(DeployAction::CreateReplicaSet(_))) {
                (
                    "NewReplicaSetCreated",
                    format!("Created new replica set \"{new_name}\""),
                )
            } else {
                (
                    "ReplicaSetUpdated",
                    format!("ReplicaSet \"{new_name}\" is progressing."),
                )
            };
        let c = condition("Progressing", "True", reason, msg, now);
        put_condition(&mut r.status.conditions, c, true);
    }
}

fn check_deadline(r: &mut Rollout, new_name: &str, now: Time) {
    let deadline =
        r.d.spec
            .progress_deadline_seconds
            .map(|s| chrono::Duration::seconds(i64::from(s)));
    let current = find_condition(&r.status.conditions, "Progressing").cloned();
    let (Some(c), Some(deadline)) = (current, deadline) else {
        return;
    };
    if c.status != "True" {
        return;
    }
    let since = c.last_update_time.or(c.last_transition_time).unwrap_or(now);
    if since + deadline <= now {
        let msg = format!("ReplicaSet \"{new_name}\" has timed out progressing.");
        let c = condition(
            "Progressing",
            "False",
            "ProgressDeadlineExceeded",
            msg.clone(),
            now,
        );
        put_condition(&mut r.status.conditions, c, true);
        r.events.push((WARNING, "ProgressDeadlineExceeded", msg));
        if r.d.spec.auto_rollback == Some(true) {
            r.requeue_after = Some(Duration::from_millis(10));
        }
    } else {
        r.requeue_after = Some(podutil::until(since + deadline, now) + Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::decide;
    use super::super::fixtures::stalled_rollout;
    use super::*;

    #[test]
    fn a_rollout_past_its_deadline_stops_progressing() {
        let (d, good, bad) = stalled_rollout();
        let dec = decide(
            &d,
            &[Arc::new(good.clone()), bad.clone()],
            1,
            podutil::now(),
        );
        let cond = find_condition(&dec.status.conditions, "Progressing").unwrap();
        assert_eq!(
            (cond.status.as_str(), cond.reason.as_str()),
            ("False", "ProgressDeadlineExceeded")
        );
    }
}
