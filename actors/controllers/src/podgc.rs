//! Pod garbage collection: a pod bound to a node that no longer exists is deleted at once,
//! with no grace period (Kubernetes' PodGC). Nothing is left to stop its containers, and
//! its owner can only replace it once it is gone.
//!
//! Triggers: every Pod change, and a Node leaving the cache (its pods, through the
//! `spec.nodeName` index). The decision reads the node cache first and confirms a missing
//! node with a live read, so a cache that lags never deletes a healthy pod.

use std::sync::Arc;

use bus_schemas::kinds::{Node, Pod};
use shoal_bus::controller::{self, Action, TraceReconciles};
use shoal_bus::informer::INDEX_NODE;
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use shoal_bus::ObjectKey;
use tokio::task::JoinHandle;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::gc::delete_any;
use crate::spawn_traced;

pub const NAME: &str = "pod-garbage-collector";

/// The node the pod is bound to, when the cache no longer has it.
pub fn bound_to_missing_node(pod: &Pod, node_cached: impl Fn(&str) -> bool) -> Option<&str> {
    let node = pod.spec.node_name.as_str();
    (!node.is_empty() && !node_cached(node)).then_some(node)
}

pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let Some(node) = bound_to_missing_node(&pod, |n| ctx.nodes.get("", n).is_some()) else {
        return Ok(Action::AwaitChange);
    };
    match ctx.api.get::<Node>("", node).await {
        Err(e) if e.is_not_found() => {
            let meta = &pod.metadata;
            delete_any(&ctx, "Pod", &meta.namespace, &meta.name, None, Some(0)).await?;
            Ok(Action::AwaitChange)
        }
        Err(e) => Err(ReconcileError::api("get", "Node", node.to_string(), e)),
        Ok(_) => Ok(Action::AwaitChange),
    }
}

pub fn start(ctx: &Arc<Ctx>, sd: &Shutdown) -> JoinHandle<()> {
    let queue = WorkQueue::new(Default::default());
    let (nodes, pods) = (ctx.nodes.clone(), ctx.pods.clone());
    controller::feed_mapped(&ctx.nodes, queue.clone(), move |key, _: &Node| {
        if nodes.get("", &key.name).is_some() {
            return Vec::new();
        }
        pods.by_index(INDEX_NODE, &key.name)
            .iter()
            .map(|pod| ObjectKey::of(pod.as_ref()))
            .collect()
    });
    spawn_traced(
        NAME,
        TraceReconciles::WhileDeleting,
        ctx.pods.clone(),
        queue,
        ctx,
        reconcile,
        sd,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bound_pod_whose_node_is_gone_is_collected() {
        let mut pod = Pod::default();
        assert_eq!(bound_to_missing_node(&pod, |_| false), None, "unbound");
        pod.spec.node_name = "n1".into();
        assert_eq!(bound_to_missing_node(&pod, |_| true), None, "node present");
        assert_eq!(bound_to_missing_node(&pod, |_| false), Some("n1"));
    }
}
