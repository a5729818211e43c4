//! StatefulSet controller: pods with stable names and DNS identities, created, rolled and
//! removed in ordinal order, with their templates kept as ControllerRevisions.
//!
//! - [`decide`]: the pure decision (set, pods, revisions, now → creates, deletes, status).
//! - [`revisions`]: ControllerRevision naming, numbering and history pruning.
//! - [`claims`]: the pods' PersistentVolumeClaims from `volumeClaimTemplates`, and the
//!   retention policy as owner references.
//! - [`reconcile`] performs both.

pub mod claims;
pub mod decide;
pub mod revisions;

use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::{ControllerRevision, Pod, PodTemplateSpec, StatefulSet};
use shoal_bus::controller::{self, Action};
use shoal_bus::informer::INDEX_OWNER;
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use tokio::task::JoinHandle;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::podutil::{self, is_owned_by};
use crate::{owner_key, spawn};
pub use decide::{decide, ordinal_of, pod_for, Revision, StatefulSetDecision};

pub const NAME: &str = "statefulset";

fn owned<K: bus_schemas::Resource>(items: Vec<Arc<K>>, uid: &str) -> Vec<Arc<K>> {
    items
        .into_iter()
        .filter(|o| is_owned_by(o.meta(), uid))
        .collect()
}

pub async fn reconcile(set: Arc<StatefulSet>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let uid = set.metadata.uid.clone();
    let ns = set.metadata.namespace.clone();
    let key = format!("{ns}/{}", set.metadata.name);
    ctx.expectations.wait(&uid, &ctx.pods).await;
    let pods = owned(ctx.pods.by_index(INDEX_OWNER, &uid), &uid);
    let mut history = owned(ctx.revisions.by_index(INDEX_OWNER, &uid), &uid);

    // The update revision is the set's template now; make sure it is recorded and newest.
    let update_name = revisions::revision_name(&set, &set.spec.template);
    let current_name = match set.status.current_revision.as_str() {
        "" => update_name.clone(),
        name if history.iter().any(|r| r.metadata.name == name) => name.to_string(),
        _ => update_name.clone(),
    };
    let (renumber, prune) = revisions::plan(&set, &history, &update_name, &current_name);
    if let Some(number) = renumber {
        let written = match history.iter().find(|r| r.metadata.name == update_name) {
            Some(existing) => {
                let mut next = (**existing).clone();
                next.revision = number;
                ctx.api.update(&next).await
            }
            None => {
                let revision = revisions::new_revision(&set, &update_name, number);
                match ctx.api.create(&revision).await {
                    Err(e) if e.is_already_exists() => {
                        ctx.api.get::<ControllerRevision>(&ns, &update_name).await
                    }
                    other => other,
                }
            }
        }
        .map_err(|e| ReconcileError::api("write", "ControllerRevision", key.clone(), e))?;
        history.retain(|r| r.metadata.name != update_name);
        history.push(Arc::new(written));
    }
    for name in &prune {
        crate::gc::delete_any(&ctx, "ControllerRevision", &ns, name, None, None).await?;
    }
    let current_template: PodTemplateSpec = history
        .iter()
        .find(|r| r.metadata.name == current_name)
        .and_then(|r| revisions::template_of(r))
        .unwrap_or_else(|| set.spec.template.clone());
    let current = Revision {
        name: &current_name,
        template: &current_template,
    };
    let update = Revision {
        name: &update_name,
        template: &set.spec.template,
    };
    let d = decide(&set, &pods, current, update, podutil::now());

    if !set.spec.volume_claim_templates.is_empty() {
        let creating: Vec<i32> = d.create.iter().map(|(ordinal, _)| *ordinal).collect();
        let wanted = set.first_ordinal()..set.first_ordinal() + set.replicas().max(0);
        let existing: Vec<i32> = pods
            .iter()
            .filter_map(|p| ordinal_of(&set.metadata.name, p))
            .filter(|i| wanted.contains(i))
            .collect();
        // A pod removed because the set shrank, not one replaced in place.
        let condemned: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| d.delete.contains(&p.metadata.name))
            .filter(|p| ordinal_of(&set.metadata.name, p).is_some_and(|i| !wanted.contains(&i)))
            .cloned()
            .collect();
        claims::sync(&ctx, &set, &creating, &existing, &condemned).await?;
    }
    for name in &d.delete {
        crate::replicaset::delete_pod(&ctx, set.as_ref(), &ns, name).await?;
    }
    let new_pods: Vec<Pod> = d
        .create
        .iter()
        .map(|(ordinal, revision)| {
            let template = if *revision == current_name {
                &current_template
            } else {
                &set.spec.template
            };
            pod_for(&set, *ordinal, revision, template)
        })
        .collect();
    crate::create::create_pods(&ctx, set.as_ref(), new_pods)
        .await
        .map_err(|e| ReconcileError::api("create", "Pod", key.clone(), e))?;
    if d.status != set.status {
        let mut next = (*set).clone();
        next.status = d.status;
        ctx.api
            .update_status(&next)
            .await
            .map_err(|e| ReconcileError::api("update-status", "StatefulSet", key, e))?;
    }
    // minReadySeconds: look again when the youngest ready pod becomes available.
    Ok(if set.spec.min_ready_seconds > 0 {
        Action::RequeueAfter(Duration::from_secs(
            u64::try_from(set.spec.min_ready_seconds).unwrap_or(1),
        ))
    } else {
        Action::AwaitChange
    })
}

/// Triggers: the set's pods and revisions.
pub fn start(ctx: &Arc<Ctx>, sd: &Shutdown) -> JoinHandle<()> {
    let queue = WorkQueue::new(Default::default());
    controller::feed_mapped(&ctx.pods, queue.clone(), |_, pod: &Pod| {
        owner_key::<StatefulSet>(&pod.metadata)
    });
    controller::feed_mapped(
        &ctx.revisions,
        queue.clone(),
        |_, r: &ControllerRevision| owner_key::<StatefulSet>(&r.metadata),
    );
    spawn(NAME, ctx.statefulsets.clone(), queue, ctx, reconcile, sd)
}
