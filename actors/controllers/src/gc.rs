//! Garbage collection: ownerReferences drive cascading deletion across every kind.
//!
//! One reconcile loop per kind (dispatched generically with [`bus_schemas::with_kind!`]).
//! For each object it checks, in order:
//! - owner side, when the object is being deleted with finalizer `orphan`: remove this
//!   owner's references from every dependent, then the finalizer; with `foregroundDeletion`:
//!   delete the dependents (foreground too, so chains unwind leaf first), wait until none
//!   that has blockOwnerDeletion remains, then remove the finalizer;
//! - dependent side: when none of its owners exists any more (checked by uid, and confirmed
//!   with a live read before acting), delete it (background); dangling references next to a
//!   live owner are dropped;
//! - namespaced objects whose namespace is gone are deleted;
//! - Namespaces themselves are not collected here: the namespace controller
//!   ([`crate::namespace`]) owns them and deletes their content; pods bound to a node that
//!   no longer exists are the pod collector's ([`crate::podgc`]).
//!
//! [`decide_owner_side`] and [`decide_dependent_side`] are the pure parts.
//!
//! NOTE: dependents are found through the `owner` index (controller references) plus a scan
//! of the owner's namespace for non-controller references; the scan runs only for owners
//! that are being deleted with a finalizer, which is rare.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::{Namespace, KINDS};
use bus_schemas::selector::Selector;
use bus_schemas::{with_kind, OwnerReference, Resource};
use shoal_bus::controller::{self, Action, TraceReconciles};
use shoal_bus::informer::INDEX_OWNER;
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use shoal_bus::ObjectKey;
use tokio::sync::broadcast::error::RecvError;

use crate::context::Ctx;
use crate::controller_config;
use crate::error::ReconcileError;

pub use bus_schemas::wellknown::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN};

/// A dependent of some owner, as GC sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependent {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub deleting: bool,
    /// Whether its reference to the owner has blockOwnerDeletion.
    pub blocks: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerStep {
    Nothing,
    /// Remove the owner's references from these dependents, then the finalizer.
    Orphan(Vec<Dependent>),
    /// Delete these dependents (foreground), and remove the finalizer if `done`.
    Foreground {
        delete: Vec<Dependent>,
        done: bool,
    },
}

pub fn decide_owner_side(meta: &bus_schemas::ObjectMeta, dependents: &[Dependent]) -> OwnerStep {
    if !meta.is_deleting() {
        return OwnerStep::Nothing;
    }
    if meta.finalizers.iter().any(|f| f == FINALIZER_ORPHAN) {
        return OwnerStep::Orphan(dependents.to_vec());
    }
    if meta.finalizers.iter().any(|f| f == FINALIZER_FOREGROUND) {
        let delete = dependents.iter().filter(|d| !d.deleting).cloned().collect();
        let done = !dependents.iter().any(|d| d.blocks);
        return OwnerStep::Foreground { delete, done };
    }
    OwnerStep::Nothing
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DependentStep {
    Keep,
    /// Every owner is gone: delete.
    Delete,
    /// Some owners are gone: drop these references (by uid).
    DropReferences(Vec<String>),
}

/// `owner_exists[i]` says whether `refs[i]`'s owner (same uid) exists.
pub fn decide_dependent_side(refs: &[OwnerReference], owner_exists: &[bool]) -> DependentStep {
    if refs.is_empty() {
        return DependentStep::Keep;
    }
    if owner_exists.iter().all(|e| !e) {
        return DependentStep::Delete;
    }
    let dangling: Vec<String> = refs
        .iter()
        .zip(owner_exists)
        .filter(|(_, e)| !**e)
        .map(|(r, _)| r.uid.clone())
        .collect();
    if dangling.is_empty() {
        DependentStep::Keep
    } else {
        DependentStep::DropReferences(dangling)
    }
}

fn namespace_of_owner(kind: &str, dependent_ns: &str) -> String {
    let namespaced = bus_schemas::kinds::lookup(kind).is_none_or(|k| k.namespaced);
    if namespaced {
        dependent_ns.to_string()
    } else {
        String::new()
    }
}

/// Whether the owner a reference names exists with the same uid. Unknown kinds count as
/// existing (never delete on doubt); absence in the cache is confirmed with a live read.
pub async fn owner_exists(
    ctx: &Ctx,
    r: &OwnerReference,
    dependent_ns: &str,
) -> Result<bool, ReconcileError> {
    let ns = namespace_of_owner(&r.kind, dependent_ns);
    with_kind!(r.kind.as_str(), O => {
        if let Some(o) = ctx.informers.get::<O>().get(&ns, &r.name) {
            if o.meta().uid == r.uid {
                return Ok(true);
            }
        }
        match ctx.api.get::<O>(&ns, &r.name).await {
            Ok(o) => Ok(o.meta().uid == r.uid),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(ReconcileError::api("get", O::INFO.kind, format!("{ns}/{}", r.name), e)),
        }
    }, _ => Ok(true))
}

/// Every object (any namespaced kind) with a reference to `uid`, in `namespace` (or all
/// namespaces for a cluster-scoped owner).
pub fn find_dependents(ctx: &Ctx, uid: &str, namespace: &str) -> Vec<Dependent> {
    let mut out = Vec::new();
    for info in KINDS.iter().filter(|k| k.namespaced) {
        with_kind!(info.kind, D => {
            let informer = ctx.informers.get::<D>();
            let ns = (!namespace.is_empty()).then_some(namespace);
            let mut seen = std::collections::HashSet::new();
            let candidates = informer.by_index(INDEX_OWNER, uid).into_iter().chain(
                informer.list(ns, &Selector::everything()).into_iter()
                    .filter(|o| o.meta().owner_references.iter().any(|r| r.uid == uid)),
            );
            for obj in candidates {
                let m = obj.meta();
                if !seen.insert((m.namespace.clone(), m.name.clone())) {
                    continue;
                }
                let Some(r) = m.owner_references.iter().find(|r| r.uid == uid) else { continue };
                out.push(Dependent {
                    kind: D::INFO.kind,
                    namespace: m.namespace.clone(),
                    name: m.name.clone(),
                    deleting: m.is_deleting(),
                    blocks: r.block_owner_deletion == Some(true),
                });
            }
        }, _ => {})
    }
    out
}

async fn remove_reference(ctx: &Ctx, d: &Dependent, uid: &str) -> Result<(), ReconcileError> {
    with_kind!(d.kind, D => {
        let Some(obj) = ctx.informers.get::<D>().get(&d.namespace, &d.name) else { return Ok(()) };
        let mut next = (*obj).clone();
        next.meta_mut().owner_references.retain(|r| r.uid != uid);
        match ctx.api.update(&next).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(ReconcileError::api("update", D::INFO.kind, format!("{}/{}", d.namespace, d.name), e)),
        }
    }, _ => Ok(()))
}

/// Deletes an object of any kind; NotFound counts as done.
pub async fn delete_any(
    ctx: &Ctx,
    kind: &str,
    namespace: &str,
    name: &str,
    policy: Option<&str>,
    grace: Option<i64>,
) -> Result<(), ReconcileError> {
    with_kind!(kind, D => {
        let options = DeleteOptions {
            namespace: namespace.to_string(),
            name: name.to_string(),
            propagation_policy: policy.map(str::to_string),
            grace_period_seconds: grace,
            preconditions: None,
        };
        match ctx.api.delete::<D>(&options).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(ReconcileError::api("delete", D::INFO.kind, format!("{namespace}/{name}"), e)),
        }
    }, _ => Ok(()))
}

async fn remove_finalizer<K: Resource>(
    ctx: &Ctx,
    obj: &K,
    finalizer: &str,
) -> Result<(), ReconcileError> {
    let mut next = obj.clone();
    next.meta_mut().finalizers.retain(|f| f != finalizer);
    match ctx.api.update(&next).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(ReconcileError::api(
            "update",
            K::INFO.kind,
            obj.meta().name.clone(),
            e,
        )),
    }
}

pub async fn reconcile<K: Resource>(obj: Arc<K>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let meta = obj.meta();
    // Owner side.
    if meta.is_deleting() && !meta.finalizers.is_empty() {
        let dependents = find_dependents(&ctx, &meta.uid, &meta.namespace);
        match decide_owner_side(meta, &dependents) {
            OwnerStep::Nothing => {}
            OwnerStep::Orphan(deps) => {
                for d in &deps {
                    remove_reference(&ctx, d, &meta.uid).await?;
                }
                remove_finalizer(&ctx, obj.as_ref(), FINALIZER_ORPHAN).await?;
                return Ok(Action::AwaitChange);
            }
            OwnerStep::Foreground { delete, done } => {
                for d in &delete {
                    delete_any(
                        &ctx,
                        d.kind,
                        &d.namespace,
                        &d.name,
                        Some("Foreground"),
                        None,
                    )
                    .await?;
                }
                if done {
                    remove_finalizer(&ctx, obj.as_ref(), FINALIZER_FOREGROUND).await?;
                    return Ok(Action::AwaitChange);
                }
                return Ok(Action::RequeueAfter(Duration::from_millis(500)));
            }
        }
    }
    if meta.is_deleting() {
        return Ok(Action::AwaitChange);
    }
    // Dependent side.
    if !meta.owner_references.is_empty() {
        let mut exists = Vec::with_capacity(meta.owner_references.len());
        for r in &meta.owner_references {
            exists.push(owner_exists(&ctx, r, &meta.namespace).await?);
        }
        match decide_dependent_side(&meta.owner_references, &exists) {
            DependentStep::Keep => {}
            DependentStep::Delete => {
                tracing::info!(kind = K::INFO.kind, object = %ObjectKey::of(obj.as_ref()), "owner gone; deleting dependent");
                delete_any(&ctx, K::INFO.kind, &meta.namespace, &meta.name, None, None).await?;
                return Ok(Action::AwaitChange);
            }
            DependentStep::DropReferences(uids) => {
                let mut next = (*obj).clone();
                next.meta_mut()
                    .owner_references
                    .retain(|r| !uids.contains(&r.uid));
                ctx.api.update(&next).await.map_err(|e| {
                    ReconcileError::api("update", K::INFO.kind, meta.name.clone(), e)
                })?;
                return Ok(Action::AwaitChange);
            }
        }
    }
    // Objects left in a namespace that is gone.
    if K::INFO.namespaced && ctx.namespaces.get("", &meta.namespace).is_none() {
        match ctx.api.get::<Namespace>("", &meta.namespace).await {
            Err(e) if e.is_not_found() => {
                delete_any(
                    &ctx,
                    K::INFO.kind,
                    &meta.namespace,
                    &meta.name,
                    None,
                    Some(0),
                )
                .await?;
                return Ok(Action::AwaitChange);
            }
            Err(e) => {
                return Err(ReconcileError::api(
                    "get",
                    "Namespace",
                    meta.namespace.clone(),
                    e,
                ))
            }
            Ok(_) => {}
        }
    }
    Ok(Action::AwaitChange)
}

/// Runs one GC loop per collected kind until `shutdown`, fed by every kind's changes: an
/// owner being deleted enqueues its dependents, a dependent going enqueues owners waiting on
/// it.
pub async fn run(ctx: Arc<Ctx>, shutdown: Shutdown) {
    let mut queues: HashMap<&'static str, Arc<WorkQueue<ObjectKey>>> = HashMap::new();
    for info in KINDS.iter().filter(|k| collected(k.kind)) {
        queues.insert(info.kind, WorkQueue::new(Default::default()));
    }
    let queues = Arc::new(queues);
    let mut tasks = Vec::new();
    for info in KINDS {
        with_kind!(info.kind, K => {
            // Every kind's deletions route work, Namespaces' included (a namespace can own).
            tasks.push(tokio::spawn(route_changes::<K>(ctx.clone(), queues.clone())));
            if let Some(queue) = queues.get(K::INFO.kind) {
                let mut config = controller_config("garbage-collector", &ctx);
                config.trace = TraceReconciles::WhileDeleting;
                let informer = ctx.informers.get::<K>();
                let sd = shutdown.clone();
                tasks.push(tokio::spawn(controller::run(
                    config,
                    informer,
                    queue.clone(),
                    ctx.clone(),
                    reconcile::<K>,
                    sd.wait(),
                )));
            }
        }, _ => {})
    }
    shutdown.wait().await;
    for t in tasks {
        t.abort();
    }
}

/// Namespaces have a controller of their own, whose finalizer guards their content; GC
/// acting on them too would race it.
fn collected(kind: &str) -> bool {
    kind != Namespace::INFO.kind
}

async fn route_changes<K: Resource>(
    ctx: Arc<Ctx>,
    queues: Arc<HashMap<&'static str, Arc<WorkQueue<ObjectKey>>>>,
) {
    let informer = ctx.informers.get::<K>();
    let mut rx = informer.subscribe();
    loop {
        let change = match rx.recv().await {
            Ok(c) => c,
            Err(RecvError::Lagged(_)) => continue, // the periodic resync covers what was lost
            Err(RecvError::Closed) => return,
        };
        let obj = change.new.as_ref();
        let meta = obj.meta();
        if !meta.is_deleting() {
            continue;
        }
        // Its dependents may now be orphans (or must be orphaned / deleted).
        for info in KINDS.iter().filter(|k| k.namespaced) {
            with_kind!(info.kind, D => {
                let deps = ctx.informers.get::<D>().by_index(INDEX_OWNER, &meta.uid);
                for dep in deps {
                    queues[D::INFO.kind].add(ObjectKey::of(dep.as_ref()));
                }
            }, _ => {})
        }
        if !meta.finalizers.is_empty() {
            if let Some(q) = queues.get(K::INFO.kind) {
                q.add(change.key.clone());
            }
        }
        // Owners waiting in foreground deletion for this dependent.
        for r in &meta.owner_references {
            if let Some(q) = queues.get(r.kind.as_str()) {
                q.add(ObjectKey::new(
                    namespace_of_owner(&r.kind, &meta.namespace),
                    r.name.clone(),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(name: &str, deleting: bool, blocks: bool) -> Dependent {
        Dependent {
            kind: "Pod",
            namespace: "default".into(),
            name: name.into(),
            deleting,
            blocks,
        }
    }

    fn meta(finalizers: &[&str], deleting: bool) -> bus_schemas::ObjectMeta {
        let mut m = bus_schemas::ObjectMeta {
            finalizers: finalizers.iter().map(|f| f.to_string()).collect(),
            ..Default::default()
        };
        if deleting {
            m.deletion_timestamp = Some(crate::podutil::now());
        }
        m
    }

    #[test]
    fn orphan_and_foreground() {
        let deps = [dep("a", false, true), dep("b", true, false)];
        assert_eq!(
            decide_owner_side(&meta(&["orphan"], false), &deps),
            OwnerStep::Nothing
        );
        assert_eq!(
            decide_owner_side(&meta(&["orphan"], true), &deps),
            OwnerStep::Orphan(deps.to_vec())
        );
        assert_eq!(
            decide_owner_side(&meta(&["foregroundDeletion"], true), &deps),
            OwnerStep::Foreground {
                delete: vec![deps[0].clone()],
                done: false
            }
        );
        assert_eq!(
            decide_owner_side(
                &meta(&["foregroundDeletion"], true),
                &[dep("b", true, false)]
            ),
            OwnerStep::Foreground {
                delete: vec![],
                done: true
            }
        );
    }

    #[test]
    fn dependents_go_only_when_every_owner_is_gone() {
        let r = |uid: &str| OwnerReference {
            uid: uid.into(),
            ..Default::default()
        };
        assert_eq!(decide_dependent_side(&[], &[]), DependentStep::Keep);
        assert_eq!(
            decide_dependent_side(&[r("a")], &[true]),
            DependentStep::Keep
        );
        assert_eq!(
            decide_dependent_side(&[r("a")], &[false]),
            DependentStep::Delete
        );
        assert_eq!(
            decide_dependent_side(&[r("a"), r("b")], &[true, false]),
            DependentStep::DropReferences(vec!["b".into()])
        );
    }
}
