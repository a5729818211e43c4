//! Deletion policy, pure: which finalizer a propagation policy adds, how long a deletion
//! waits, and when it is complete. Reads no state, so the verbs decide with it and tests need
//! no server.

use std::any::Any;

use bus_schemas::kinds::{Namespace, Pod};
use bus_schemas::status::Cause;
use bus_schemas::wellknown::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use bus_schemas::{ObjectMeta, Resource, Status};

/// What happens to an object's dependents when it is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Propagation {
    /// Garbage collection removes the dependents after the owner is gone.
    Background,
    /// The owner stays (finalizer `foregroundDeletion`) until its blocking dependents are gone.
    Foreground,
    /// The dependents are released (finalizer `orphan`), not removed.
    Orphan,
}

impl Propagation {
    pub(crate) fn parse(policy: Option<&str>, name: &str) -> Result<Propagation, Status> {
        match policy.unwrap_or("Background") {
            "Background" => Ok(Propagation::Background),
            "Foreground" => Ok(Propagation::Foreground),
            "Orphan" => Ok(Propagation::Orphan),
            other => Err(Status::invalid(
                "DeleteOptions",
                name,
                vec![Cause::not_supported(
                    "propagationPolicy",
                    other,
                    &["Background", "Foreground", "Orphan"],
                )],
            )),
        }
    }

    /// Adds the finalizer this policy needs, once.
    pub(crate) fn add_finalizer(self, meta: &mut ObjectMeta) {
        let finalizer = match self {
            Propagation::Background => return,
            Propagation::Foreground => FINALIZER_FOREGROUND,
            Propagation::Orphan => FINALIZER_ORPHAN,
        };
        if !meta.finalizers.iter().any(|f| f == finalizer) {
            meta.finalizers.push(finalizer.to_string());
        }
    }
}

/// The grace period a deletion gets: pods running on a node get time to stop; everything
/// else is removed at once (or when its finalizers are gone).
pub(crate) fn grace_period<K: Resource>(obj: &K, requested: Option<i64>) -> i64 {
    let Some(pod) = (obj as &dyn Any).downcast_ref::<Pod>() else {
        return 0;
    };
    if pod.spec.node_name.is_empty() || is_terminal(pod) {
        return 0;
    }
    requested
        .or(pod.spec.termination_grace_period_seconds)
        .unwrap_or(30)
        .max(0)
}

/// A bound, still-running pod is removed only when its node confirms its containers stopped
/// (the node deletes it again with grace period 0).
fn awaits_node<K: Resource>(obj: &K) -> bool {
    let Some(pod) = (obj as &dyn Any).downcast_ref::<Pod>() else {
        return false;
    };
    !pod.spec.node_name.is_empty()
        && !is_terminal(pod)
        && pod.metadata.deletion_grace_period_seconds.unwrap_or(0) > 0
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(pod.status.phase.as_str(), "Succeeded" | "Failed")
}

/// Side effects of starting a deletion.
pub(crate) fn on_delete<K: Resource>(obj: &mut K) {
    if let Some(ns) = (obj as &mut dyn Any).downcast_mut::<Namespace>() {
        ns.status.phase = "Terminating".into();
    }
}

/// Deletion is complete when no finalizer holds the object and no grace period is running.
pub(crate) fn ready_to_remove<K: Resource>(obj: &K) -> bool {
    let meta = obj.meta();
    meta.deletion_timestamp.is_some() && meta.finalizers.is_empty() && !awaits_node(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_add_their_finalizer_once_and_unknown_ones_are_refused() {
        let mut meta = ObjectMeta::default();
        Propagation::Orphan.add_finalizer(&mut meta);
        Propagation::Orphan.add_finalizer(&mut meta);
        Propagation::Background.add_finalizer(&mut meta);
        assert_eq!(meta.finalizers, vec![FINALIZER_ORPHAN.to_string()]);
        assert_eq!(
            Propagation::parse(None, "x").unwrap(),
            Propagation::Background
        );
        assert!(Propagation::parse(Some("Sideways"), "x").is_err());
    }

    #[test]
    fn only_a_running_bound_pod_waits_for_its_node() {
        let mut pod = Pod::default();
        assert_eq!(grace_period(&pod, Some(10)), 0);
        pod.spec.node_name = "n1".into();
        assert_eq!(grace_period(&pod, None), 30);
        assert_eq!(grace_period(&pod, Some(-5)), 0);
        pod.metadata.deletion_timestamp = Some(chrono::Utc::now());
        pod.metadata.deletion_grace_period_seconds = Some(30);
        assert!(!ready_to_remove(&pod));
        pod.status.phase = "Succeeded".into();
        assert!(ready_to_remove(&pod));
    }
}
