//! What [`crate::step!`] records, and how: an OpenTelemetry event added straight to the span
//! the current code runs in.
//!
//! NOTE: why not a `tracing` event. A step was one, and `tracing-opentelemetry` turned it
//! into an OpenTelemetry event on the same span. On the way it went through every layer's
//! filter (the log layer's too, which then dropped it: steps are never logged), looked the
//! span up in the registry, wrote a `level` and a `target` that the export thread took off
//! again, and, once the span had started (the layer starts it when first entered), built the
//! event twice: once for itself, once more inside the SDK's span with a second clock read. A
//! step adds nothing to logs and everything to the span, so it goes to the span directly:
//! the OpenTelemetry context that the layer makes current whenever a traced span is entered
//! names that span. The actors' instrumentation stays `tracing` spans and `step!`.

use std::time::Instant;

use opentelemetry::trace::TraceContextExt;
use opentelemetry::{Context, KeyValue, Value};

/// Records a step named `name` that began at `started` on the current span, when that span
/// is recorded. `fields` makes the step's own attributes; it runs only then.
pub fn record<const N: usize>(
    name: &'static str,
    started: &Instant,
    ok: bool,
    fields: impl FnOnce() -> [KeyValue; N],
) {
    // The context is looked up twice so that `fields`, the caller's code, runs while the
    // current context is not borrowed (code that attached a context there would panic).
    if !Context::map_current(|cx| cx.span().span_context().is_sampled()) {
        return;
    }
    let mut attributes = Vec::with_capacity(N + 1 + usize::from(!ok));
    attributes.push(KeyValue::new(
        "duration_us",
        crate::int(started.elapsed().as_micros()),
    ));
    if !ok {
        attributes.push(KeyValue::new("outcome", "failed"));
    }
    attributes.extend(fields());
    // A remote parent's context is sampled too but has no span here: adding to it does
    // nothing, as a `tracing` event outside any span did.
    Context::map_current(|cx| cx.span().add_event(name, attributes));
}

/// A step's field as an OpenTelemetry value. Numbers stay numbers (the OTLP `intValue` that
/// `shoal trace` and Jaeger show as such); text is copied, as the span outlives the step.
pub trait StepValue {
    fn into_step_value(self) -> Value;
}

impl StepValue for i64 {
    fn into_step_value(self) -> Value {
        Value::I64(self)
    }
}

impl StepValue for u64 {
    fn into_step_value(self) -> Value {
        Value::I64(crate::int(self))
    }
}

impl StepValue for bool {
    fn into_step_value(self) -> Value {
        Value::Bool(self)
    }
}

impl StepValue for &str {
    fn into_step_value(self) -> Value {
        Value::from(self.to_owned())
    }
}

impl StepValue for String {
    fn into_step_value(self) -> Value {
        Value::from(self)
    }
}

/// One field of a step.
pub fn field(key: &'static str, value: impl StepValue) -> KeyValue {
    KeyValue::new(key, value.into_step_value())
}

/// Turns a step's fields (`key = value` or a variable's name) into an array of attributes,
/// so that [`record`] knows their number and allocates once.
#[doc(hidden)]
#[macro_export]
macro_rules! __step_fields {
    ([$($done:expr),*]) => { [$($done),*] };
    ([$($done:expr),*] $key:ident = $value:expr $(, $($rest:tt)*)?) => {
        $crate::__step_fields!(
            [$($done,)* $crate::steps::field(stringify!($key), $value)] $($($rest)*)?
        )
    };
    ([$($done:expr),*] $key:ident $(, $($rest:tt)*)?) => {
        $crate::__step_fields!(
            [$($done,)* $crate::steps::field(stringify!($key), $key)] $($($rest)*)?
        )
    };
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use opentelemetry::trace::{SpanContext, TraceFlags, TraceId, TraceState, TracerProvider as _};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, Span, SpanData, SpanProcessor};
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Keeps what ends, as the SDK hands it to an exporter's queue.
    #[derive(Debug, Clone, Default)]
    struct Kept(Arc<Mutex<Vec<SpanData>>>);

    impl SpanProcessor for Kept {
        fn on_start(&self, _span: &mut Span, _cx: &Context) {}
        fn on_end(&self, span: SpanData) {
            self.0.lock().unwrap().push(span);
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    /// The spans `f` made, under the OpenTelemetry layer (every span sampled).
    fn recorded(f: impl FnOnce()) -> Vec<SpanData> {
        let kept = Kept::default();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(kept.clone())
            .build();
        let subscriber = tracing_subscriber::registry().with(
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("test"))
                .with_location(false),
        );
        tracing::subscriber::with_default(subscriber, f);
        let spans = std::mem::take(&mut *kept.0.lock().unwrap());
        spans
    }

    fn attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
        attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    }

    #[test]
    fn a_step_lands_on_the_span_entered_when_it_is_taken() {
        let spans = recorded(|| {
            let started = Instant::now();
            let sync = tracing::info_span!(target: "shoal_agent", "pod.sync");
            sync.in_scope(|| {
                let start = tracing::info_span!(target: "shoal_agent", "node.container_start");
                start.in_scope(|| crate::step!("inner", started, true));
                crate::step!("outer", started, true);
            });
        });
        let steps_of = |name: &str| -> Vec<String> {
            let span = spans.iter().find(|s| s.name == name).unwrap();
            span.events.iter().map(|e| e.name.to_string()).collect()
        };
        assert_eq!(steps_of("node.container_start"), ["inner"]);
        assert_eq!(steps_of("pod.sync"), ["outer"]);
    }

    #[test]
    fn a_step_carries_only_its_own_fields_and_a_log_event_keeps_its_level_and_target() {
        let spans = recorded(|| {
            let span = tracing::info_span!(target: "shoal_api", "api.request");
            let _entered = span.enter();
            let started = Instant::now();
            let node = String::from("node-7");
            crate::step!("api.decode", started, true, bytes = 12u64, node);
            crate::step!("api.validate", started, false);
            tracing::warn!(target: "shoal_api::write", "retrying a conflict");
        });
        assert_eq!(spans.len(), 1);
        let events = &spans[0].events.events;
        let names: Vec<&str> = events.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(
            names[..2],
            ["api.decode", "api.validate"],
            "in order, on the span"
        );

        let step = &events[0];
        let keys: Vec<&str> = step.attributes.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(
            keys,
            ["duration_us", "bytes", "node"],
            "a step that went well"
        );
        // Numbers, not their text.
        assert!(matches!(step.attributes[0].value, Value::I64(_)));
        assert!(matches!(step.attributes[1].value, Value::I64(12)));
        assert_eq!(
            attribute(&step.attributes, "node").as_deref(),
            Some("node-7")
        );
        let failed = &events[1];
        assert_eq!(
            attribute(&failed.attributes, "outcome").as_deref(),
            Some("failed"),
            "a failed step says so"
        );
        let log = &events[2];
        assert_eq!(attribute(&log.attributes, "level").as_deref(), Some("WARN"));
        assert_eq!(
            attribute(&log.attributes, "target").as_deref(),
            Some("shoal_api::write")
        );
    }

    fn counted(evaluated: &Cell<u32>) -> i64 {
        evaluated.set(evaluated.get() + 1);
        1
    }

    #[test]
    fn a_step_outside_a_recorded_span_evaluates_none_of_its_fields() {
        let evaluated = Cell::new(0);
        let started = Instant::now();
        crate::step!("untraced", started, true, n = counted(&evaluated));
        // A sampled trace continued from elsewhere, with no span of this process in it.
        let remote = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            opentelemetry::trace::SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let _carried = Context::new().with_remote_span_context(remote).attach();
        crate::step!("remote", started, false, n = counted(&evaluated),);
        assert_eq!(evaluated.get(), 1, "only where the trace is sampled");
    }
}
