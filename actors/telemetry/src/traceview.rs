//! Reading traces back from `SHOAL_TRACES`: every span of one trace, with the actor that
//! recorded it, in the shapes `shoal trace` prints (a waterfall, or OTLP JSON).

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::consumer::pull::OrderedConfig;
use async_nats::jetstream::consumer::DeliverPolicy;
use bus_schemas::subjects;
use futures::StreamExt;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValueKind;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, Span};
use prost::Message;

use crate::jetstream::ACTOR_ATTRIBUTE;

#[derive(Debug, thiserror::Error)]
pub enum TraceReadError {
    #[error("the trace stream {stream} is unavailable (no actor has exported a span yet, or the cluster predates tracing): {detail}")]
    Unavailable {
        stream: &'static str,
        detail: String,
    },
}

fn unavailable(e: impl std::fmt::Display) -> TraceReadError {
    TraceReadError::Unavailable {
        stream: subjects::TRACES_STREAM,
        detail: e.to_string(),
    }
}

/// Every stored batch holding a span of `trace_id` (lower-case hex), trimmed to those spans.
/// Reads the whole bounded stream: it is a debugging aid, not a query engine.
pub async fn read_trace(
    nats: &async_nats::Client,
    trace_id: &str,
) -> Result<Vec<ResourceSpans>, TraceReadError> {
    let want = hex_to_bytes(trace_id).ok_or_else(|| unavailable("bad trace id"))?;
    let js = async_nats::jetstream::new(nats.clone());
    let stream = js
        .get_stream(subjects::TRACES_STREAM)
        .await
        .map_err(unavailable)?;
    let mut consumer = stream
        .create_consumer(OrderedConfig {
            deliver_policy: DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .map_err(unavailable)?;
    let mut pending = consumer.info().await.map_err(unavailable)?.num_pending;
    let mut out = Vec::new();
    if pending == 0 {
        return Ok(out);
    }
    let mut messages = consumer.messages().await.map_err(unavailable)?;
    while pending > 0 {
        let Ok(Some(msg)) = tokio::time::timeout(Duration::from_secs(10), messages.next()).await
        else {
            break;
        };
        let msg = msg.map_err(unavailable)?;
        pending = msg.info().map(|i| i.pending).unwrap_or(0);
        // `shoal.v1.traces.<actor>`, or `shoal.v1.traces.node.<node>` from a node agent.
        let actor = subjects::traces_actor(msg.subject.as_str()).unwrap_or_default();
        // A batch that does not decode is someone else's: skip it rather than fail the view.
        let Ok(request) = ExportTraceServiceRequest::decode(msg.payload.as_ref()) else {
            continue;
        };
        for mut rs in request.resource_spans {
            for ss in &mut rs.scope_spans {
                ss.spans.retain(|s| s.trace_id == want);
                for span in &mut ss.spans {
                    if attribute(&span.attributes, ACTOR_ATTRIBUTE).is_none() {
                        span.attributes.push(string_kv("shoal.exported_by", &actor));
                    }
                }
            }
            rs.scope_spans.retain(|ss| !ss.spans.is_empty());
            if !rs.scope_spans.is_empty() {
                out.push(rs);
            }
        }
    }
    Ok(out)
}

fn string_kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(opentelemetry_proto::tonic::common::v1::AnyValue {
            value: Some(AnyValueKind::StringValue(value.into())),
        }),
    }
}

pub fn hex_to_bytes(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) || hex.is_empty() {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

pub fn bytes_to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn value_text(v: &AnyValueKind) -> String {
    match v {
        AnyValueKind::StringValue(s) => s.clone(),
        AnyValueKind::BoolValue(b) => b.to_string(),
        AnyValueKind::IntValue(i) => i.to_string(),
        AnyValueKind::DoubleValue(d) => format!("{d:.3}"),
        other => format!("{other:?}"),
    }
}

pub fn attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref().map(value_text))
}

/// One line of the waterfall.
#[derive(Debug, Clone)]
pub struct Row {
    pub depth: usize,
    pub actor: String,
    pub service: String,
    pub name: String,
    pub span_id: String,
    pub parent_id: String,
    pub start_offset: Duration,
    pub duration: Duration,
    /// Attributes worth showing, `key=value`.
    pub attributes: Vec<String>,
    pub error: Option<String>,
    /// A step or log event recorded on the span above it, not a span of its own.
    pub event: bool,
}

/// Attributes every span has that say nothing about the work.
fn is_noise(key: &str) -> bool {
    key.starts_with("code.")
        || key.starts_with("thread.")
        || matches!(
            key,
            "busy_ns" | "idle_ns" | "target" | "level" | ACTOR_ATTRIBUTE | "shoal.exported_by"
        )
        || key.starts_with("otel.")
}

/// `key=value` of the attributes worth showing, leaving out `shown_elsewhere`.
fn shown_attributes(attributes: &[KeyValue], shown_elsewhere: &[&str]) -> Vec<String> {
    attributes
        .iter()
        .filter(|kv| !is_noise(&kv.key) && !shown_elsewhere.contains(&kv.key.as_str()))
        .filter_map(|kv| {
            let v = value_text(kv.value.as_ref()?.value.as_ref()?);
            (!v.is_empty()).then(|| format!("{}={v}", kv.key))
        })
        .collect()
}

/// A span's events as rows one level below it: a step ([`crate::step!`]) spans the
/// `duration_us` before its timestamp; other events (logs) are instants.
fn event_rows(span: &Span, parent: &Row, trace_start: u64) -> Vec<(u64, Row)> {
    span.events
        .iter()
        .map(|e| {
            let took = attribute(&e.attributes, "duration_us")
                .and_then(|us| us.parse::<u64>().ok())
                .map_or(Duration::ZERO, Duration::from_micros);
            let start = e.time_unix_nano.saturating_sub(took.as_nanos() as u64);
            let failed = attribute(&e.attributes, "outcome").as_deref() == Some("failed");
            let row = Row {
                depth: parent.depth + 1,
                actor: parent.actor.clone(),
                service: parent.service.clone(),
                name: e.name.clone(),
                span_id: String::new(),
                parent_id: parent.span_id.clone(),
                start_offset: Duration::from_nanos(start.saturating_sub(trace_start)),
                duration: took,
                attributes: shown_attributes(&e.attributes, &["duration_us", "outcome"]),
                error: failed.then(|| String::from("failed")),
                event: true,
            };
            (start, row)
        })
        .collect()
}

/// What the waterfall walks: a span still to expand, or an event's finished row.
enum Item {
    Span(usize, usize),
    Event(Box<Row>),
}

/// The span's own actor attribute, its nearest ancestor's, or the stream it was exported to.
fn actor_of<'a>(mut span: &'a Span, by_id: &HashMap<&[u8], &'a Span>) -> String {
    for _ in 0..64 {
        if let Some(actor) = attribute(&span.attributes, ACTOR_ATTRIBUTE) {
            return actor;
        }
        match by_id.get(span.parent_span_id.as_slice()) {
            Some(parent) => span = parent,
            None => break,
        }
    }
    attribute(&span.attributes, "shoal.exported_by").unwrap_or_default()
}

/// The spans in tree order (each after its parent, children by start time), with depth,
/// offset from the trace's first span, and the actor (own, an ancestor's, or the exporter's).
pub fn waterfall(batches: &[ResourceSpans]) -> Vec<Row> {
    let mut spans: Vec<(&Span, String)> = Vec::new();
    for rs in batches {
        let service = rs
            .resource
            .as_ref()
            .and_then(|r| attribute(&r.attributes, "service.name"))
            .unwrap_or_default();
        for ss in &rs.scope_spans {
            for span in &ss.spans {
                spans.push((span, service.clone()));
            }
        }
    }
    let Some(start) = spans.iter().map(|(s, _)| s.start_time_unix_nano).min() else {
        return Vec::new();
    };
    let by_id: HashMap<&[u8], &Span> = spans
        .iter()
        .map(|(s, _)| {
            let s: &Span = s;
            (s.span_id.as_slice(), s)
        })
        .collect();
    let actor_of = |span: &Span| actor_of(span, &by_id);
    let mut children: HashMap<&[u8], Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (i, (span, _)) in spans.iter().enumerate() {
        if by_id.contains_key(span.parent_span_id.as_slice()) {
            children
                .entry(span.parent_span_id.as_slice())
                .or_default()
                .push(i);
        } else {
            roots.push(i);
        }
    }
    roots.sort_by_key(|i| spans[*i].0.start_time_unix_nano);
    let mut rows = Vec::with_capacity(spans.len());
    let mut stack: Vec<Item> = roots.into_iter().rev().map(|i| Item::Span(i, 0)).collect();
    while let Some(item) = stack.pop() {
        let (i, depth) = match item {
            Item::Event(row) => {
                rows.push(*row);
                continue;
            }
            Item::Span(i, depth) => (i, depth),
        };
        let (span, service) = &spans[i];
        let status = span.status.as_ref();
        let error = status
            .filter(|s| s.code == StatusCode::Error as i32)
            .map(|s| s.message.clone());
        let row = Row {
            depth,
            actor: actor_of(span),
            service: service.clone(),
            name: span.name.clone(),
            span_id: bytes_to_hex(&span.span_id),
            parent_id: bytes_to_hex(&span.parent_span_id),
            start_offset: Duration::from_nanos(span.start_time_unix_nano.saturating_sub(start)),
            duration: Duration::from_nanos(
                span.end_time_unix_nano
                    .saturating_sub(span.start_time_unix_nano),
            ),
            attributes: shown_attributes(&span.attributes, &[]),
            error,
            event: false,
        };
        // Children and events in the order they started.
        let mut below: Vec<(u64, Item)> = event_rows(span, &row, start)
            .into_iter()
            .map(|(at, row)| (at, Item::Event(Box::new(row))))
            .collect();
        if let Some(kids) = children.get(span.span_id.as_slice()) {
            below.extend(
                kids.iter()
                    .map(|k| (spans[*k].0.start_time_unix_nano, Item::Span(*k, depth + 1))),
            );
        }
        below.sort_by_key(|(at, _)| *at);
        rows.push(row);
        stack.extend(below.into_iter().rev().map(|(_, item)| item));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::AnyValue;
    use opentelemetry_proto::tonic::trace::v1::span::Event;
    use opentelemetry_proto::tonic::trace::v1::ScopeSpans;

    fn kv(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(AnyValueKind::StringValue(value.into())),
            }),
        }
    }

    fn span(id: u8, parent: u8, name: &str, start: u64, end: u64, events: Vec<Event>) -> Span {
        Span {
            trace_id: vec![1; 16],
            span_id: vec![id; 8],
            parent_span_id: if parent == 0 { vec![] } else { vec![parent; 8] },
            name: name.into(),
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes: vec![kv(ACTOR_ATTRIBUTE, "scheduler")],
            events,
            ..Default::default()
        }
    }

    fn step(name: &str, at: u64, micros: &str, outcome: &str) -> Event {
        Event {
            time_unix_nano: at,
            name: name.into(),
            attributes: vec![
                kv("duration_us", micros),
                kv("outcome", outcome),
                kv("level", "INFO"),
                kv("nodes", "1000"),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn steps_are_rows_under_their_span_in_the_order_things_started() {
        let attempt = span(
            1,
            0,
            "schedule",
            1_000_000,
            9_000_000,
            vec![
                // Recorded at their ends: filtering ran 2–4 ms, scoring 4–5 ms.
                step("scheduler.filter", 4_000_000, "2000", "ok"),
                step("scheduler.score", 5_000_000, "1000", "failed"),
            ],
        );
        let bind = span(2, 1, "scheduler.bind", 6_000_000, 8_000_000, vec![]);
        let batches = vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![bind, attempt],
                ..Default::default()
            }],
            ..Default::default()
        }];
        let rows = waterfall(&batches);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "schedule",
                "scheduler.filter",
                "scheduler.score",
                "scheduler.bind"
            ]
        );
        let filter = &rows[1];
        assert!(filter.event && !rows[0].event && !rows[3].event);
        assert_eq!(filter.depth, 1);
        assert_eq!(filter.actor, "scheduler");
        assert_eq!(filter.start_offset, Duration::from_millis(1));
        assert_eq!(filter.duration, Duration::from_millis(2));
        assert_eq!(filter.attributes, ["nodes=1000"]);
        assert_eq!(filter.error, None);
        assert_eq!(rows[2].error.as_deref(), Some("failed"));
    }
}
