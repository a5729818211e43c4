//! DaemonSet controller: one pod on every eligible node.
//!
//! Pods are created with `spec.nodeName` already set (Kubernetes' older way, rather than a
//! node-affinity term for the scheduler): the DaemonSet decides placement itself, so a pod
//! lands even on a node the scheduler would skip (unschedulable, or tainted NoSchedule by the
//! node lifecycle), exactly like the default tolerations Kubernetes gives daemon pods.
//! Eligibility is nodeSelector + required node affinity + taints (NoSchedule / NoExecute)
//! tolerated by the template's tolerations plus those defaults.
//!
//! Updates: `RollingUpdate` replaces old pods (by `controller-revision-hash`) node by node
//! within maxUnavailable; `OnDelete` replaces a pod only after someone deletes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use bus_schemas::kinds::daemonset::DaemonSetStatus;
use bus_schemas::kinds::node::Taint;
use bus_schemas::kinds::{DaemonSet, IntOrString, Node, Pod, PodTemplateSpec, Toleration};
use bus_schemas::meta::Time;
use bus_schemas::selector::Selector;
use shoal_bus::controller::Action;
use shoal_bus::informer::INDEX_OWNER;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::podutil::{self, is_active, is_available, is_owned_by};
use crate::{owner_key, spawn};
use shoal_bus::controller;
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use tokio::task::JoinHandle;

pub const NAME: &str = "daemonset";
pub const HASH_LABEL: &str = "controller-revision-hash";

/// Tolerations every daemon pod gets (Kubernetes' AddOrUpdateDaemonPodTolerations).
pub fn default_tolerations() -> Vec<Toleration> {
    let exists = |key: &str, effect: &str| Toleration {
        key: key.into(),
        operator: "Exists".into(),
        value: String::new(),
        effect: effect.into(),
        toleration_seconds: None,
    };
    vec![
        exists("node.kubernetes.io/not-ready", "NoExecute"),
        exists("node.kubernetes.io/unreachable", "NoExecute"),
        exists("node.kubernetes.io/disk-pressure", "NoSchedule"),
        exists("node.kubernetes.io/memory-pressure", "NoSchedule"),
        exists("node.kubernetes.io/pid-pressure", "NoSchedule"),
        exists("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
}

fn tolerated(taint: &Taint, tolerations: &[Toleration]) -> bool {
    taint.effect == "PreferNoSchedule" || tolerations.iter().any(|t| t.tolerates(taint))
}

/// Whether a daemon pod from `template` should run on `node`.
pub fn eligible(node: &Node, template: &PodTemplateSpec) -> bool {
    if node.metadata.is_deleting() {
        return false;
    }
    let labels = &node.metadata.labels;
    let spec = &template.spec;
    if !spec
        .node_selector
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    if let Some(required) = required {
        if !required.matches(labels, &node.metadata.name) {
            return false;
        }
    }
    let mut tolerations = spec.tolerations.clone();
    tolerations.extend(default_tolerations());
    node.spec.taints.iter().all(|t| tolerated(t, &tolerations))
}

#[derive(Debug, Clone, PartialEq)]
pub struct DsDecision {
    /// Nodes to create a daemon pod on.
    pub create: Vec<String>,
    pub delete: Vec<String>,
    pub status: DaemonSetStatus,
}

pub fn decide(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    pods: &[Arc<Pod>],
    hash: &str,
    now: Time,
) -> DsDecision {
    let mut create = Vec::new();
    let mut delete = Vec::new();
    let min_ready = ds.spec.min_ready_seconds;
    let mut by_node: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for pod in pods.iter().map(|p| p.as_ref()) {
        if pod.metadata.is_deleting() {
            continue;
        }
        if pod.is_terminal() {
            delete.push(pod.metadata.name.clone()); // replaced on the next pass
            continue;
        }
        by_node
            .entry(pod.spec.node_name.as_str())
            .or_default()
            .push(pod);
    }
    let is_new = |p: &Pod| p.metadata.labels.get(HASH_LABEL).map(String::as_str) == Some(hash);
    let mut status = ds.status.clone();
    let (mut desired, mut current, mut misscheduled, mut ready, mut updated, mut available) =
        (0, 0, 0, 0, 0, 0);
    let mut old_on_eligible: Vec<&Pod> = Vec::new();
    let node_names: std::collections::BTreeSet<&str> =
        nodes.iter().map(|n| n.metadata.name.as_str()).collect();
    for node in nodes {
        let name = node.metadata.name.as_str();
        let here: Vec<&Pod> = by_node
            .get(name)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| is_active(p))
            .collect();
        if !eligible(node, &ds.spec.template) {
            if !here.is_empty() {
                misscheduled += 1;
                delete.extend(here.iter().map(|p| p.metadata.name.clone()));
            }
            continue;
        }
        desired += 1;
        let Some(keep) = here.iter().copied().max_by_key(|p| {
            (
                is_new(p),
                p.is_ready(),
                std::cmp::Reverse(p.metadata.creation_timestamp),
            )
        }) else {
            create.push(name.to_string());
            continue;
        };
        delete.extend(
            here.iter()
                .filter(|p| p.metadata.name != keep.metadata.name)
                .map(|p| p.metadata.name.clone()),
        );
        current += 1;
        ready += i32::from(keep.is_ready());
        available += i32::from(is_available(keep, min_ready, now));
        if is_new(keep) {
            updated += 1;
        } else {
            old_on_eligible.push(keep);
        }
    }
    // Pods on nodes that are gone.
    for (node, ps) in &by_node {
        if !node_names.contains(node) {
            delete.extend(ps.iter().map(|p| p.metadata.name.clone()));
        }
    }
    if ds.spec.update_strategy.type_ != "OnDelete" {
        let max_unavailable = ds
            .spec
            .update_strategy
            .rolling_update
            .as_ref()
            .and_then(|r| r.max_unavailable.clone())
            .unwrap_or(IntOrString::Int(1))
            .scaled_value(desired, true)
            .unwrap_or(1)
            .max(1);
        let mut budget = max_unavailable - (desired - available);
        for pod in old_on_eligible {
            if !is_available(pod, min_ready, now) {
                delete.push(pod.metadata.name.clone());
            } else if budget > 0 {
                delete.push(pod.metadata.name.clone());
                budget -= 1;
            }
        }
    }
    status.desired_number_scheduled = desired;
    status.current_number_scheduled = current;
    status.number_misscheduled = misscheduled;
    status.number_ready = ready;
    status.updated_number_scheduled = updated;
    status.number_available = available;
    status.number_unavailable = (desired - available).max(0);
    status.observed_generation = ds.metadata.generation;
    delete.sort();
    delete.dedup();
    DsDecision {
        create,
        delete,
        status,
    }
}

pub fn template_hash(ds: &DaemonSet) -> String {
    crate::deployment::template_hash(&ds.spec.template, ds.status.collision_count)
}

pub fn daemon_pod(ds: &DaemonSet, node: &str, hash: &str) -> Pod {
    let generate = format!("{}-", ds.metadata.name);
    let mut pod = podutil::pod_from_template(
        &ds.spec.template,
        &ds.metadata.namespace,
        &generate,
        podutil::controller_ref(ds),
    );
    pod.metadata.labels.insert(HASH_LABEL.into(), hash.into());
    pod.spec.node_name = node.to_string();
    for t in default_tolerations() {
        if !pod.spec.tolerations.contains(&t) {
            pod.spec.tolerations.push(t);
        }
    }
    pod
}

pub async fn reconcile(ds: Arc<DaemonSet>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    if ds.metadata.is_deleting() {
        return Ok(Action::AwaitChange);
    }
    let uid = ds.metadata.uid.clone();
    let key = format!("{}/{}", ds.metadata.namespace, ds.metadata.name);
    ctx.expectations.wait(&uid, &ctx.pods).await;
    let pods: Vec<Arc<Pod>> = ctx
        .pods
        .by_index(INDEX_OWNER, &uid)
        .into_iter()
        .filter(|p| is_owned_by(&p.metadata, &uid))
        .collect();
    let nodes = ctx.nodes.list(None, &Selector::everything());
    let hash = template_hash(&ds);
    let now = podutil::now();
    let d = decide(&ds, &nodes, &pods, &hash, now);
    for name in &d.delete {
        crate::replicaset::delete_pod(&ctx, ds.as_ref(), &ds.metadata.namespace, name).await?;
    }
    let daemons: Vec<Pod> = d
        .create
        .iter()
        .map(|node| daemon_pod(&ds, node, &hash))
        .collect();
    crate::create::create_pods(&ctx, ds.as_ref(), daemons)
        .await
        .map_err(|e| ReconcileError::api("create", "Pod", key.clone(), e))?;
    if d.create.is_empty() && d.delete.is_empty() && d.status != ds.status {
        let mut next = (*ds).clone();
        next.status = d.status;
        ctx.api
            .update_status(&next)
            .await
            .map_err(|e| ReconcileError::api("update-status", "DaemonSet", key, e))?;
    }
    Ok(Action::AwaitChange)
}

/// Triggers: the DaemonSet's pods, and every node change (eligibility may change).
pub fn start(ctx: &Arc<Ctx>, sd: &Shutdown) -> JoinHandle<()> {
    let queue = WorkQueue::new(Default::default());
    controller::feed_mapped(&ctx.pods, queue.clone(), |_, pod: &Pod| {
        owner_key::<DaemonSet>(&pod.metadata)
    });
    let dss = ctx.daemonsets.clone();
    controller::feed_mapped(&ctx.nodes, queue.clone(), move |_, _node: &Node| dss.keys());
    spawn(NAME, ctx.daemonsets.clone(), queue, ctx, reconcile, sd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str)]) -> Arc<Node> {
        let mut n = Node::default();
        n.metadata.name = name.into();
        n.metadata.labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        n.spec.taints = taints
            .iter()
            .map(|(k, e)| Taint {
                key: k.to_string(),
                effect: e.to_string(),
                ..Default::default()
            })
            .collect();
        Arc::new(n)
    }

    fn ds() -> DaemonSet {
        let mut ds = DaemonSet::default();
        ds.metadata.name = "agent".into();
        ds.metadata.namespace = "default".into();
        ds.metadata.uid = "ds-uid".into();
        ds.spec
            .template
            .spec
            .node_selector
            .insert("role".into(), "worker".into());
        ds
    }

    #[test]
    fn eligibility_follows_selector_affinity_and_taints() {
        let t = ds().spec.template;
        assert!(eligible(&node("a", &[("role", "worker")], &[]), &t));
        assert!(!eligible(&node("b", &[("role", "db")], &[]), &t));
        assert!(!eligible(
            &node("c", &[("role", "worker")], &[("dedicated", "NoSchedule")]),
            &t
        ));
        assert!(eligible(
            &node(
                "d",
                &[("role", "worker")],
                &[("dedicated", "PreferNoSchedule")]
            ),
            &t
        ));
        // Lifecycle taints are tolerated by default.
        assert!(eligible(
            &node(
                "e",
                &[("role", "worker")],
                &[("node.kubernetes.io/unreachable", "NoExecute")]
            ),
            &t
        ));
        let mut t2 = t.clone();
        t2.spec.tolerations.push(Toleration {
            key: "dedicated".into(),
            operator: "Exists".into(),
            ..Default::default()
        });
        assert!(eligible(
            &node("c", &[("role", "worker")], &[("dedicated", "NoSchedule")]),
            &t2
        ));
    }

    #[test]
    fn one_pod_per_eligible_node() {
        let d = ds();
        let nodes = [
            node("a", &[("role", "worker")], &[]),
            node("b", &[("role", "worker")], &[]),
            node("c", &[], &[]),
        ];
        let mut on_c = daemon_pod(&d, "c", "h");
        on_c.metadata.name = "on-c".into();
        let mut gone = daemon_pod(&d, "zz", "h");
        gone.metadata.name = "on-gone".into();
        let mut on_a = daemon_pod(&d, "a", "h");
        on_a.metadata.name = "on-a".into();
        let dec = decide(
            &d,
            &nodes,
            &[Arc::new(on_c), Arc::new(gone), Arc::new(on_a)],
            "h",
            podutil::now(),
        );
        assert_eq!(dec.create, vec!["b".to_string()]);
        assert_eq!(dec.delete, vec!["on-c".to_string(), "on-gone".to_string()]);
        assert_eq!(dec.status.desired_number_scheduled, 2);
        assert_eq!(dec.status.number_misscheduled, 1);
    }

    #[test]
    fn rolling_update_respects_max_unavailable() {
        let mut d = ds();
        d.spec.update_strategy.type_ = "RollingUpdate".into();
        let nodes: Vec<Arc<Node>> = ["a", "b", "c"]
            .iter()
            .map(|n| node(n, &[("role", "worker")], &[]))
            .collect();
        let pods: Vec<Arc<Pod>> = ["a", "b", "c"]
            .iter()
            .map(|n| {
                let mut p = daemon_pod(&d, n, "old");
                p.metadata.name = format!("p-{n}");
                p.status.conditions.push(bus_schemas::Condition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                });
                Arc::new(p)
            })
            .collect();
        let dec = decide(&d, &nodes, &pods, "new", podutil::now());
        assert_eq!(dec.delete.len(), 1, "maxUnavailable defaults to 1");
        d.spec.update_strategy.type_ = "OnDelete".into();
        let dec = decide(&d, &nodes, &pods, "new", podutil::now());
        assert!(dec.delete.is_empty());
    }
}
