//! The embedded trace store: finished spans go to the bounded JetStream stream
//! `SHOAL_TRACES` on `shoal.v1.traces.<actor>`, each message an OTLP
//! `ExportTraceServiceRequest` (protobuf), so `shoal trace` needs no collector. A node agent
//! process publishes everything on its own `shoal.v1.traces.node.<node>` instead, so a
//! node's credential can be allowed that one subject.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use async_nats::jetstream::{self, stream};
use bus_schemas::subjects;
use opentelemetry::trace::SpanId;
use opentelemetry::Value;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use tokio::sync::OnceCell;

/// The span attribute naming the actor that did the work (`api`, `scheduler`, …).
pub const ACTOR_ATTRIBUTE: &str = "shoal.actor";

/// What the exporter's connection adds to its connect options: the process's credential on
/// a bus with identities on.
type ConnectWith =
    Box<dyn Fn(async_nats::ConnectOptions) -> async_nats::ConnectOptions + Send + Sync>;
/// Set in a node agent process: the node every batch is published under.
static NODE: OnceLock<String> = OnceLock::new();

/// Where this process's spans go, once it knows its cluster's NATS, and how it connects.
static TARGET: OnceLock<(String, ConnectWith)> = OnceLock::new();

/// Sends this process's spans to the cluster at `url` from now on (the first call wins),
/// connecting anonymously.
pub fn export_to(url: &str) {
    export_as(url, |options| options);
}

/// [`export_to`] with a credential: `connect_with` sets it on the exporter's connect options
/// (`shoal_bus::auth::ClientAuth::apply`), as every connection on a bus with identities on
/// must.
pub fn export_as(
    url: &str,
    connect_with: impl Fn(async_nats::ConnectOptions) -> async_nats::ConnectOptions
        + Send
        + Sync
        + 'static,
) {
    let _ = TARGET.set((url.to_string(), Box::new(connect_with)));
}

/// As [`export_to`], for a node agent process: every batch goes to
/// `shoal.v1.traces.node.<node>` whatever its actor (the first call of either wins).
pub fn export_as_node(
    url: &str,
    node: &str,
    connect_with: impl Fn(async_nats::ConnectOptions) -> async_nats::ConnectOptions
        + Send
        + Sync
        + 'static,
) {
    if TARGET.get().is_none() {
        let _ = NODE.set(node.to_string());
    }
    export_as(url, connect_with);
}

/// The subject a group of spans of `actor` is published on, and whether the spans must
/// carry their actor themselves (the subject names another, so readers could not tell).
fn subject_for(actor: &str, node: Option<&str>) -> (String, bool) {
    match node {
        Some(node) => (subjects::node_traces(node), actor != subjects::NODE_ACTOR),
        None => (subjects::traces(actor), false),
    }
}

/// Writes `actor` into every span of the group that does not name its own.
fn stamp_actor(spans: &mut [SpanData], actor: &str) {
    for span in spans {
        if actor_attribute(span).is_none() {
            span.attributes.push(opentelemetry::KeyValue::new(
                ACTOR_ATTRIBUTE,
                actor.to_string(),
            ));
        }
    }
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
        let (url, connect_with) = TARGET.get()?;
        Some(
            self.js
                .get_or_try_init(|| async {
                    // A cluster's URL is a comma-separated list of its servers.
                    let servers: Vec<&str> = url
                        .split(',')
                        .map(str::trim)
                        .filter(|u| !u.is_empty())
                        .collect();
                    let nats = connect_with(async_nats::ConnectOptions::new())
                        .name("shoal-traces")
                        .max_reconnects(None)
                        .connect(servers)
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

fn actor_attribute(span: &SpanData) -> Option<&str> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == ACTOR_ATTRIBUTE)
        .and_then(|kv| match &kv.value {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        })
}

/// Groups a batch by actor, in the order actors first appear: a span without the attribute
/// takes its nearest ancestor's in the same batch, else the process's default. That is a
/// fallback: a child ends before its parent and can leave in an earlier batch, so every
/// span an actor makes names its actor itself. The actors are read in place: a batch copies
/// each actor's name once, not once per span.
pub fn by_actor(batch: Vec<SpanData>, default_actor: &str) -> Vec<(String, Vec<SpanData>)> {
    let mut actors: Vec<String> = Vec::new();
    let group_of: Vec<usize> = {
        let own: HashMap<SpanId, (SpanId, Option<&str>)> = batch
            .iter()
            .map(|s| {
                (
                    s.span_context.span_id(),
                    (s.parent_span_id, actor_attribute(s)),
                )
            })
            .collect();
        let resolve = |mut id: SpanId| -> &str {
            for _ in 0..64 {
                match own.get(&id) {
                    Some((_, Some(actor))) => return actor,
                    Some((parent, None)) => id = *parent,
                    None => break,
                }
            }
            default_actor
        };
        batch
            .iter()
            .map(|span| {
                let actor = resolve(span.span_context.span_id());
                actors.iter().position(|a| a == actor).unwrap_or_else(|| {
                    actors.push(actor.to_string());
                    actors.len() - 1
                })
            })
            .collect()
    };
    let mut groups: Vec<(String, Vec<SpanData>)> =
        actors.into_iter().map(|a| (a, Vec::new())).collect();
    for (span, group) in batch.into_iter().zip(group_of) {
        groups[group].1.push(span);
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
        for (actor, mut spans) in by_actor(batch, &self.default_actor) {
            let (subject, stamp) = subject_for(&actor, NODE.get().map(String::as_str));
            if stamp {
                stamp_actor(&mut spans, &actor);
            }
            let request = crate::otlp_encode::export_request(&spans, &self.resource);
            let ack = js
                .publish(subject, request.into())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn span(id: u64, parent: u64, actor: Option<&'static str>) -> SpanData {
        use opentelemetry::trace::{
            SpanContext, SpanKind, Status, TraceFlags, TraceId, TraceState,
        };
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(7u128),
                SpanId::from(id),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::from(parent),
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "work".into(),
            start_time: std::time::UNIX_EPOCH,
            end_time: std::time::UNIX_EPOCH,
            attributes: actor
                .map(|a| opentelemetry::KeyValue::new(ACTOR_ATTRIBUTE, a))
                .into_iter()
                .collect(),
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    #[test]
    fn spans_are_grouped_by_their_own_or_their_nearest_ancestors_actor() {
        let batch = vec![
            span(3, 2, None),
            span(2, 1, Some("api")),
            span(5, 0, Some("scheduler")),
            span(6, 99, None),
            span(4, 3, None),
        ];
        let groups: Vec<(String, Vec<u64>)> = by_actor(batch, "controllers")
            .into_iter()
            .map(|(actor, spans)| {
                let ids = spans
                    .iter()
                    .map(|s| u64::from_be_bytes(s.span_context.span_id().to_bytes()))
                    .collect();
                (actor, ids)
            })
            .collect();
        assert_eq!(
            groups,
            [
                ("api".to_string(), vec![3, 2, 4]),
                ("scheduler".to_string(), vec![5]),
                ("controllers".to_string(), vec![6]),
            ]
        );
    }

    #[test]
    fn a_node_process_publishes_every_actor_under_its_own_subject() {
        assert_eq!(
            subject_for("node", Some("n.1")),
            ("shoal.v1.traces.node.n%2E1".to_string(), false)
        );
        // Readers take the actor from the subject: another actor's spans must say theirs.
        assert_eq!(
            subject_for("api", Some("n1")),
            ("shoal.v1.traces.node.n1".to_string(), true)
        );
        assert_eq!(
            subject_for("api", None),
            ("shoal.v1.traces.api".to_string(), false)
        );
    }
}
