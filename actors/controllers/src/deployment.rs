//! Deployment controller: rollouts of a pod template through one ReplicaSet per template.
//!
//! Each template gets a ReplicaSet named `<deployment>-<hash>` whose selector and template
//! carry `pod-template-hash: <hash>`; its `deployment.kubernetes.io/revision` annotation says
//! which rollout it is. [`decide`] is pure: from the Deployment, its ReplicaSets and how many
//! old pods still run, it returns the ReplicaSet writes and the status; [`reconcile`]
//! performs them.
//!
//! Undo (the CLI copies an old ReplicaSet's template back) and restart (an annotation on the
//! template) are just template changes: the matching old ReplicaSet becomes the new one again
//! (its revision bumped), or a new hash makes a new ReplicaSet.
//!
//! NOTE: availability of a ReplicaSet is counted as `min(status.availableReplicas,
//! spec.replicas)`: a scale-down the ReplicaSet controller has not acted on yet must not
//! count pods that are about to go, or two quick reconciles could scale down twice.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::deployment::DeploymentStatus;
use bus_schemas::kinds::{Deployment, PodTemplateSpec, ReplicaSet};
use bus_schemas::meta::{find_condition, Condition, Time};
use shoal_bus::controller::Action;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::events::{NORMAL, WARNING};
use crate::podutil::{self, is_owned_by};

pub const NAME: &str = "deployment";
pub use bus_schemas::wellknown::{POD_TEMPLATE_HASH_LABEL as HASH_LABEL, REVISION_ANNOTATION};
/// Set on a ReplicaSet once a rollout to it completed: the targets of automatic rollback.
pub const COMPLETE_ANNOTATION: &str = "shoal.io/rollout-complete";
pub const RESTARTED_AT_ANNOTATION: &str = "kubectl.kubernetes.io/restartedAt";

/// One write the controller intends.
#[derive(Debug, Clone, PartialEq)]
pub enum DeployAction {
    CreateReplicaSet(Box<ReplicaSet>),
    /// Sets spec.replicas and/or merges annotations of an owned ReplicaSet.
    UpdateReplicaSet {
        name: String,
        replicas: Option<i32>,
        annotations: BTreeMap<String, String>,
    },
    DeleteReplicaSet(String),
    /// Sets the Deployment's revision annotation.
    SetRevision(String),
    /// Replaces the Deployment's template (automatic rollback).
    Rollback {
        template: Box<PodTemplateSpec>,
        revision: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub actions: Vec<DeployAction>,
    pub status: DeploymentStatus,
    /// (type, reason, message) of events to record.
    pub events: Vec<(&'static str, &'static str, String)>,
    pub requeue_after: Option<Duration>,
}

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

pub fn revision_of(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .get(REVISION_ANNOTATION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
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

/// Decides one Deployment. `rss` are the ReplicaSets it controls; `old_pods_running` counts
/// non-terminal pods of its old ReplicaSets (Recreate waits for them).
pub fn decide(
    d: &Deployment,
    rss: &[Arc<ReplicaSet>],
    old_pods_running: usize,
    now: Time,
) -> Decision {
    let mut actions = Vec::new();
    let mut events = Vec::new();
    let mut status = d.status.clone();
    let replicas = d.replicas();
    let dname = &d.metadata.name;
    let live: Vec<&ReplicaSet> = rss
        .iter()
        .map(|r| r.as_ref())
        .filter(|r| !r.metadata.is_deleting())
        .collect();
    let mut new_rs: Option<ReplicaSet> = live
        .iter()
        .find(|r| strip_hash(&r.spec.template) == d.spec.template)
        .map(|r| (*r).clone());
    let mut olds: Vec<&ReplicaSet> = live
        .iter()
        .copied()
        .filter(|r| {
            new_rs
                .as_ref()
                .is_none_or(|n| n.metadata.uid != r.metadata.uid)
        })
        .collect();
    olds.sort_by_key(|r| (r.metadata.creation_timestamp, r.metadata.name.clone()));
    let max_revision = live.iter().map(|r| revision_of(r)).max().unwrap_or(0);
    let mut progress = d.metadata.generation != d.status.observed_generation;

    if d.metadata.is_deleting() {
        return Decision {
            actions,
            status,
            events,
            requeue_after: None,
        };
    }

    // Automatic rollback (Shoal extension) once the deadline passed.
    let deadline_exceeded = find_condition(&d.status.conditions, "Progressing")
        .is_some_and(|c| c.status == "False" && c.reason == "ProgressDeadlineExceeded");
    if d.spec.auto_rollback == Some(true)
        && deadline_exceeded
        && !d.spec.paused
        && d.status.observed_generation == d.metadata.generation
    {
        let target = olds
            .iter()
            .filter(|r| r.metadata.annotations.contains_key(COMPLETE_ANNOTATION))
            .max_by_key(|r| revision_of(r));
        if let Some(target) = target {
            let revision = revision_of(target).to_string();
            actions.push(DeployAction::Rollback {
                template: Box::new(strip_hash(&target.spec.template)),
                revision: revision.clone(),
            });
            events.push((
                WARNING,
                "DeploymentRollback",
                format!("Rolled back deployment {dname} to revision {revision}: progress deadline exceeded"),
            ));
            return Decision {
                actions,
                status,
                events,
                requeue_after: None,
            };
        }
    }

    let (max_surge, max_unavailable) = d.rollout_budget();
    let recreate = d.spec.strategy.type_ == "Recreate";
    let mut new_spec: Option<i32> = new_rs.as_ref().map(spec_replicas);
    let mut old_specs: Vec<i32> = olds.iter().map(|r| spec_replicas(r)).collect();

    if d.spec.paused {
        // Paused: no rollout; only follow a replica-count change when one ReplicaSet is active.
        let active: Vec<&ReplicaSet> = live
            .iter()
            .copied()
            .filter(|r| spec_replicas(r) > 0)
            .collect();
        if let [only] = active.as_slice() {
            if spec_replicas(only) != replicas {
                actions.push(scale(only, replicas, &mut events));
            }
        }
    } else {
        // The new ReplicaSet: create it, or make sure its revision is the newest.
        let hash = template_hash(&d.spec.template, d.status.collision_count);
        match &new_rs {
            None => {
                let name = format!("{dname}-{hash}");
                if live.iter().any(|r| r.metadata.name == name)
                    || rss.iter().any(|r| r.metadata.name == name)
                {
                    // Same name, different template: a hash collision. Try the next hash.
                    status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                    return Decision {
                        actions,
                        status,
                        events,
                        requeue_after: Some(Duration::from_millis(100)),
                    };
                }
                let initial = if recreate {
                    if old_specs.iter().any(|s| *s > 0) || old_pods_running > 0 {
                        None
                    } else {
                        Some(replicas)
                    }
                } else {
                    let olds_counts: Vec<(i32, i32)> = olds
                        .iter()
                        .map(|r| (spec_replicas(r), r.status.available_replicas))
                        .collect();
                    Some(
                        rolling_counts(replicas, max_surge, max_unavailable, (0, 0), &olds_counts)
                            .0,
                    )
                };
                if let Some(initial) = initial {
                    let rs = new_replica_set(d, &hash, initial, max_revision + 1);
                    events.push((
                        NORMAL,
                        "ScalingReplicaSet",
                        format!("Scaled up replica set {} to {initial}", rs.metadata.name),
                    ));
                    new_spec = Some(initial);
                    new_rs = Some(rs.clone());
                    actions.push(DeployAction::CreateReplicaSet(Box::new(rs)));
                    progress = true;
                }
            }
            Some(rs) => {
                if revision_of(rs) < max_revision || revision_of(rs) == 0 {
                    let mut annotations = BTreeMap::new();
                    annotations.insert(
                        REVISION_ANNOTATION.to_string(),
                        (max_revision + 1).to_string(),
                    );
                    actions.push(DeployAction::UpdateReplicaSet {
                        name: rs.metadata.name.clone(),
                        replicas: None,
                        annotations,
                    });
                    progress = true;
                }
            }
        }
        let created = matches!(actions.last(), Some(DeployAction::CreateReplicaSet(_)));

        if recreate {
            for (spec, old) in old_specs.iter_mut().zip(&olds) {
                if *spec > 0 {
                    *spec = 0;
                    actions.push(scale(old, 0, &mut events));
                    progress = true;
                }
            }
            if let (Some(rs), false) = (&new_rs, created) {
                let nothing_old = old_specs.iter().all(|s| *s == 0) && old_pods_running == 0;
                if nothing_old && spec_replicas(rs) != replicas {
                    actions.push(scale(rs, replicas, &mut events));
                    new_spec = Some(replicas);
                    progress = true;
                }
            }
        } else if let Some(rs) = &new_rs {
            let new_counts = (
                new_spec.unwrap_or(0),
                if created {
                    0
                } else {
                    rs.status.available_replicas
                },
            );
            let olds_counts: Vec<(i32, i32)> = olds
                .iter()
                .map(|r| (spec_replicas(r), r.status.available_replicas))
                .collect();
            let (n, o) = rolling_counts(
                replicas,
                max_surge,
                max_unavailable,
                new_counts,
                &olds_counts,
            );
            if !created && Some(n) != new_spec {
                actions.push(scale(rs, n, &mut events));
                new_spec = Some(n);
                progress = true;
            }
            for ((spec, new), old) in old_specs.iter_mut().zip(o).zip(&olds) {
                if new != *spec {
                    actions.push(scale(old, new, &mut events));
                    *spec = new;
                    progress = true;
                }
            }
        }
    }

    // Status from what the ReplicaSets report.
    let sum = |f: &dyn Fn(&ReplicaSet) -> i32| live.iter().map(|r| f(r)).sum::<i32>();
    let new_status = |f: &dyn Fn(&ReplicaSet) -> i32| new_rs.as_ref().map(f).unwrap_or(0);
    let before = (
        status.replicas,
        status.updated_replicas,
        status.ready_replicas,
        status.available_replicas,
    );
    status.replicas = sum(&|r| r.status.replicas);
    status.updated_replicas = new_status(&|r| r.status.replicas);
    status.ready_replicas = sum(&|r| r.status.ready_replicas);
    status.available_replicas = sum(&|r| r.status.available_replicas);
    status.unavailable_replicas = (replicas - status.available_replicas).max(0);
    status.observed_generation = d.metadata.generation;
    let after = (
        status.replicas,
        status.updated_replicas,
        status.ready_replicas,
        status.available_replicas,
    );
    progress |= before != after;

    let min_available = replicas - max_unavailable;
    let available = if status.available_replicas >= min_available.min(replicas) {
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
    put_condition(&mut status.conditions, available, false);

    let new_name = new_rs
        .as_ref()
        .map(|r| r.metadata.name.clone())
        .unwrap_or_default();
    let complete = new_rs.is_some()
        && new_spec == Some(replicas)
        && status.updated_replicas == replicas
        && status.replicas == replicas
        && status.available_replicas == replicas
        && old_specs.iter().all(|s| *s == 0);
    let deadline = d
        .spec
        .progress_deadline_seconds
        .map(|s| chrono::Duration::seconds(i64::from(s)));
    let mut requeue_after = None;
    if d.spec.paused {
        let c = condition(
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused".into(),
            now,
        );
        put_condition(&mut status.conditions, c, false);
    } else if complete {
        let msg = format!("ReplicaSet \"{new_name}\" has successfully progressed.");
        let c = condition("Progressing", "True", "NewReplicaSetAvailable", msg, now);
        put_condition(&mut status.conditions, c, false);
        if let Some(rs) = &new_rs {
            if !rs.metadata.annotations.contains_key(COMPLETE_ANNOTATION) {
                let mut annotations = BTreeMap::new();
                annotations.insert(COMPLETE_ANNOTATION.to_string(), "true".to_string());
                actions.push(DeployAction::UpdateReplicaSet {
                    name: rs.metadata.name.clone(),
                    replicas: None,
                    annotations,
                });
            }
        }
    } else {
        let current = find_condition(&status.conditions, "Progressing").cloned();
        let exceeded = current
            .as_ref()
            .is_some_and(|c| c.reason == "ProgressDeadlineExceeded");
        if progress
            || current.is_none()
            || (!exceeded
                && current
                    .as_ref()
                    .is_some_and(|c| c.reason == "NewReplicaSetAvailable"))
        {
            let (reason, msg) =
                if progress && matches!(actions.first(), Some(DeployAction::CreateReplicaSet(_))) {
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
            put_condition(&mut status.conditions, c, true);
        }
        let current = find_condition(&status.conditions, "Progressing").cloned();
        if let (Some(c), Some(deadline)) = (current, deadline) {
            let since = c.last_update_time.or(c.last_transition_time).unwrap_or(now);
            if c.status == "True" {
                if since + deadline <= now {
                    let msg = format!("ReplicaSet \"{new_name}\" has timed out progressing.");
                    let c = condition(
                        "Progressing",
                        "False",
                        "ProgressDeadlineExceeded",
                        msg.clone(),
                        now,
                    );
                    put_condition(&mut status.conditions, c, true);
                    events.push((WARNING, "ProgressDeadlineExceeded", msg));
                    if d.spec.auto_rollback == Some(true) {
                        requeue_after = Some(Duration::from_millis(10));
                    }
                } else {
                    requeue_after =
                        Some(podutil::until(since + deadline, now) + Duration::from_millis(50));
                }
            }
        }
    }

    // The Deployment carries its current revision.
    if let Some(rs) = &new_rs {
        let revision = actions
            .iter()
            .find_map(|a| match a {
                DeployAction::UpdateReplicaSet {
                    name, annotations, ..
                } if *name == rs.metadata.name => annotations.get(REVISION_ANNOTATION).cloned(),
                _ => None,
            })
            .unwrap_or_else(|| revision_of(rs).to_string());
        if d.metadata.annotations.get(REVISION_ANNOTATION) != Some(&revision) {
            actions.push(DeployAction::SetRevision(revision));
        }
    }

    // Revision history: fully scaled-down old ReplicaSets beyond the limit go.
    if let Some(limit) = d.spec.revision_history_limit {
        let mut idle: Vec<&ReplicaSet> = olds
            .iter()
            .zip(&old_specs)
            .filter(|(r, spec)| **spec == 0 && spec_replicas(r) == 0 && r.status.replicas == 0)
            .map(|(r, _)| *r)
            .collect();
        idle.sort_by_key(|r| std::cmp::Reverse(revision_of(r)));
        for rs in idle
            .into_iter()
            .skip(usize::try_from(limit.max(0)).unwrap_or(0))
        {
            actions.push(DeployAction::DeleteReplicaSet(rs.metadata.name.clone()));
        }
    }
    Decision {
        actions,
        status,
        events,
        requeue_after,
    }
}

fn scale(
    rs: &ReplicaSet,
    to: i32,
    events: &mut Vec<(&'static str, &'static str, String)>,
) -> DeployAction {
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

fn key(d: &Deployment) -> String {
    format!("{}/{}", d.metadata.namespace, d.metadata.name)
}

pub async fn reconcile(d: Arc<Deployment>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let uid = d.metadata.uid.clone();
    ctx.expectations.wait(&uid, &ctx.replicasets).await;
    let rss: Vec<Arc<ReplicaSet>> = ctx
        .replicasets
        .by_index(shoal_bus::informer::INDEX_OWNER, &uid)
        .into_iter()
        .filter(|r| r.metadata.namespace == d.metadata.namespace)
        .collect();
    let new_template = &d.spec.template;
    let old_pods_running = rss
        .iter()
        .filter(|r| strip_hash(&r.spec.template) != *new_template)
        .map(|r| {
            ctx.pods
                .by_index(shoal_bus::informer::INDEX_OWNER, &r.metadata.uid)
                .iter()
                .filter(|p| is_owned_by(&p.metadata, &r.metadata.uid) && !p.is_terminal())
                .count()
        })
        .sum();
    let now = podutil::now();
    let decision = decide(&d, &rss, old_pods_running, now);
    for (type_, reason, message) in &decision.events {
        ctx.events
            .record(d.as_ref(), type_, reason, message.clone());
    }
    let mut current = (*d).clone();
    for action in decision.actions {
        match action {
            DeployAction::CreateReplicaSet(rs) => match ctx.api.create(rs.as_ref()).await {
                Ok(created) => ctx.expectations.expect(&uid, created.metadata.revision()),
                Err(e) if e.is_already_exists() => {}
                Err(e) => {
                    return Err(ReconcileError::api(
                        "create",
                        "ReplicaSet",
                        rs.metadata.name.clone(),
                        e,
                    ))
                }
            },
            DeployAction::UpdateReplicaSet {
                name,
                replicas,
                annotations,
            } => {
                let ns = &d.metadata.namespace;
                let Some(rs) = ctx.replicasets.get(ns, &name) else {
                    continue;
                };
                let mut next = (*rs).clone();
                if let Some(r) = replicas {
                    next.spec.replicas = Some(r);
                }
                next.metadata.annotations.extend(annotations);
                let written = ctx.api.update(&next).await.map_err(|e| {
                    ReconcileError::api("update", "ReplicaSet", format!("{ns}/{name}"), e)
                })?;
                ctx.expectations.expect(&uid, written.metadata.revision());
            }
            DeployAction::DeleteReplicaSet(name) => {
                let options = DeleteOptions {
                    namespace: d.metadata.namespace.clone(),
                    name: name.clone(),
                    ..Default::default()
                };
                match ctx.api.delete::<ReplicaSet>(&options).await {
                    Ok(_) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(ReconcileError::api("delete", "ReplicaSet", name, e)),
                }
            }
            DeployAction::SetRevision(revision) => {
                current
                    .metadata
                    .annotations
                    .insert(REVISION_ANNOTATION.into(), revision);
                current = ctx
                    .api
                    .update(&current)
                    .await
                    .map_err(|e| ReconcileError::api("update", "Deployment", key(&d), e))?;
            }
            DeployAction::Rollback { template, .. } => {
                current.spec.template = *template;
                ctx.api
                    .update(&current)
                    .await
                    .map_err(|e| ReconcileError::api("update", "Deployment", key(&d), e))?;
                // The template change brings us back here with a new generation.
                return Ok(Action::AwaitChange);
            }
        }
    }
    if decision.status != current.status {
        current.status = decision.status;
        ctx.api
            .update_status(&current)
            .await
            .map_err(|e| ReconcileError::api("update-status", "Deployment", key(&d), e))?;
    }
    Ok(match decision.requeue_after {
        Some(after) => Action::RequeueAfter(after),
        None => Action::AwaitChange,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::kinds::deployment::RollingUpdateDeployment;
    use bus_schemas::kinds::IntOrString;
    use bus_schemas::selector::LabelSelector;

    fn deployment(replicas: i32, image: &str) -> Deployment {
        let mut d = Deployment::default();
        d.metadata.name = "web".into();
        d.metadata.namespace = "default".into();
        d.metadata.uid = "d-uid".into();
        d.metadata.generation = 1;
        d.spec.replicas = Some(replicas);
        let mut sel = LabelSelector::default();
        sel.match_labels.insert("app".into(), "web".into());
        d.spec.selector = Some(sel);
        d.spec
            .template
            .metadata
            .labels
            .insert("app".into(), "web".into());
        d.spec
            .template
            .spec
            .containers
            .push(bus_schemas::kinds::Container {
                name: "main".into(),
                image: image.into(),
                ..Default::default()
            });
        d.spec.strategy.type_ = "RollingUpdate".into();
        d.spec.strategy.rolling_update = Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(1)),
            max_unavailable: Some(IntOrString::Int(1)),
        });
        d.spec.revision_history_limit = Some(2);
        d.spec.progress_deadline_seconds = Some(600);
        d
    }

    fn rs_of(
        d: &Deployment,
        image: &str,
        spec: i32,
        available: i32,
        revision: i64,
    ) -> Arc<ReplicaSet> {
        let mut d2 = d.clone();
        d2.spec.template.spec.containers[0].image = image.into();
        let hash = template_hash(&d2.spec.template, None);
        let mut rs = new_replica_set(&d2, &hash, spec, revision);
        rs.metadata.uid = format!("uid-{image}");
        rs.status.replicas = spec;
        rs.status.ready_replicas = available;
        rs.status.available_replicas = available;
        Arc::new(rs)
    }

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
    fn deadline_and_auto_rollback() {
        let mut d = deployment(2, "v2");
        d.spec.progress_deadline_seconds = Some(5);
        d.spec.auto_rollback = Some(true);
        let mut good = (*rs_of(&d, "v1", 1, 1, 1)).clone();
        good.metadata
            .annotations
            .insert(COMPLETE_ANNOTATION.into(), "true".into());
        let bad = rs_of(&d, "v2", 2, 0, 2);
        let long_ago = podutil::now() - chrono::Duration::seconds(60);
        d.status.observed_generation = 1;
        d.status.replicas = 3;
        d.status.updated_replicas = 2;
        d.status.available_replicas = 1;
        d.status.ready_replicas = 1;
        d.status.conditions.push(Condition {
            type_: "Progressing".into(),
            status: "True".into(),
            reason: "ReplicaSetUpdated".into(),
            last_update_time: Some(long_ago),
            last_transition_time: Some(long_ago),
            ..Default::default()
        });
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
