//! `metrics.k8s.io/v1beta1` (what `kubectl top` reads): PodMetrics and NodeMetrics built from
//! the latest usage samples node agents publish on `shoal.v1.metrics.…`.

use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use bus_schemas::api::PodMetrics;
use bus_schemas::{codec, subjects, Reason};
use futures::StreamExt;
use hyper::Method;
use serde_json::{json, Value};

use crate::bus::Bus;
use crate::http::{self, Request, Response};

pub const GROUP: &str = "metrics.k8s.io";
pub const VERSION: &str = "v1beta1";

/// How long the window of one sample is: the agents' sampling period.
const WINDOW: &str = "5s";

pub fn resource_list() -> Value {
    json!({
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{VERSION}"),
        "resources": [
            {"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"]},
            {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]},
        ],
    })
}

pub fn aggregated_resources() -> Vec<Value> {
    [("nodes", "NodeMetrics", "Cluster"), ("pods", "PodMetrics", "Namespaced")]
        .iter()
        .map(|(plural, kind, scope)| {
            json!({"resource": plural, "responseKind": {"group": GROUP, "version": VERSION, "kind": kind},
                   "scope": scope, "singularResource": "", "verbs": ["get", "list"]})
        })
        .collect()
}

async fn latest(bus: &Bus, filter: String) -> Result<Vec<PodMetrics>, String> {
    let js = async_nats::jetstream::new(bus.nats.clone());
    let stream = js
        .get_stream(subjects::METRICS_STREAM)
        .await
        .map_err(|e| format!("the metrics stream is unavailable: {e}"))?;
    let mut consumer = stream
        .create_consumer(OrderedConfig {
            filter_subject: filter,
            deliver_policy: DeliverPolicy::LastPerSubject,
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    let mut pending = consumer
        .info()
        .await
        .map_err(|e| e.to_string())?
        .num_pending;
    let mut messages = consumer.messages().await.map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while pending > 0 {
        let Some(msg) = messages.next().await else {
            break;
        };
        let msg = msg.map_err(|e| e.to_string())?;
        pending = msg.info().map(|i| i.pending).unwrap_or(0);
        if let Ok(sample) = codec::from_msgpack::<PodMetrics>(&msg.payload) {
            out.push(sample);
        }
    }
    Ok(out)
}

fn usage(cpu_millicores: u64, memory: u64) -> Value {
    json!({"cpu": format!("{cpu_millicores}m"), "memory": format!("{}Ki", memory / 1024)})
}

fn node_metrics(s: &PodMetrics) -> Value {
    json!({
        "kind": "NodeMetrics", "apiVersion": format!("{GROUP}/{VERSION}"),
        "metadata": {"name": s.node, "creationTimestamp": s.timestamp},
        "timestamp": s.timestamp, "window": WINDOW,
        "usage": usage(s.cpu_millicores, s.memory_working_set_bytes),
    })
}

fn pod_metrics(s: &PodMetrics) -> Value {
    let containers: Vec<Value> = s
        .containers
        .iter()
        .map(|c| json!({"name": c.name, "usage": usage(c.cpu_millicores, c.memory_working_set_bytes)}))
        .collect();
    json!({
        "kind": "PodMetrics", "apiVersion": format!("{GROUP}/{VERSION}"),
        "metadata": {"name": s.pod, "namespace": s.namespace, "creationTimestamp": s.timestamp},
        "timestamp": s.timestamp, "window": WINDOW, "containers": containers,
    })
}

pub async fn serve(
    bus: &Bus,
    req: &Request,
    plural: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Response {
    if req.method != Method::GET {
        return http::method_not_allowed(&req.method, &req.path);
    }
    let (filter, kind) = match plural {
        "nodes" => ("shoal.v1.metrics.*._._".to_string(), "NodeMetrics"),
        "pods" => (
            format!(
                "shoal.v1.metrics.*.{}.*",
                namespace
                    .map(subjects::encode_token)
                    .unwrap_or_else(|| "*".into())
            ),
            "PodMetrics",
        ),
        _ => return http::not_found(&req.path),
    };
    let samples = match latest(bus, filter).await {
        Ok(s) => s,
        Err(e) => return http::error(Reason::ServiceUnavailable, e),
    };
    let items: Vec<Value> = samples
        .iter()
        .filter(|s| (kind == "NodeMetrics") == s.pod.is_empty())
        .filter(|s| name.is_none_or(|n| n == if s.pod.is_empty() { &s.node } else { &s.pod }))
        .map(|s| {
            if s.pod.is_empty() {
                node_metrics(s)
            } else {
                pod_metrics(s)
            }
        })
        .collect();
    if let Some(name) = name {
        return match items.into_iter().next() {
            Some(item) => http::json(&item),
            None => http::error(
                Reason::NotFound,
                format!("{} {name:?} not found", plural.trim_end_matches('s')),
            ),
        };
    }
    http::json(&json!({
        "kind": format!("{kind}List"), "apiVersion": format!("{GROUP}/{VERSION}"),
        "metadata": {}, "items": items,
    }))
}
