//! Scale: `--hpas` HPAs, each on a one-pod Deployment on hollow nodes, their pods' usage
//! published by the benchmark every second (at the 50 % target ± 5 %, so passes decide but do not
//! rescale); the autoscaler runs alone in a `shoal up --join URL --actors autoscaler`
//! process. Measured: every pass's duration (from its `/metrics`, read every 50 ms) and the
//! process's RSS (/proc).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use tokio::sync::Semaphore;

use crate::common::{mib, rss_kib};
use crate::objects::{cpu_hpa, deployment, wait_until};
use crate::usage;

const NAMESPACE: &str = "default";
/// Small, so a hollow node's CPU (this machine's) holds `--pods-per-node` of them.
const REQUEST_MILLICORES: u64 = 20;

#[derive(Args)]
pub struct ScaleArgs {
    #[arg(long, default_value_t = 1000)]
    hpas: usize,
    /// Pods per hollow node (a node holds up to 110).
    #[arg(long, default_value_t = 100)]
    pods_per_node: usize,
    /// How long passes are measured once every HPA reads its metrics.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
}

fn name(i: usize) -> String {
    format!("scale-{i:05}")
}

pub fn run(args: ScaleArgs) -> Result<()> {
    let nodes = args.hpas.div_ceil(args.pods_per_node.max(1)).max(1);
    let cluster = crate::hollow_cluster::start(nodes)?;
    let outcome = cluster.runtime.block_on(async {
        println!(
            "\n== scale: {} HPAs on {} one-pod Deployments over {nodes} hollow nodes ==",
            args.hpas, args.hpas
        );
        let start = Instant::now();
        let sem = Arc::new(Semaphore::new(args.concurrency));
        let mut tasks = Vec::with_capacity(args.hpas);
        for i in 0..args.hpas {
            let permit = sem.clone().acquire_owned().await?;
            let api = cluster.api.clone();
            tasks.push(tokio::spawn(async move {
                let pod_spec = serde_json::json!({
                    "containers": [{"name": "main", "image": "shoal/busybox:1.35",
                        "resources": {"requests": {"cpu": format!("{REQUEST_MILLICORES}m"), "memory": "4Mi"}}}]
                });
                api.create(&deployment(NAMESPACE, &name(i), 1, pod_spec)?)
                    .await?;
                api.create(&cpu_hpa(NAMESPACE, &name(i), 1, 4, 50)?).await?;
                drop(permit);
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        println!(
            "{} Deployments and HPAs created in {:.1} s",
            args.hpas,
            start.elapsed().as_secs_f64()
        );
        let last = std::cell::Cell::new(Instant::now());
        wait_until(
            "every pod Running",
            Duration::from_secs(900),
            || async {
                let running = cluster.running(NAMESPACE);
                if last.get().elapsed() >= Duration::from_secs(10) {
                    last.set(Instant::now());
                    eprintln!("  [{:>4.0} s] {running} pods Running", start.elapsed().as_secs_f64());
                }
                running >= args.hpas
            },
        )
        .await?;
        println!(
            "{} pods Running after {:.1} s",
            args.hpas,
            start.elapsed().as_secs_f64()
        );
        let publisher = usage::publish_every(
            Duration::from_secs(1),
            cluster.pods.clone(),
            NAMESPACE.into(),
            cluster.node_conns.clone(),
            usage::oscillating(REQUEST_MILLICORES as f64 / 2.0, 0.05, 60.0),
        );

        // Started once the cluster is there, so its start-up (cache load) is not a pass.
        let autoscaler = cluster.autoscaler()?;
        let pid = autoscaler.pid();
        let began = Instant::now();
        let last = std::cell::Cell::new(Instant::now());
        wait_until(
            "every HPA reading its metrics",
            Duration::from_secs(600),
            || async {
                let active = cluster.active_hpas(NAMESPACE);
                if last.get().elapsed() >= Duration::from_secs(10) {
                    last.set(Instant::now());
                    eprintln!("  [{:>4.0} s] {active} HPAs reading their metrics", began.elapsed().as_secs_f64());
                }
                active >= args.hpas
            },
        )
        .await?;
        println!(
            "every HPA reading its metrics {:.1} s after the autoscaler started",
            began.elapsed().as_secs_f64()
        );

        // One pass apart, the histogram's sum grows by exactly that pass's duration.
        let mut passes = Vec::new();
        let mut previous: Option<(u64, f64)> = None;
        let mut peak_rss = 0;
        let deadline = Instant::now() + Duration::from_secs(args.seconds);
        while Instant::now() < deadline {
            if let Some((count, sum)) = autoscaler.pass_totals() {
                if let Some((c0, s0)) = previous {
                    if count == c0 + 1 {
                        passes.push(Duration::from_secs_f64((sum - s0).max(0.0)));
                    }
                }
                previous = Some((count, sum));
            }
            peak_rss = peak_rss.max(rss_kib(pid).map(|r| r.0).unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        publisher.abort();
        let (rss, hwm) = rss_kib(pid).unwrap_or((0, 0));
        println!(
            "one pass over {} HPAs: {}   (goal <= 1 s; Kubernetes: one pass every 15 s, --horizontal-pod-autoscaler-sync-period)",
            args.hpas,
            crate::common::describe(&mut passes)
        );
        println!(
            "autoscaler process RSS {:.0} MiB (highest seen {:.0}, VmHWM {:.0})   (goal <= 200 MiB)",
            mib(rss),
            mib(peak_rss),
            mib(hwm)
        );
        drop(autoscaler);
        anyhow::Ok(())
    });
    outcome
}
