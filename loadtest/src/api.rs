//! The state-path benchmark: raw JetStream publishes and API creates to the same stream, on a
//! nats-server with `sync_interval: always`, measured in one run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use bus_schemas::api::ListOptions;
use bus_schemas::kinds::Pod;
use bus_schemas::roles::Role;
use bytes::Bytes;
use clap::Args;
use shoal_bus::ApiClient;
use tokio::sync::Semaphore;

use crate::stats::{ms, summarize};

#[derive(Args)]
pub struct ApiArgs {
    /// Objects written in each throughput phase.
    #[arg(long, default_value_t = 10_000)]
    pub count: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Offered rate for the latency phase (creates per second).
    #[arg(long, default_value_t = 1_000)]
    pub rate: u64,
    /// Seconds of the latency phase.
    #[arg(long, default_value_t = 5)]
    pub rate_seconds: u64,
}

fn pod(name: &str, i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {
            "app": if i.is_multiple_of(2) { "even" } else { "odd" },
            "tier": if i.is_multiple_of(10) { "ten" } else { "other" }
        }},
        "spec": {"containers": [{"name": "main", "image": "shoal/busybox:1.35",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    }))
    .expect("benchmark pod")
}

pub fn run(args: ApiArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (runtime, natsd) = crate::control_plane::nats_on_runtime(dir.path(), 1)?;
    let url = natsd.url();
    let api_auth = crate::control_plane::creds(&runtime, &natsd, &Role::Api)?;
    crate::tracing_mode::export_to(&url, &api_auth);
    println!(
        "nats-server {url} with JetStream sync_interval: always (store {})",
        dir.path().display()
    );

    // The API actor gets its own thread and actix system, as it would be its own process.
    let admin = crate::control_plane::creds(&runtime, &natsd, &Role::Admin)?;
    crate::control_plane::start(&url, api_auth.clone(), None)?;

    runtime.block_on(async move {
        // The load generator is an operator, as `shoal apply` would be.
        let nats = shoal_bus::connect(&url, "bench-client", &admin).await?;
        let api = ApiClient::new(nats.clone());
        shoal_api::bootstrap(&api).await?;

        // The raw baseline publishes straight into the state stream, which only the API's
        // identity may: it measures the API's own write path without the API in between.
        let raw_nats = shoal_bus::connect(&url, "bench-raw", &api_auth).await?;
        let payload = Bytes::from(bus_schemas::codec::to_msgpack(&pod("raw", 0))?);
        let raw =
            crate::raw::raw_publishes(&raw_nats, args.count, args.concurrency, payload).await?;
        let (creates, latencies) = api_creates(&api, args.count, args.concurrency, "tp").await?;
        let mut latencies = latencies;
        let s = summarize(&mut latencies);
        println!();
        println!("== throughput ({} objects, concurrency {}) ==", args.count, args.concurrency);
        println!("raw JetStream publish:  {raw:>9.0} msgs/s");
        println!("API create:             {creates:>9.0} creates/s   (p50 {}, p90 {}, p99 {})", ms(s.p50), ms(s.p90), ms(s.p99));
        println!("ratio API/raw:          {:>9.2}   (goal >= 0.50)", creates / raw);

        let mut paced = paced_creates(&api, args.rate, args.rate_seconds).await?;
        let achieved = paced.len() as f64 / args.rate_seconds as f64;
        let p = summarize(&mut paced);
        println!();
        println!("== latency at an offered {} creates/s for {} s ==", args.rate, args.rate_seconds);
        println!("achieved {achieved:.0} creates/s; p50 {}, p90 {}, p99 {}, max {}   (goal p99 <= 5 ms)", ms(p.p50), ms(p.p90), ms(p.p99), ms(p.max));

        let total = list_all(&api, "").await?;
        let mut list_times = Vec::new();
        let mut matched = 0;
        for _ in 0..5 {
            let start = Instant::now();
            matched = list_all(&api, "app=even,tier=ten").await?;
            list_times.push(start.elapsed());
        }
        let l = summarize(&mut list_times);
        println!();
        println!("== list by selector ==");
        println!("{total} pods stored; `app=even,tier=ten` matched {matched}; over 5 lists: p50 {}, max {}   (goal <= 100 ms for 10,000 pods)", ms(l.p50), ms(l.max));
        anyhow::Ok(())
    })?;
    drop(natsd);
    Ok(())
}

async fn api_creates(
    api: &ApiClient,
    count: usize,
    concurrency: usize,
    prefix: &str,
) -> Result<(f64, Vec<Duration>)> {
    let sem = Arc::new(Semaphore::new(concurrency));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let permit = sem.clone().acquire_owned().await?;
        let api = api.clone();
        let p = pod(&format!("{prefix}-{i:06}"), i);
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            api.create(&p).await?;
            drop(permit);
            anyhow::Ok(t.elapsed())
        }));
    }
    let mut latencies = Vec::with_capacity(count);
    for t in tasks {
        latencies.push(t.await??);
    }
    Ok((count as f64 / start.elapsed().as_secs_f64(), latencies))
}

/// Open-loop creates at a fixed rate: latency measured from each request's scheduled start.
async fn paced_creates(api: &ApiClient, rate: u64, seconds: u64) -> Result<Vec<Duration>> {
    let total = (rate * seconds) as usize;
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(total);
    for i in 0..total {
        let due = start + interval * i as u32;
        tokio::time::sleep_until(due).await;
        let api = api.clone();
        let p = pod(&format!("paced-{i:06}"), i);
        tasks.push(tokio::spawn(async move {
            api.create(&p).await?;
            anyhow::Ok(due.elapsed())
        }));
    }
    let mut out = Vec::with_capacity(total);
    for t in tasks {
        out.push(t.await??);
    }
    Ok(out)
}

async fn list_all(api: &ApiClient, selector: &str) -> Result<usize> {
    let options = ListOptions {
        label_selector: selector.into(),
        ..Default::default()
    };
    Ok(api.list::<Pod>(&options).await?.items.len())
}
