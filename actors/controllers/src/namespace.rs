//! Namespace controller: deleting a namespace removes everything in it, then the namespace.
//!
//! Every live namespace gets the finalizer [`FINALIZER`] (added by this controller, so a
//! namespace deleted before the controller saw it has no content guard; GC then deletes
//! objects whose namespace no longer exists). A terminating namespace has its content
//! deleted (every namespaced kind); once nothing is left the finalizer is removed and the API
//! removes the namespace.
//!
//! Triggers: its own Namespaces, and every namespaced object being deleted in a terminating
//! namespace (the namespace waits for its content to go before dropping the finalizer).
//!
//! NOTE: an API-side default finalizer at namespace creation would close that window; see
//! the crate report.

use std::sync::Arc;

use bus_schemas::kinds::{Namespace, KINDS};
use bus_schemas::selector::Selector;
use bus_schemas::{with_kind, Resource};
use shoal_bus::controller::{self, Action};
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use shoal_bus::ObjectKey;
use tokio::task::JoinHandle;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::gc::delete_any;
use crate::spawn;

pub const NAME: &str = "namespace";
pub const FINALIZER: &str = "shoal.io/namespace-content";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceStep {
    AddFinalizer,
    /// Delete these (kind, name); `remaining` objects still exist.
    DeleteContent {
        delete: Vec<(&'static str, String)>,
        remaining: usize,
    },
    RemoveFinalizer,
    Nothing,
}

/// `content`: (kind, name, deleting) of every object in the namespace.
pub fn decide(ns: &Namespace, content: &[(&'static str, String, bool)]) -> NamespaceStep {
    let has = ns.metadata.finalizers.iter().any(|f| f == FINALIZER);
    match (ns.metadata.is_deleting(), has) {
        (false, false) => NamespaceStep::AddFinalizer,
        (false, true) | (true, false) => NamespaceStep::Nothing,
        (true, true) if content.is_empty() => NamespaceStep::RemoveFinalizer,
        (true, true) => NamespaceStep::DeleteContent {
            delete: content
                .iter()
                .filter(|c| !c.2)
                .map(|c| (c.0, c.1.clone()))
                .collect(),
            remaining: content.len(),
        },
    }
}

fn content(ctx: &Ctx, namespace: &str) -> Vec<(&'static str, String, bool)> {
    let mut out = Vec::new();
    for info in KINDS.iter().filter(|k| k.namespaced) {
        with_kind!(info.kind, K => {
            for obj in ctx.informers.get::<K>().list(Some(namespace), &Selector::everything()) {
                out.push((K::INFO.kind, obj.meta().name.clone(), obj.meta().is_deleting()));
            }
        }, _ => {})
    }
    out
}

pub async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let name = &ns.metadata.name;
    match decide(&ns, &content(&ctx, name)) {
        NamespaceStep::Nothing => Ok(Action::AwaitChange),
        NamespaceStep::AddFinalizer | NamespaceStep::RemoveFinalizer => {
            let mut next = ns.as_ref().clone();
            if next.metadata.is_deleting() {
                next.metadata.finalizers.retain(|f| f != FINALIZER);
            } else {
                next.metadata.finalizers.push(FINALIZER.into());
            }
            match ctx.api.update(&next).await {
                Ok(_) => Ok(Action::AwaitChange),
                Err(e) if e.is_not_found() => Ok(Action::AwaitChange),
                Err(e) => Err(ReconcileError::api("update", "Namespace", name.clone(), e)),
            }
        }
        NamespaceStep::DeleteContent { delete, remaining } => {
            tracing::debug!(namespace = %name, remaining, "deleting namespace content");
            for (kind, obj) in &delete {
                delete_any(&ctx, kind, name, obj, None, None).await?;
            }
            Ok(Action::RequeueAfter(std::time::Duration::from_millis(500)))
        }
    }
}

/// Triggers: its Namespaces, and any namespaced object being deleted in a namespace that
/// is terminating (each deletion may be the last thing it waits for).
pub fn start(ctx: &Arc<Ctx>, sd: &Shutdown) -> JoinHandle<()> {
    let queue = WorkQueue::new(Default::default());
    for info in KINDS.iter().filter(|k| k.namespaced) {
        with_kind!(info.kind, K => {
            let namespaces = ctx.namespaces.clone();
            controller::feed_mapped(&ctx.informers.get::<K>(), queue.clone(), move |_, obj: &K| {
                let meta = obj.meta();
                let terminating = meta.is_deleting()
                    && namespaces
                        .get("", &meta.namespace)
                        .is_some_and(|ns| ns.metadata.is_deleting());
                if terminating {
                    vec![ObjectKey::new("", meta.namespace.clone())]
                } else {
                    Vec::new()
                }
            });
        }, _ => {})
    }
    spawn(NAME, ctx.namespaces.clone(), queue, ctx, reconcile, sd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_steps() {
        let mut ns = Namespace::default();
        assert_eq!(decide(&ns, &[]), NamespaceStep::AddFinalizer);
        ns.metadata.finalizers.push(FINALIZER.into());
        assert_eq!(
            decide(&ns, &[("Pod", "a".into(), false)]),
            NamespaceStep::Nothing
        );
        ns.metadata.deletion_timestamp = Some(crate::podutil::now());
        assert_eq!(
            decide(
                &ns,
                &[("Pod", "a".into(), false), ("Pod", "b".into(), true)]
            ),
            NamespaceStep::DeleteContent {
                delete: vec![("Pod", "a".into())],
                remaining: 2
            }
        );
        assert_eq!(decide(&ns, &[]), NamespaceStep::RemoveFinalizer);
    }
}
