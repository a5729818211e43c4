//! `shoal top pods|nodes`: the latest usage samples node agents published.

use anyhow::Result;
use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use bus_schemas::api::{ListOptions, PodMetrics};
use bus_schemas::kinds::Node;
use bus_schemas::{codec, subjects};
use futures::StreamExt;

use crate::remote::Session;
use crate::table::Table;

#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// pods or nodes.
    pub what: String,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Per-container figures.
    #[arg(long)]
    pub containers: bool,
    /// Also show this application metric, scraped from pods annotated
    /// `prometheus.io/scrape: "true"` (summed over the pod's series of that name).
    #[arg(long)]
    pub metric: Option<String>,
}

/// A pod's application metric, summed over its series; `<none>` when it exposes none.
fn app_value(sample: &PodMetrics, name: &str) -> String {
    let values: Vec<f64> = sample
        .app
        .iter()
        .filter(|m| m.name == name)
        .map(|m| m.value)
        .collect();
    if values.is_empty() {
        return "<none>".into();
    }
    let total: f64 = values.iter().sum();
    if total.fract() == 0.0 && total.abs() < 1e15 {
        format!("{}", total as i64)
    } else {
        format!("{total:.3}")
    }
}

async fn latest(session: &Session, filter: String) -> Result<Vec<PodMetrics>> {
    let js = async_nats::jetstream::new(session.nats.clone());
    let stream = js
        .get_stream(subjects::METRICS_STREAM)
        .await
        .map_err(|e| anyhow::anyhow!("metrics stream unavailable: {e}"))?;
    let mut consumer = stream
        .create_consumer(OrderedConfig {
            filter_subject: filter,
            deliver_policy: DeliverPolicy::LastPerSubject,
            ..Default::default()
        })
        .await?;
    let mut pending = consumer.info().await?.num_pending;
    let mut messages = consumer.messages().await?;
    let mut out = Vec::new();
    while pending > 0 {
        let Some(msg) = messages.next().await else {
            break;
        };
        let msg = msg?;
        pending = msg.info().map(|i| i.pending).unwrap_or(0);
        if let Ok(sample) = codec::from_msgpack::<PodMetrics>(&msg.payload) {
            out.push(sample);
        }
    }
    Ok(out)
}

fn cores(m: u64) -> String {
    format!("{m}m")
}

fn mib(bytes: u64) -> String {
    if bytes < 1024 * 1024 {
        format!("{}Ki", bytes / 1024)
    } else {
        format!("{}Mi", bytes / (1024 * 1024))
    }
}

pub async fn run(session: &Session, args: TopArgs) -> Result<i32> {
    match args.what.as_str() {
        "pods" | "pod" | "po" => {
            let ns = if args.all_namespaces {
                None
            } else {
                Some(args.namespace.clone().unwrap_or_else(|| "default".into()))
            };
            let filter = format!(
                "shoal.v1.metrics.*.{}.*",
                ns.as_deref()
                    .map(subjects::encode_token)
                    .unwrap_or_else(|| "*".into())
            );
            let mut samples: Vec<PodMetrics> = latest(session, filter)
                .await?
                .into_iter()
                .filter(|s| !s.pod.is_empty())
                .collect();
            samples.sort_by(|a, b| (&a.namespace, &a.pod).cmp(&(&b.namespace, &b.pod)));
            if samples.is_empty() {
                eprintln!("No metrics yet: node agents publish them every few seconds.");
                return Ok(0);
            }
            let mut headers: Vec<String> = vec!["NAME".into()];
            if args.containers {
                headers.push("CONTAINER".into());
            }
            headers.extend(["CPU(cores)".into(), "MEMORY(bytes)".into()]);
            if let Some(name) = &args.metric {
                headers.push(name.clone());
            }
            if args.all_namespaces {
                headers.insert(0, "NAMESPACE".into());
            }
            let mut rows = Vec::new();
            for s in &samples {
                let lead = |mut row: Vec<String>| {
                    if args.all_namespaces {
                        row.insert(0, s.namespace.clone());
                    }
                    if let Some(name) = &args.metric {
                        row.push(app_value(s, name));
                    }
                    row
                };
                if args.containers {
                    for c in &s.containers {
                        rows.push(lead(vec![
                            s.pod.clone(),
                            c.name.clone(),
                            cores(c.cpu_millicores),
                            mib(c.memory_working_set_bytes),
                        ]));
                    }
                } else {
                    rows.push(lead(vec![
                        s.pod.clone(),
                        cores(s.cpu_millicores),
                        mib(s.memory_working_set_bytes),
                    ]));
                }
            }
            Table::new(headers, rows).print(true);
        }
        "nodes" | "node" | "no" => {
            let samples = latest(session, "shoal.v1.metrics.*._._".into()).await?;
            let nodes = session
                .api
                .list::<Node>(&ListOptions::default())
                .await?
                .items;
            let mut rows = Vec::new();
            for s in samples {
                let node = nodes.iter().find(|n| n.metadata.name == s.node);
                let alloc = |k: &str, scale: i128| {
                    node.and_then(|n| n.status.allocatable.get(k))
                        .map(|q| q.milli_value() / scale)
                        .unwrap_or(0)
                        .max(1) as u64
                };
                let cpu_pct = s.cpu_millicores * 100 / alloc("cpu", 1);
                let mem_pct = s.memory_working_set_bytes * 100 / alloc("memory", 1000);
                rows.push(vec![
                    s.node.clone(),
                    cores(s.cpu_millicores),
                    format!("{cpu_pct}%"),
                    mib(s.memory_working_set_bytes),
                    format!("{mem_pct}%"),
                ]);
            }
            if rows.is_empty() {
                eprintln!("No metrics yet: node agents publish them every few seconds.");
                return Ok(0);
            }
            let headers = ["NAME", "CPU(cores)", "CPU%", "MEMORY(bytes)", "MEMORY%"]
                .map(String::from)
                .to_vec();
            Table::new(headers, rows).print(true);
        }
        other => anyhow::bail!("top takes pods or nodes, not {other:?}"),
    }
    Ok(0)
}
