//! The embedded trace store: finished spans go to the bounded JetStream stream
//! `SHOAL_TRACES` on `shoal.v1.traces.<actor>`, each message an OTLP
//! `ExportTraceServiceRequest` (protobuf), so `shoal trace` needs no collector.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use async_nats::jetstream::{self, stream};
use bus_schemas::subjects;
use opentelemetry::trace::SpanId;
use opentelemetry::Value;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use prost::Message;
use tokio::sync::OnceCell;

/// The span attribute naming the actor that did the work (`api`, `scheduler`, …).
pub const ACTOR_ATTRIBUTE: &str = "shoal.actor";

/// Where this process's spans go, once it knows its cluster's NATS.
static TARGET: OnceLock<String> = OnceLock::new();

/// How the exporter's connection presents itself (its credential, the CA): the bus refuses
/// anonymous connections.
type Options = Box<dyn Fn() -> async_nats::ConnectOptions + Send + Sync>;
static OPTIONS: OnceLock<Options> = OnceLock::new();

/// Sends this process's spans to the cluster at `url` from now on (the first call wins).
pub fn export_to(url: &str) {
    let _ = TARGET.set(url.to_string());
}

/// [`export_to`], connecting with the options `options` makes (the first call wins).
pub fn export_with(
    url: &str,
    options: impl Fn() -> async_nats::ConnectOptions + Send + Sync + 'static,
) {
    let _ = OPTIONS.set(Box::new(options));
    export_to(url);
}

/// Creates the traces stream if absent: bounded by size and age, oldest dropped first.
pub async fn ensure_stream(js: &jetstream::Context, replicas: usize) -> Result<(), String> {
    js.get_or_create_stream(stream::Config {
        name: subjects::TRACES_STREAM.to_string(),
        subjects: vec![subjects::TRACES_ALL.to_string()],
        storage: stream::StorageType::File,
        max_bytes: 256 * 1024 * 1024,
        max_age: Duration::from_secs(24 * 3600),
        num_replicas: replicas,
        discard: stream::DiscardPolicy::Old,
        description: Some("Shoal trace spans (OTLP protobuf), per actor".into()),
        ..Default::default()
    })
    .await
    .map(|_| ())
    .map_err(|e| format!("creating stream {}: {e}", subjects::TRACES_STREAM))
}

#[derive(Debug)]
pub struct JetStreamExporter {
    /// The actor of spans that name none and whose ancestors in the batch name none either.
    default_actor: String,
    resource: ResourceAttributesWithSchema,
    js: OnceCell<jetstream::Context>,
}

impl JetStreamExporter {
    pub fn new(default_actor: &str) -> Self {
        JetStreamExporter {
            default_actor: default_actor.to_string(),
            resource: ResourceAttributesWithSchema::default(),
            js: OnceCell::new(),
        }
    }

    async fn context(&self) -> Option<Result<&jetstream::Context, String>> {
        let url = TARGET.get()?;
        Some(
            self.js
                .get_or_try_init(|| async {
                    let options = OPTIONS.get().map(|make| make()).unwrap_or_default();
                    let nats = options
                        .name("shoal-traces")
                        .max_reconnects(None)
                        .connect(url)
                        .await
                        .map_err(|e| format!("connecting to {url}: {e}"))?;
                    let js = jetstream::new(nats);
                    ensure_stream(&js, 1).await?;
                    Ok(js)
                })
                .await,
        )
    }
}

fn actor_attribute(span: &SpanData) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == ACTOR_ATTRIBUTE)
        .map(|kv| match &kv.value {
            Value::String(s) => s.to_string(),
            other => other.to_string(),
        })
}

/// Groups a batch by actor: a span without the attribute takes its nearest ancestor's in the
/// same batch (children end, and are exported, no later than their parents' batch in one
/// process), else the process's default.
pub fn by_actor(batch: Vec<SpanData>, default_actor: &str) -> HashMap<String, Vec<SpanData>> {
    let own: HashMap<SpanId, (SpanId, Option<String>)> = batch
        .iter()
        .map(|s| {
            (
                s.span_context.span_id(),
                (s.parent_span_id, actor_attribute(s)),
            )
        })
        .collect();
    let resolve = |mut id: SpanId| -> String {
        for _ in 0..64 {
            match own.get(&id) {
                Some((_, Some(actor))) => return actor.clone(),
                Some((parent, None)) => id = *parent,
                None => break,
            }
        }
        default_actor.to_string()
    };
    let mut groups: HashMap<String, Vec<SpanData>> = HashMap::new();
    for span in batch {
        let actor = resolve(span.span_context.span_id());
        groups.entry(actor).or_default().push(span);
    }
    groups
}

impl SpanExporter for JetStreamExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let js = match self.context().await {
            None => return Ok(()),
            Some(Err(e)) => return Err(OTelSdkError::InternalFailure(e)),
            Some(Ok(js)) => js,
        };
        for (actor, spans) in by_actor(batch, &self.default_actor) {
            let request = ExportTraceServiceRequest {
                resource_spans: group_spans_by_resource_and_scope(spans, &self.resource),
            };
            let ack = js
                .publish(subjects::traces(&actor), request.encode_to_vec().into())
                .await
                .map_err(|e| OTelSdkError::InternalFailure(e.to_string()))?;
            ack.await
                .map_err(|e| OTelSdkError::InternalFailure(e.to_string()))?;
        }
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.into();
    }
}
