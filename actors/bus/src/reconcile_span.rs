//! What one reconcile records: a span that continues the trace of the work that last changed
//! the object (so a ReplicaSet's reconcile belongs to the `shoal apply` that changed its
//! Deployment), and the controller metrics.

use std::time::Duration;

use bus_schemas::Resource;
use shoal_telemetry::metrics;
use shoal_telemetry::metrics::label;
use shoal_telemetry::work::Traced;
use tracing::field::Empty;

use crate::controller::Action;
use crate::informer::ObjectKey;

/// No span when the object's last change belongs to a trace decided against: the reconcile
/// only carries that trace on to what it writes.
pub fn reconcile_span<K: Resource>(
    controller: &'static str,
    key: &ObjectKey,
    obj: &K,
    traceparent: Option<&str>,
) -> Traced {
    Traced::from_traceparent(traceparent, || {
        tracing::info_span!(
            "reconcile",
            shoal.actor = "controllers",
            controller,
            kind = K::INFO.kind,
            namespace = key.namespace.as_str(),
            name = key.name.as_str(),
            resource_version = obj.meta().resource_version.as_str(),
            outcome = Empty,
            otel.status_code = Empty,
        )
    })
}

/// Records the decision (wait for a change, look again later, retry after an error) and the
/// latency and queue depth metrics.
pub fn reconciled<E: std::fmt::Display>(
    span: &tracing::Span,
    controller: &'static str,
    result: &Result<Action, E>,
    took: Duration,
    queue_depth: usize,
) {
    let outcome = match result {
        Ok(Action::AwaitChange) => "done",
        Ok(Action::RequeueAfter(_)) => "requeue",
        Err(_) => "error",
    };
    span.record("outcome", outcome);
    if let Err(e) = result {
        span.record("otel.status_code", "ERROR");
        span.in_scope(|| tracing::info!(error = %e, "reconcile failed"));
    }
    let m = &metrics().controllers;
    m.reconcile_seconds
        .get_or_create(&[label("controller", controller), label("result", outcome)])
        .observe(took.as_secs_f64());
    m.queue_depth
        .get_or_create(&[label("controller", controller)])
        .set(queue_depth as i64);
}
