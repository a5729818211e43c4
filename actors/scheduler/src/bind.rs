//! The scheduler's writes, all through the API: allocation records and pod binds (both CAS),
//! the selected node of WaitForFirstConsumer claims, PodScheduled conditions, Events, and evictions for preemption. Each returns a typed
//! outcome the loop maps onto a retry decision; none panics on odd objects.

use std::sync::Arc;

use bus_schemas::api::{DeleteOptions, Preconditions};
use bus_schemas::kinds::common::ObjectReference;
use bus_schemas::kinds::event::EventSource;
use bus_schemas::kinds::persistent_volume_claim::SELECTED_NODE_ANNOTATION;
use bus_schemas::kinds::{Event, Lease, Namespace, PersistentVolumeClaim, Pod};
use bus_schemas::meta::{find_condition, set_condition};
use bus_schemas::{Condition, Resource};
use shoal_bus::{ApiClient, ApiError};

use crate::ledger::ALLOCATION_NAMESPACE;

pub const COMPONENT: &str = "default-scheduler";
const MAX_NAME: usize = 253;

/// What writing an allocation record did.
#[derive(Debug)]
pub enum AllocOutcome {
    Written(Box<Lease>),
    /// Someone else wrote first; carries the record as it is now (None: it does not exist).
    Conflict(Option<Box<Lease>>),
    Failed(String),
}

/// Creates (`create`) or CAS-updates node `node`'s allocation record.
pub async fn write_allocation(
    api: &ApiClient,
    node: &str,
    next: &Lease,
    create: bool,
) -> AllocOutcome {
    let result = if create {
        api.create(next).await
    } else {
        api.update(next).await
    };
    match result {
        Ok(lease) => AllocOutcome::Written(Box::new(lease)),
        Err(e) if e.is_conflict() || e.is_already_exists() || e.is_not_found() => {
            match api.get::<Lease>(ALLOCATION_NAMESPACE, node).await {
                Ok(lease) => AllocOutcome::Conflict(Some(Box::new(lease))),
                Err(e) if e.is_not_found() => AllocOutcome::Conflict(None),
                Err(e) => AllocOutcome::Failed(e.to_string()),
            }
        }
        Err(e) => AllocOutcome::Failed(e.to_string()),
    }
}

/// What binding a pod did.
#[derive(Debug)]
pub enum BindOutcome {
    Bound(Box<Pod>),
    /// The pod changed (another scheduler bound it, or it was updated): decide again.
    Conflict,
    Gone,
    Failed(String),
}

/// Binds: sets spec.nodeName with CAS on the pod's resourceVersion.
pub async fn bind_pod(api: &ApiClient, pod: &Pod, node: &str) -> BindOutcome {
    let mut next = pod.clone();
    next.spec.node_name = node.to_string();
    // A short deadline: the bind must land within the allocation entry's window.
    let api = api
        .clone()
        .with_deadline(std::time::Duration::from_secs(10));
    match api.update(&next).await {
        Ok(bound) => BindOutcome::Bound(Box::new(bound)),
        Err(e) if e.is_conflict() => BindOutcome::Conflict,
        Err(e) if e.is_not_found() => BindOutcome::Gone,
        Err(e) => BindOutcome::Failed(e.to_string()),
    }
}

fn scheduled_condition(status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: "PodScheduled".into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        ..Default::default()
    }
}

/// Writes PodScheduled=False/Unschedulable (and a nominated node, if any) unless already so.
pub async fn report_unschedulable(
    api: &ApiClient,
    pod: &Pod,
    message: &str,
    nominated: Option<&str>,
) -> Result<(), ApiError> {
    let mut next = pod.clone();
    let now = chrono::Utc::now();
    let mut changed = set_condition(
        &mut next.status.conditions,
        scheduled_condition("False", "Unschedulable", message),
        now,
    );
    if let Some(node) = nominated {
        if next.status.nominated_node_name != node {
            next.status.nominated_node_name = node.to_string();
            changed = true;
        }
    }
    if !changed {
        return Ok(());
    }
    match api.update_status(&next).await {
        Ok(_) => Ok(()),
        // The pod moved on (bound, deleted, updated): the next attempt sees the new version.
        Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

/// After a bind: PodScheduled=True and no nomination, when an earlier attempt had said
/// otherwise (a fresh pod needs no status write, which keeps binds to one write each).
pub async fn clear_unschedulable(api: &ApiClient, bound: &Pod) -> Result<(), ApiError> {
    let was_unschedulable = find_condition(&bound.status.conditions, "PodScheduled")
        .is_some_and(|c| c.status != "True");
    if !was_unschedulable && bound.status.nominated_node_name.is_empty() {
        return Ok(());
    }
    let mut next = bound.clone();
    next.status.nominated_node_name.clear();
    set_condition(
        &mut next.status.conditions,
        scheduled_condition("True", "", ""),
        chrono::Utc::now(),
    );
    match api.update_status(&next).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

fn event_name(pod: &Pod, reason: &str) -> String {
    let suffix = format!(".{}", reason.to_ascii_lowercase());
    let mut name = pod.metadata.name.clone();
    name.truncate(MAX_NAME - suffix.len());
    name + &suffix
}

/// Records an Event about `pod`: creates it, or bumps the count of the one already there
/// for the same pod and reason.
pub async fn record_event(
    api: &ApiClient,
    pod: &Pod,
    type_: &str,
    reason: &str,
    message: &str,
    instance: &str,
) -> Result<(), ApiError> {
    let now = chrono::Utc::now();
    let involved = ObjectReference {
        kind: "Pod".into(),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        api_version: "v1".into(),
        ..Default::default()
    };
    let mut event = Event {
        involved_object: involved.clone(),
        reason: reason.into(),
        message: message.into(),
        source: EventSource {
            component: COMPONENT.into(),
            host: String::new(),
        },
        first_timestamp: Some(now),
        last_timestamp: Some(now),
        count: 1,
        type_: type_.into(),
        reporting_component: COMPONENT.into(),
        reporting_instance: instance.into(),
        ..Default::default()
    };
    event.metadata.namespace = pod.metadata.namespace.clone();
    event.metadata.name = event_name(pod, reason);
    match api.create(&event).await {
        Ok(_) => return Ok(()),
        Err(e) if e.is_already_exists() => {}
        Err(e) => return Err(e),
    }
    for _ in 0..3 {
        let mut existing: Event = api
            .get(&event.metadata.namespace, &event.metadata.name)
            .await?;
        if existing.involved_object.uid != involved.uid {
            // The same name for a recreated pod: start counting afresh.
            existing.involved_object = involved.clone();
            existing.count = 0;
            existing.first_timestamp = Some(now);
        }
        existing.count = existing.count.saturating_add(1);
        existing.message = message.into();
        existing.type_ = type_.into();
        existing.last_timestamp = Some(now);
        existing.reporting_instance = instance.into();
        match api.update(&existing).await {
            Ok(_) => return Ok(()),
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Evicts one victim gracefully (its own grace period) and tells it why.
pub async fn evict(
    api: &ApiClient,
    victim: Arc<Pod>,
    preemptor: &Pod,
    node: &str,
    instance: &str,
) -> Result<(), ApiError> {
    let options = DeleteOptions {
        namespace: victim.metadata.namespace.clone(),
        name: victim.metadata.name.clone(),
        grace_period_seconds: victim.spec.termination_grace_period_seconds,
        preconditions: Some(Preconditions {
            uid: Some(victim.metadata.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete::<Pod>(&options).await {
        Ok(p) => {
            tracing::debug!(victim = %victim.metadata.name, deleting = ?p.metadata.deletion_timestamp,
                grace = ?p.metadata.deletion_grace_period_seconds, "evicted");
        }
        Err(e) if e.is_not_found() || e.is_conflict() => return Ok(()),
        Err(e) => return Err(e),
    }
    let message = format!(
        "Preempted by pod {}/{} ({}) on node {node}",
        preemptor.metadata.namespace, preemptor.metadata.name, preemptor.metadata.uid
    );
    record_event(api, &victim, "Normal", "Preempted", &message, instance).await
}

/// Creates a namespace unless it exists (start-up; idempotent).
pub async fn ensure_namespace(api: &ApiClient, name: &str) -> Result<(), ApiError> {
    let mut ns = Namespace::default();
    ns.metadata.name = name.into();
    ns.set_type_meta();
    match api.create(&ns).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_already_exists() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes the chosen node on each unbound WaitForFirstConsumer claim of `pod`
/// (`volume.kubernetes.io/selected-node`), before the pod is bound: that node's provisioner
/// then makes the volume there. A claim another attempt already gave a different node fails
/// the bind, so the pod is decided again with that node as a constraint.
pub async fn select_node_for_claims(
    api: &ApiClient,
    pod: &Pod,
    claims: &[String],
    node: &str,
) -> Result<(), String> {
    const ATTEMPTS: usize = 3;
    let namespace = &pod.metadata.namespace;
    'claims: for name in claims {
        for _ in 0..ATTEMPTS {
            let mut claim: PersistentVolumeClaim = api
                .get(namespace, name)
                .await
                .map_err(|e| format!("reading claim {namespace}/{name}: {e}"))?;
            match claim.selected_node() {
                Some(chosen) if chosen == node => continue 'claims,
                Some(chosen) => {
                    return Err(format!(
                        "claim {namespace}/{name} was given node {chosen:?} meanwhile"
                    ))
                }
                None => {}
            }
            if !claim.spec.volume_name.is_empty() {
                // Bound meanwhile: the volume's own node affinity decides now.
                return Err(format!("claim {namespace}/{name} was bound meanwhile"));
            }
            claim
                .metadata
                .annotations
                .insert(SELECTED_NODE_ANNOTATION.into(), node.to_string());
            match api.update(&claim).await {
                Ok(_) => continue 'claims,
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(format!("selecting node for claim {namespace}/{name}: {e}")),
            }
        }
        return Err(format!(
            "claim {namespace}/{name} kept changing while its node was being selected"
        ));
    }
    Ok(())
}
