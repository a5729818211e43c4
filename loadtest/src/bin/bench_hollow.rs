//! Memory per hollow node: the RSS of a process hosting N hollow node agents (default 5,000),
//! minus the same process with 0 agents, divided by N. Goal <= 2 MiB per node. Prints
//! figures; never asserts.
//!
//! Layout: nats-server child (JetStream `sync_interval: always`, temp dir); this process runs
//! the API actor, scheduler and controllers (one actix thread, as `shoal up`); the hollow
//! agents run in a child process (this binary re-executed with the hidden `--hollow-only`),
//! sharing one InformerFactory, as `shoal node --hollow --count N`, each on a connection of
//! its own with its node's identity (so the per-node figure includes one connection each).
//! The child's VmRSS (/proc/<pid>/status) is what is measured:
//!
//! 1. baseline: a child with 0 agents (its cache's connection and pod cache started and synced);
//! 2. N agents: once every Node is registered and Ready, and after `--settle-seconds` of
//!    heartbeats, RSS_N; per node = (RSS_N - RSS_0) / N;
//! 3. with `--pods-per-node` > 0 (default 10): N × that many pods created directly and
//!    scheduled; once all are Running, RSS again: per node with workload, and per pod.
//!    (The child's pod cache holds every pod, so this includes the cached objects.)
//!
//! Run: `cargo build --release -p shoal-loadtest && /work/target/release/bench_hollow --nodes 5000`

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bus_schemas::kinds::{Node, Pod};
use bus_schemas::meta::find_condition;
use bus_schemas::selector::Selector;
use clap::Parser;
use shoal_bus::{ApiClient, Informer};
use tokio::sync::Semaphore;

use common::{mib, rss_kib, HollowFleet};

// The control plane and the hollow fleet churn through many small, short-lived objects;
// mimalloc keeps their memory compact where glibc's per-thread arenas fragment.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "Memory per hollow node (child-process RSS with N agents vs 0)")]
struct Args {
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// Pods per node for the with-workload measurement (0 skips it).
    #[arg(long, default_value_t = 10)]
    pods_per_node: usize,
    /// Heartbeat interval of the hollow agents (`shoal node --hollow` uses 10 s).
    #[arg(long, default_value_t = 10_000)]
    heartbeat_ms: u64,
    /// Time to let the fleet run (heartbeats, status loops) before each RSS reading.
    #[arg(long, default_value_t = 15)]
    settle_seconds: u64,
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// (internal) Be the hollow-node child process.
    #[arg(long, hide = true)]
    hollow_only: bool,
    #[arg(long, hide = true)]
    url: Option<String>,
    /// (internal) The hollow-node child's identity directory.
    #[arg(long, hide = true)]
    auth_dir: Option<std::path::PathBuf>,
}

fn main() -> Result<()> {
    common::init_tracing();
    let args = Args::parse();
    if args.hollow_only {
        let url = args.url.context("--hollow-only needs --url")?;
        return common::hollow_main(
            &url,
            args.auth_dir.as_deref(),
            args.nodes,
            Duration::from_millis(args.heartbeat_ms),
        );
    }
    let dir = tempfile::tempdir()?;
    let (runtime, natsd) = common::start_nats(dir.path())?;
    let url = natsd.url();
    let identities = common::Identities::of(&runtime, &natsd)?;
    identities.issue_fleet(&runtime, &natsd, args.nodes)?;
    let cp = common::start_control_plane(url.clone(), &identities, true)?;
    let result = runtime.block_on(bench(&args, &url, &identities, &cp));
    drop(natsd);
    result
}

/// VmRSS of the child after letting it settle; the last of a few readings 1 s apart.
async fn settled_rss(pid: u32, settle: Duration) -> Result<u64> {
    tokio::time::sleep(settle).await;
    let mut readings = Vec::new();
    for _ in 0..3 {
        readings.push(rss_kib(pid).context("reading the child's /proc status")?.0);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!(
        "  RSS readings (MiB): {:?}",
        readings
            .iter()
            .map(|k| format!("{:.1}", mib(*k)))
            .collect::<Vec<_>>()
    );
    Ok(*readings.last().unwrap_or(&0))
}

async fn spawn_fleet(
    url: &str,
    identities: &common::Identities,
    nodes: usize,
    heartbeat: Duration,
) -> Result<HollowFleet> {
    let (url, identities) = (url.to_string(), identities.clone());
    tokio::task::spawn_blocking(move || HollowFleet::spawn(&url, &identities, nodes, heartbeat))
        .await?
}

async fn bench(
    args: &Args,
    url: &str,
    identities: &common::Identities,
    cp: &common::ControlPlane,
) -> Result<()> {
    let heartbeat = Duration::from_millis(args.heartbeat_ms);
    let settle = Duration::from_secs(args.settle_seconds);
    // The generator acts as an operator; the raw baseline writes into the state stream
    // directly, which only the API's identity may.
    let nats = shoal_bus::connect(url, "bench-generator", &identities.admin).await?;
    let raw_nats = shoal_bus::connect(url, "bench-raw", &identities.api).await?;
    let raw = common::raw_publishes(&raw_nats, 5_000, args.concurrency).await?;
    println!("raw JetStream publish (baseline): {raw:.0} msgs/s");
    println!(
        "{} hollow nodes, heartbeat every {:?} ({:.0} Lease writes/s)",
        args.nodes,
        heartbeat,
        args.nodes as f64 / heartbeat.as_secs_f64()
    );

    println!("\n== baseline: the child process with 0 agents ==");
    let rss0 = {
        let fleet = spawn_fleet(url, identities, 0, heartbeat).await?;
        let rss = settled_rss(fleet.pid(), Duration::from_secs(3)).await?;
        drop(fleet);
        rss
    };
    println!("RSS_0 = {:.1} MiB", mib(rss0));

    println!("\n== {} agents ==", args.nodes);
    let start = Instant::now();
    let fleet = spawn_fleet(url, identities, args.nodes, heartbeat).await?;
    let nodes: Informer<Node> = cp.informers.get();
    let mut last = Instant::now();
    loop {
        let all = nodes.list(None, &Selector::everything());
        let ready = all
            .iter()
            .filter(|n| {
                find_condition(&n.status.conditions, "Ready").is_some_and(|c| c.status == "True")
            })
            .count();
        if ready >= args.nodes {
            break;
        }
        if last.elapsed() >= Duration::from_secs(5) {
            last = Instant::now();
            println!(
                "  [{:>4.0} s] Nodes {} (Ready {}), child RSS {:.0} MiB",
                start.elapsed().as_secs_f64(),
                all.len(),
                ready,
                mib(rss_kib(fleet.pid()).map(|r| r.0).unwrap_or(0))
            );
        }
        if start.elapsed() > Duration::from_secs(900) {
            anyhow::bail!(
                "only {ready} of {} nodes Ready after 15 minutes",
                args.nodes
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The brief asks to poll the API: one list confirms what the cache says.
    let listed = ApiClient::new(nats.clone())
        .list::<Node>(&Default::default())
        .await?
        .items
        .len();
    println!(
        "all {} nodes Ready after {:.1} s (API lists {listed} Nodes); settling {:?}",
        args.nodes,
        start.elapsed().as_secs_f64(),
        settle
    );
    let rss_n = settled_rss(fleet.pid(), settle).await?;
    let per_node = mib(rss_n.saturating_sub(rss0)) / args.nodes.max(1) as f64;
    println!("\n== memory per hollow node ==");
    println!(
        "RSS_0 {:.1} MiB, RSS_{} {:.1} MiB",
        mib(rss0),
        args.nodes,
        mib(rss_n)
    );
    println!(
        "per hollow node: {:.3} MiB ({:.0} KiB)   (goal <= 2 MiB)",
        per_node,
        per_node * 1024.0
    );
    println!(
        "control plane (this process) {:.0} MiB",
        mib(rss_kib(std::process::id()).map(|r| r.0).unwrap_or(0))
    );

    if args.pods_per_node == 0 {
        return Ok(());
    }
    let total = args.nodes * args.pods_per_node;
    println!(
        "\n== with {} pods per node ({total} pods, created directly) ==",
        args.pods_per_node
    );
    let api = ApiClient::new(nats.clone()).with_deadline(Duration::from_secs(60));
    let pods: Informer<Pod> = cp.informers.get();
    let sem = Arc::new(Semaphore::new(args.concurrency));
    let start = Instant::now();
    let creator = tokio::spawn(async move {
        let mut tasks = Vec::with_capacity(total);
        for i in 0..total {
            let permit = sem.clone().acquire_owned().await?;
            let api = api.clone();
            tasks.push(tokio::spawn(async move {
                let mut pod = common::bench_pod(&format!("hollow-load-{i:07}"));
                pod.metadata.namespace = "default".into();
                pod.metadata
                    .labels
                    .insert("app".into(), "hollow-load".into());
                api.create(&pod).await?;
                drop(permit);
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        anyhow::Ok(())
    });
    let mut last = (Instant::now(), usize::MAX);
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let all = pods.list(Some("default"), &Selector::everything());
        let running = all.iter().filter(|p| p.status.phase == "Running").count();
        println!(
            "  [{:>4.0} s] pods {} Running {} child RSS {:.0} MiB",
            start.elapsed().as_secs_f64(),
            all.len(),
            running,
            mib(rss_kib(fleet.pid()).map(|r| r.0).unwrap_or(0))
        );
        if running >= total {
            break;
        }
        if running != last.1 {
            last = (Instant::now(), running);
        } else if last.0.elapsed() > Duration::from_secs(120) {
            println!("  no progress for 120 s; measuring with {running} Running");
            break;
        }
    }
    creator.await??;
    let rss_p = settled_rss(fleet.pid(), settle).await?;
    println!(
        "\n== memory per hollow node with {} pods each ==",
        args.pods_per_node
    );
    println!("RSS with pods {:.1} MiB", mib(rss_p));
    println!(
        "per hollow node: {:.3} MiB   (goal <= 2 MiB); per pod over the idle fleet: {:.1} KiB",
        mib(rss_p.saturating_sub(rss0)) / args.nodes.max(1) as f64,
        rss_p.saturating_sub(rss_n) as f64 / total.max(1) as f64
    );
    println!(
        "control plane (this process) {:.0} MiB",
        mib(rss_kib(std::process::id()).map(|r| r.0).unwrap_or(0))
    );
    drop(fleet);
    Ok(())
}
