//! Binding claims to PersistentVolumes made by hand (Kubernetes' PV controller), and what
//! becomes of such a volume once its claim is gone.
//!
//! Two loops:
//! - claims: a claim with no dynamic provisioner here (no class, a class that does not
//!   exist, or one whose provisioner is not `shoal.io/local-path`, such as
//!   `kubernetes.io/no-provisioner`) binds to the smallest Available volume that fits
//!   ([`bus_schemas::kinds::volume_match`]). A class that waits for the first consumer binds
//!   only once the scheduler has chosen a node (`volume.kubernetes.io/selected-node`), to a
//!   volume whose node affinity admits that node. A claim nothing fits stays Pending with a
//!   FailedBinding Event saying why. Claims of `shoal.io/local-path` are the node
//!   provisioners' (their volumes are made for them).
//! - volumes: a new volume becomes Available; a volume whose claim is gone becomes Released
//!   (`Retain`) or Failed (`Delete`: nothing here can delete a volume made by hand, and its
//!   data is never touched).
//!
//! Binding is four writes, each with optimistic concurrency, in Kubernetes' order: the
//! volume's claimRef (which reserves it: of two claims racing for one volume, the second
//! write fails on the resourceVersion and that claim looks again), the volume's status
//! Bound, the claim's `spec.volumeName`, the claim's status Bound. A crash between two of
//! them is finished by the next reconcile: a volume reserved for the claim is its first
//! choice.

use std::sync::Arc;

use bus_schemas::kinds::common::ObjectReference;
use bus_schemas::kinds::storage_class::LOCAL_PATH_PROVISIONER;
use bus_schemas::kinds::volume_match::{self, Misses};
use bus_schemas::kinds::{PersistentVolume, PersistentVolumeClaim, StorageClass};
use shoal_bus::controller::{self, Action};
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use shoal_bus::ObjectKey;
use tokio::task::JoinHandle;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::events::{NORMAL, WARNING};
use crate::spawn;

pub const NAME: &str = "persistentvolume-binder";
pub const RECLAIM_NAME: &str = "persistentvolume-reclaimer";
/// Kubernetes' annotations: who made a volume, and that a claim's binding is complete.
pub const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";
pub const BIND_COMPLETED_ANNOTATION: &str = "pv.kubernetes.io/bind-completed";
pub const BOUND_BY_CONTROLLER_ANNOTATION: &str = "pv.kubernetes.io/bound-by-controller";
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Who gets a claim its volume.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// A node's local-path provisioner makes it one (or the claim is being deleted).
    NotOurs,
    /// Its class waits for the first consumer and no node is chosen yet.
    WaitForNode,
    /// The binder picks among the volumes, on this node if one was chosen.
    Bind { node: Option<String> },
}

/// Who binds `claim`, whose class (if it names one) is `class` in the cache.
pub fn route(claim: &PersistentVolumeClaim, class: Option<&StorageClass>) -> Route {
    if claim.metadata.is_deleting()
        || class.is_some_and(|c| c.provisioner == LOCAL_PATH_PROVISIONER)
    {
        return Route::NotOurs;
    }
    let node = claim.selected_node().map(str::to_string);
    if class.is_some_and(StorageClass::waits_for_first_consumer) && node.is_none() {
        return Route::WaitForNode;
    }
    Route::Bind { node }
}

/// What a volume made by hand needs, given whether its claim still exists.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeStep {
    Nothing,
    MarkAvailable,
    MarkReleased,
    /// `Delete` asked of a volume nothing here can delete: Failed, with this message.
    MarkFailed(String),
}

pub fn volume_step(volume: &PersistentVolume, claim_exists: Option<bool>) -> VolumeStep {
    let annotations = &volume.metadata.annotations;
    if annotations
        .get(PROVISIONED_BY_ANNOTATION)
        .map(String::as_str)
        == Some(LOCAL_PATH_PROVISIONER)
        || volume.metadata.is_deleting()
    {
        return VolumeStep::Nothing;
    }
    let phase = volume.status.phase.as_str();
    let Some(reference) = &volume.spec.claim_ref else {
        // A new volume, or one an administrator freed by clearing its claimRef.
        return match phase {
            "" | "Pending" | "Released" => VolumeStep::MarkAvailable,
            _ => VolumeStep::Nothing,
        };
    };
    match claim_exists {
        // Reserved by name for a claim that may come (or is binding): Available till then.
        Some(true) | None if matches!(phase, "" | "Pending") => VolumeStep::MarkAvailable,
        Some(false) if phase != "Released" && phase != "Failed" => {
            match volume.spec.persistent_volume_reclaim_policy.as_str() {
                "Delete" => VolumeStep::MarkFailed(format!(
                    "claim {}/{} is gone and the volume's reclaim policy is Delete, but no \
                     provisioner here can delete a volume made by hand: its data is kept; \
                     delete the PersistentVolume (and the data) yourself",
                    reference.namespace, reference.name
                )),
                _ => VolumeStep::MarkReleased,
            }
        }
        _ => VolumeStep::Nothing,
    }
}

fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        kind: "PersistentVolumeClaim".into(),
        api_version: "v1".into(),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        ..Default::default()
    }
}

fn claim_name(claim: &PersistentVolumeClaim) -> String {
    format!("{}/{}", claim.metadata.namespace, claim.metadata.name)
}

pub async fn reconcile(
    claim: Arc<PersistentVolumeClaim>,
    ctx: Arc<Ctx>,
) -> Result<Action, ReconcileError> {
    if claim.is_bound() {
        return Ok(Action::AwaitChange);
    }
    let class_name = claim.class();
    let class = (!class_name.is_empty())
        .then(|| ctx.classes.get("", class_name))
        .flatten();
    let Route::Bind { node } = route(&claim, class.as_deref()) else {
        return Ok(Action::AwaitChange);
    };
    // A node not (yet) in the cache is matched by its name, as its hostname label would be.
    let node_labels = node.as_deref().map(|n| match ctx.nodes.get("", n) {
        Some(node) => node.metadata.labels.clone(),
        None => [(HOSTNAME_LABEL.to_string(), n.to_string())].into(),
    });
    let volumes = ctx.volumes.list(None, &Default::default());
    let on_node = |v: &PersistentVolume| match (&node, &node_labels, v.required_nodes()) {
        (Some(node), Some(labels), Some(required)) => required.matches(labels, node),
        _ => true,
    };
    match volume_match::smallest_fit(&volumes, &claim, on_node) {
        Ok(volume) => bind(&ctx, (*claim).clone(), volume.clone()).await,
        Err(misses) => {
            not_bound(&ctx, &claim, &misses);
            // A new or freed volume re-queues the claim.
            Ok(Action::AwaitChange)
        }
    }
}

fn not_bound(ctx: &Ctx, claim: &PersistentVolumeClaim, misses: &Misses) {
    let class = if claim.class().is_empty() {
        " and no storage class is set".to_string()
    } else {
        String::new()
    };
    ctx.events
        .record(claim, WARNING, "FailedBinding", format!("{misses}{class}"));
}

/// The four writes of a binding, each skipped when already done.
async fn bind(
    ctx: &Ctx,
    mut claim: PersistentVolumeClaim,
    mut volume: PersistentVolume,
) -> Result<Action, ReconcileError> {
    let name = volume.metadata.name.clone();
    let err = |verb, kind, e| ReconcileError::api(verb, kind, name.clone(), e);
    let reserved = volume
        .spec
        .claim_ref
        .as_ref()
        .is_some_and(|r| r.uid == claim.metadata.uid);
    if !reserved {
        volume.spec.claim_ref = Some(claim_reference(&claim));
        volume
            .metadata
            .annotations
            .insert(BOUND_BY_CONTROLLER_ANNOTATION.into(), "yes".into());
        volume = ctx
            .api
            .update(&volume)
            .await
            .map_err(|e| err("update", "PersistentVolume", e))?;
    }
    if volume.status.phase != "Bound" {
        volume.status.phase = "Bound".into();
        volume.status.message.clear();
        volume.status.last_phase_transition_time = Some(chrono::Utc::now());
        volume = ctx
            .api
            .update_status(&volume)
            .await
            .map_err(|e| err("update status", "PersistentVolume", e))?;
    }
    let object = claim_name(&claim);
    let err = |verb, e| ReconcileError::api(verb, "PersistentVolumeClaim", object.clone(), e);
    if claim.spec.volume_name.is_empty() {
        claim.spec.volume_name = name.clone();
        let annotations = &mut claim.metadata.annotations;
        annotations.insert(BIND_COMPLETED_ANNOTATION.into(), "yes".into());
        annotations.insert(BOUND_BY_CONTROLLER_ANNOTATION.into(), "yes".into());
        claim = ctx.api.update(&claim).await.map_err(|e| err("update", e))?;
    }
    claim.status.phase = "Bound".into();
    claim.status.capacity = volume.spec.capacity.clone();
    claim.status.access_modes = volume.spec.access_modes.clone();
    let claim = ctx
        .api
        .update_status(&claim)
        .await
        .map_err(|e| err("update status", e))?;
    tracing::info!(claim = %claim_name(&claim), volume = %name, "claim bound");
    ctx.events.record(
        &claim,
        NORMAL,
        "Bound",
        format!("bound to persistentvolume {name}"),
    );
    Ok(Action::AwaitChange)
}

pub async fn reconcile_volume(
    volume: Arc<PersistentVolume>,
    ctx: Arc<Ctx>,
) -> Result<Action, ReconcileError> {
    let claim_exists = match &volume.spec.claim_ref {
        None => None,
        Some(r) => {
            let matches = |c: &PersistentVolumeClaim| r.uid.is_empty() || c.metadata.uid == r.uid;
            if ctx
                .claims
                .get(&r.namespace, &r.name)
                .is_some_and(|c| matches(c.as_ref()))
            {
                Some(true)
            } else {
                // The cache may trail a claim just made: only a live read says it is gone.
                match ctx
                    .api
                    .get::<PersistentVolumeClaim>(&r.namespace, &r.name)
                    .await
                {
                    Ok(c) => Some(matches(&c)),
                    Err(e) if e.is_not_found() => Some(false),
                    Err(e) => {
                        let object = format!("{}/{}", r.namespace, r.name);
                        return Err(ReconcileError::api(
                            "get",
                            "PersistentVolumeClaim",
                            object,
                            e,
                        ));
                    }
                }
            }
        }
    };
    let (phase, message) = match volume_step(&volume, claim_exists) {
        VolumeStep::Nothing => return Ok(Action::AwaitChange),
        VolumeStep::MarkAvailable => ("Available", String::new()),
        VolumeStep::MarkReleased => ("Released", String::new()),
        VolumeStep::MarkFailed(message) => ("Failed", message),
    };
    let mut next = (*volume).clone();
    next.status.phase = phase.into();
    next.status.message = message.clone();
    next.status.last_phase_transition_time = Some(chrono::Utc::now());
    let name = volume.metadata.name.clone();
    ctx.api
        .update_status(&next)
        .await
        .map_err(|e| ReconcileError::api("update status", "PersistentVolume", name.clone(), e))?;
    if phase == "Failed" {
        ctx.events
            .record(&*volume, WARNING, "VolumeFailedDelete", message);
    }
    tracing::info!(volume = %name, phase, "volume phase");
    Ok(Action::AwaitChange)
}

/// Unbound claims a change of this volume may let bind: its claim, or every claim of its
/// class waiting for one.
fn claims_for_volume(ctx: &Ctx, volume: &PersistentVolume) -> Vec<ObjectKey> {
    if let Some(r) = &volume.spec.claim_ref {
        return vec![ObjectKey::new(r.namespace.clone(), r.name.clone())];
    }
    ctx.claims
        .list(None, &Default::default())
        .iter()
        .filter(|c| !c.is_bound() && c.class() == volume.spec.storage_class_name)
        .map(|c| ObjectKey::of(c.as_ref()))
        .collect()
}

pub fn start(ctx: &Arc<Ctx>, sd: &Shutdown) -> Vec<JoinHandle<()>> {
    let claims_queue = WorkQueue::new(Default::default());
    let weak = Arc::downgrade(ctx);
    controller::feed_mapped(&ctx.volumes, claims_queue.clone(), move |_, volume| {
        weak.upgrade()
            .map(|ctx| claims_for_volume(&ctx, volume))
            .unwrap_or_default()
    });
    let claims = ctx.claims.clone();
    controller::feed_mapped(
        &ctx.classes,
        claims_queue.clone(),
        move |key, _: &StorageClass| {
            claims
                .list(None, &Default::default())
                .iter()
                .filter(|c| !c.is_bound() && c.class() == key.name)
                .map(|c| ObjectKey::of(c.as_ref()))
                .collect()
        },
    );
    let volumes_queue = WorkQueue::new(Default::default());
    controller::feed_mapped(&ctx.claims, volumes_queue.clone(), |_, claim| {
        let name = &claim.spec.volume_name;
        if name.is_empty() {
            Vec::new()
        } else {
            vec![ObjectKey::new(String::new(), name.clone())]
        }
    });
    vec![
        spawn(NAME, ctx.claims.clone(), claims_queue, ctx, reconcile, sd),
        spawn(
            RECLAIM_NAME,
            ctx.volumes.clone(),
            volumes_queue,
            ctx,
            reconcile_volume,
            sd,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::kinds::persistent_volume_claim::SELECTED_NODE_ANNOTATION;
    use bus_schemas::kinds::storage_class::BINDING_WAIT_FOR_FIRST_CONSUMER;

    fn class(provisioner: &str, wait: bool) -> StorageClass {
        let mut class = StorageClass {
            provisioner: provisioner.into(),
            ..Default::default()
        };
        if wait {
            class.volume_binding_mode = Some(BINDING_WAIT_FOR_FIRST_CONSUMER.into());
        }
        class
    }

    #[test]
    fn claims_of_the_local_path_provisioner_are_left_to_it() {
        let mut claim = PersistentVolumeClaim::default();
        assert_eq!(route(&claim, None), Route::Bind { node: None });
        assert_eq!(
            route(&claim, Some(&class(LOCAL_PATH_PROVISIONER, true))),
            Route::NotOurs
        );
        let static_local = class("kubernetes.io/no-provisioner", true);
        assert_eq!(route(&claim, Some(&static_local)), Route::WaitForNode);
        claim
            .metadata
            .annotations
            .insert(SELECTED_NODE_ANNOTATION.into(), "n1".into());
        assert_eq!(
            route(&claim, Some(&static_local)),
            Route::Bind {
                node: Some("n1".into())
            }
        );
    }

    #[test]
    fn a_volume_whose_claim_is_gone_is_released_or_failed_never_deleted() {
        let mut pv = PersistentVolume::default();
        assert_eq!(volume_step(&pv, None), VolumeStep::MarkAvailable);
        pv.status.phase = "Available".into();
        assert_eq!(volume_step(&pv, None), VolumeStep::Nothing);
        pv.spec.claim_ref = Some(ObjectReference {
            namespace: "default".into(),
            name: "data".into(),
            ..Default::default()
        });
        pv.status.phase = "Bound".into();
        assert_eq!(volume_step(&pv, Some(true)), VolumeStep::Nothing);
        pv.spec.persistent_volume_reclaim_policy = "Retain".into();
        assert_eq!(volume_step(&pv, Some(false)), VolumeStep::MarkReleased);
        pv.spec.persistent_volume_reclaim_policy = "Delete".into();
        assert!(matches!(
            volume_step(&pv, Some(false)),
            VolumeStep::MarkFailed(m) if m.contains("default/data") && m.contains("data is kept")
        ));
        pv.status.phase = "Failed".into();
        assert_eq!(volume_step(&pv, Some(false)), VolumeStep::Nothing);
        // The provisioner's own volumes are its business.
        pv.status.phase = "Bound".into();
        pv.metadata.annotations.insert(
            PROVISIONED_BY_ANNOTATION.into(),
            LOCAL_PATH_PROVISIONER.into(),
        );
        assert_eq!(volume_step(&pv, Some(false)), VolumeStep::Nothing);
    }
}
