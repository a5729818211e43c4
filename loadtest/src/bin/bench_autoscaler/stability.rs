//! Stability: a Deployment on a hollow node whose pods' usage the benchmark publishes,
//! oscillating ±5 % around the HPA's target for `--seconds`; every decision the autoscaler
//! publishes is read, and the rescales among them counted (expected 0: Kubernetes' 10 %
//! tolerance swallows a ±5 % swing).
//!
//! Synthetic samples rather than real pods: a real pod's cgroup CPU usage on this loaded
//! machine wanders by more than ±5 % on its own, so the swing would not be the one asked for.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;

use crate::objects::{cpu_hpa, deployment, wait_until};
use crate::usage;

const NAMESPACE: &str = "default";
const NAME: &str = "steady";
const REQUEST_MILLICORES: f64 = 100.0;

#[derive(Args)]
pub struct StabilityArgs {
    /// How long the load oscillates (the issue: 5 minutes).
    #[arg(long, default_value_t = 300)]
    seconds: u64,
    #[arg(long, default_value_t = 4)]
    replicas: i32,
    /// The HPA's CPU utilization target, in percent of the request.
    #[arg(long, default_value_t = 50)]
    target_percent: u32,
    /// The swing around the target, in percent of it.
    #[arg(long, default_value_t = 5.0)]
    swing_percent: f64,
    /// Period of the oscillation.
    #[arg(long, default_value_t = 60.0)]
    oscillation_seconds: f64,
}

pub fn run(args: StabilityArgs) -> Result<()> {
    let cluster = crate::hollow_cluster::start(1)?;
    let autoscaler = cluster.autoscaler()?;
    let outcome = cluster.runtime.block_on(async {
        let api = &cluster.api;
        let pod_spec = serde_json::json!({
            "containers": [{"name": "main", "image": "shoal/busybox:1.35",
                "resources": {"requests": {"cpu": format!("{REQUEST_MILLICORES}m"), "memory": "16Mi"}}}]
        });
        api.create(&deployment(NAMESPACE, NAME, args.replicas, pod_spec)?)
            .await?;
        let replicas = args.replicas as usize;
        wait_until(
            "the pods Running on the hollow node",
            Duration::from_secs(120),
            || async { cluster.running(NAMESPACE) >= replicas },
        )
        .await?;
        let target = REQUEST_MILLICORES * f64::from(args.target_percent) / 100.0;
        let publisher = usage::publish_every(
            Duration::from_secs(1),
            cluster.pods.clone(),
            NAMESPACE.into(),
            cluster.node_conns.clone(),
            usage::oscillating(target, args.swing_percent / 100.0, args.oscillation_seconds),
        );
        let mut decisions = crate::objects::decisions(&cluster.admin, NAMESPACE).await?;
        api.create(&cpu_hpa(
            NAMESPACE,
            NAME,
            1,
            args.replicas * 4,
            args.target_percent,
        )?)
        .await?;
        wait_until(
            "the HPA reading the synthetic usage",
            Duration::from_secs(60),
            || async { cluster.active_hpas(NAMESPACE) >= 1 },
        )
        .await?;
        println!(
            "\n== stability: synthetic usage {target:.0}m ± {}% of {REQUEST_MILLICORES:.0}m requests (target {}%), {} pods on a hollow node, {} s ==",
            args.swing_percent, args.target_percent, args.replicas, args.seconds
        );
        println!("(samples published every 1 s by the benchmark as the hollow node, the agent's message format; the oscillation period {} s)", args.oscillation_seconds);
        while decisions.try_recv().is_ok() {}
        let start = Instant::now();
        let deadline = start + Duration::from_secs(args.seconds);
        let (mut passes, mut rescales) = (0usize, Vec::new());
        let mut proposals: BTreeMap<i32, usize> = BTreeMap::new();
        let mut last_report = Instant::now();
        while Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(Some((at, d))) = tokio::time::timeout(left, decisions.recv()).await else {
                continue;
            };
            if d.hpa != NAME {
                continue;
            }
            passes += 1;
            *proposals.entry(d.proposal).or_default() += 1;
            if d.rescaled {
                rescales.push((at.duration_since(start), d.desired_replicas, d.reason));
            }
            if last_report.elapsed() >= Duration::from_secs(30) {
                last_report = Instant::now();
                eprintln!(
                    "  [{:>4.0} s] {passes} decisions, {} rescales",
                    start.elapsed().as_secs_f64(),
                    rescales.len()
                );
            }
        }
        publisher.abort();
        println!(
            "decisions {passes} in {} s, rescales {}   (goal 0; Kubernetes: 0 within its 10 % tolerance, scale-down window 300 s)",
            args.seconds,
            rescales.len()
        );
        println!("proposals (replicas: passes): {proposals:?}");
        for (at, to, reason) in &rescales {
            println!("  rescale at {:.1} s to {to}: {reason}", at.as_secs_f64());
        }
        anyhow::Ok(())
    });
    drop(autoscaler);
    outcome
}
