//! `--log-format json`: one JSON object per line, carrying the `trace_id` and `span_id` of the
//! span the line was written in, so a log line leads to its trace.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_opentelemetry::OtelData;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

pub struct JsonWithTrace;

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(
            field.name().to_string(),
            Value::String(format!("{value:?}")),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().to_string(), Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_string(), value.into());
    }
}

impl<S, N> FormatEvent<S, N> for JsonWithTrace
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut line = Map::new();
        line.insert(
            "timestamp".into(),
            chrono::Utc::now()
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                .into(),
        );
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("target".into(), meta.target().into());
        let mut fields = Map::new();
        event.record(&mut Fields(&mut fields));
        if let Some(message) = fields.remove("message") {
            line.insert("message".into(), message);
        }
        if !fields.is_empty() {
            line.insert("fields".into(), Value::Object(fields));
        }
        if ctx.lookup_current().is_none() {
            // Work of an unsampled trace has no span, only the trace's context.
            let cx = opentelemetry::Context::current();
            let sc = opentelemetry::trace::TraceContextExt::span(&cx)
                .span_context()
                .clone();
            if sc.is_valid() {
                line.insert("trace_id".into(), sc.trace_id().to_string().into());
                line.insert("span_id".into(), sc.span_id().to_string().into());
            }
        }
        if let Some(span) = ctx.lookup_current() {
            line.insert("span".into(), span.name().into());
            // The nearest span with an OpenTelemetry context (all of them, when the layer is
            // installed).
            for span in span.scope() {
                let extensions = span.extensions();
                let Some(otel) = extensions.get::<OtelData>() else {
                    continue;
                };
                if let (Some(trace_id), Some(span_id)) = (otel.trace_id(), otel.span_id()) {
                    line.insert("trace_id".into(), trace_id.to_string().into());
                    line.insert("span_id".into(), span_id.to_string().into());
                    break;
                }
            }
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}
