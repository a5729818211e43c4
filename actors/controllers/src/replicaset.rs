//! ReplicaSet controller: exactly `replicas` active pods matching the selector.
//!
//! [`decide`] is pure: from the ReplicaSet and the pods it could own (its own, and orphans
//! in its namespace) it returns the adoptions, releases, creations and deletions to make and
//! the status to report. [`reconcile`] gathers the inputs from the caches and performs them.

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::replicaset::ReplicaSetStatus;
use bus_schemas::kinds::{Pod, ReplicaSet};
use bus_schemas::meta::Time;
use bus_schemas::selector::Selector;
use bus_schemas::Resource;
use shoal_bus::controller::Action;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::events::NORMAL;
use crate::podutil::{self, available_at, is_active, is_available, selects};
use crate::{owner_key, replica_failure, spawn};
use shoal_bus::controller;
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use shoal_bus::ObjectKey;
use tokio::task::JoinHandle;

pub const NAME: &str = "replicaset";
/// At most this many pods are created or deleted by one reconcile (Kubernetes' burst).
pub const BURST: usize = 500;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodAction {
    /// Add our controller reference to an orphan that matches the selector.
    Adopt(String),
    /// Remove our controller reference from a pod whose labels stopped matching.
    Release(String),
    Create(usize),
    Delete(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub actions: Vec<PodAction>,
    pub status: ReplicaSetStatus,
    /// Look again then (a pod becomes available after minReadySeconds).
    pub requeue_at: Option<Time>,
}

/// Deletion preference, lowest first: unscheduled, then pending, then not ready, then the
/// most recently ready, then the newest.
fn deletion_rank(pod: &Pod) -> impl Ord {
    let scheduled = !pod.spec.node_name.is_empty();
    let phase = match pod.status.phase.as_str() {
        "Pending" | "" => 0,
        "Unknown" => 1,
        _ => 2,
    };
    let ready = pod.is_ready();
    let ready_since = podutil::ready_since(pod).flatten();
    let created = pod.metadata.creation_timestamp;
    (
        scheduled,
        phase,
        ready,
        Reverse(ready_since),
        Reverse(created),
        pod.metadata.name.clone(),
    )
}

/// Orders surplus pods for deletion (the first are deleted first).
pub fn deletion_order(mut pods: Vec<&Pod>) -> Vec<&Pod> {
    pods.sort_by_key(|p| deletion_rank(p));
    pods
}

pub fn decide(rs: &ReplicaSet, candidates: &[Arc<Pod>], now: Time) -> Decision {
    let uid = &rs.metadata.uid;
    let selector = rs.spec.selector.as_ref();
    let deleting = rs.metadata.is_deleting();
    let mut actions = Vec::new();
    let mut owned: Vec<&Pod> = Vec::new();
    for pod in candidates {
        let labels = &pod.metadata.labels;
        match pod.metadata.controller_ref() {
            Some(r) if r.uid == *uid => {
                if selects(selector, labels) {
                    owned.push(pod);
                } else if !deleting {
                    actions.push(PodAction::Release(pod.metadata.name.clone()));
                }
            }
            None if !deleting && is_active(pod) && selects(selector, labels) => {
                actions.push(PodAction::Adopt(pod.metadata.name.clone()));
                owned.push(pod);
            }
            _ => {}
        }
    }
    let active: Vec<&Pod> = owned.iter().copied().filter(|p| is_active(p)).collect();
    let min_ready = rs.spec.min_ready_seconds;
    if !deleting {
        let want = usize::try_from(rs.replicas().max(0)).unwrap_or(0);
        if active.len() < want {
            actions.push(PodAction::Create((want - active.len()).min(BURST)));
        } else if active.len() > want {
            let surplus = active.len() - want;
            for pod in deletion_order(active.clone())
                .into_iter()
                .take(surplus.min(BURST))
            {
                actions.push(PodAction::Delete(pod.metadata.name.clone()));
            }
        }
    }
    let template_labels = &rs.spec.template.metadata.labels;
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(active.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    let mut status = rs.status.clone();
    status.replicas = count(&|_| true);
    status.fully_labeled_replicas = count(&|p| {
        template_labels
            .iter()
            .all(|(k, v)| p.metadata.labels.get(k) == Some(v))
    });
    status.ready_replicas = count(&|p| p.is_ready());
    status.available_replicas = count(&|p| is_available(p, min_ready, now));
    status.observed_generation = rs.metadata.generation;
    let requeue_at = active
        .iter()
        .filter(|p| !is_available(p, min_ready, now))
        .filter_map(|p| available_at(p, min_ready))
        .min();
    Decision {
        actions,
        status,
        requeue_at,
    }
}

/// The pods a ReplicaSet may own: its own, and orphans matching its selector.
fn candidates(rs: &ReplicaSet, ctx: &Ctx) -> Vec<Arc<Pod>> {
    let mut pods = ctx
        .pods
        .by_index(shoal_bus::informer::INDEX_OWNER, &rs.metadata.uid);
    let selector: Option<Selector> = rs
        .spec
        .selector
        .as_ref()
        .filter(|s| !s.is_empty())
        .and_then(|s| s.to_selector().ok());
    if let Some(selector) = selector {
        let orphans = ctx
            .pods
            .by_index(shoal_bus::informer::INDEX_ORPHANS, &rs.metadata.namespace);
        pods.extend(orphans.into_iter().filter(|p| {
            p.metadata.controller_ref().is_none() && selector.matches(&p.metadata.labels)
        }));
    }
    pods
}

pub async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let uid = rs.metadata.uid.clone();
    ctx.expectations.wait(&uid, &ctx.pods).await;
    let now = podutil::now();
    let mut decision = decide(&rs, &candidates(&rs, &ctx), now);
    let conditions = &mut decision.status.conditions;
    let changed = match perform(&rs, &ctx, &decision.actions).await {
        Ok(changed) => {
            replica_failure::clear(conditions);
            changed
        }
        Err(e) => {
            if let Some((reason, message)) = replica_failure::reason_of(&e) {
                replica_failure::record(conditions, reason, message, now);
                if decision.status != rs.status {
                    // Best effort: the failure is what the work queue retries either way.
                    let _ = write_status(&rs, &ctx, decision.status).await;
                }
            }
            return Err(e);
        }
    };
    if !changed && decision.status != rs.status {
        write_status(&rs, &ctx, decision.status).await?;
    }
    Ok(match decision.requeue_at {
        Some(at) => Action::RequeueAfter(podutil::until(at, now) + Duration::from_millis(50)),
        None => Action::AwaitChange,
    })
}

async fn write_status(
    rs: &ReplicaSet,
    ctx: &Ctx,
    status: ReplicaSetStatus,
) -> Result<(), ReconcileError> {
    let mut next = rs.clone();
    next.status = status;
    ctx.api
        .update_status(&next)
        .await
        .map(|_| ())
        .map_err(|e| ReconcileError::api("update-status", "ReplicaSet", key(rs), e))
}

fn key<K: Resource>(obj: &K) -> String {
    format!("{}/{}", obj.meta().namespace, obj.meta().name)
}

/// Performs the actions; returns whether anything was written (the status is then written by
/// the reconcile the resulting pod events trigger, computed from what the cache shows).
async fn perform(
    rs: &ReplicaSet,
    ctx: &Ctx,
    actions: &[PodAction],
) -> Result<bool, ReconcileError> {
    let ns = &rs.metadata.namespace;
    let uid = &rs.metadata.uid;
    let mut wrote = false;
    for action in actions {
        match action {
            PodAction::Adopt(name) | PodAction::Release(name) => {
                let Some(pod) = ctx.pods.get(ns, name) else {
                    continue;
                };
                let mut next = (*pod).clone();
                if matches!(action, PodAction::Adopt(_)) {
                    if next.metadata.controller_ref().is_some() {
                        continue;
                    }
                    next.metadata
                        .owner_references
                        .push(podutil::controller_ref(rs));
                } else {
                    next.metadata.owner_references.retain(|r| r.uid != *uid);
                }
                let written =
                    ctx.api.update(&next).await.map_err(|e| {
                        ReconcileError::api("update", "Pod", format!("{ns}/{name}"), e)
                    })?;
                ctx.expectations.expect(uid, written.metadata.revision());
                wrote = true;
            }
            PodAction::Create(n) => {
                wrote = true;
                create_pods(rs, ctx, *n).await?;
            }
            PodAction::Delete(name) => {
                wrote = true;
                delete_pod(ctx, rs, ns, name).await?;
            }
        }
    }
    Ok(wrote)
}

/// Creates `n` pods in slow-start batches (1, 2, 4, …) so a failing create fails fast.
async fn create_pods(rs: &ReplicaSet, ctx: &Ctx, n: usize) -> Result<(), ReconcileError> {
    let ns = &rs.metadata.namespace;
    let generate = format!("{}-", rs.metadata.name);
    let template = podutil::pod_from_template(
        &rs.spec.template,
        ns,
        &generate,
        podutil::controller_ref(rs),
    );
    crate::create::create_pods(ctx, rs, std::iter::repeat_n(template, n))
        .await
        .map_err(|e| ReconcileError::api("create", "Pod", format!("{ns}/{generate}*"), e))
}

pub(crate) async fn delete_pod<K: Resource>(
    ctx: &Ctx,
    owner: &K,
    ns: &str,
    name: &str,
) -> Result<(), ReconcileError> {
    let options = DeleteOptions {
        namespace: ns.to_string(),
        name: name.to_string(),
        ..Default::default()
    };
    match ctx.api.delete::<Pod>(&options).await {
        Ok(deleted) => {
            ctx.expectations
                .expect(&owner.meta().uid, deleted.metadata.revision());
            ctx.events.record(
                owner,
                NORMAL,
                "SuccessfulDelete",
                format!("Deleted pod: {name}"),
            );
            Ok(())
        }
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(ReconcileError::api(
            "delete",
            "Pod",
            format!("{ns}/{name}"),
            e,
        )),
    }
}

/// Triggers: the ReplicaSet's pods, and orphans its selector matches (to adopt them).
pub fn start(ctx: &Arc<Ctx>, sd: &Shutdown) -> JoinHandle<()> {
    let queue = WorkQueue::new(Default::default());
    let rss = ctx.replicasets.clone();
    controller::feed_mapped(&ctx.pods, queue.clone(), move |_, pod: &Pod| {
        if pod.metadata.controller_ref().is_some() {
            return owner_key::<ReplicaSet>(&pod.metadata);
        }
        rss.list(Some(&pod.metadata.namespace), &Selector::everything())
            .into_iter()
            .filter(|rs| podutil::selects(rs.spec.selector.as_ref(), &pod.metadata.labels))
            .map(|rs| ObjectKey::of(rs.as_ref()))
            .collect()
    });
    spawn(NAME, ctx.replicasets.clone(), queue, ctx, reconcile, sd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::meta::Condition;
    use bus_schemas::selector::LabelSelector;

    fn rs(replicas: i32) -> ReplicaSet {
        let mut rs = ReplicaSet::default();
        rs.metadata.name = "web".into();
        rs.metadata.namespace = "default".into();
        rs.metadata.uid = "rs-uid".into();
        rs.metadata.generation = 3;
        rs.spec.replicas = Some(replicas);
        let mut sel = LabelSelector::default();
        sel.match_labels.insert("app".into(), "web".into());
        rs.spec.selector = Some(sel);
        rs.spec
            .template
            .metadata
            .labels
            .insert("app".into(), "web".into());
        rs
    }

    fn pod(name: &str, owner: Option<&str>, app: &str, age_s: i64) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = name.into();
        p.metadata.namespace = "default".into();
        p.metadata.labels.insert("app".into(), app.into());
        p.metadata.creation_timestamp = Some(podutil::now() - chrono::Duration::seconds(age_s));
        p.status.phase = "Running".into();
        if let Some(uid) = owner {
            let mut r = podutil::controller_ref(&rs(1));
            r.uid = uid.into();
            p.metadata.owner_references.push(r);
        }
        Arc::new(p)
    }

    fn ready(p: Arc<Pod>, node: &str) -> Arc<Pod> {
        let mut p = (*p).clone();
        p.spec.node_name = node.into();
        p.status.conditions.push(Condition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: Some(podutil::now() - chrono::Duration::seconds(100)),
            ..Default::default()
        });
        Arc::new(p)
    }

    #[test]
    fn creates_missing_pods() {
        let d = decide(
            &rs(3),
            &[pod("a", Some("rs-uid"), "web", 10)],
            podutil::now(),
        );
        assert_eq!(d.actions, vec![PodAction::Create(2)]);
        assert_eq!(d.status.replicas, 1);
        assert_eq!(d.status.observed_generation, 3);
    }

    #[test]
    fn adopts_orphans_and_releases_mismatched() {
        let pods = [
            pod("orphan", None, "web", 10),
            pod("stray", Some("rs-uid"), "debug", 10),
            pod("other", Some("x"), "web", 1),
        ];
        let d = decide(&rs(1), &pods, podutil::now());
        assert_eq!(
            d.actions,
            vec![
                PodAction::Adopt("orphan".into()),
                PodAction::Release("stray".into())
            ]
        );
    }

    #[test]
    fn deletes_unscheduled_then_not_ready_then_newest() {
        let pods = [
            ready(pod("old-ready", Some("rs-uid"), "web", 300), "n1"),
            ready(pod("new-ready", Some("rs-uid"), "web", 5), "n1"),
            pod("bound-not-ready", Some("rs-uid"), "web", 100),
            pod("unscheduled", Some("rs-uid"), "web", 200),
        ];
        let mut bound = (*pods[2]).clone();
        bound.spec.node_name = "n1".into();
        let pods = [
            pods[0].clone(),
            pods[1].clone(),
            Arc::new(bound),
            pods[3].clone(),
        ];
        let d = decide(&rs(1), &pods, podutil::now());
        assert_eq!(
            d.actions,
            vec![
                PodAction::Delete("unscheduled".into()),
                PodAction::Delete("bound-not-ready".into()),
                PodAction::Delete("new-ready".into()),
            ]
        );
        assert_eq!(d.status.ready_replicas, 2);
    }

    #[test]
    fn terminal_and_deleting_pods_do_not_count() {
        let mut failed = (*pod("failed", Some("rs-uid"), "web", 10)).clone();
        failed.status.phase = "Failed".into();
        let mut going = (*pod("going", Some("rs-uid"), "web", 10)).clone();
        going.metadata.deletion_timestamp = Some(podutil::now());
        let d = decide(&rs(1), &[Arc::new(failed), Arc::new(going)], podutil::now());
        assert_eq!(d.actions, vec![PodAction::Create(1)]);
    }

    #[test]
    fn deleting_replicaset_does_nothing() {
        let mut r = rs(3);
        r.metadata.deletion_timestamp = Some(podutil::now());
        let d = decide(&r, &[pod("orphan", None, "web", 1)], podutil::now());
        assert!(d.actions.is_empty());
    }

    #[test]
    fn availability_waits_for_min_ready_seconds() {
        let mut r = rs(1);
        r.spec.min_ready_seconds = 1000;
        let p = ready(pod("a", Some("rs-uid"), "web", 10), "n1");
        let d = decide(&r, &[p], podutil::now());
        assert_eq!(d.status.ready_replicas, 1);
        assert_eq!(d.status.available_replicas, 0);
        assert!(d.requeue_at.is_some());
    }
}
