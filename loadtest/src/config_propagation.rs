//! ConfigMap change → visible in the volumes of N running pods on a real node (API,
//! scheduler, node agent, busybox containers). The clock starts when the update is sent and
//! stops, per pod, when the file the container reads through its `..data` symlink holds the
//! new value. Kubernetes' kubelet only notices on its periodic sync (a minute or more).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bus_schemas::kinds::{ConfigMap, Pod};
use clap::Args;

use crate::real_node::{with_real_node, NodeOptions};
use crate::stats::{ms, summarize};

#[derive(Args)]
pub struct ConfigArgs {
    /// Running pods that mount the ConfigMap.
    #[arg(long, default_value_t = 100)]
    pub pods: usize,
    /// Updates of the ConfigMap, each measured in every pod.
    #[arg(long, default_value_t = 10)]
    pub updates: usize,
    /// Pod CIDR of the benchmark node (its own bridge is created and removed).
    #[arg(long, default_value = "10.214.0.0/22")]
    pub pod_cidr: String,
}

const CONFIG_MAP: &str = "bench-config";
const KEY: &str = "value";
const VOLUME: &str = "config";
/// How often the mounted files are read: the figures' resolution.
const POLL: Duration = Duration::from_millis(5);
/// Longer than this for one update is reported as a failure, not a figure.
const GIVE_UP: Duration = Duration::from_secs(120);

fn pod_name(i: usize) -> String {
    format!("cfg-{i:04}")
}

fn pod(i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": pod_name(i)},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "volumes": [{"name": VOLUME, "configMap": {"name": CONFIG_MAP}}],
            "containers": [{"name": "main", "image": "shoal/busybox:1.35",
                "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"],
                "volumeMounts": [{"name": VOLUME, "mountPath": "/etc/config"}],
                "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]
        }
    }))
    .expect("benchmark pod")
}

fn config_map(value: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = CONFIG_MAP.into();
    cm.metadata.namespace = "default".into();
    cm.data.insert(KEY.into(), value.into());
    cm
}

pub fn run(args: ConfigArgs) -> Result<()> {
    let pod_cidr = args.pod_cidr.clone();
    let options = NodeOptions {
        bridge_prefix: "shg",
        pod_cidr: &pod_cidr,
        cgroup_parent: "shoal-bench-config",
        // The agent's defaults, as `shoal up` runs it: the update must not ride a short sync.
        sync_period: None,
        ..Default::default()
    };
    with_real_node(options, |node| async move {
        let api = node.api.clone();

        api.create(&config_map("v0")).await?;
        for i in 0..args.pods {
            api.create(&pod(i)).await?;
        }
        let started = Instant::now();
        let files: Vec<PathBuf> = loop {
            let pods = api.list::<Pod>(&Default::default()).await?.items;
            let running: Vec<&Pod> = pods
                .iter()
                .filter(|p| p.status.phase == "Running")
                .collect();
            if running.len() == args.pods {
                break running
                    .iter()
                    .map(|p| node.runtime.volume_dir(&p.metadata.uid, VOLUME).join(KEY))
                    .collect();
            }
            if started.elapsed() > Duration::from_secs(600) {
                bail!(
                    "only {}/{} pods running after 10 minutes",
                    running.len(),
                    args.pods
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        eprintln!(
            "  {} pods running in {:.1} s",
            args.pods,
            started.elapsed().as_secs_f64()
        );

        let mut latencies = Vec::new();
        let mut slowest = Vec::new();
        for round in 1..=args.updates {
            let value = format!("v{round}");
            let mut cm: ConfigMap = api.get("default", CONFIG_MAP).await?;
            cm.data.insert(KEY.into(), value.clone());
            let sent = Instant::now();
            api.update(&cm).await.context("updating the ConfigMap")?;
            let mut pending: Vec<&PathBuf> = files.iter().collect();
            let mut last = Duration::ZERO;
            while !pending.is_empty() {
                let now = sent.elapsed();
                pending.retain(|file| {
                    let seen = std::fs::read_to_string(file).is_ok_and(|text| text == value);
                    if seen {
                        latencies.push(now);
                        last = now;
                    }
                    !seen
                });
                if now > GIVE_UP {
                    bail!(
                        "update {round}: {} pods never saw it (first: {})",
                        pending.len(),
                        pending[0].display()
                    );
                }
                tokio::time::sleep(POLL).await;
            }
            slowest.push(last);
            eprintln!("  update {round}: all {} pods in {}", args.pods, ms(last));
        }

        let s = summarize(&mut latencies);
        let all = summarize(&mut slowest);
        println!();
        println!(
            "== ConfigMap update → visible in {} running pods' volumes (real containers, agent defaults), {} updates ==",
            args.pods, args.updates
        );
        println!(
            "per pod: p50 {}, p90 {}, p99 {}, max {}   (goal p99 <= 2 s; the kubelet: up to a minute or more)",
            ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max)
        );
        println!(
            "all pods of one update: p50 {}, max {}   (poll every {})",
            ms(all.p50),
            ms(all.max),
            ms(POLL)
        );

        let names: Vec<String> = (0..args.pods).map(pod_name).collect();
        node.delete_pods_and_stop(&names, Duration::from_secs(120))
            .await?;
        Ok(())
    })
}
