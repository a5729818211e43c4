//! W3C trace context in NATS headers (`traceparent`, `tracestate`): how a trace crosses from
//! one actor to the next, and how it is kept with the objects it changed.
//!
//! Without the OpenTelemetry layer installed (unit tests, tools that never call
//! [`crate::init`]) spans carry no context: nothing is injected and extraction is a no-op.

use async_nats::{HeaderMap, HeaderName};
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub const TRACEPARENT: &str = bus_schemas::subjects::HEADER_TRACEPARENT;
pub const TRACESTATE: &str = "tracestate";

// NOTE: why names made once. A header looked up or set by a `&str` is validated, compared
// with every standard NATS header name and copied into a new allocation, on every call;
// every request and event passes through here, traced or not.
pub const TRACEPARENT_HEADER: HeaderName = HeaderName::from_static(TRACEPARENT);
const TRACESTATE_HEADER: HeaderName = HeaderName::from_static(TRACESTATE);

/// The trace context fields of a message (or of a traceparent kept with a cached object),
/// each read once, as the SDK's propagator asks for them.
struct TraceFields<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl Extractor for TraceFields<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => Some(self.traceparent),
            TRACESTATE => self.tracestate,
            _ => None,
        }
    }
    fn keys(&self) -> Vec<&str> {
        let mut keys = vec![TRACEPARENT];
        keys.extend(self.tracestate.map(|_| TRACESTATE));
        keys
    }
}

fn context_from(fields: TraceFields<'_>) -> Context {
    TraceContextPropagator::new().extract_with_context(&Context::new(), &fields)
}

/// The running work's trace: the current span's, or, outside any span, the context an
/// unsampled trace's work carries ([`crate::work`]).
pub(crate) fn current_context() -> Context {
    let span = tracing::Span::current();
    if span.is_none() {
        Context::current()
    } else {
        span.context()
    }
}

/// Writes the current span's context into `headers`; leaves them alone when there is none.
///
/// NOTE: why not the SDK's `TraceContextPropagator::inject_context`. It always writes a
/// `tracestate`, empty when the trace has none (as all of Shoal's do), and every delivered
/// message's headers are parsed, header by header, by each client that receives it. W3C
/// Trace Context asks senders not to send an empty `tracestate`.
pub fn inject_current(headers: &mut HeaderMap) {
    let cx = current_context();
    let span = cx.span();
    let span_context = span.span_context();
    if !span_context.is_valid() {
        return;
    }
    headers.insert(TRACEPARENT_HEADER, traceparent_of(span_context).as_str());
    let state = span_context.trace_state().header();
    if !state.is_empty() {
        headers.insert(TRACESTATE_HEADER, state.as_str());
    }
}

fn traceparent_of(span_context: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        span_context.trace_id(),
        span_context.span_id(),
        span_context.trace_flags().to_u8()
    )
}

/// The remote context `headers` carry: empty (so a new root starts) when they carry none or
/// a malformed one. Never the running code's context: a message starts its own work.
pub fn extract(headers: Option<&HeaderMap>) -> Context {
    let Some(headers) = headers else {
        return Context::new();
    };
    // Most messages carry headers but no trace (tracing off, or a sender outside one).
    let Some(traceparent) = headers.get(TRACEPARENT_HEADER) else {
        return Context::new();
    };
    context_from(TraceFields {
        traceparent: traceparent.as_str(),
        tracestate: headers.get(TRACESTATE_HEADER).map(|v| v.as_str()),
    })
}

/// The remote context of a traceparent string (empty when malformed).
pub fn extract_traceparent(traceparent: &str) -> Context {
    context_from(TraceFields {
        traceparent,
        tracestate: None,
    })
}

/// The current span's context as a traceparent, if it has a valid one.
pub fn current_traceparent() -> Option<String> {
    current_traceparent_if(SpanContext::is_valid)
}

/// The traceparent an object event keeps: the running work's, when its trace is sampled
/// (or when the sampler follows no parent, so every span decides for itself).
///
/// NOTE: why not an unsampled one. Every event is delivered to each actor that watches its
/// kind, and each receiver parses the header, keeps it with the object and turns it into a
/// context for the work the change causes: at a 0.01 ratio, 99 events in 100 carried one to
/// say only "not sampled". Work caused by a change kept with no trace starts none
/// ([`crate::work::Traced::from_traceparent`]), which says the same for free.
pub fn traceparent_to_keep() -> Option<String> {
    current_traceparent_if(is_kept)
}

/// Whether a traceparent (a request's, in a process that does not trace) is one an event
/// keeps, by the rule of [`traceparent_to_keep`].
pub fn keeps(traceparent: &str) -> bool {
    is_kept(extract_traceparent(traceparent).span().span_context())
}

fn current_traceparent_if(wanted: fn(&SpanContext) -> bool) -> Option<String> {
    let cx = current_context();
    let span = cx.span();
    let span_context = span.span_context();
    wanted(span_context).then(|| traceparent_of(span_context))
}

fn is_kept(span_context: &SpanContext) -> bool {
    span_context.is_valid() && (span_context.is_sampled() || !crate::sampling::parent_decides())
}

/// The trace id a traceparent names, if it is well formed.
pub fn trace_id_of(traceparent: &str) -> Option<String> {
    let cx = extract_traceparent(traceparent);
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid().then(|| sc.trace_id().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_traceparents_name_no_trace() {
        assert_eq!(trace_id_of("00-zz-yy-01"), None);
        assert_eq!(trace_id_of(""), None);
        assert_eq!(
            trace_id_of("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").as_deref(),
            Some("0af7651916cd43dd8448eb211c80319c")
        );
    }

    #[test]
    fn headers_round_trip_a_context() {
        let mut headers = HeaderMap::new();
        headers.insert(
            TRACEPARENT,
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        );
        let cx = extract(Some(&headers));
        assert_eq!(
            cx.span().span_context().trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        let mut bad = HeaderMap::new();
        bad.insert(TRACEPARENT, "not-a-trace");
        assert!(!extract(Some(&bad)).span().span_context().is_valid());
    }

    #[test]
    fn headers_without_a_traceparent_name_no_trace_and_a_set_one_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert("Shoal-Request-Id", "r-1");
        headers.insert(TRACESTATE, "vendor=abc");
        assert!(!extract(Some(&headers)).span().span_context().is_valid());
        headers.insert(
            TRACEPARENT,
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
        );
        let cx = extract(Some(&headers));
        let span = cx.span();
        let found = span.span_context();
        assert!(found.is_valid() && found.is_remote() && !found.is_sampled());
        assert_eq!(found.trace_state().header(), "vendor=abc");
    }

    fn injected_with_state(state: &str) -> HeaderMap {
        use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};
        use std::str::FromStr;
        let remote = SpanContext::new(
            TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap(),
            SpanId::from_hex("b7ad6b7169203331").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::from_str(state).unwrap(),
        );
        let _current = Context::new().with_remote_span_context(remote).attach();
        let mut headers = HeaderMap::new();
        inject_current(&mut headers);
        headers
    }

    #[test]
    fn an_empty_tracestate_is_not_sent_and_a_set_one_is() {
        let plain = injected_with_state("");
        assert_eq!(
            plain.get(TRACEPARENT).map(|v| v.as_str()),
            Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        );
        assert!(plain.get(TRACESTATE).is_none());
        let vendor = injected_with_state("vendor=abc");
        assert_eq!(
            vendor.get(TRACESTATE).map(|v| v.as_str()),
            Some("vendor=abc")
        );
        let cx = extract(Some(&vendor));
        assert_eq!(
            cx.span().span_context().trace_state().header(),
            "vendor=abc"
        );
    }

    #[test]
    fn nothing_is_injected_outside_a_trace() {
        let mut headers = HeaderMap::new();
        inject_current(&mut headers);
        assert!(headers.get(TRACEPARENT).is_none());
        assert!(headers.get(TRACESTATE).is_none());
    }
}
