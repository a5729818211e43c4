//! `GET pods/<name>/log`: a container's lines from the bus' log stream (node agents ship
//! them there), streamed as text; with `follow=true` the response stays open for new lines.

use std::collections::VecDeque;

use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use bus_schemas::{subjects, Reason};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::bus::Bus;
use crate::http::{self, Request, Response};

/// The container instance (`containerID` without its scheme) whose lines to show.
fn instance_of(pod: &Value, container: &str, previous: bool) -> String {
    let statuses = ["/status/containerStatuses", "/status/initContainerStatuses"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten();
    let status = statuses
        .into_iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(container));
    let pointer = if previous {
        "/lastState/terminated/containerID"
    } else {
        "/containerID"
    };
    status
        .and_then(|s| s.pointer(pointer))
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim_start_matches("shoal://")
        .to_string()
}

fn container_names(pod: &Value) -> Vec<String> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str).map(String::from))
        .collect()
}

pub async fn serve(bus: &Bus, req: &Request, ns: &str, name: &str) -> Response {
    let pods = crate::resources::of_kind("Pod").expect("pods are served");
    let pod = match bus.get(&pods, ns, name).await {
        Ok(p) => p,
        Err(e) => return http::api_error(&e),
    };
    let names = container_names(&pod);
    let container = match req.param("container") {
        Some(c) => c.to_string(),
        None if names.len() == 1 => names[0].clone(),
        None => {
            return http::error(
                Reason::BadRequest,
                format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    names.join(" ")
                ),
            )
        }
    };
    let previous = req.flag("previous");
    let instance = instance_of(&pod, &container, previous);
    if previous && instance.is_empty() {
        return http::error(
            Reason::BadRequest,
            format!("previous terminated container {container:?} in pod {name:?} not found"),
        );
    }
    let js = async_nats::jetstream::new(bus.nats.clone());
    let stream = match js.get_stream(subjects::LOGS_STREAM).await {
        Ok(s) => s,
        Err(e) => {
            return http::error(
                Reason::ServiceUnavailable,
                format!("the log stream is unavailable: {e}"),
            )
        }
    };
    let consumer = stream
        .create_consumer(OrderedConfig {
            filter_subject: subjects::logs_of(ns, name, &container),
            deliver_policy: DeliverPolicy::All,
            ..Default::default()
        })
        .await;
    let mut consumer = match consumer {
        Ok(c) => c,
        Err(e) => return http::error(Reason::ServiceUnavailable, format!("reading logs: {e}")),
    };
    let pending = consumer.info().await.map(|i| i.num_pending).unwrap_or(0);
    let options = LogOptions {
        instance,
        follow: req.flag("follow") && !previous,
        timestamps: req.flag("timestamps"),
        tail: req.param("tailLines").and_then(|t| t.parse().ok()),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(async move {
        let Ok(messages) = consumer.messages().await else {
            return;
        };
        pump(messages, pending, options, tx).await;
    });
    http::streaming(rx, "text/plain")
}

struct LogOptions {
    instance: String,
    follow: bool,
    timestamps: bool,
    tail: Option<usize>,
}

async fn pump(
    mut messages: async_nats::jetstream::consumer::pull::Ordered,
    mut pending: u64,
    options: LogOptions,
    tx: mpsc::Sender<Bytes>,
) {
    let instance_of = |msg: &async_nats::jetstream::Message| {
        msg.headers
            .as_ref()
            .and_then(|h| h.get(subjects::HEADER_CONTAINER_ID))
            .map(|v| v.as_str().to_string())
    };
    let line = |payload: &[u8]| {
        let text = String::from_utf8_lossy(payload);
        let mut out = if options.timestamps {
            text.to_string()
        } else {
            text.split_once(' ')
                .map(|(_, l)| l.to_string())
                .unwrap_or_default()
        };
        out.push('\n');
        Bytes::from(out)
    };
    // The backlog first, cut to tailLines, then (following) whatever arrives.
    let mut backlog = VecDeque::new();
    while pending > 0 {
        let Some(Ok(msg)) = messages.next().await else {
            return;
        };
        pending = msg.info().map(|i| i.pending).unwrap_or(0);
        let mine =
            options.instance.is_empty() || instance_of(&msg).is_some_and(|i| i == options.instance);
        if mine {
            backlog.push_back(line(&msg.payload));
            if options.tail.is_some_and(|n| backlog.len() > n) {
                backlog.pop_front();
            }
        }
    }
    for l in backlog {
        if tx.send(l).await.is_err() {
            return;
        }
    }
    if !options.follow {
        return;
    }
    loop {
        tokio::select! {
            msg = messages.next() => {
                let Some(Ok(msg)) = msg else { return };
                // A restarted container writes under a new instance: follow the newest.
                if tx.send(line(&msg.payload)).await.is_err() {
                    return;
                }
            }
            _ = tx.closed() => return,
        }
    }
}
