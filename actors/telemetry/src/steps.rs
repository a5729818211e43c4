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

use std::borrow::Cow;
use std::time::Instant;

use opentelemetry::trace::TraceContextExt;
use opentelemetry::{Context, KeyValue, Value};

/// Records a step named `name` that began at `started` on the current span, when that span
/// is recorded. `fields` adds the step's own attributes; it runs only then.
pub fn record(
    name: &'static str,
    started: &Instant,
    ok: bool,
    fields: impl FnOnce(&mut Vec<KeyValue>),
) {
    if !Context::map_current(|cx| cx.span().span_context().is_sampled()) {
        return;
    }
    let mut attributes = Vec::with_capacity(4);
    attributes.push(KeyValue::new(
        "duration_us",
        crate::int(started.elapsed().as_micros()),
    ));
    if !ok {
        attributes.push(KeyValue::new("outcome", "failed"));
    }
    fields(&mut attributes);
    // A remote parent's context is sampled too but has no span here: adding to it does
    // nothing, as a `tracing` event outside any span did.
    Context::map_current(|cx| cx.span().add_event(Cow::Borrowed(name), attributes));
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

impl StepValue for usize {
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

impl StepValue for &String {
    fn into_step_value(self) -> Value {
        Value::from(self.clone())
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

/// Expands a step's fields (`key = value` or a variable's name) into pushes onto `$attributes`.
#[doc(hidden)]
#[macro_export]
macro_rules! __step_fields {
    ($attributes:ident;) => {};
    ($attributes:ident; $key:ident = $value:expr $(, $($rest:tt)*)?) => {
        $attributes.push($crate::steps::field(stringify!($key), $value));
        $($crate::__step_fields!($attributes; $($rest)*);)?
    };
    ($attributes:ident; $key:ident $(, $($rest:tt)*)?) => {
        $attributes.push($crate::steps::field(stringify!($key), $key));
        $($crate::__step_fields!($attributes; $($rest)*);)?
    };
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use opentelemetry::trace::{SpanContext, TraceFlags, TraceId, TraceState};

    use super::*;

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
