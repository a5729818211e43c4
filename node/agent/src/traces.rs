//! What a pod's start records: while a pod is starting (until all its containers run and are
//! ready), each pass of its worker is a span continuing the trace that last changed the pod —
//! so the image pull, the sandbox, each container's start and the probe that made the pod
//! Ready belong to the `shoal apply` that asked for it. Past that, a pod's routine work
//! (probes every few seconds) is not traced. And the node's Prometheus metrics.

use std::time::Duration;

use bus_schemas::kinds::Pod;
use shoal_telemetry::metrics;
use shoal_telemetry::metrics::label;
use shoal_telemetry::work::{self, Traced};
use tracing::field::Empty;

use crate::probes::ProbeKind;

/// No span for a pod whose last change belongs to a trace decided against: the pass only
/// carries that trace on to its reports.
pub fn sync_span(pod: &Pod, node: &str, traceparent: Option<&str>) -> Traced {
    Traced::from_traceparent(traceparent, || {
        tracing::info_span!(
            "pod.sync",
            shoal.actor = "node",
            kind = "Pod",
            namespace = pod.metadata.namespace.as_str(),
            name = pod.metadata.name.as_str(),
            resource_version = pod.metadata.resource_version.as_str(),
            node,
        )
    })
}

/// A child of the current span while it is recorded, or nothing (routine work is not
/// traced, and neither is a pod start in a trace decided against).
///
/// NOTE: why each child names its actor too. A child ends before its parent and can leave
/// in an earlier export batch, where the exporter finds no ancestor to take the actor from:
/// in `shoal up`, one process for every actor, such a container start could be shown as `up`'s.
fn child(make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    work::child_of_current(make)
}

/// A pull: its registry round trips and unpacking take long enough to be a span.
pub fn image_span(image: &str) -> tracing::Span {
    child(|| {
        tracing::info_span!(
            "node.image_pull_unpack",
            shoal.actor = "node",
            image,
            outcome = Empty
        )
    })
}

/// An image already on this machine, nothing pulled: a step of the pod's sync (the
/// kubelet's "already present on machine"), not a span of its own.
pub fn image_present(image: &str, looked: std::time::Instant) {
    shoal_telemetry::step!("node.image_present", looked, true, image);
}

/// The pod's sandbox (namespaces, network, cgroup) made or not: a step of the pod's sync,
/// with the error when it failed.
///
/// NOTE: why a step and not a span. Nothing happens inside it that is traced on its own, and
/// every pod start makes one: at a 1.0 sample ratio sandbox spans were one in seven of a pod
/// start's spans. A step keeps its name, duration and outcome on the pod's sync span.
pub fn sandbox_made<T, E: std::fmt::Display>(started: std::time::Instant, made: &Result<T, E>) {
    match made {
        Ok(_) => shoal_telemetry::step!("node.sandbox", started, true),
        Err(e) => {
            shoal_telemetry::step!(
                "node.sandbox",
                started,
                false,
                error = e.to_string().as_str()
            )
        }
    }
}

pub fn container_span(container: &str, restart: bool) -> tracing::Span {
    child(|| {
        tracing::info_span!(
            "node.container_create_start",
            shoal.actor = "node",
            container,
            restart,
            outcome = Empty,
            otel.status_code = Empty,
        )
    })
}

pub fn probe_span(kind: ProbeKind, container: &str) -> tracing::Span {
    child(|| {
        tracing::info_span!(
            "node.probe",
            shoal.actor = "node",
            probe = probe_name(kind),
            container,
            result = Empty,
            ready = Empty,
        )
    })
}

/// Marks a span's outcome, as an error when it failed.
pub fn outcome<T, E: std::fmt::Display>(span: &tracing::Span, result: &Result<T, E>) {
    match result {
        Ok(_) => {
            span.record("outcome", "ok");
        }
        Err(e) => {
            span.record("outcome", e.to_string().as_str());
            span.record("otel.status_code", "ERROR");
        }
    }
}

fn probe_name(kind: ProbeKind) -> &'static str {
    match kind {
        ProbeKind::Startup => "startup",
        ProbeKind::Liveness => "liveness",
        ProbeKind::Readiness => "readiness",
    }
}

pub fn probe_result(span: &tracing::Span, kind: ProbeKind, ok: bool, ready: bool) {
    let result = if ok { "success" } else { "failure" };
    span.record("result", result);
    span.record("ready", ready);
    metrics()
        .node
        .probe_results
        .get_or_create(&[label("probe", probe_name(kind)), label("result", result)])
        .inc();
}

pub fn container_restarted() {
    metrics().node.container_restarts.inc();
}

/// From the worker first seeing the pod to all its containers running.
pub fn pod_started(took: Duration) {
    metrics().node.pod_start_seconds.observe(took.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use shoal_telemetry::span_actors::span_actors;

    use super::*;

    #[test]
    fn every_span_of_a_pod_start_names_the_node_as_its_actor() {
        let spans = span_actors(|| {
            let sync = sync_span(&Pod::default(), "node-1", None);
            sync.in_scope(|| {
                let _pull = image_span("shoal/busybox:1.35");
                let _start = container_span("main", false);
                let _probe = probe_span(ProbeKind::Readiness, "main");
            });
        });
        let names: Vec<&str> = spans.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            [
                "pod.sync",
                "node.image_pull_unpack",
                "node.container_create_start",
                "node.probe"
            ]
        );
        for (name, actor) in &spans {
            assert_eq!(actor.as_deref(), Some("node"), "{name}");
        }
    }
}
