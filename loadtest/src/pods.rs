//! Pod create → Running on a real node: the whole path (API, scheduler, node agent, real
//! containers with the image already cached), observed through a watch, one pod at a time.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bus_schemas::kinds::Pod;
use bus_schemas::subjects;
use clap::Args;
use shoal_bus::watch::RawWatch;
use shoal_bus::Store;

use crate::real_node::{with_real_node, NodeOptions};
use crate::stats::{ms, summarize};

#[derive(Args)]
pub struct PodsArgs {
    #[arg(long, default_value_t = 100)]
    pub count: usize,
    /// Pod CIDR of the benchmark node (its own bridge is created and removed).
    #[arg(long, default_value = "10.213.0.0/22")]
    pub pod_cidr: String,
}

fn pod(i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("bench-{i:04}")},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "main", "image": "shoal/busybox:1.35",
            "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}
    }))
    .expect("benchmark pod")
}

pub fn run(args: PodsArgs) -> Result<()> {
    let pod_cidr = args.pod_cidr.clone();
    let options = NodeOptions {
        bridge_prefix: "shb",
        pod_cidr: &pod_cidr,
        cgroup_parent: "shoal-bench",
        sync_period: Some(Duration::from_millis(500)),
        ..Default::default()
    };
    with_real_node(options, |node| async move {
        let (api, nats) = (node.api.clone(), node.nats.clone());

        let store = Store::open(nats.clone()).await?;
        let mut latencies = Vec::new();
        for i in 0..=args.count {
            let from = store.last_revision().await? + 1;
            let mut watch = RawWatch::start(
                store.clone(),
                subjects::object("pod", "default", &format!("bench-{i:04}")),
                from,
            );
            let start = Instant::now();
            api.create(&pod(i)).await?;
            loop {
                let event = tokio::time::timeout(Duration::from_secs(60), watch.next())
                    .await
                    .context("pod never ran")?;
                let Some(event) = event else {
                    anyhow::bail!("watch ended")
                };
                let event = event?;
                let p: Pod = bus_schemas::codec::from_msgpack(&event.payload)?;
                if p.status.phase == "Running" {
                    break;
                }
            }
            // Pod 0 pulls and unpacks the image: it is the warm-up, not a sample.
            if i > 0 {
                latencies.push(start.elapsed());
            }
            if i % 20 == 0 {
                eprintln!("  {i}/{} pods running", args.count);
            }
        }
        let s = summarize(&mut latencies);
        println!();
        println!("== pod create → Running (real containers, image cached, scheduler + node agent), {} pods ==", args.count);
        println!(
            "p50 {}, p90 {}, p99 {}, max {}   (goal p99 <= 150 ms; Kubernetes' SLO p99 <= 5 s)",
            ms(s.p50),
            ms(s.p90),
            ms(s.p99),
            ms(s.max)
        );

        let names: Vec<String> = (0..=args.count).map(|i| format!("bench-{i:04}")).collect();
        node.delete_pods_and_stop(&names, Duration::from_secs(60))
            .await?;
        Ok(())
    })
}
