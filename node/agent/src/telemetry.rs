//! Logs, metrics and exec: what a node offers besides running pods.
//!
//! Log lines are shipped to `shoal.v1.logs.<node>.<ns>.<pod>.<container>` (captured by the bounded
//! `SHOAL_LOGS` stream, so `shoal logs` needs no connection to the node); usage samples go to
//! `shoal.v1.metrics.<node>.<ns>.<pod>` every few seconds (the `SHOAL_METRICS` stream keeps
//! the latest). Exec is request/reply on `shoal.v1.agent.<node>.exec`: one-shot here, or
//! the start of a streaming session ([`crate::exec_session`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use bus_schemas::api::{AppMetric, ContainerMetrics, ExecReply, ExecRequest, PodMetrics};
use bus_schemas::kinds::Pod;
use bus_schemas::{codec, subjects};
use futures::StreamExt;
use shoal_bus::informer::INDEX_NODE;
use shoal_bus::Informer;
use shoal_node::logs::LogReader;

use crate::agent::AgentCtx;

/// Ships one container instance's log lines until dropped (then drains what is left).
pub struct LogShipper {
    stop: Arc<AtomicBool>,
}

impl Drop for LogShipper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

pub fn ship_logs(
    nats: async_nats::Client,
    reader: LogReader,
    subject: String,
    container_id: String,
    from_start: bool,
) -> LogShipper {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let handle = tokio::runtime::Handle::current();
    // NOTE: one thread per running container: the log follower blocks on the file. Fine for a
    // real node's tens of containers; hollow nodes ship no logs.
    std::thread::spawn(move || {
        let Ok(mut follower) = reader.follow(from_start) else {
            return;
        };
        let mut idle_after_stop = 0;
        loop {
            let stopping = flag.load(Ordering::Acquire);
            match follower.next_line(Duration::from_millis(if stopping { 50 } else { 250 })) {
                Some(line) => {
                    let mut headers = HeaderMap::new();
                    headers.insert(subjects::HEADER_CONTAINER_ID, container_id.as_str());
                    headers.insert(subjects::HEADER_LOG_STREAM, line.stream.as_str());
                    let body = format!("{} {}", line.time, line.content);
                    let _ = handle.block_on(nats.publish_with_headers(
                        subject.clone(),
                        headers,
                        body.into(),
                    ));
                }
                None if stopping => {
                    idle_after_stop += 1;
                    if idle_after_stop >= 2 {
                        let _ = handle.block_on(nats.flush());
                        return;
                    }
                }
                None => {}
            }
        }
    });
    LogShipper { stop }
}

/// Answers exec requests for pods on this node.
pub async fn serve_exec(ctx: Arc<AgentCtx>, nats: async_nats::Client, pods: Informer<Pod>) {
    let subject = subjects::agent_request(&ctx.config.node_name, "exec");
    let Ok(mut sub) = nats.subscribe(subject.clone()).await else {
        tracing::error!(%subject, "cannot subscribe for exec requests");
        return;
    };
    while let Some(msg) = sub.next().await {
        let (ctx, nats, pods) = (ctx.clone(), nats.clone(), pods.clone());
        tokio::spawn(async move {
            let Some(reply_to) = msg.reply.clone() else {
                return;
            };
            let reply = match codec::from_msgpack::<ExecRequest>(&msg.payload) {
                Ok(req) => exec(&ctx, &nats, &pods, req).await,
                Err(e) => ExecReply {
                    exit_code: -1,
                    error: format!("malformed exec request: {e}"),
                    ..Default::default()
                },
            };
            if let Ok(body) = codec::to_msgpack(&reply) {
                let _ = nats.publish(reply_to, body.into()).await;
            }
        });
    }
}

async fn exec(
    ctx: &Arc<AgentCtx>,
    nats: &async_nats::Client,
    pods: &Informer<Pod>,
    req: ExecRequest,
) -> ExecReply {
    let fail = |error: String| ExecReply {
        exit_code: -1,
        error,
        ..Default::default()
    };
    let container = match find_container(ctx, pods, &req).await {
        Ok(id) => id,
        Err(e) => return fail(e),
    };
    if !req.session.is_empty() {
        return crate::exec_session::start(ctx, nats, container, req).await;
    }
    let timeout = Duration::from_secs(if req.timeout_seconds == 0 {
        60
    } else {
        req.timeout_seconds as u64
    });
    let request = shoal_node::runtime::ExecRequest::new(req.command.clone(), timeout);
    match ctx.call(move |rt| rt.exec(&container, &request)).await {
        Ok(r) => ExecReply {
            exit_code: r.exit_code,
            stdout: r.stdout,
            stderr: r.stderr,
            ..Default::default()
        },
        Err(e) => fail(e.to_string()),
    }
}

/// The id of the running container `req` names (the pod's first when it names none).
async fn find_container(
    ctx: &Arc<AgentCtx>,
    pods: &Informer<Pod>,
    req: &ExecRequest,
) -> Result<String, String> {
    let Some(pod) = pods.get(&req.namespace, &req.pod) else {
        return Err(format!("pod {}/{} not found", req.namespace, req.pod));
    };
    if pod.spec.node_name != ctx.config.node_name {
        return Err(format!(
            "pod {}/{} is not on node {}",
            req.namespace, req.pod, ctx.config.node_name
        ));
    }
    let name = if req.container.is_empty() {
        pod.spec
            .containers
            .first()
            .map(|c| c.name.clone())
            .unwrap_or_default()
    } else {
        req.container.clone()
    };
    let uid = pod.metadata.uid.clone();
    let containers = ctx
        .call(|rt| rt.list_containers())
        .await
        .unwrap_or_default();
    let mut candidates: Vec<_> = containers
        .into_iter()
        .filter(|c| c.sandbox_id == uid && c.name == name)
        .collect();
    candidates.sort_by_key(|c| c.started_at);
    match candidates.pop() {
        Some(c) => Ok(c.id),
        None => Err(format!(
            "container {name:?} is not running in pod {}/{}",
            req.namespace, req.pod
        )),
    }
}

/// Publishes CPU and memory usage of every pod on this node, and the node's total.
pub async fn publish_metrics(
    ctx: Arc<AgentCtx>,
    nats: async_nats::Client,
    pods: Informer<Pod>,
    period: Duration,
) {
    let node = ctx.config.node_name.clone();
    let mut previous: HashMap<String, (Instant, u64)> = HashMap::new();
    loop {
        tokio::time::sleep(period).await;
        let containers = ctx
            .call(|rt| rt.list_containers())
            .await
            .unwrap_or_default();
        let now = Instant::now();
        let mut node_total = PodMetrics {
            node: node.clone(),
            timestamp: chrono::Utc::now(),
            ..Default::default()
        };
        let hollow = ctx.backend.is_hollow();
        let mut published = false;
        for pod in pods.by_index(INDEX_NODE, &node) {
            if hollow && !crate::hollow_usage::annotated(&pod) {
                continue;
            }
            published = true;
            let uid = pod.metadata.uid.clone();
            let stats = {
                let uid = uid.clone();
                ctx.call(move |rt| rt.sandbox_stats(&uid)).await
            };
            let Ok(stats) = stats else { continue };
            // A pod's first reading has nothing to take a rate against: like metrics-server,
            // publish nothing rather than a zero the autoscaler would read as idle.
            let Some(cpu_millicores) = rate(&mut previous, uid.clone(), now, stats.cpu_usage_ns)
            else {
                continue;
            };
            let mut sample = PodMetrics {
                namespace: pod.metadata.namespace.clone(),
                pod: pod.metadata.name.clone(),
                node: node.clone(),
                timestamp: chrono::Utc::now(),
                cpu_millicores,
                memory_working_set_bytes: stats.memory_working_set_bytes,
                containers: Vec::new(),
                app: Vec::new(),
            };
            for c in containers.iter().filter(|c| c.sandbox_id == uid) {
                let id = c.id.clone();
                if let Ok(cs) = ctx.call(move |rt| rt.container_stats(&id)).await {
                    sample.containers.push(ContainerMetrics {
                        name: c.name.clone(),
                        cpu_millicores: rate(&mut previous, c.id.clone(), now, cs.cpu_usage_ns)
                            .unwrap_or(0),
                        memory_working_set_bytes: cs.memory_working_set_bytes,
                    });
                }
            }
            if hollow {
                crate::hollow_usage::apply(&pod, &mut sample);
            }
            sample.app = scrape_app_metrics(&ctx, &pod, period).await;
            node_total.cpu_millicores += sample.cpu_millicores;
            node_total.memory_working_set_bytes += sample.memory_working_set_bytes;
            if let Ok(body) = codec::to_msgpack(&sample) {
                let subject = subjects::metrics(&node, &sample.namespace, &sample.pod);
                let _ = nats.publish(subject, body.into()).await;
            }
        }
        if hollow && !published {
            continue;
        }
        if let Ok(body) = codec::to_msgpack(&node_total) {
            let _ = nats
                .publish(subjects::metrics(&node, "", ""), body.into())
                .await;
        }
        previous.retain(|_, (at, _)| now.duration_since(*at) < period * 3);
    }
}

/// The pod's own metrics when it asks to be scraped; a failed scrape is logged and sends
/// none (the HPA then sees the metric missing, not a zero).
async fn scrape_app_metrics(ctx: &AgentCtx, pod: &Pod, period: Duration) -> Vec<AppMetric> {
    let target = match crate::scrape::Target::of(pod) {
        Ok(Some(target)) => target,
        Ok(None) => return Vec::new(),
        Err(e) => {
            tracing::debug!(pod = %pod.metadata.name, error = %e, "not scraped");
            return Vec::new();
        }
    };
    let timeout = period.min(Duration::from_secs(2));
    match crate::scrape::scrape(ctx.hostnet.clone(), target, timeout).await {
        Ok(series) => series,
        Err(e) => {
            tracing::debug!(pod = %pod.metadata.name, error = %e, "scrape failed");
            Vec::new()
        }
    }
}

/// Millicores used since the previous sample of the same cgroup; `None` on its first
/// sample, or when the counter went backwards (a recreated cgroup).
fn rate(
    previous: &mut HashMap<String, (Instant, u64)>,
    key: String,
    now: Instant,
    usage_ns: u64,
) -> Option<u64> {
    let millicores = match previous.get(&key) {
        Some((at, before)) if usage_ns >= *before => {
            let elapsed = now.duration_since(*at).as_nanos().max(1);
            let used = u128::from(usage_ns - before) * 1000 / elapsed;
            Some(u64::try_from(used).unwrap_or(u64::MAX))
        }
        _ => None,
    };
    previous.insert(key, (now, usage_ns));
    millicores
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_rate_needs_two_readings_and_survives_a_reset_counter() {
        let mut previous = HashMap::new();
        let start = Instant::now();
        assert_eq!(rate(&mut previous, "c".into(), start, 5_000_000_000), None);
        // 500 ms of CPU over one second: half a core.
        let later = start + Duration::from_secs(1);
        assert_eq!(
            rate(&mut previous, "c".into(), later, 5_500_000_000),
            Some(500)
        );
        // A counter that went backwards is a new cgroup: no rate until the next reading.
        let again = later + Duration::from_secs(1);
        assert_eq!(rate(&mut previous, "c".into(), again, 1_000), None);
        let then = again + Duration::from_millis(250);
        assert_eq!(
            rate(&mut previous, "c".into(), then, 1_000 + 250_000_000),
            Some(1000)
        );
    }
}
