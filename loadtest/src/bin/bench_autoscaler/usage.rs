//! Synthetic usage samples for pods on hollow nodes (which publish none): the message a node
//! agent publishes (`PodMetrics`, msgpack, on `shoal.v1.metrics.<node>.<ns>.<pod>`), sent on
//! a connection with that node's identity, the only one allowed to publish there.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use bus_schemas::api::{ContainerMetrics, PodMetrics};
use bus_schemas::kinds::Pod;
use bus_schemas::subjects;
use shoal_bus::Informer;

/// Millicores for (pod index, seconds since the start).
pub type Load = Arc<dyn Fn(usize, f64) -> u64 + Send + Sync>;

/// One sample of `pod`'s main container at `cpu_millicores`.
pub fn sample(pod: &Pod, cpu_millicores: u64) -> PodMetrics {
    let memory = 8 << 20;
    PodMetrics {
        namespace: pod.metadata.namespace.clone(),
        pod: pod.metadata.name.clone(),
        node: pod.spec.node_name.clone(),
        timestamp: chrono::Utc::now(),
        cpu_millicores,
        memory_working_set_bytes: memory,
        containers: pod
            .spec
            .containers
            .iter()
            .map(|c| ContainerMetrics {
                name: c.name.clone(),
                cpu_millicores,
                memory_working_set_bytes: memory,
            })
            .collect(),
        app: Vec::new(),
    }
}

/// Publishes a sample of every Running pod in `namespace` every `period`, as its node (one
/// connection per node, from `nodes`), at `load`. Returns the task; abort it to stop.
pub fn publish_every(
    period: Duration,
    pods: Informer<Pod>,
    namespace: String,
    nodes: HashMap<String, async_nats::Client>,
    load: Load,
) -> tokio::task::JoinHandle<Result<()>> {
    tokio::spawn(async move {
        let start = Instant::now();
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let t = start.elapsed().as_secs_f64();
            let mut all = pods.list(
                Some(&namespace),
                &bus_schemas::selector::Selector::everything(),
            );
            all.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            for (i, pod) in all.iter().enumerate() {
                if pod.status.phase != "Running" {
                    continue;
                }
                let Some(nats) = nodes.get(&pod.spec.node_name) else {
                    continue;
                };
                let body = bus_schemas::codec::to_msgpack(&sample(pod, load(i, t)))?;
                let subject = subjects::metrics(
                    &pod.spec.node_name,
                    &pod.metadata.namespace,
                    &pod.metadata.name,
                );
                nats.publish(subject, body.into()).await?;
            }
            for nats in nodes.values() {
                nats.flush().await?;
            }
        }
    })
}

/// `target` ± `amplitude` (a fraction) over a `period_s` sine, every pod in phase, so their
/// average swings the whole amplitude too.
pub fn oscillating(target: f64, amplitude: f64, period_s: f64) -> Load {
    Arc::new(move |_, t| {
        let x = target * (1.0 + amplitude * (std::f64::consts::TAU * t / period_s).sin());
        x.round().max(0.0) as u64
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_oscillation_swings_the_whole_amplitude_around_the_target_and_no_further() {
        let load = super::oscillating(100.0, 0.05, 60.0);
        let values: Vec<u64> = (0..600u32)
            .map(|i| load(i as usize % 4, f64::from(i) / 10.0))
            .collect();
        assert_eq!(values.iter().min(), Some(&95));
        assert_eq!(values.iter().max(), Some(&105));
    }
}
