//! Deployment controller: rollouts of a pod template through one ReplicaSet per template.
//!
//! Split the way Kubernetes' own controller is, one part per file, each with its tests:
//! - [`hash`]: template hashing and ReplicaSet naming (`<deployment>-<hash>`, the
//!   `pod-template-hash` label), and creating the ReplicaSet for a new template;
//! - [`strategy`]: the rolling and recreate strategies (how many replicas each ReplicaSet
//!   should have now);
//! - [`progress`]: status counts and the `Available` and `Progressing` conditions, with the
//!   progress deadline;
//! - [`history`]: revisions (`deployment.kubernetes.io/revision`) and pruning old
//!   ReplicaSets beyond the history limit;
//! - [`rollback`]: automatic rollback after a missed deadline.
//!
//! [`decide`] is pure: from the Deployment, its ReplicaSets and how many old pods still run,
//! it returns the ReplicaSet writes and the status; [`reconcile`] performs them.
//!
//! Undo (the CLI copies an old ReplicaSet's template back) and restart (an annotation on the
//! template) are just template changes: the matching old ReplicaSet becomes the new one again
//! (its revision bumped), or a new hash makes a new ReplicaSet.

mod hash;
mod history;
mod progress;
mod rollback;
mod strategy;

/// Triggers: the Deployment's ReplicaSets, and their pods (Recreate waits for old pods to go).
pub fn start(ctx: &Arc<Ctx>, sd: &Shutdown) -> JoinHandle<()> {
    let queue = WorkQueue::new(Default::default());
    controller::feed_mapped(&ctx.replicasets, queue.clone(), |_, rs: &ReplicaSet| {
        owner_key::<Deployment>(&rs.metadata)
    });
    let rss = ctx.replicasets.clone();
    controller::feed_mapped(&ctx.pods, queue.clone(), move |_, pod: &Pod| {
        owner_key::<ReplicaSet>(&pod.metadata)
            .into_iter()
            .filter_map(|k| rss.get(&k.namespace, &k.name))
            .flat_map(|rs| owner_key::<Deployment>(&rs.metadata))
            .collect()
    });
    spawn(NAME, ctx.deployments.clone(), queue, ctx, reconcile, sd)
}

#[cfg(test)]
mod fixtures;

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::deployment::DeploymentStatus;
use bus_schemas::kinds::{Deployment, PodTemplateSpec, ReplicaSet};
use bus_schemas::meta::Time;
use shoal_bus::controller::Action;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::podutil::{self, is_owned_by};
use crate::{owner_key, spawn};
use bus_schemas::kinds::Pod;
use shoal_bus::controller;
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use tokio::task::JoinHandle;

pub use hash::{new_replica_set, strip_hash, template_hash};
pub use history::revision_of;
pub use strategy::rolling_counts;

pub const NAME: &str = "deployment";
pub use bus_schemas::wellknown::{POD_TEMPLATE_HASH_LABEL as HASH_LABEL, REVISION_ANNOTATION};
/// Marks a ReplicaSet whose rollout once completed: a target for automatic rollback.
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

/// (type, reason, message) of an event to record.
pub type Event = (&'static str, &'static str, String);

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub actions: Vec<DeployAction>,
    pub status: DeploymentStatus,
    pub events: Vec<Event>,
    pub requeue_after: Option<Duration>,
}

/// What one decision knows and intends so far, handed from step to step.
struct Rollout<'a> {
    d: &'a Deployment,
    replicas: i32,
    /// (max surge, max unavailable), resolved against `replicas`.
    budget: (i32, i32),
    /// The ReplicaSets not being deleted.
    live: Vec<&'a ReplicaSet>,
    /// The ReplicaSet of the current template, once found or created.
    new_rs: Option<ReplicaSet>,
    new_spec: Option<i32>,
    /// Whether `new_rs` is created by this decision (so reports nothing yet).
    created: bool,
    /// The others, oldest first, and the replica counts planned for them.
    olds: Vec<&'a ReplicaSet>,
    old_specs: Vec<i32>,
    max_revision: i64,
    /// Something moved: restarts the progress deadline.
    progress: bool,
    actions: Vec<DeployAction>,
    events: Vec<Event>,
    status: DeploymentStatus,
    requeue_after: Option<Duration>,
}

impl<'a> Rollout<'a> {
    fn observe(d: &'a Deployment, rss: &'a [Arc<ReplicaSet>]) -> Self {
        let live: Vec<&ReplicaSet> = rss
            .iter()
            .map(|r| r.as_ref())
            .filter(|r| !r.metadata.is_deleting())
            .collect();
        let new_rs: Option<ReplicaSet> = live
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
        Rollout {
            d,
            replicas: d.replicas(),
            budget: d.rollout_budget(),
            new_spec: new_rs.as_ref().map(spec_replicas),
            old_specs: olds.iter().map(|r| spec_replicas(r)).collect(),
            live,
            new_rs,
            created: false,
            olds,
            max_revision,
            progress: d.metadata.generation != d.status.observed_generation,
            actions: Vec::new(),
            events: Vec::new(),
            status: d.status.clone(),
            requeue_after: None,
        }
    }

    fn into_decision(self) -> Decision {
        Decision {
            actions: self.actions,
            status: self.status,
            events: self.events,
            requeue_after: self.requeue_after,
        }
    }
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
}

/// Decides one Deployment. `rss` are the ReplicaSets it controls; `old_pods_running` counts
/// non-terminal pods of its old ReplicaSets (Recreate waits for them).
pub fn decide(
    d: &Deployment,
    rss: &[Arc<ReplicaSet>],
    old_pods_running: usize,
    now: Time,
) -> Decision {
    let mut r = Rollout::observe(d, rss);
    if d.metadata.is_deleting() {
        return r.into_decision();
    }
    if rollback::auto_rollback(&mut r).is_break() {
        return r.into_decision();
    }
    if d.spec.paused {
        strategy::follow_replicas_while_paused(&mut r);
    } else {
        if r.new_rs.is_some() {
            history::promote_new(&mut r);
        } else if let ControlFlow::Break(()) = hash::create_new(&mut r, rss, old_pods_running) {
            return r.into_decision();
        }
        strategy::step(&mut r, old_pods_running);
    }
    progress::count_replicas(&mut r);
    progress::set_available(&mut r, now);
    progress::set_progressing(&mut r, now);
    progress::set_replica_failure(&mut r, now);
    history::stamp_deployment(&mut r);
    history::prune(&mut r);
    r.into_decision()
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
