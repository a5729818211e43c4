//! Pod helpers every workload controller shares: stamping pods from templates, owner
//! references, readiness and availability.

use std::collections::BTreeMap;

use bus_schemas::kinds::{Pod, PodTemplateSpec};
use bus_schemas::meta::{find_condition, Time};
use bus_schemas::selector::LabelSelector;
use bus_schemas::{OwnerReference, Resource};

/// The owner reference a controller puts on what it creates or adopts.
pub fn controller_ref<K: Resource>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::INFO.api_version.to_string(),
        kind: K::INFO.kind.to_string(),
        name: owner.meta().name.clone(),
        uid: owner.meta().uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A new pod from a template, owned by `owner`, named `<generate_name><random>`.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    generate_name: &str,
    owner: OwnerReference,
) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.namespace = namespace.to_string();
    pod.metadata.generate_name = generate_name.to_string();
    pod.metadata.labels = template.metadata.labels.clone();
    pod.metadata.annotations = template.metadata.annotations.clone();
    pod.metadata.owner_references = vec![owner];
    pod.spec = template.spec.clone();
    pod
}

/// Neither terminal nor being deleted: the pod counts toward its controller's replicas.
pub fn is_active(pod: &Pod) -> bool {
    !pod.is_terminal() && !pod.metadata.is_deleting()
}

/// When the pod became Ready, if it is.
pub fn ready_since(pod: &Pod) -> Option<Option<Time>> {
    let cond = find_condition(&pod.status.conditions, "Ready")?;
    cond.is_true().then_some(cond.last_transition_time)
}

/// Ready for at least `min_ready_seconds` at `now`.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Time) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => true,
        Some(Some(since)) => since + chrono::Duration::seconds(i64::from(min_ready_seconds)) <= now,
    }
}

/// When a ready-but-not-yet-available pod becomes available (for requeueing).
pub fn available_at(pod: &Pod, min_ready_seconds: i32) -> Option<Time> {
    match ready_since(pod) {
        Some(Some(since)) if min_ready_seconds > 0 => {
            Some(since + chrono::Duration::seconds(i64::from(min_ready_seconds)))
        }
        _ => None,
    }
}

/// Whether `labels` match a workload selector. A missing or empty selector matches
/// nothing: a controller must never adopt every pod in a namespace.
pub fn selects(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    selector.is_some_and(|s| !s.is_empty() && s.matches(labels))
}

pub fn is_owned_by(meta: &bus_schemas::ObjectMeta, uid: &str) -> bool {
    meta.controller_ref().is_some_and(|r| r.uid == uid)
}

pub fn now() -> Time {
    chrono::Utc::now()
}

/// Seconds from `now` until `at` as a std Duration (zero if past).
pub fn until(at: Time, now: Time) -> std::time::Duration {
    (at - now).to_std().unwrap_or_default()
}
