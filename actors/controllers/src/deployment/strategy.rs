//! The rolling and recreate strategies: how many replicas the new and the old ReplicaSets
//! should have now.
//!
//! NOTE: availability of a ReplicaSet is counted as `min(status.availableReplicas,
//! spec.replicas)`: a scale-down the ReplicaSet controller has not acted on yet must not
//! count pods that are about to go, or two quick reconciles could scale down twice.

use std::collections::BTreeMap;

use bus_schemas::kinds::ReplicaSet;

use super::{spec_replicas, DeployAction, Event, Rollout};
use crate::events::NORMAL;

/// Kubernetes' rolling-update arithmetic, as a pure function over (new, olds) replica counts.
/// `new` and each old are (spec replicas, available); returns the new spec counts.
pub fn rolling_counts(
    replicas: i32,
    max_surge: i32,
    max_unavailable: i32,
    new: (i32, i32),
    olds: &[(i32, i32)],
) -> (i32, Vec<i32>) {
    let avail = |spec: i32, available: i32| available.min(spec).max(0);
    let mut new_spec = new.0;
    let mut old_specs: Vec<i32> = olds.iter().map(|o| o.0).collect();
    // Scale up the new ReplicaSet within the surge budget (down if it has too many).
    if new_spec > replicas {
        new_spec = replicas;
    } else {
        let total: i32 = new_spec + old_specs.iter().sum::<i32>();
        let max_total = replicas + max_surge;
        if total < max_total {
            new_spec += (max_total - total).min(replicas - new_spec).max(0);
        }
    }
    // Scale down old ReplicaSets within the unavailability budget.
    let old_total: i32 = old_specs.iter().sum();
    if old_total > 0 {
        let min_available = replicas - max_unavailable;
        let all_total = new_spec + old_total;
        let new_unavailable = new_spec - avail(new_spec, new.1);
        let mut max_scaled_down = all_total - min_available - new_unavailable;
        // First the unhealthy old pods: removing them costs no availability.
        for (spec, old) in old_specs.iter_mut().zip(olds) {
            if max_scaled_down <= 0 {
                break;
            }
            let unhealthy = *spec - avail(*spec, old.1);
            if unhealthy > 0 {
                let down = unhealthy.min(max_scaled_down);
                *spec -= down;
                max_scaled_down -= down;
            }
        }
        // Then available ones, as far as availability allows.
        let available_total: i32 = avail(new_spec, new.1)
            + old_specs
                .iter()
                .zip(olds)
                .map(|(s, o)| avail(*s, o.1))
                .sum::<i32>();
        let mut budget = available_total - min_available;
        for spec in old_specs.iter_mut() {
            if budget <= 0 {
                break;
            }
            let down = (*spec).min(budget);
            *spec -= down;
            budget -= down;
        }
    }
    (new_spec, old_specs)
}

fn is_recreate(r: &Rollout) -> bool {
    r.d.spec.strategy.type_ == "Recreate"
}

fn old_counts(r: &Rollout) -> Vec<(i32, i32)> {
    r.olds
        .iter()
        .map(|rs| (spec_replicas(rs), rs.status.available_replicas))
        .collect()
}

/// The size a new ReplicaSet starts at; `None` while Recreate still waits for old pods.
pub(super) fn initial_replicas(r: &Rollout, old_pods_running: usize) -> Option<i32> {
    if is_recreate(r) {
        if r.old_specs.iter().any(|s| *s > 0) || old_pods_running > 0 {
            None
        } else {
            Some(r.replicas)
        }
    } else {
        let (max_surge, max_unavailable) = r.budget;
        Some(
            rolling_counts(
                r.replicas,
                max_surge,
                max_unavailable,
                (0, 0),
                &old_counts(r),
            )
            .0,
        )
    }
}

/// Paused: no rollout; only follow a replica-count change when one ReplicaSet is active.
pub(super) fn follow_replicas_while_paused(r: &mut Rollout) {
    let active: Vec<&ReplicaSet> = r
        .live
        .iter()
        .copied()
        .filter(|rs| spec_replicas(rs) > 0)
        .collect();
    if let [only] = active.as_slice() {
        if spec_replicas(only) != r.replicas {
            r.actions.push(scale(only, r.replicas, &mut r.events));
        }
    }
}

/// Moves the ReplicaSets one step of the Deployment's strategy.
pub(super) fn step(r: &mut Rollout, old_pods_running: usize) {
    if is_recreate(r) {
        recreate(r, old_pods_running);
    } else {
        rolling(r);
    }
}

/// All old pods go first; the new ReplicaSet grows only once none is left.
fn recreate(r: &mut Rollout, old_pods_running: usize) {
    for (spec, old) in r.old_specs.iter_mut().zip(&r.olds) {
        if *spec > 0 {
            *spec = 0;
            r.actions.push(scale(old, 0, &mut r.events));
            r.progress = true;
        }
    }
    if let (Some(rs), false) = (&r.new_rs, r.created) {
        let nothing_old = r.old_specs.iter().all(|s| *s == 0) && old_pods_running == 0;
        if nothing_old && spec_replicas(rs) != r.replicas {
            r.actions.push(scale(rs, r.replicas, &mut r.events));
            r.new_spec = Some(r.replicas);
            r.progress = true;
        }
    }
}

/// The new ReplicaSet grows within the surge budget while the old ones shrink within the
/// unavailability budget.
fn rolling(r: &mut Rollout) {
    let Some(rs) = &r.new_rs else { return };
    let new_counts = (
        r.new_spec.unwrap_or(0),
        if r.created {
            0
        } else {
            rs.status.available_replicas
        },
    );
    let (max_surge, max_unavailable) = r.budget;
    let (n, o) = rolling_counts(
        r.replicas,
        max_surge,
        max_unavailable,
        new_counts,
        &old_counts(r),
    );
    if !r.created && Some(n) != r.new_spec {
        r.actions.push(scale(rs, n, &mut r.events));
        r.new_spec = Some(n);
        r.progress = true;
    }
    for ((spec, new), old) in r.old_specs.iter_mut().zip(o).zip(&r.olds) {
        if new != *spec {
            r.actions.push(scale(old, new, &mut r.events));
            *spec = new;
            r.progress = true;
        }
    }
}

fn scale(rs: &ReplicaSet, to: i32, events: &mut Vec<Event>) -> DeployAction {
    let from = spec_replicas(rs);
    let verb = if to > from { "up" } else { "down" };
    events.push((
        NORMAL,
        "ScalingReplicaSet",
        format!(
            "Scaled {verb} replica set {} from {from} to {to}",
            rs.metadata.name
        ),
    ));
    DeployAction::UpdateReplicaSet {
        name: rs.metadata.name.clone(),
        replicas: Some(to),
        annotations: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bus_schemas::kinds::deployment::RollingUpdateDeployment;
    use bus_schemas::kinds::IntOrString;
    use bus_schemas::meta::find_condition;

    use super::super::fixtures::{deployment, rs_of};
    use super::super::{decide, DeployAction};
    use super::*;
    use crate::podutil;

    #[test]
    fn rolling_math_counts() {
        // 3 replicas, surge 1, unavailable 1, fresh rollout: new gets 1, old may lose 1.
        assert_eq!(rolling_counts(3, 1, 1, (0, 0), &[(3, 3)]), (1, vec![2]));
        // New has 1 unavailable: old keeps availability at 2.
        assert_eq!(rolling_counts(3, 1, 1, (1, 0), &[(2, 2)]), (2, vec![2]));
        // New 2 available: old may go entirely (2 stay available).
        assert_eq!(rolling_counts(3, 1, 1, (2, 2), &[(2, 2)]), (2, vec![0]));
        assert_eq!(rolling_counts(3, 1, 1, (3, 3), &[(1, 1)]), (3, vec![0]));
        // Surge 0, unavailable 1: scale down first, then up.
        assert_eq!(rolling_counts(3, 0, 1, (0, 0), &[(3, 3)]), (0, vec![2]));
        assert_eq!(rolling_counts(3, 0, 1, (0, 0), &[(2, 2)]), (1, vec![2]));
        // Unhealthy old pods are removed first, without touching availability.
        assert_eq!(rolling_counts(3, 1, 1, (1, 0), &[(3, 1)]), (1, vec![2]));
    }

    #[test]
    fn percentages_resolve_like_kubernetes() {
        let mut d = deployment(10, "v1");
        d.spec.strategy.rolling_update = Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::from("25%")),
            max_unavailable: Some(IntOrString::from("25%")),
        });
        assert_eq!(d.rollout_budget(), (3, 2));
        let (n, o) = rolling_counts(10, 3, 2, (0, 0), &[(10, 10)]);
        assert_eq!((n, o), (3, vec![8]));
    }

    #[test]
    fn rollout_never_plans_below_min_available() {
        // Simulate: each step, the RS controller makes spec replicas real and all become
        // available after one step; availability must never fall below replicas - maxUnavailable.
        for (surge, unavail) in [(1, 0), (0, 1), (2, 1), (1, 1), (3, 2)] {
            let replicas = 5;
            let (mut new, mut old) = ((0, 0), (replicas, replicas));
            for _ in 0..50 {
                let (n, o) = rolling_counts(replicas, surge, unavail, new, &[old]);
                let available_now = new.1.min(n) + old.1.min(o[0]);
                assert!(
                    available_now >= replicas - unavail,
                    "surge {surge} unavail {unavail}"
                );
                assert!(n + o[0] <= replicas + surge);
                new = (n, n.min(new.1 + 1).max(new.1.min(n)));
                new.1 = n; // new pods become available
                old = (o[0], o[0].min(old.1));
                if new == (replicas, replicas) && old.0 == 0 {
                    break;
                }
            }
            assert_eq!(new, (replicas, replicas));
            assert_eq!(old.0, 0);
        }
    }

    #[test]
    fn recreate_scales_old_to_zero_then_waits() {
        let mut d = deployment(3, "v2");
        d.spec.strategy.type_ = "Recreate".into();
        d.spec.strategy.rolling_update = None;
        let old = rs_of(&d, "v1", 3, 3, 1);
        let dec = decide(&d, std::slice::from_ref(&old), 3, podutil::now());
        assert_eq!(dec.actions.len(), 1, "{:?}", dec.actions);
        assert!(matches!(
            &dec.actions[0],
            DeployAction::UpdateReplicaSet {
                replicas: Some(0),
                ..
            }
        ));
        // Old scaled to 0 but pods still running: nothing new yet.
        let mut zero = (*old).clone();
        zero.spec.replicas = Some(0);
        let dec = decide(&d, &[Arc::new(zero.clone())], 2, podutil::now());
        assert!(!dec
            .actions
            .iter()
            .any(|a| matches!(a, DeployAction::CreateReplicaSet(_))));
        let dec = decide(&d, &[Arc::new(zero)], 0, podutil::now());
        assert!(
            matches!(&dec.actions[0], DeployAction::CreateReplicaSet(rs) if rs.spec.replicas == Some(3))
        );
    }

    #[test]
    fn paused_does_not_roll() {
        let mut d = deployment(3, "v2");
        d.spec.paused = true;
        let old = rs_of(&d, "v1", 3, 3, 1);
        let dec = decide(&d, &[old], 3, podutil::now());
        assert!(dec.actions.is_empty(), "{:?}", dec.actions);
        let cond = find_condition(&dec.status.conditions, "Progressing").unwrap();
        assert_eq!(cond.reason, "DeploymentPaused");
    }
}
