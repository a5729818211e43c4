//! What the scheduler records: a span per scheduling attempt that continues the trace of the
//! pod's creation (queue wait, the nodes considered, the decision), with the filtering and scoring
//! passes (`decide`) and the bind as its steps, and the scheduler's Prometheus metrics.

use bus_schemas::kinds::Pod;
use shoal_bus::ObjectKey;
use shoal_telemetry::metrics;
use shoal_telemetry::metrics::label;
use shoal_telemetry::work::Traced;
use tracing::field::Empty;

fn since_creation(pod: &Pod) -> Option<f64> {
    let created = pod.metadata.creation_timestamp?;
    let ms = (chrono::Utc::now() - created).num_milliseconds();
    (ms >= 0).then(|| ms as f64 / 1000.0)
}

/// No span for a pod whose creation belongs to a trace decided against: the attempt only
/// carries that trace on to the bind.
pub fn schedule_span(
    key: &ObjectKey,
    pod: &Pod,
    traceparent: Option<&str>,
    nodes: usize,
) -> Traced {
    Traced::from_traceparent(traceparent, || {
        tracing::info_span!(
            "schedule",
            shoal.actor = "scheduler",
            kind = "Pod",
            namespace = key.namespace.as_str(),
            name = key.name.as_str(),
            resource_version = pod.metadata.resource_version.as_str(),
            queue_wait_seconds = since_creation(pod).unwrap_or(0.0),
            nodes = shoal_telemetry::int(nodes),
            unfit_nodes = Empty,
            outcome = Empty,
            node = Empty,
        )
    })
}

/// The bind, a step of its attempt: the attempt's span is the parent of the API's span of
/// the bind request, which times the write itself.
///
/// NOTE: why not a span of its own. It only waited for that request, as a client span
/// would, and Shoal's callers make none (see `shoal_bus::client`): at a 1.0 ratio it was one
/// span in ten of a pod's start.
pub fn bind_step(node: &str, outcome: &crate::bind::BindOutcome, started: std::time::Instant) {
    let bound = matches!(outcome, crate::bind::BindOutcome::Bound(_));
    shoal_telemetry::step!(
        "scheduler.bind",
        started,
        bound,
        node,
        result = bind_outcome(outcome)
    );
}

/// One attempt's result: scheduled, unschedulable, retry (a cache a write behind) or
/// conflict (lost a race for a node or the pod).
pub fn attempt(result: &'static str) {
    metrics()
        .scheduler
        .attempts
        .get_or_create(&[label("result", result)])
        .inc();
}

pub fn conflict() {
    metrics().scheduler.conflicts.inc();
    attempt("conflict");
}

/// A bind landed: the end-to-end latency, from the pod's creation.
pub fn bound(pod: &Pod) {
    if let Some(seconds) = since_creation(pod) {
        metrics().scheduler.e2e_seconds.observe(seconds);
    }
}

fn bind_outcome(outcome: &crate::bind::BindOutcome) -> &'static str {
    use crate::bind::BindOutcome;
    match outcome {
        BindOutcome::Bound(_) => "bound",
        BindOutcome::Conflict => "conflict",
        BindOutcome::Gone => "gone",
        BindOutcome::Failed(_) => "failed",
    }
}
