//! Issue 14: does the state log stay small under churn? Churns N pod creates and deletes
//! (default 1,000,000) on a cluster holding L live pods (default 10,000), with a short
//! deleted-object retention so the compactor purges during the run, then measures the
//! stream's size, an informer's start-up (list + sync) and the list of the live pods, both
//! from the log (`Store::list_raw`, what every informer start pays) and through the API.
//! The same figures on a fresh cluster with the same live pods, in the same run, and the
//! ratios (goal ≤ 1.5×). Prints figures; never asserts.
//!
//! Both clusters are `shoal_api::local::LocalCluster`s: a nats-server child on a temporary
//! store and one API replica (with its compactor) in this process; pods stay unbound, so a
//! delete writes its tombstone at once.
//!
//! Run: `cargo build --release -p shoal-loadtest && $CARGO_TARGET_DIR/release/bench_compaction`
//! (`--churn 50000` for a quick proof on a debug build).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bus_schemas::api::{DeleteOptions, ListOptions};
use bus_schemas::kinds::Pod;
use bus_schemas::{subjects, Resource};
use clap::Parser;
use futures::{stream, StreamExt};
use shoal_api::compactor::CompactionConfig;
use shoal_api::local::LocalCluster;
use shoal_bus::informer::Informer;
use shoal_bus::ApiClient;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "State log size and informer start-up after pod churn, against a fresh cluster")]
struct Args {
    /// Pods created and deleted on the churned cluster.
    #[arg(long, default_value_t = 1_000_000)]
    churn: usize,
    /// Pods that stay live on both clusters.
    #[arg(long, default_value_t = 10_000)]
    live: usize,
    /// Deleted-object retention of both clusters, in seconds.
    #[arg(long, default_value_t = 5)]
    retention_seconds: u64,
    /// API requests in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Start-up and list measurements per cluster (the median is reported).
    #[arg(long, default_value_t = 5)]
    samples: usize,
}

fn pod(name: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = name.to_string();
    pod.metadata.namespace = "default".into();
    pod.metadata
        .labels
        .insert("app".into(), "bench-compaction".into());
    pod.spec.containers = vec![serde_json::from_value(serde_json::json!({
        "name": "main", "image": "busybox:1.35", "command": ["sleep", "3600"]
    }))
    .expect("container fixture")];
    pod
}

/// One cluster's figures.
#[derive(Debug, Clone, Copy)]
struct Figures {
    bytes: u64,
    messages: u64,
    informer_start: Duration,
    log_list: Duration,
    api_list: Duration,
}

fn main() -> Result<()> {
    let args = Args::parse();
    actix::System::new().block_on(bench(args))
}

async fn bench(args: Args) -> Result<()> {
    let config = CompactionConfig {
        deleted_retention: Duration::from_secs(args.retention_seconds),
        ..Default::default()
    };
    println!(
        "== bench_compaction: {} churned pod creates+deletes, {} live pods, retention {} s ==",
        args.churn, args.live, args.retention_seconds
    );

    let churned = LocalCluster::start_compacting(config).await?;
    create_live(&churned.api(), &args).await?;
    let started = Instant::now();
    churn(&churned, &args).await?;
    let churn_time = started.elapsed();
    println!(
        "churn: {} creates+deletes in {:.1} s ({:.0}/s)",
        args.churn,
        churn_time.as_secs_f64(),
        args.churn as f64 / churn_time.as_secs_f64().max(1e-9)
    );
    let waited = Instant::now();
    wait_compacted(&churned, &args).await?;
    println!(
        "compactor caught up {:.1} s after the last delete",
        waited.elapsed().as_secs_f64()
    );
    let after = measure(&churned, &args).await?;
    drop(churned);

    let fresh = LocalCluster::start_compacting(config).await?;
    create_live(&fresh.api(), &args).await?;
    let baseline = measure(&fresh, &args).await?;
    drop(fresh);

    report("fresh cluster", &baseline);
    report("after churn", &after);
    let ratio = |a: f64, b: f64| a / b.max(1e-9);
    println!(
        "ratios (churned / fresh; goal <= 1.5): stream bytes {:.2}, messages {:.2}, informer start-up {:.2}, log list {:.2}, API list {:.2}",
        ratio(after.bytes as f64, baseline.bytes as f64),
        ratio(after.messages as f64, baseline.messages as f64),
        ratio(after.informer_start.as_secs_f64(), baseline.informer_start.as_secs_f64()),
        ratio(after.log_list.as_secs_f64(), baseline.log_list.as_secs_f64()),
        ratio(after.api_list.as_secs_f64(), baseline.api_list.as_secs_f64()),
    );
    Ok(())
}

fn report(what: &str, f: &Figures) {
    println!(
        "{what:>14}: stream {} bytes, {} messages; informer start-up {:.1} ms; list of the live pods from the log {:.1} ms, through the API {:.1} ms",
        f.bytes,
        f.messages,
        ms(f.informer_start),
        ms(f.log_list),
        ms(f.api_list)
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn create_live(api: &ApiClient, args: &Args) -> Result<()> {
    let results: Vec<Result<()>> = stream::iter(0..args.live)
        .map(|i| async move {
            api.create(&pod(&format!("live-{i}")))
                .await
                .map(|_| ())
                .with_context(|| format!("creating live-{i}"))
        })
        .buffer_unordered(args.concurrency)
        .collect()
        .await;
    results.into_iter().collect()
}

async fn churn(cluster: &LocalCluster, args: &Args) -> Result<()> {
    let api = cluster.api();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let step = (args.churn / 20).max(1);
    let results: Vec<Result<()>> = stream::iter(0..args.churn)
        .map(|i| {
            let (api, done) = (&api, &done);
            async move {
                let name = format!("churn-{i}");
                api.create(&pod(&name))
                    .await
                    .with_context(|| format!("creating {name}"))?;
                let _: Pod = api
                    .delete(&DeleteOptions {
                        namespace: "default".into(),
                        name: name.clone(),
                        ..Default::default()
                    })
                    .await
                    .with_context(|| format!("deleting {name}"))?;
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if n % step == 0 {
                    eprintln!("  {n}/{} churned", args.churn);
                }
                Ok(())
            }
        })
        .buffer_unordered(args.concurrency)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Until the compaction revision passes the last delete: every churned subject is purged.
async fn wait_compacted(cluster: &LocalCluster, args: &Args) -> Result<()> {
    let last = cluster.store.last_revision().await?;
    let deadline = Instant::now() + Duration::from_secs(args.retention_seconds * 4 + 600);
    loop {
        // The record itself is written after the deletes: its own revision is above them.
        // Recorded before the purges it covers: then until the log holds only the live pods
        // (and the tombstones of the live set, none).
        if cluster.store.compacted_revision().await? + 2 >= last {
            let stream = cluster
                .store
                .jetstream()
                .get_stream(subjects::OBJECTS_STREAM)
                .await?;
            if stream.cached_info().state.subjects_count as usize <= args.live + 64 {
                return Ok(());
            }
        }
        anyhow::ensure!(Instant::now() < deadline, "the compactor did not catch up");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn measure(cluster: &LocalCluster, args: &Args) -> Result<Figures> {
    let stream = cluster
        .store
        .jetstream()
        .get_stream(subjects::OBJECTS_STREAM)
        .await?;
    let state = stream.cached_info().state.clone();
    let filter = subjects::objects_of(&Pod::INFO.token(), None);
    let (mut starts, mut log_lists, mut api_lists) = (Vec::new(), Vec::new(), Vec::new());
    let api = cluster.api();
    for _ in 0..args.samples.max(1) {
        let t = Instant::now();
        let informer = Informer::<Pod>::start(cluster.store.clone());
        informer.wait_synced().await?;
        starts.push(t.elapsed());
        anyhow::ensure!(
            informer.len() == args.live,
            "informer holds {} pods, not {}",
            informer.len(),
            args.live
        );
        drop(informer);

        let t = Instant::now();
        let (items, _) = cluster.store.list_raw(&filter).await?;
        log_lists.push(t.elapsed());
        anyhow::ensure!(items.len() == args.live, "log list: {} pods", items.len());

        let t = Instant::now();
        let listed = api
            .list::<Pod>(&ListOptions {
                namespace: "default".into(),
                ..Default::default()
            })
            .await?;
        api_lists.push(t.elapsed());
        anyhow::ensure!(
            listed.items.len() == args.live,
            "API list: {} pods",
            listed.items.len()
        );
    }
    Ok(Figures {
        bytes: state.bytes,
        messages: state.messages,
        informer_start: median(starts),
        log_list: median(log_lists),
        api_list: median(api_lists),
    })
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}
