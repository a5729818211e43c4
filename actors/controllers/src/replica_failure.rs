//! The `ReplicaFailure` condition: a ReplicaSet whose pods the API refuses (a pod security
//! level, a missing PriorityClass) says so in its status, as Kubernetes' does, instead of
//! only retrying; its Deployment shows the same condition. The reconcile's error is still
//! returned, so the work queue's per-key backoff paces the retries.

use bus_schemas::meta::{find_condition, Condition, Time};

use crate::error::ReconcileError;

pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// Why a reconcile failed, as the condition's reason: only failures to create or delete
/// pods count; the API's message becomes the condition's message.
pub fn reason_of(error: &ReconcileError) -> Option<(&'static str, String)> {
    let ReconcileError::Api {
        verb, kind, source, ..
    } = error;
    match (*verb, *kind) {
        ("create", "Pod") => Some(("FailedCreate", source.to_string())),
        ("delete", "Pod") => Some(("FailedDelete", source.to_string())),
        _ => None,
    }
}

/// Sets the condition after a failed reconcile. An existing one is left as it is, as in
/// Kubernetes: the message names a generated pod, and rewriting it on every retry would
/// turn each retry into a status write and each write into a retry.
pub fn record(conditions: &mut Vec<Condition>, reason: &str, message: String, now: Time) {
    if find_condition(conditions, REPLICA_FAILURE).is_some() {
        return;
    }
    conditions.push(Condition {
        type_: REPLICA_FAILURE.into(),
        status: "True".into(),
        reason: reason.into(),
        message,
        last_transition_time: Some(now),
        ..Default::default()
    });
}

/// Removes the condition after a reconcile that met no failure.
pub fn clear(conditions: &mut Vec<Condition>) {
    conditions.retain(|c| c.type_ != REPLICA_FAILURE);
}

/// A Deployment's `ReplicaFailure`: its new ReplicaSet's, else the first old one's (as
/// Kubernetes' getReplicaFailures picks).
pub fn of_replicasets<'a>(
    sets: impl IntoIterator<Item = &'a [Condition]>,
    now: Time,
) -> Option<Condition> {
    let found = sets
        .into_iter()
        .find_map(|conds| find_condition(conds, REPLICA_FAILURE))?;
    Some(Condition {
        last_update_time: Some(now),
        last_transition_time: found.last_transition_time.or(Some(now)),
        ..found.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::{Reason, Status};
    use shoal_bus::ApiError;

    fn now() -> Time {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn refused(verb: &'static str) -> ReconcileError {
        let status = Status::new(Reason::Forbidden, "pods \"web-x\" is forbidden: violates");
        ReconcileError::api(verb, "Pod", "default/web-*", ApiError::Status(status))
    }

    #[test]
    fn create_and_delete_failures_have_reasons_other_writes_none() {
        let (reason, message) = reason_of(&refused("create")).unwrap();
        assert_eq!(reason, "FailedCreate");
        assert_eq!(message, "pods \"web-x\" is forbidden: violates");
        assert_eq!(reason_of(&refused("delete")).unwrap().0, "FailedDelete");
        assert!(reason_of(&refused("update")).is_none());
    }

    #[test]
    fn recorded_once_then_kept_until_cleared() {
        let mut conds = Vec::new();
        record(&mut conds, "FailedCreate", "first".into(), now());
        record(&mut conds, "FailedCreate", "second".into(), now());
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].message, "first");
        assert!(conds[0].is_true());
        clear(&mut conds);
        assert!(conds.is_empty());
    }

    #[test]
    fn a_deployment_takes_the_first_failing_replicaset() {
        let mut failing = Vec::new();
        record(&mut failing, "FailedCreate", "refused".into(), now());
        let healthy: Vec<Condition> = Vec::new();
        let got = of_replicasets([healthy.as_slice(), failing.as_slice()], now()).unwrap();
        assert_eq!(
            (
                got.type_.as_str(),
                got.reason.as_str(),
                got.message.as_str()
            ),
            (REPLICA_FAILURE, "FailedCreate", "refused")
        );
        assert!(of_replicasets([healthy.as_slice()], now()).is_none());
    }
}
