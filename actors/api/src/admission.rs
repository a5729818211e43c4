//! Admission: policy applied after validation and before the write — namespaces must exist
//! and not be terminating, new pods must meet their namespace's pod security level (see
//! [`crate::pod_security`]), pod priorities are resolved from PriorityClasses, new pods of a
//! workload a VerticalPodAutoscaler sizes get its recommendation ([`crate::vpa_admission`]),
//! claims without a class get the default StorageClass, and a node may write only what is bound to it.

use std::any::Any;

use bus_schemas::kinds::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, PriorityClass, Service,
    StorageClass,
};
use bus_schemas::{Reason, Resource, Status};

use crate::state::ApiServer;

pub(crate) async fn admit<K: Resource>(
    server: &ApiServer,
    obj: &mut K,
    old: Option<&K>,
) -> Result<(), Status> {
    let started = std::time::Instant::now();
    let admitted = admit_untimed(server, obj, old).await;
    shoal_telemetry::step!("api.admission", started, admitted.is_ok());
    admitted
}

async fn admit_untimed<K: Resource>(
    server: &ApiServer,
    obj: &mut K,
    old: Option<&K>,
) -> Result<(), Status> {
    let namespace = if K::INFO.namespaced && old.is_none() {
        Some(check_namespace(server, &obj.meta().namespace).await?)
    } else {
        None
    };
    if let Some(pod) = (obj as &mut dyn Any).downcast_mut::<Pod>() {
        match old.and_then(|o| (o as &dyn Any).downcast_ref::<Pod>()) {
            None => {
                if let Some(namespace) = &namespace {
                    crate::pod_security::enforce(namespace, pod)?;
                }
                resolve_priority(server, pod).await?;
                crate::vpa_admission::admit(server, pod).await?
            }
            // Priority is resolved once, at creation; updates keep it.
            Some(old) => {
                if pod.spec.priority.is_none() {
                    pod.spec.priority = old.spec.priority;
                }
                if pod.spec.preemption_policy.is_empty() {
                    pod.spec.preemption_policy = old.spec.preemption_policy.clone();
                }
            }
        }
    }
    if let Some(claim) = (obj as &mut dyn Any).downcast_mut::<PersistentVolumeClaim>() {
        if old.is_none() {
            default_storage_class(server, claim).await?;
        }
    }
    if let (Some(svc), Some(old)) = ((obj as &mut dyn Any).downcast_mut::<Service>(), old) {
        // A manifest that leaves clusterIP out keeps the address allocated at creation.
        if let Some(old) = (old as &dyn Any).downcast_ref::<Service>() {
            svc.carry_allocated_from(old);
        }
    }
    Ok(())
}

/// The namespace a new object goes into, if it exists and is not being deleted.
async fn check_namespace(server: &ApiServer, namespace: &str) -> Result<Namespace, Status> {
    match server.cached_or_current::<Namespace>("", namespace).await? {
        None => Err(Status::not_found("Namespace", "", namespace)),
        Some(ns) if ns.metadata.deletion_timestamp.is_some() => Err(Status::new(
            Reason::Forbidden,
            format!(
                "namespace {namespace:?} is being terminated: no new objects may be created in it"
            ),
        )),
        Some(ns) => Ok(ns),
    }
}

/// Kubernetes' DefaultStorageClass admission: a claim created without `storageClassName`
/// gets the class annotated as the default (the newest, if several are); without one it
/// keeps no class. An explicit `""` means "no class" and is left alone.
async fn default_storage_class(
    server: &ApiServer,
    claim: &mut PersistentVolumeClaim,
) -> Result<(), Status> {
    if claim.spec.storage_class_name.is_some() {
        return Ok(());
    }
    let classes = server.informers.get::<StorageClass>();
    classes
        .wait_synced()
        .await
        .map_err(|e| Status::internal(format!("listing StorageClasses: {e}")))?;
    let default = classes
        .list(None, &Default::default())
        .into_iter()
        .filter(|c| c.is_default())
        .max_by(|a, b| {
            a.metadata
                .creation_timestamp
                .cmp(&b.metadata.creation_timestamp)
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
    if let Some(class) = default {
        claim.spec.storage_class_name = Some(class.metadata.name.clone());
    }
    Ok(())
}

async fn resolve_priority(server: &ApiServer, pod: &mut Pod) -> Result<(), Status> {
    let class_name = pod.spec.priority_class_name.clone();
    if class_name.is_empty() {
        pod.spec.priority.get_or_insert(0);
        return Ok(());
    }
    match server
        .cached_or_current::<PriorityClass>("", &class_name)
        .await?
    {
        Some(class) => {
            pod.spec.priority = Some(class.value);
            if pod.spec.preemption_policy.is_empty() {
                pod.spec.preemption_policy = class.preemption_policy.clone();
            }
            Ok(())
        }
        None => Err(Status::new(
            Reason::Forbidden,
            format!("no PriorityClass with name {class_name:?} was found"),
        )),
    }
}

/// A node may write only its own Node object, the pods bound to it, the PersistentVolumes
/// pinned to it and the claims the scheduler selected it for.
pub(crate) fn check_node_owns<K: Resource>(node: &str, current: &K) -> Result<(), Status> {
    let any = current as &dyn Any;
    let (owned, why) = if let Some(pod) = any.downcast_ref::<Pod>() {
        (pod.spec.node_name == node, "it is not bound to that node")
    } else if let Some(n) = any.downcast_ref::<Node>() {
        (n.metadata.name == node, "it is another node")
    } else if let Some(pv) = any.downcast_ref::<PersistentVolume>() {
        (
            pv.pinned_node() == Some(node),
            "its spec.nodeAffinity does not pin it to that node",
        )
    } else if let Some(claim) = any.downcast_ref::<PersistentVolumeClaim>() {
        (
            claim.selected_node() == Some(node),
            "its volume.kubernetes.io/selected-node annotation names another node",
        )
    } else {
        (false, "nodes write no objects of this kind")
    };
    if owned {
        Ok(())
    } else {
        Err(Status::new(
            Reason::Forbidden,
            format!(
                "node {node:?} may not write {} {:?}: {why}",
                K::INFO.kind,
                current.meta().name
            ),
        ))
    }
}
