//! Node lifecycle: a node whose heartbeats stop becomes NotReady and tainted, and its pods
//! are evicted after their toleration runs out, so their controllers replace them elsewhere.
//!
//! - Heartbeats are the Lease `shoal-node-lease/<node>` (renewTime). Older than
//!   `node_monitor_grace` → Ready=Unknown (reason NodeStatusUnknown) and the taints
//!   `node.kubernetes.io/unreachable` NoSchedule + NoExecute. A node agent reporting
//!   Ready=False gets `node.kubernetes.io/not-ready` instead. A fresh lease removes our taints,
//!   and puts Ready back to True only if the Unknown was ours (the agent reports Ready itself).
//! - Taint manager: a pod on a node with NoExecute taints is evicted (deleted with grace 0:
//!   the node is gone, nobody would confirm a graceful stop) once every toleration lapsed.
//!   Pods without a toleration for unreachable/not-ready get `default_unreachable_toleration`.
//!
//! [`decide_node`] and [`eviction_time`] are pure.

use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::node::Taint;
use bus_schemas::kinds::{Lease, Node, Pod};
use bus_schemas::meta::{find_condition, Condition, Time};
use shoal_bus::controller::{Action, TraceReconciles};
use shoal_bus::informer::INDEX_NODE;

use shoal_bus::controller;
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use shoal_bus::ObjectKey;
use tokio::task::JoinHandle;

use crate::context::{Ctx, Tunables};
use crate::error::ReconcileError;
use crate::events::{NORMAL, WARNING};
use crate::gc::delete_any;
use crate::podutil;
use crate::spawn_traced;
use futures::StreamExt;

pub const NAME: &str = "node-lifecycle";
pub use bus_schemas::wellknown::NODE_LEASE_NAMESPACE;
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const REASON_UNKNOWN: &str = "NodeStatusUnknown";

#[derive(Debug, Clone, PartialEq)]
pub struct NodeDecision {
    /// The Ready condition to write, if it must change.
    pub ready: Option<Condition>,
    /// The taints the node should have, if they must change.
    pub taints: Option<Vec<Taint>>,
    /// When to look again (the lease lapses then).
    pub recheck_at: Option<Time>,
}

/// Whether the cluster is so disrupted that evictions pause (see
/// [`Tunables::unhealthy_threshold`]), judged at most once a second: every node's reconcile
/// asks, and 5,000 nodes each counting 5,000 would cost more than the evictions.
#[derive(Default)]
pub struct Disruption {
    judged: std::sync::Mutex<Option<(std::time::Instant, bool)>>,
}

impl Disruption {
    pub fn evictions_paused(&self, nodes: impl FnOnce() -> Vec<Arc<Node>>, threshold: f64) -> bool {
        let mut judged = self.judged.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, paused)) = *judged {
            if at.elapsed() < Duration::from_secs(1) {
                return paused;
            }
        }
        let nodes = nodes();
        let paused = is_disrupted(&nodes, threshold);
        let was = judged.map(|(_, p)| p).unwrap_or(false);
        if paused != was {
            if paused {
                tracing::warn!(
                    nodes = nodes.len(),
                    "more than {:.0}% of the nodes are not Ready: evictions pause until fewer are (check the network and the control plane's load)",
                    threshold * 100.0
                );
            } else {
                tracing::info!("enough nodes are Ready again: evictions resume");
            }
        }
        *judged = Some((std::time::Instant::now(), paused));
        paused
    }
}

/// More than `threshold` of the nodes, and at least two, are not Ready.
pub fn is_disrupted(nodes: &[Arc<Node>], threshold: f64) -> bool {
    let not_ready = nodes
        .iter()
        .filter(|n| {
            find_condition(&n.status.conditions, "Ready").is_none_or(|c| c.status != "True")
        })
        .count();
    not_ready >= 2 && not_ready as f64 > threshold * nodes.len() as f64
}

/// Decides a node's condition and lifecycle taints from its lease. `watching_since`: when
/// this controller started watching; no node lapses within a grace period of it.
///
/// NOTE: why. A lease is only as fresh as the last heartbeat anyone stored, and a
/// controller that starts (a `shoal up` restarted, a new leader) may read leases that went
/// stale while nobody watched, with the agents about to beat again: judged at once, every
/// node went NotReady and unreachable-tainted for the seconds until its next heartbeat, and
/// pods created meanwhile waited as unschedulable (4 s in the demo after a restart). Like
/// Kubernetes' node lifecycle controller, which times each node from when it first observed
/// it, a node gets a full grace period from the start.
pub fn decide_node(
    node: &Node,
    lease: Option<&Lease>,
    now: Time,
    grace: Duration,
    watching_since: Time,
) -> NodeDecision {
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::seconds(10));
    let last_heartbeat = lease
        .and_then(Lease::last_renewed)
        .or(node.metadata.creation_timestamp)
        .unwrap_or(now);
    let timed_from = last_heartbeat.max(watching_since);
    let lapsed = timed_from + grace <= now;
    let current = find_condition(&node.status.conditions, "Ready");
    let mut ready = None;
    if lapsed {
        if current.is_none_or(|c| c.status != "Unknown") {
            ready = Some(Condition {
                type_: "Ready".into(),
                status: "Unknown".into(),
                reason: REASON_UNKNOWN.into(),
                message: "Node stopped posting heartbeats.".into(),
                last_transition_time: Some(now),
                last_heartbeat_time: Some(last_heartbeat),
                ..Default::default()
            });
        }
    } else if current.is_some_and(|c| c.status == "Unknown" && c.reason == REASON_UNKNOWN) {
        ready = Some(Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "NodeHeartbeatResumed".into(),
            message: "Node is posting heartbeats again.".into(),
            last_transition_time: Some(now),
            last_heartbeat_time: Some(last_heartbeat),
            ..Default::default()
        });
    }
    let effective = ready
        .as_ref()
        .or(current)
        .map(|c| c.status.clone())
        .unwrap_or_default();
    let wanted_key = match effective.as_str() {
        "Unknown" => Some(TAINT_UNREACHABLE),
        "False" => Some(TAINT_NOT_READY),
        _ => None,
    };
    let mut taints: Vec<Taint> = node
        .spec
        .taints
        .iter()
        .filter(|t| {
            let ours = t.key == TAINT_UNREACHABLE || t.key == TAINT_NOT_READY;
            !ours || Some(t.key.as_str()) == wanted_key
        })
        .cloned()
        .collect();
    if let Some(key) = wanted_key {
        for effect in ["NoSchedule", "NoExecute"] {
            if !taints.iter().any(|t| t.key == key && t.effect == effect) {
                taints.push(Taint {
                    key: key.into(),
                    value: String::new(),
                    effect: effect.into(),
                    time_added: Some(now),
                });
            }
        }
    }
    let taints = (taints != node.spec.taints).then_some(taints);
    let recheck_at = (!lapsed).then_some(timed_from + grace);
    NodeDecision {
        ready,
        taints,
        recheck_at,
    }
}

/// When `pod` must be evicted from a node with `taints`: None if it tolerates every NoExecute
/// taint forever (or there is none).
pub fn eviction_time(
    pod: &Pod,
    taints: &[Taint],
    default_toleration: Duration,
    now: Time,
) -> Option<Time> {
    let default = chrono::Duration::from_std(default_toleration).unwrap_or_default();
    let mut earliest: Option<Time> = None;
    for taint in taints.iter().filter(|t| t.effect == "NoExecute") {
        let added = taint.time_added.unwrap_or(now);
        let tolerated_for = match pod.spec.tolerations.iter().find(|t| t.tolerates(taint)) {
            Some(t) => t
                .toleration_seconds
                .map(|s| chrono::Duration::seconds(s.max(0))),
            None if taint.key == TAINT_UNREACHABLE || taint.key == TAINT_NOT_READY => Some(default),
            None => Some(chrono::Duration::zero()),
        };
        if let Some(d) = tolerated_for {
            let at = added + d;
            earliest = Some(earliest.map_or(at, |e| e.min(at)));
        }
    }
    earliest
}

/// Tries of a node's condition and taint writes that lost a race (client-go's
/// `retry.DefaultRetry`: five).
const CONFLICT_TRIES: usize = 5;

pub async fn reconcile(
    node: Arc<Node>,
    ctx: Arc<Ctx>,
    watching_since: Time,
) -> Result<Action, ReconcileError> {
    let now = podutil::now();
    let name = node.metadata.name.clone();
    let tunables: &Tunables = &ctx.tunables;
    let mut lease = ctx.leases.get(NODE_LEASE_NAMESPACE, &name);
    if condemns(&decide_node(
        &node,
        lease.as_deref(),
        now,
        tunables.node_monitor_grace,
        watching_since,
    )) {
        lease = newest_lease(lease, fresh_lease(&ctx, &name).await?);
    }
    // NOTE: after a conflict the node is read again from the API, not the cache, and the
    // write retried at once (Kubernetes' RetryOnConflict). Agents write their nodes too, and
    // after a partition heals this process's cache can trail the log by seconds: retried
    // from the cache through the work queue's back-off, a node's Ready condition conflicted
    // six times running and reached the log 5 s after its heartbeats did.
    let mut current = (*node).clone();
    let mut tries = 1;
    let decision = loop {
        let decision = decide_node(
            &current,
            lease.as_deref(),
            now,
            tunables.node_monitor_grace,
            watching_since,
        );
        match write_decision(&ctx, &current, &decision).await {
            Ok(written) => {
                current = written;
                break decision;
            }
            Err((_, e)) if e.is_conflict() && tries < CONFLICT_TRIES => {
                tries += 1;
                current = ctx
                    .api
                    .get::<Node>("", &name)
                    .await
                    .map_err(|e| ReconcileError::api("get", "Node", name.clone(), e))?;
            }
            Err((verb, e)) => return Err(ReconcileError::api(verb, "Node", name.clone(), e)),
        }
    };
    // Taint manager. Due evictions run concurrently (bounded): a failed node may hold
    // hundreds of pods, and evicting them one write at a time delays every replacement.
    let mut next_eviction: Option<Time> = None;
    let mut due = Vec::new();
    if current.spec.taints.iter().any(|t| t.effect == "NoExecute") {
        for pod in ctx.pods.by_index(INDEX_NODE, &name) {
            if pod.is_terminal()
                || (pod.metadata.is_deleting()
                    && pod.metadata.deletion_grace_period_seconds == Some(0))
            {
                continue;
            }
            let Some(at) = eviction_time(
                &pod,
                &current.spec.taints,
                tunables.default_unreachable_toleration,
                now,
            ) else {
                continue;
            };
            if at <= now {
                due.push(pod);
            } else {
                next_eviction = Some(next_eviction.map_or(at, |e| e.min(at)));
            }
        }
    }
    if !due.is_empty()
        && ctx.disruption.evictions_paused(
            || {
                ctx.nodes
                    .list(None, &bus_schemas::selector::Selector::everything())
            },
            tunables.unhealthy_threshold,
        )
    {
        ctx.events.record(
            &current,
            WARNING,
            "EvictionsPaused",
            format!(
                "{} pods due for eviction stay: more than {:.0}% of the nodes are not Ready, which looks like a network or control-plane failure rather than the nodes'",
                due.len(),
                tunables.unhealthy_threshold * 100.0
            ),
        );
        due.clear();
        next_eviction = Some(now + chrono::Duration::seconds(2));
    }
    let evictions = futures::stream::iter(due.into_iter().map(|pod| {
        let ctx = ctx.clone();
        let node = name.clone();
        async move {
            let (ns, pname) = (&pod.metadata.namespace, &pod.metadata.name);
            tracing::info!(node = %node, pod = %format!("{ns}/{pname}"), "evicting pod from tainted node");
            delete_any(&ctx, "Pod", ns, pname, None, Some(0)).await?;
            ctx.events.record(
                pod.as_ref(),
                NORMAL,
                "TaintManagerEviction",
                format!("Marking for deletion Pod {ns}/{pname}"),
            );
            Ok::<(), ReconcileError>(())
        }
    }))
    .buffer_unordered(32)
    .collect::<Vec<_>>()
    .await;
    for result in evictions {
        result?;
    }
    let next = [decision.recheck_at, next_eviction]
        .into_iter()
        .flatten()
        .min();
    Ok(match next {
        Some(at) => Action::RequeueAfter(podutil::until(at, now) + Duration::from_millis(50)),
        None => Action::RequeueAfter(Duration::from_secs(5)),
    })
}

/// Whether `decision` marks its node as no longer heard from.
fn condemns(decision: &NodeDecision) -> bool {
    decision
        .ready
        .as_ref()
        .is_some_and(|c| c.status == "Unknown")
}

/// The node's heartbeat Lease as the API reads it now. A node is only condemned on a
/// fresh read: this process's cache stops with its link, and a controller that led from the
/// cut-off side of a partition saw no heartbeat from anyone for the whole cut. In a chaos
/// run, 1 s after such a cut healed, more than half the cluster's nodes were NotReady
/// although only the cut host's had missed heartbeats, and all were Ready again 11 s later.
async fn fresh_lease(ctx: &Ctx, name: &str) -> Result<Option<Arc<Lease>>, ReconcileError> {
    match ctx.api.get::<Lease>(NODE_LEASE_NAMESPACE, name).await {
        Ok(lease) => Ok(Some(Arc::new(lease))),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(ReconcileError::api("get", "Lease", name.to_string(), e)),
    }
}

/// Of two reads of one Lease, the one that heard the latest heartbeat (a read may come
/// from a replica that trails the cache).
fn newest_lease(cached: Option<Arc<Lease>>, fresh: Option<Arc<Lease>>) -> Option<Arc<Lease>> {
    let heard = |l: &Option<Arc<Lease>>| l.as_deref().and_then(Lease::last_renewed);
    if heard(&fresh) >= heard(&cached) {
        fresh.or(cached)
    } else {
        cached
    }
}

/// Writes what `decision` changes of `node`: its Ready condition (with an Event) and its
/// taints. Returns the node as last written, or the failed verb and why.
async fn write_decision(
    ctx: &Ctx,
    node: &Node,
    decision: &NodeDecision,
) -> Result<Node, (&'static str, shoal_bus::ApiError)> {
    let name = &node.metadata.name;
    let mut current = node.clone();
    if let Some(ready) = &decision.ready {
        let mut next = current.clone();
        next.status.conditions.retain(|c| c.type_ != "Ready");
        next.status.conditions.push(ready.clone());
        current = ctx
            .api
            .update_status(&next)
            .await
            .map_err(|e| ("update-status", e))?;
        if ready.status == "Unknown" {
            ctx.events.record(
                &current,
                WARNING,
                "NodeNotReady",
                format!("Node {name} status is now: NodeNotReady"),
            );
        } else {
            ctx.events.record(
                &current,
                NORMAL,
                "NodeReady",
                format!("Node {name} status is now: NodeReady"),
            );
        }
    }
    if let Some(taints) = &decision.taints {
        let mut next = current.clone();
        next.spec.taints = taints.clone();
        current = ctx.api.update(&next).await.map_err(|e| ("update", e))?;
    }
    Ok(current)
}

/// Triggers: the node's heartbeat Lease.
pub fn start(ctx: &Arc<Ctx>, sd: &Shutdown) -> JoinHandle<()> {
    let watching_since = podutil::now();
    let queue = WorkQueue::new(Default::default());
    controller::feed_mapped(&ctx.leases, queue.clone(), |key, _lease: &Lease| {
        if key.namespace == NODE_LEASE_NAMESPACE {
            vec![ObjectKey::new("", key.name.clone())]
        } else {
            Vec::new()
        }
    });
    spawn_traced(
        NAME,
        TraceReconciles::ContinuingOnly,
        ctx.nodes.clone(),
        queue,
        ctx,
        move |node, ctx| reconcile(node, ctx, watching_since),
        sd,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::kinds::Toleration;

    /// A controller watching since long before any heartbeat these tests look at.
    const LONG_AGO: Time = Time::MIN_UTC;

    /// `node` judged at `now` on `lease` with a 10 s grace, by a controller watching since
    /// long before.
    fn judged_on(node: &Node, lease: Option<&Lease>, now: Time) -> NodeDecision {
        decide_node(node, lease, now, Duration::from_secs(10), LONG_AGO)
    }

    /// `node` judged now, its lease renewed `lease_age_s` ago.
    fn judged(node: &Node, lease_age_s: i64) -> NodeDecision {
        judged_on(node, Some(&lease(lease_age_s)), podutil::now())
    }

    fn node_with_ready(status: &str, reason: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = "n1".into();
        n.status.conditions.push(Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: reason.into(),
            ..Default::default()
        });
        n
    }

    fn lease(age_s: i64) -> Lease {
        let mut l = Lease::default();
        l.spec.renew_time = Some(podutil::now() - chrono::Duration::seconds(age_s));
        l
    }

    #[test]
    fn a_node_is_judged_on_the_lease_that_heard_its_latest_heartbeat() {
        let renewed = |l: Option<Arc<Lease>>| l.and_then(|l| l.spec.renew_time);
        let (stale, fresh) = (Arc::new(lease(30)), Arc::new(lease(1)));
        // The cache stopped during a cut; the API's read heard the node since.
        let newest = newest_lease(Some(stale.clone()), Some(fresh.clone()));
        assert_eq!(renewed(newest.clone()), fresh.spec.renew_time);
        let n = node_with_ready("True", "NodeReady");
        let now = podutil::now();
        assert!(condemns(&judged_on(&n, Some(&stale), now)));
        assert!(!condemns(&judged_on(&n, newest.as_deref(), now)));
        // A read from a replica that trails the cache never makes the node look older.
        assert_eq!(
            renewed(newest_lease(Some(fresh.clone()), Some(stale))),
            fresh.spec.renew_time
        );
        assert_eq!(
            renewed(newest_lease(Some(fresh.clone()), None)),
            fresh.spec.renew_time
        );
        // Restoring a node that beats again is not a condemnation.
        let back = node_with_ready("Unknown", REASON_UNKNOWN);
        assert!(!condemns(&judged_on(&back, Some(&fresh), now)));
    }

    #[test]
    fn a_controller_that_just_started_gives_a_stale_node_a_grace_period_first() {
        let n = node_with_ready("True", "NodeReady");
        let now = podutil::now();
        let grace = Duration::from_secs(10);
        let stale = lease(300);
        let d = decide_node(&n, Some(&stale), now, grace, now);
        assert!(!condemns(&d), "judged only a grace period after the start");
        assert_eq!(d.recheck_at, Some(now + chrono::Duration::seconds(10)));
        let later = now + chrono::Duration::seconds(10);
        assert!(condemns(&decide_node(&n, Some(&stale), later, grace, now)));
    }

    #[test]
    fn lapsed_lease_makes_node_unknown_and_tainted() {
        let n = node_with_ready("True", "NodeReady");
        let d = judged(&n, 30);
        assert_eq!(d.ready.as_ref().unwrap().status, "Unknown");
        let taints = d.taints.unwrap();
        assert_eq!(taints.len(), 2);
        assert!(taints.iter().all(|t| t.key == TAINT_UNREACHABLE));
        assert!(d.recheck_at.is_none());
    }

    #[test]
    fn fresh_lease_untaints_and_restores_only_our_unknown() {
        let mut n = node_with_ready("Unknown", REASON_UNKNOWN);
        n.spec.taints.push(Taint {
            key: TAINT_UNREACHABLE.into(),
            effect: "NoExecute".into(),
            ..Default::default()
        });
        n.spec.taints.push(Taint {
            key: "dedicated".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
        let d = judged(&n, 1);
        assert_eq!(d.ready.unwrap().status, "True");
        assert_eq!(
            d.taints
                .unwrap()
                .iter()
                .map(|t| t.key.as_str())
                .collect::<Vec<_>>(),
            vec!["dedicated"]
        );
        // A node the agent reports not ready keeps its condition and gets not-ready taints.
        let n = node_with_ready("False", "KubeletNotReady");
        let d = judged(&n, 1);
        assert!(d.ready.is_none());
        assert!(d.taints.unwrap().iter().all(|t| t.key == TAINT_NOT_READY));
        let n = node_with_ready("True", "NodeReady");
        let d = judged(&n, 1);
        assert_eq!((d.ready, d.taints), (None, None));
    }

    #[test]
    fn evictions_pause_only_when_most_nodes_are_down() {
        let nodes = |down: usize, up: usize| -> Vec<Arc<Node>> {
            (0..down)
                .map(|_| Arc::new(node_with_ready("Unknown", REASON_UNKNOWN)))
                .chain((0..up).map(|_| Arc::new(node_with_ready("True", "NodeReady"))))
                .collect()
        };
        assert!(
            !is_disrupted(&nodes(1, 1), 0.55),
            "one of two nodes failing is a node failure"
        );
        assert!(
            !is_disrupted(&nodes(1, 0), 0.55),
            "a lone node may fail too"
        );
        assert!(!is_disrupted(&nodes(10, 990), 0.55));
        assert!(!is_disrupted(&nodes(55, 45), 0.55));
        assert!(is_disrupted(&nodes(56, 44), 0.55));
        assert!(
            is_disrupted(&nodes(5000, 0), 0.55),
            "everything down at once"
        );
    }

    #[test]
    fn eviction_respects_tolerations() {
        let now = podutil::now();
        let taint = Taint {
            key: TAINT_UNREACHABLE.into(),
            effect: "NoExecute".into(),
            value: String::new(),
            time_added: Some(now),
        };
        let mut pod = Pod::default();
        assert_eq!(
            eviction_time(
                &pod,
                std::slice::from_ref(&taint),
                Duration::from_secs(5),
                now
            ),
            Some(now + chrono::Duration::seconds(5))
        );
        pod.spec.tolerations.push(Toleration {
            key: TAINT_UNREACHABLE.into(),
            operator: "Exists".into(),
            effect: "NoExecute".into(),
            toleration_seconds: Some(60),
            ..Default::default()
        });
        assert_eq!(
            eviction_time(
                &pod,
                std::slice::from_ref(&taint),
                Duration::from_secs(5),
                now
            ),
            Some(now + chrono::Duration::seconds(60))
        );
        pod.spec.tolerations[0].toleration_seconds = None;
        assert_eq!(
            eviction_time(
                &pod,
                std::slice::from_ref(&taint),
                Duration::from_secs(5),
                now
            ),
            None
        );
        let other = Taint {
            key: "gpu-broken".into(),
            effect: "NoExecute".into(),
            value: String::new(),
            time_added: Some(now),
        };
        assert_eq!(
            eviction_time(&Pod::default(), &[other], Duration::from_secs(5), now),
            Some(now)
        );
    }
}
