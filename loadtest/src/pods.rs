//! Pod create → Running on a real node: the whole path (API, scheduler, node agent, real
//! containers with the image already cached), observed through a watch, one pod at a time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bus_schemas::kinds::Pod;
use bus_schemas::subjects;
use clap::Args;
use shoal_bus::watch::RawWatch;
use shoal_bus::{ApiClient, Store};

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
    let dir = tempfile::tempdir()?;
    let (runtime, natsd) = crate::control_plane::nats_on_runtime(dir.path(), 2)?;
    let url = natsd.url();

    crate::control_plane::start(&url, true)?;

    runtime.block_on(async move {
        let nats = shoal_bus::connect(&url, "bench-client").await?;
        let api = ApiClient::new(nats.clone());
        shoal_api::bootstrap(&api).await?;

        // The image goes into the cluster registry; the first pod caches it on the node.
        let image_dir = dir.path().join("image");
        shoal_node::testimage::build_busybox_layout(&image_dir.join("layout"), "shoal/busybox", "1.35")?;
        let scratch = shoal_node::image::ImageStore::open(image_dir.join("store"))?;
        let registry = shoal_agent::registry::Registry::open(&async_nats::jetstream::new(nats.clone())).await?;
        registry.import_path(&scratch, &image_dir.join("layout"), |_, _| {}).await?;

        let node_name = "bench-node";
        let bridge = format!("shb{}", std::process::id() % 10000);
        let mut rc = shoal_node::runtime::RuntimeConfig::new(
            dir.path().join("node"),
            shoal_node::net::NetworkConfig::new(&bridge, args.pod_cidr.parse().map_err(|e| anyhow::anyhow!("{e}"))?),
        );
        rc.cgroup_parent = "shoal-bench".into();
        let backend = shoal_agent::Backend::Linux(Arc::new(shoal_node::LinuxRuntime::new(rc)?));
        let mut config = shoal_agent::AgentConfig::new(node_name, args.pod_cidr.clone());
        config.sync_period = Duration::from_millis(500);
        let (trigger, stop) = shoal_bus::shutdown::channel();
        let agent_nats = nats.clone();
        let agent = tokio::spawn(async move { shoal_agent::run(config, backend, agent_nats, stop.wait()).await });

        let store = Store::open(nats.clone()).await?;
        let mut latencies = Vec::new();
        for i in 0..=args.count {
            let from = store.last_revision().await? + 1;
            let mut watch = RawWatch::start(store.clone(), subjects::object("pod", "default", &format!("bench-{i:04}")), from);
            let start = Instant::now();
            api.create(&pod(i)).await?;
            loop {
                let event = tokio::time::timeout(Duration::from_secs(60), watch.next()).await.context("pod never ran")?;
                let Some(event) = event else { anyhow::bail!("watch ended") };
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
        println!("p50 {}, p90 {}, p99 {}, max {}   (goal p99 <= 150 ms; Kubernetes' SLO p99 <= 5 s)", ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max));

        for i in 0..=args.count {
            let options = bus_schemas::api::DeleteOptions { name: format!("bench-{i:04}"), grace_period_seconds: Some(0), ..Default::default() };
            let _ = api.delete::<Pod>(&options).await;
        }
        // Wait until the node has removed every sandbox, then stop it.
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let left = api.list::<Pod>(&Default::default()).await?.items.len();
            if left == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        trigger.fire();
        let _ = agent.await;
        let mut rc = shoal_node::runtime::RuntimeConfig::new(
            dir.path().join("node"),
            shoal_node::net::NetworkConfig::new(&bridge, args.pod_cidr.parse().map_err(|e| anyhow::anyhow!("{e}"))?),
        );
        rc.cgroup_parent = "shoal-bench".into();
        if let Ok(rt) = shoal_node::LinuxRuntime::new(rc) {
            use shoal_node::Runtime;
            let _ = rt.cleanup_orphans(&Default::default());
        }
        let _ = std::process::Command::new("ip").args(["link", "del", &bridge]).status();
        anyhow::Ok(())
    })?;
    drop(natsd);
    Ok(())
}
