//! OTLP protobuf for `SHOAL_TRACES`, written straight from the SDK's spans.
//!
//! NOTE: why not `opentelemetry-proto`'s conversion and prost. That path first copies every
//! span into the generated message types (a `String` per attribute key and string value, a
//! `Vec` per id, per event and per attribute list), encodes them, then frees them all: in a
//! profile at a 1.0 sample ratio, 86 % of the export thread's samples (the copying alone,
//! 56 %), on a machine whose cores the actors need. Here each field is written once into one
//! buffer. The bytes are the same `ExportTraceServiceRequest` (the tests decode them with the
//! generated types and compare them with the conversion's, byte for byte), so readers are
//! unchanged. The OTLP exporter to a collector still uses `opentelemetry-otlp`.

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_proto::tonic::common::v1::InstrumentationScope as ProtoScope;
use opentelemetry_proto::tonic::resource::v1::Resource as ProtoResource;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::trace::SpanData;
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, WireType};

/// `spans` as one `ExportTraceServiceRequest` of `resource`, grouped by instrumentation
/// scope in the order scopes first appear.
pub fn export_request(spans: &[SpanData], resource: &ResourceAttributesWithSchema) -> Vec<u8> {
    let mut scopes: Vec<&InstrumentationScope> = Vec::new();
    for span in spans {
        if !scopes.contains(&&span.instrumentation_scope) {
            scopes.push(&span.instrumentation_scope);
        }
    }
    let mut buf = Vec::with_capacity(spans.len() * 512);
    // ExportTraceServiceRequest.resource_spans = 1
    nested(&mut buf, 1, |buf| {
        // ResourceSpans.resource = 1
        let proto_resource = ProtoResource {
            attributes: resource.attributes.0.clone(),
            dropped_attributes_count: 0,
            entity_refs: vec![],
        };
        prost::encoding::message::encode(1, &proto_resource, buf);
        for scope in &scopes {
            // ResourceSpans.scope_spans = 2
            nested(buf, 2, |buf| {
                let proto_scope: ProtoScope = (*scope, None).into();
                // ScopeSpans.scope = 1
                prost::encoding::message::encode(1, &proto_scope, buf);
                for span in spans.iter().filter(|s| &s.instrumentation_scope == *scope) {
                    // ScopeSpans.spans = 2
                    nested(buf, 2, |buf| span_fields(span, buf));
                }
                // ScopeSpans.schema_url = 3
                string(buf, 3, scope.schema_url().unwrap_or_default());
            });
        }
        // ResourceSpans.schema_url = 3
        string(buf, 3, resource.schema_url.as_deref().unwrap_or_default());
    });
    buf
}

fn span_fields(span: &SpanData, buf: &mut Vec<u8>) {
    let context = &span.span_context;
    bytes(buf, 1, &context.trace_id().to_bytes());
    bytes(buf, 2, &context.span_id().to_bytes());
    string(buf, 3, &context.trace_state().header());
    if span.parent_span_id != SpanId::INVALID {
        bytes(buf, 4, &span.parent_span_id.to_bytes());
    }
    string(buf, 5, &span.name);
    varint(buf, 6, span_kind(&span.span_kind));
    fixed64(buf, 7, nanos(span.start_time));
    fixed64(buf, 8, nanos(span.end_time));
    for kv in &span.attributes {
        nested(buf, 9, |buf| key_value(kv, buf));
    }
    varint(buf, 10, u64::from(span.dropped_attributes_count));
    for event in &span.events.events {
        nested(buf, 11, |buf| {
            fixed64(buf, 1, nanos(event.timestamp));
            string(buf, 2, &event.name);
            for kv in &event.attributes {
                nested(buf, 3, |buf| key_value(kv, buf));
            }
            varint(buf, 4, u64::from(event.dropped_attributes_count));
        });
    }
    varint(buf, 12, u64::from(span.events.dropped_count));
    for link in &span.links.links {
        nested(buf, 13, |buf| {
            let linked = &link.span_context;
            bytes(buf, 1, &linked.trace_id().to_bytes());
            bytes(buf, 2, &linked.span_id().to_bytes());
            string(buf, 3, &linked.trace_state().header());
            for kv in &link.attributes {
                nested(buf, 4, |buf| key_value(kv, buf));
            }
            varint(buf, 5, u64::from(link.dropped_attributes_count));
            fixed32(
                buf,
                6,
                span_flags(linked.is_remote(), linked.trace_flags().to_u8()),
            );
        });
    }
    varint(buf, 14, u64::from(span.links.dropped_count));
    // Status: always present, as the conversion makes it.
    nested(buf, 15, |buf| {
        if let Status::Error { description } = &span.status {
            string(buf, 2, description);
        }
        let code = match span.status {
            Status::Unset => 0,
            Status::Ok => 1,
            Status::Error { .. } => 2,
        };
        varint(buf, 3, code);
    });
    // Last, though the schema lists it after the parent: prost writes fields in tag order.
    fixed32(
        buf,
        16,
        span_flags(span.parent_span_is_remote, context.trace_flags().to_u8()),
    );
}

/// SpanFlags: the W3C trace flags, plus "whether the parent is remote is known" and, when
/// it is, "remote".
fn span_flags(parent_is_remote: bool, trace_flags: u8) -> u32 {
    const HAS_IS_REMOTE: u32 = 0x100;
    const IS_REMOTE: u32 = 0x200;
    let mut flags = u32::from(trace_flags) | HAS_IS_REMOTE;
    if parent_is_remote {
        flags |= IS_REMOTE;
    }
    flags
}

fn span_kind(kind: &SpanKind) -> u64 {
    match kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    }
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn key_value(kv: &KeyValue, buf: &mut Vec<u8>) {
    string(buf, 1, kv.key.as_str());
    nested(buf, 2, |buf| any_value(&kv.value, buf));
}

/// AnyValue's oneof: written even when it holds a default (an empty string is a value).
fn any_value(value: &Value, buf: &mut Vec<u8>) {
    match value {
        Value::Bool(b) => oneof_varint(buf, 2, u64::from(*b)),
        Value::I64(i) => oneof_varint(buf, 3, *i as u64),
        Value::F64(f) => {
            encode_key(4, WireType::SixtyFourBit, buf);
            buf.extend_from_slice(&f.to_le_bytes());
        }
        Value::String(s) => oneof_string(buf, 1, s.as_str()),
        Value::Array(array) => nested(buf, 5, |buf| array_values(array, buf)),
        // A kind of value newer than this code: its text, rather than nothing.
        other => oneof_string(buf, 1, &other.to_string()),
    }
}

fn array_values(array: &Array, buf: &mut Vec<u8>) {
    // ArrayValue.values = 1, each an AnyValue.
    let mut each = |value: Value| nested(buf, 1, |buf| any_value(&value, buf));
    match array {
        Array::Bool(v) => v.iter().for_each(|b| each(Value::Bool(*b))),
        Array::I64(v) => v.iter().for_each(|i| each(Value::I64(*i))),
        Array::F64(v) => v.iter().for_each(|f| each(Value::F64(*f))),
        // Written from the borrowed text: wrapping each in a `Value` would copy it.
        Array::String(v) => v
            .iter()
            .for_each(|s: &StringValue| nested(buf, 1, |buf| oneof_string(buf, 1, s.as_str()))),
        other => each(Value::String(other.to_string().into())),
    }
}

/// A length-delimited field whose body `write` appends. The length goes in front once the
/// body is written: one byte is reserved, and the body moves along when the length needs
/// more (a span's attributes, a batch's spans), which costs a copy of the body, not a pass
/// that measures every field first.
fn nested(buf: &mut Vec<u8>, tag: u32, write: impl FnOnce(&mut Vec<u8>)) {
    encode_key(tag, WireType::LengthDelimited, buf);
    let at = buf.len();
    buf.push(0);
    write(buf);
    let len = (buf.len() - at - 1) as u64;
    if len < 0x80 {
        buf[at] = len as u8;
    } else {
        let mut prefix = [0u8; 10];
        let width = encoded_len_varint(len);
        encode_varint(len, &mut &mut prefix[..]);
        buf.splice(at..at + 1, prefix[..width].iter().copied());
    }
}

/// Proto3 leaves out fields that hold their default; so does the generated encoder.
fn string(buf: &mut Vec<u8>, tag: u32, value: &str) {
    bytes(buf, tag, value.as_bytes());
}

fn bytes(buf: &mut Vec<u8>, tag: u32, value: &[u8]) {
    if !value.is_empty() {
        delimited(buf, tag, value);
    }
}

fn oneof_string(buf: &mut Vec<u8>, tag: u32, value: &str) {
    delimited(buf, tag, value.as_bytes());
}

fn delimited(buf: &mut Vec<u8>, tag: u32, value: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(value.len() as u64, buf);
    buf.extend_from_slice(value);
}

fn varint(buf: &mut Vec<u8>, tag: u32, value: u64) {
    if value != 0 {
        oneof_varint(buf, tag, value);
    }
}

fn oneof_varint(buf: &mut Vec<u8>, tag: u32, value: u64) {
    encode_key(tag, WireType::Varint, buf);
    encode_varint(value, buf);
}

fn fixed64(buf: &mut Vec<u8>, tag: u32, value: u64) {
    if value != 0 {
        encode_key(tag, WireType::SixtyFourBit, buf);
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

fn fixed32(buf: &mut Vec<u8>, tag: u32, value: u32) {
    if value != 0 {
        encode_key(tag, WireType::ThirtyTwoBit, buf);
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::time::Duration;

    use opentelemetry::trace::{Event, Link, SpanContext, TraceFlags, TraceId, TraceState};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use opentelemetry_sdk::Resource;
    use prost::Message;

    use super::*;

    fn resource() -> ResourceAttributesWithSchema {
        let resource = Resource::builder()
            .with_service_name("shoal-api")
            .with_attribute(KeyValue::new("process.pid", 4242i64))
            .build();
        (&resource).into()
    }

    fn context(trace: u128, span: u64, remote: bool) -> SpanContext {
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            TraceFlags::SAMPLED,
            remote,
            TraceState::from_key_value([("vendor", "x1")]).unwrap(),
        )
    }

    /// Every kind of field a span can hold: each value type and array type, an empty string,
    /// events, links, dropped counts, remote and local parents, and every status.
    fn span(i: u64, scope: &InstrumentationScope) -> SpanData {
        let at = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_000_000_000 + i * 1_000);
        let mut events = SpanEvents::default();
        events.events.push(Event::new(
            "api.cas_write",
            at + Duration::from_micros(3),
            vec![
                KeyValue::new("duration_us", 17i64),
                KeyValue::new("write", "conflict"),
                KeyValue::new("negative", -5i64),
            ],
            1,
        ));
        events.dropped_count = (i % 3) as u32;
        let mut links = SpanLinks::default();
        if i.is_multiple_of(4) {
            links.links.push(Link::new(
                context(7, 8, true),
                vec![KeyValue::new("why", "follows")],
                0,
            ));
            links.dropped_count = 2;
        }
        SpanData {
            span_context: context(0xabc0 + u128::from(i), 0x10 + i, false),
            parent_span_id: if i.is_multiple_of(5) {
                SpanId::INVALID
            } else {
                SpanId::from(0x1000 + i)
            },
            parent_span_is_remote: i % 2 == 1,
            span_kind: [SpanKind::Server, SpanKind::Internal, SpanKind::Client][i as usize % 3]
                .clone(),
            name: Cow::Owned(format!("reconcile-{i}-{}", "x".repeat(i as usize % 200))),
            start_time: at,
            end_time: at + Duration::from_millis(i),
            attributes: vec![
                KeyValue::new("shoal.actor", "controllers"),
                KeyValue::new("resource_version", i as i64),
                KeyValue::new("ready", i.is_multiple_of(2)),
                KeyValue::new("ratio", 0.25 * i as f64),
                KeyValue::new("empty", ""),
                KeyValue::new(
                    "names",
                    Value::Array(vec![StringValue::from("a"), "b".into()].into()),
                ),
                KeyValue::new("flags", Value::Array(vec![true, false].into())),
                KeyValue::new("counts", Value::Array(vec![1i64, -2].into())),
                KeyValue::new("weights", Value::Array(vec![0.5f64].into())),
            ],
            dropped_attributes_count: (i % 2) as u32,
            events,
            links,
            status: match i % 3 {
                0 => Status::Unset,
                1 => Status::Ok,
                _ => Status::error(format!("conflict at {i}")),
            },
            instrumentation_scope: scope.clone(),
        }
    }

    fn reference(
        spans: &[SpanData],
        resource: &ResourceAttributesWithSchema,
    ) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(spans.to_vec(), resource),
        }
    }

    #[test]
    fn a_batch_is_the_same_bytes_the_generated_encoder_writes() {
        let scope = InstrumentationScope::builder("shoal").build();
        // Enough spans that every level's length takes more than one byte.
        let spans: Vec<SpanData> = (0..300).map(|i| span(i, &scope)).collect();
        let resource = resource();
        let ours = export_request(&spans, &resource);
        let theirs = reference(&spans, &resource);
        assert!(ours.len() > 16_384, "{} bytes", ours.len());
        assert_eq!(
            ExportTraceServiceRequest::decode(ours.as_slice()).unwrap(),
            theirs
        );
        assert!(
            ours == theirs.encode_to_vec(),
            "same message, different bytes"
        );
    }

    #[test]
    fn spans_of_several_scopes_are_grouped_by_scope() {
        let shoal = InstrumentationScope::builder("shoal").build();
        let other = InstrumentationScope::builder("other")
            .with_version("1.2")
            .with_schema_url("https://opentelemetry.io/schemas/1.21.0")
            .build();
        let spans = vec![span(1, &shoal), span(2, &other), span(3, &shoal)];
        let resource = resource();
        let sorted = |mut request: ExportTraceServiceRequest| {
            for rs in &mut request.resource_spans {
                rs.scope_spans.sort_by(|a, b| {
                    a.scope
                        .as_ref()
                        .unwrap()
                        .name
                        .cmp(&b.scope.as_ref().unwrap().name)
                });
            }
            request
        };
        let ours = ExportTraceServiceRequest::decode(export_request(&spans, &resource).as_slice())
            .unwrap();
        assert_eq!(ours.resource_spans[0].scope_spans.len(), 2);
        assert_eq!(sorted(ours), sorted(reference(&spans, &resource)));
    }

    #[test]
    fn an_empty_batch_decodes_as_the_conversion_makes_it() {
        let resource = resource();
        let ours =
            ExportTraceServiceRequest::decode(export_request(&[], &resource).as_slice()).unwrap();
        assert_eq!(ours, reference(&[], &resource));
    }
}
