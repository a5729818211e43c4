//! Work in a trace the sampler decided against makes no spans but still carries the trace
//! on; work in a sampled trace is recorded whole. Spans are collected by an in-memory
//! processor behind the same layer `shoal_telemetry::init` installs.

use std::sync::{Arc, Mutex};

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, Span, SpanData, SpanProcessor};
use shoal_telemetry::propagation::current_traceparent;
use shoal_telemetry::sampling::Sampling;
use shoal_telemetry::work::{child_of_current, Traced};
use tracing_subscriber::layer::SubscriberExt;

const SAMPLED: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const UNSAMPLED: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";

#[derive(Debug, Clone, Default)]
struct Collected(Arc<Mutex<Vec<SpanData>>>);

impl SpanProcessor for Collected {
    fn on_start(&self, _: &mut Span, _: &Context) {}
    fn on_end(&self, span: SpanData) {
        if span.span_context.is_sampled() {
            self.0.lock().unwrap().push(span);
        }
    }
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
    fn shutdown_with_timeout(&self, _: std::time::Duration) -> OTelSdkResult {
        Ok(())
    }
}

impl Collected {
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.name.to_string())
            .collect();
        names.sort();
        names
    }
    fn trace_ids(&self) -> Vec<String> {
        let spans = self.0.lock().unwrap();
        spans
            .iter()
            .map(|s| s.span_context.trace_id().to_string())
            .collect()
    }
}

/// Runs `f` under a subscriber with Shoal's layer and sampler: new roots kept at `ratio`,
/// remote parents followed when `parent_based`.
fn traced(ratio: f64, parent_based: bool, f: impl FnOnce()) -> Collected {
    let collected = Collected::default();
    let sampling = Sampling {
        parent_based,
        ratio,
    };
    let provider = SdkTracerProvider::builder()
        .with_sampler(sampling.sampler())
        .with_span_processor(collected.clone())
        .build();
    let subscriber =
        tracing_subscriber::registry().with(shoal_telemetry::otel_layer(&provider, sampling));
    tracing::subscriber::with_default(subscriber, f);
    collected
}

/// A message's headers, carrying `traceparent` (or none).
fn headers_with(traceparent: Option<&str>) -> async_nats::HeaderMap {
    let mut headers = async_nats::HeaderMap::new();
    if let Some(tp) = traceparent {
        headers.insert("traceparent", tp);
    }
    headers
}

/// A request arriving with `traceparent` in its headers (or none).
fn request(traceparent: Option<&str>) -> Traced {
    Traced::from_headers(
        Some(&headers_with(traceparent)),
        || tracing::info_span!(target: "shoal::test", "request"),
    )
}

/// Work caused by an object's change, kept with `traceparent` (or none).
fn object_change(traceparent: Option<&str>) -> Traced {
    Traced::from_traceparent(
        traceparent,
        || tracing::info_span!(target: "shoal::test", "reconcile"),
    )
}

/// Whether a part of `work` makes no span of its own.
fn records_no_part(work: &Traced) -> bool {
    work.child(|| tracing::info_span!(target: "shoal::test", "part"))
        .span()
        .is_none()
}

fn write() -> tracing::Span {
    child_of_current(|| tracing::info_span!(target: "shoal::test", "write"))
}

/// What a unit of work sends downstream: the traceparent current inside it, from within a
/// part of it, across an await.
fn downstream(work: &Traced) -> Option<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(work.run(async {
        tokio::task::yield_now().await;
        let part = write();
        part.in_scope(current_traceparent)
    }))
}

#[test]
fn a_sampled_trace_is_recorded_whole() {
    let mut sent = None;
    let collected = traced(0.0, true, || {
        let work = request(Some(SAMPLED));
        assert!(!work.span().is_none());
        sent = downstream(&work);
    });
    assert_eq!(collected.names(), ["request", "write"]);
    assert!(collected
        .trace_ids()
        .iter()
        .all(|t| t == "0af7651916cd43dd8448eb211c80319c"));
    let sent = sent.expect("a traceparent downstream");
    assert!(
        sent.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
        "{sent}"
    );
    assert!(sent.ends_with("-01"), "{sent}");
}

#[test]
fn work_in_a_trace_decided_against_makes_no_span_and_carries_the_trace_on() {
    let mut sent = None;
    let collected = traced(1.0, true, || {
        let work = request(Some(UNSAMPLED));
        assert!(work.span().is_none(), "no span for an unsampled parent");
        assert!(records_no_part(&work));
        sent = downstream(&work);
        // A unit of work started inside carried work continues it too.
        let nested = work.in_scope(|| request(None));
        assert!(nested.span().is_none());
    });
    assert!(collected.names().is_empty(), "{:?}", collected.names());
    assert_eq!(sent.as_deref(), Some(UNSAMPLED));
}

#[test]
fn a_dropped_new_root_makes_no_span_and_says_so_downstream() {
    let mut sent = None;
    let collected = traced(0.0, true, || {
        let work = request(None);
        assert!(
            work.span().is_none(),
            "the root is dropped before it is made"
        );
        assert!(records_no_part(&work));
        sent = downstream(&work);
    });
    assert!(collected.names().is_empty());
    let sent = sent.expect("the dropped root's context goes downstream");
    assert!(sent.ends_with("-00"), "{sent}");
}

#[test]
fn a_kept_new_root_is_recorded_with_its_parts_and_says_so_downstream() {
    let mut sent = None;
    let collected = traced(1.0, true, || {
        let work = request(None);
        assert!(!work.span().is_none());
        sent = downstream(&work);
    });
    assert_eq!(collected.names(), ["request", "write"]);
    let trace = collected.trace_ids()[0].clone();
    let sent = sent.expect("a traceparent downstream");
    assert!(sent.starts_with(&format!("00-{trace}-")), "{sent}");
    assert!(sent.ends_with("-01"), "{sent}");
}

/// The SDK keeps exactly the roots decided up front: were it to draw again, a 0.25 ratio
/// would keep about 1 in 16.
#[test]
fn new_roots_are_kept_at_the_ratio_and_the_sdk_follows_the_decision() {
    const ROOTS: usize = 4000;
    let mut made = 0;
    let collected = traced(0.25, true, || {
        for _ in 0..ROOTS {
            let work = request(None);
            if !work.span().is_none() {
                made += 1;
            }
            work.in_scope(|| drop(write()));
        }
    });
    let names = collected.names();
    let requests = names.iter().filter(|n| *n == "request").count();
    let writes = names.iter().filter(|n| *n == "write").count();
    assert_eq!(requests, made, "every root made is recorded");
    assert_eq!(writes, made, "and so is its part");
    let share = made as f64 / ROOTS as f64;
    assert!((0.20..=0.30).contains(&share), "kept {share:.3} of roots");
}

#[test]
fn without_parent_based_sampling_every_span_decides_for_itself() {
    let collected = traced(1.0, false, || {
        let work = request(Some(UNSAMPLED));
        assert!(!work.span().is_none());
        let _ = downstream(&work);
    });
    assert_eq!(collected.names(), ["request", "write"]);
}

#[test]
fn carried_work_makes_no_span_but_what_it_sends_continues_the_trace() {
    let mut sent = None;
    let collected = traced(1.0, true, || {
        let work = Traced::carrying(Some(SAMPLED));
        assert!(work.span().is_none(), "carried work records no span");
        sent = downstream(&work);
    });
    assert!(collected.names().is_empty(), "{:?}", collected.names());
    assert_eq!(sent.as_deref(), Some(SAMPLED));
}

#[test]
fn a_step_is_an_event_on_its_span_with_its_duration_and_outcome() {
    let collected = traced(1.0, true, || {
        let work = request(Some(SAMPLED));
        work.in_scope(|| {
            let started = std::time::Instant::now();
            shoal_telemetry::step!("decode", started, false, bytes = 12u64);
        });
        // Outside any span there is nothing to record it on.
        let started = std::time::Instant::now();
        shoal_telemetry::step!("lost", started, true);
    });
    let spans = collected.0.lock().unwrap();
    assert_eq!(spans.len(), 1, "the step made no span of its own");
    let events = &spans[0].events.events;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].name, "decode");
    let value = |key: &str| {
        events[0]
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    assert!(value("duration_us").is_some());
    assert_eq!(value("outcome").as_deref(), Some("failed"));
    assert_eq!(value("bytes").as_deref(), Some("12"));
}

fn routine(traceparent: Option<&str>) -> Traced {
    Traced::continuing_only(
        Some(&headers_with(traceparent)),
        || tracing::info_span!(target: "shoal::test", "heartbeat"),
    )
}

#[test]
fn routine_work_starts_no_trace_even_at_1_0_but_continues_one_it_is_sent() {
    let mut sent = (None, None);
    let collected = traced(1.0, true, || {
        let alone = routine(None);
        assert!(alone.span().is_none(), "no new root for a heartbeat");
        sent.0 = downstream(&alone);
        // The same request without the routine exemption would start a trace.
        assert!(!request(None).span().is_none());
        sent.1 = downstream(&routine(Some(SAMPLED)));
    });
    assert_eq!(sent.0, None, "nothing traced goes downstream");
    let continued = sent.1.expect("the sender's trace goes on");
    assert!(
        continued.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
        "{continued}"
    );
    assert_eq!(collected.names(), ["heartbeat", "request", "write"]);
}

#[test]
fn work_caused_by_a_change_kept_with_no_trace_starts_none_and_says_so_downstream() {
    let mut sent = None;
    let collected = traced(1.0, true, || {
        let work = object_change(None);
        assert!(work.span().is_none(), "no new root, even at 1.0");
        assert!(records_no_part(&work));
        sent = downstream(&work);
        // The same change kept with a sampled trace continues it.
        let continued = object_change(Some(SAMPLED));
        assert!(!continued.span().is_none());
        // Inside recorded work, a change kept with none is part of that work.
        let outer = request(None);
        assert!(outer.in_scope(|| !object_change(None).span().is_none()));
    });
    let sent = sent.expect("an unsampled context goes downstream, so the API draws no root");
    assert!(sent.ends_with("-00"), "{sent}");
    assert_eq!(collected.names(), ["reconcile", "reconcile", "request"]);
}

/// Under parent-based sampling an event keeps only a sampled trace: work its change causes
/// starts no trace when it keeps none, which says "not sampled" without a header.
#[test]
fn an_event_keeps_a_sampled_trace_only() {
    use shoal_telemetry::propagation::{keeps, traceparent_to_keep};
    let mut kept = (None, None, None);
    traced(1.0, true, || {
        kept.0 = request(Some(SAMPLED)).in_scope(traceparent_to_keep);
        kept.1 = request(Some(UNSAMPLED)).in_scope(traceparent_to_keep);
        kept.2 = traceparent_to_keep();
    });
    let sampled = kept.0.expect("a sampled trace is kept");
    assert!(
        sampled.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
        "{sampled}"
    );
    assert_eq!(kept.1, None, "an unsampled trace is not");
    assert_eq!(kept.2, None, "outside any trace there is nothing to keep");
    assert!(keeps(SAMPLED));
    assert!(!keeps(UNSAMPLED));
    assert!(!keeps("00-zz-yy-01"));
    // Where every span decides for itself, a parent's decision is no reason to drop it.
    traced(0.0, false, || {
        kept.1 = request(Some(UNSAMPLED)).in_scope(traceparent_to_keep);
    });
    let own = kept.1.expect("a span's own decision is kept");
    assert!(own.ends_with("-00"), "{own}");
}
