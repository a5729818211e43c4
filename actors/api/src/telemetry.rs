//! What the API records about its work: a span per request (continuing the sender's trace),
//! the request metrics, and what each compare-and-swap write met.

use std::time::Duration;

use async_nats::HeaderMap;
use bus_schemas::subjects::{self, NodeReport, HEADER_CODE};
use shoal_bus::{StoreError, Written};
use shoal_telemetry::metrics::label;
use shoal_telemetry::work::Traced;
use shoal_telemetry::{metrics, propagation};
use tracing::field::Empty;

/// Kind and verb of a request subject, as metric labels: `shoal.v1.api.<kind>.<verb>`, or
/// `node` and the report for `shoal.v1.node.<node>.<report>`.
pub fn kind_and_verb(subject: &str) -> (&str, &str) {
    if let Some((kind, verb)) = subjects::parse_api(subject) {
        return (kind, verb.map_or("unknown", |v| v.as_str()));
    }
    if let Ok((_, report)) = subjects::parse_node_report(subject) {
        return ("node", report.as_str());
    }
    ("unknown", "")
}

/// The span of one request, child of the sender's trace when its headers carry a valid one
/// (a missing or malformed traceparent starts a new root trace; the request goes on). A
/// request in a trace the sender's sampler decided against gets no span, only its context.
/// A node's routine report starts no trace (see [`is_routine`]).
pub fn request_span(subject: &str, headers: Option<&HeaderMap>) -> Traced {
    let make = || {
        let (kind, verb) = kind_and_verb(subject);
        tracing::info_span!(
            "api.request",
            shoal.actor = "api",
            otel.kind = "server",
            kind,
            verb,
            code = Empty,
            otel.status_code = Empty,
        )
    };
    if is_routine(subject) {
        Traced::continuing_only(headers, make)
    } else {
        Traced::from_headers(headers, make)
    }
}

/// A node's heartbeat and periodic status: they continue a trace they carry, but start
/// none of their own.
///
/// NOTE: why. Every node sends one every few seconds: at a 1.0 sample ratio a 1,000-node
/// fleet made 500 one-span traces a second, an eighth of the API's spans while 30,000 pods
/// started, crowding the bounded `SHOAL_TRACES` out of the rollouts operators look for. Their
/// latency and failures are in the request metrics (`kind="node"`, `verb="heartbeat"`), as
/// the node's routine probes are (the agent traces a pod's probes only until it is Ready).
fn is_routine(subject: &str) -> bool {
    subjects::is_node_report(subject)
        && subject.rsplit_once('.').is_some_and(|(_, report)| {
            [NodeReport::Heartbeat, NodeReport::NodeStatus]
                .iter()
                .any(|r| r.as_str() == report)
        })
}

/// Records a served request: its code on the span, and the request metrics.
pub fn served(span: &tracing::Span, subject: &str, reply_headers: &HeaderMap, took: Duration) {
    let code = reply_headers
        .get(HEADER_CODE)
        .map(|v| v.as_str().to_string())
        .unwrap_or_else(|| "200".into());
    span.record("code", code.as_str());
    if code.parse::<u16>().is_ok_and(|c| c >= 400) {
        span.record("otel.status_code", "ERROR");
    }
    let (kind, verb) = kind_and_verb(subject);
    let api = &metrics().api;
    api.requests
        .get_or_create(&[
            label("kind", kind),
            label("verb", verb),
            label("code", code),
        ])
        .inc();
    api.request_seconds
        .get_or_create(&[label("kind", kind), label("verb", verb)])
        .observe(took.as_secs_f64());
}

pub fn lane_dropped(lane: &'static str) {
    metrics()
        .api
        .lane_dropped
        .get_or_create(&[label("lane", lane)])
        .inc();
}

/// Records one compare-and-swap write of an object version as a step of the request's span:
/// what it expected, what it wrote, and its outcome (`written`, `duplicate`, `conflict`,
/// `earlier_version` or `failed`). Each retry of a conflict is a step of its own, so
/// conflicts and retries stay visible in the trace; conflicts are also counted.
///
/// NOTE: why a create's refused write is no conflict. A create expects no version at all,
/// and the log refuses it whenever the name has any history: a deleted object's tombstone
/// (names are reused: a StatefulSet's pods, a Deployment's ReplicaSets, a demo applied
/// again), which the API then writes over, or a live object (AlreadyExists). Neither is a
/// lost race between writers. Counted as conflicts, every re-created name raised the
/// conflict counter and showed a failed write in a trace that succeeded.
///
/// NOTE: why a step and not a span. A write has no children, and every object change passes
/// through one: at a 1.0 sample ratio, write spans were a quarter of all the spans of a pod's
/// start (about 3.6 of 14).
pub fn cas_written(
    kind: &'static str,
    namespace: &str,
    name: &str,
    expected: u64,
    started: std::time::Instant,
    result: &Result<Written, StoreError>,
) {
    let (write, resource_version, ok) = match result {
        Ok(w) if w.duplicate => ("duplicate", w.revision, true),
        Ok(w) => ("written", w.revision, true),
        Err(StoreError::Conflict { .. }) if expected == 0 => ("earlier_version", 0, true),
        Err(StoreError::Conflict { .. }) => {
            metrics()
                .api
                .cas_conflicts
                .get_or_create(&[label("kind", kind)])
                .inc();
            ("conflict", 0, false)
        }
        Err(_) => ("failed", 0, false),
    };
    shoal_telemetry::step!(
        "api.cas_write",
        started,
        ok,
        namespace,
        name,
        expected = shoal_telemetry::int(expected),
        resource_version = shoal_telemetry::int(resource_version),
        write
    );
}

/// The trace context an object event carries: the request's span, so work done because of
/// the event continues from it; the sender's header when this process does not trace. Only
/// a sampled trace is kept (see [`propagation::traceparent_to_keep`]).
pub fn event_traceparent(from_request: Option<&str>) -> Option<String> {
    if shoal_telemetry::installed() {
        return propagation::traceparent_to_keep();
    }
    from_request
        .filter(|tp| propagation::keeps(tp))
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::kind_and_verb;
    use bus_schemas::subjects::{node_report, NodeReport};

    #[test]
    fn only_heartbeats_and_node_status_are_routine() {
        assert!(super::is_routine(&node_report(
            "n.1",
            NodeReport::Heartbeat
        )));
        assert!(super::is_routine(&node_report(
            "n1",
            NodeReport::NodeStatus
        )));
        assert!(!super::is_routine(&node_report(
            "n1",
            NodeReport::PodStatus
        )));
        assert!(!super::is_routine("shoal.v1.api.node.heartbeat"));
    }

    #[test]
    fn subjects_become_kind_and_verb_labels() {
        assert_eq!(kind_and_verb("shoal.v1.api.pod.create"), ("pod", "create"));
        assert_eq!(
            kind_and_verb(&node_report("n.1", NodeReport::PodStatus)),
            ("node", NodeReport::PodStatus.as_str())
        );
        assert_eq!(kind_and_verb("elsewhere"), ("unknown", ""));
    }
}
