//! Scheduling at scale with hollow nodes: create → bound → Running throughput and latency,
//! control-plane memory, and node-failure recovery. Prints figures; never asserts timings.
//!
//! Process layout (like production, on one machine):
//! - nats-server child, JetStream `sync_interval: always`, store in a temp dir;
//! - this process: the API actor and controllers on one thread with their own actix
//!   system, the scheduler on a second, one shared InformerFactory (as `shoal up`), plus the load generator,
//!   which reads the same pod cache (so pods are cached once here);
//! - a child process (this binary, `--hollow-only`) hosting `--nodes` hollow agents sharing one
//!   InformerFactory (as `shoal node --hollow --count N`), each on its own connection.
//!
//! Identities are on, as `shoal up` runs: each actor, each hollow node and the generator
//! (as admin) present their own credential. `--compare-auth` runs the workload (without
//! failover) once with identities off and once on, each in a process of its own, and prints
//! the API create rate and the scheduling throughput of both and their ratio.
//!
//! So the RSS of this process is the control plane (+ the generator's per-pod timestamps,
//! ~100 B/pod), the fleet's RSS is the child's, and nats-server's is its own.
//!
//! Phases:
//! 1. Raw JetStream publish rate into the state stream (the write-capacity baseline).
//! 2. The hollow fleet registers; wait until every Node is Ready.
//! 3. Workload: `--workload deployments` (default: D Deployments × `--replicas-per-deployment`,
//!    exercising Deployment → ReplicaSet → pod creates, scheduler, agents) or `--workload pods`
//!    (direct pod creates, `--concurrency` in flight: scheduler + agents only). Per pod:
//!    created = metadata.creationTimestamp (API clock), bound = first seen with spec.nodeName,
//!    Running = first seen with status.phase Running (seen through the shared pod cache, the
//!    same watch every actor uses). Throughput = pods / (first create → last Running).
//! 4. Failover (`--skip-failover` skips; needs ReplicaSet-owned pods): stop the agents of
//!    `--failover-percent` of the nodes; for each of their pods, the time until a replacement
//!    of the same ReplicaSet is Running, measured from the agents' stop, from the node being
//!    marked NotReady, and from the pod's eviction (replacements are paired with evicted pods
//!    per ReplicaSet in order).
//!
//! Run: `cargo build --release -p shoal-loadtest && /work/target/release/bench_scheduling
//!       --nodes 1000 --pods 30000` (add `--compare-auth` for identities off versus on)

#[path = "common/mod.rs"]
mod common;
#[path = "common/compare_auth.rs"]
mod compare_auth;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bus_schemas::kinds::{Deployment, Node, Pod};
use bus_schemas::meta::find_condition;
use bus_schemas::selector::Selector;
use bus_schemas::Time;
use chrono::Utc;
use clap::{Parser, ValueEnum};
use shoal_bus::informer::INDEX_NODE;
use shoal_bus::{ApiClient, EventType, Informer};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::Semaphore;

use common::{between, describe, memory_line, HollowFleet};

// The control plane and the hollow fleet churn through many small, short-lived objects;
// mimalloc keeps their memory compact where glibc's per-thread arenas fragment.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const NAMESPACE: &str = "default";
const BENCH_LABEL: &str = "shoal.bench/scheduling";

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
enum Workload {
    /// Direct pod creates: the scheduler and the agents.
    Pods,
    /// Deployments: the Deployment and ReplicaSet controllers too; required for failover.
    Deployments,
}

#[derive(Parser)]
#[command(
    about = "Scheduling throughput/latency, control-plane memory and failover on hollow nodes"
)]
struct Args {
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    #[arg(long, default_value_t = 30_000)]
    pods: usize,
    #[arg(long, value_enum, default_value_t = Workload::Deployments)]
    workload: Workload,
    /// Pods per Deployment (`--workload deployments`).
    #[arg(long, default_value_t = 1000)]
    replicas_per_deployment: usize,
    /// Create requests in flight at once (pods, or Deployments).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Hollow agents' heartbeat (Lease renewal) interval: nodes / this = heartbeat writes/s.
    #[arg(long, default_value_t = 2000)]
    heartbeat_ms: u64,
    #[arg(long)]
    skip_failover: bool,
    /// Share of the nodes whose agents are stopped in the failover phase.
    #[arg(long, default_value_t = 1.0)]
    failover_percent: f64,
    /// Messages in the raw JetStream baseline.
    #[arg(long, default_value_t = 10_000)]
    raw_count: usize,
    /// Give up on a phase when its counts have not moved for this long.
    #[arg(long, default_value_t = 120)]
    stall_seconds: u64,
    /// Runs the workload (no failover) with identities off, then on, then on with TLS, each in
    /// a process of its own, and compares their API create rate and scheduling throughput
    /// (goal >= 0.95x with identities, >= 0.9x with TLS).
    #[arg(long)]
    compare_auth: bool,
    /// Identities off: no authorization on the server, every connection anonymous (the
    /// baseline of `--compare-auth`).
    #[arg(long)]
    no_auth: bool,
    /// Identities and TLS on: clients verify the server against a CA made for the run.
    #[arg(long)]
    tls: bool,
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
    let _tracing = common::init_tracing();
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
    if args.compare_auth {
        return compare_auth::run();
    }
    run(args)
}

/// What the generator saw of one pod (keyed by uid: replacements are new pods).
#[derive(Default, Clone)]
struct Track {
    owner: Option<String>,
    created: Option<Time>,
    bound: Option<Time>,
    running: Option<Time>,
    deleted: Option<Time>,
    node: String,
}

#[derive(Default)]
struct Tracker {
    pods: HashMap<String, Track>,
    bound: usize,
    running: usize,
    deleted: usize,
}

impl Tracker {
    fn observe(&mut self, pod: &Pod, deleted: bool, now: Time) {
        if pod.metadata.namespace != NAMESPACE || !pod.metadata.labels.contains_key(BENCH_LABEL) {
            return;
        }
        let t = self
            .pods
            .entry(pod.metadata.uid.clone())
            .or_insert_with(|| Track {
                owner: pod.metadata.controller_ref().map(|r| r.uid.clone()),
                created: pod.metadata.creation_timestamp,
                ..Default::default()
            });
        if t.bound.is_none() && !pod.spec.node_name.is_empty() {
            t.bound = Some(now);
            t.node = pod.spec.node_name.clone();
            self.bound += 1;
        }
        if t.running.is_none() && pod.status.phase == "Running" {
            t.running = Some(now);
            self.running += 1;
        }
        if deleted && t.deleted.is_none() {
            t.deleted = Some(now);
            self.deleted += 1;
        }
    }
}

/// Writes to the state log during the workload, by kind, counted from the caches' change
/// streams (each change is one stored write), against the log's own sequence.
struct WriteCounts {
    first_revision: u64,
    by_kind: Vec<(&'static str, Arc<std::sync::atomic::AtomicU64>)>,
}

impl WriteCounts {
    async fn start(informers: &shoal_bus::InformerFactory, api: &ApiClient) -> WriteCounts {
        use bus_schemas::kinds::{Event, Lease, ReplicaSet};
        let first_revision = match shoal_bus::Store::open(api.nats().clone()).await {
            Ok(store) => store.last_revision().await.unwrap_or(0),
            Err(_) => 0,
        };
        let by_kind = vec![
            ("Pod", count_changes(informers.get::<Pod>())),
            ("Lease", count_changes(informers.get::<Lease>())),
            ("ReplicaSet", count_changes(informers.get::<ReplicaSet>())),
            ("Deployment", count_changes(informers.get::<Deployment>())),
            ("Event", count_changes(informers.get::<Event>())),
            ("Node", count_changes(informers.get::<Node>())),
        ];
        WriteCounts {
            first_revision,
            by_kind,
        }
    }

    async fn report(&self, api: &ApiClient, pods: usize) {
        let last = match shoal_bus::Store::open(api.nats().clone()).await {
            Ok(store) => store.last_revision().await.unwrap_or(0),
            Err(_) => 0,
        };
        let per_pod = |n: u64| n as f64 / pods.max(1) as f64;
        let total = last.saturating_sub(self.first_revision);
        let parts: Vec<String> = self
            .by_kind
            .iter()
            .map(|(kind, n)| {
                let n = n.load(std::sync::atomic::Ordering::Relaxed);
                format!("{kind} {n} ({:.2}/pod)", per_pod(n))
            })
            .collect();
        println!(
            "state-log writes during the workload: {total} ({:.2} per pod): {}",
            per_pod(total),
            parts.join(", ")
        );
    }
}

fn count_changes<K: bus_schemas::Resource>(
    informer: Informer<K>,
) -> Arc<std::sync::atomic::AtomicU64> {
    let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut changes = informer.subscribe();
    let counter = count.clone();
    tokio::spawn(async move {
        loop {
            match changes.recv().await {
                Ok(_) => {
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Err(RecvError::Lagged(n)) => {
                    counter.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
    count
}

/// Feeds the tracker from the shared pod cache's change stream; on lag, from the cache.
fn spawn_tracker(pods: Informer<Pod>, tracker: Arc<Mutex<Tracker>>) {
    let mut changes = pods.subscribe();
    tokio::spawn(async move {
        loop {
            match changes.recv().await {
                Ok(change) => {
                    let now = Utc::now();
                    tracker.lock().expect("tracker").observe(
                        &change.new,
                        change.event == EventType::Deleted,
                        now,
                    );
                }
                Err(RecvError::Lagged(n)) => {
                    // Level-triggered catch-up: times are late by at most the lag.
                    eprintln!("(generator lagged {n} pod changes; catching up from the cache)");
                    let now = Utc::now();
                    let all = pods.list(Some(NAMESPACE), &Selector::everything());
                    let present: HashSet<String> =
                        all.iter().map(|p| p.metadata.uid.clone()).collect();
                    let mut t = tracker.lock().expect("tracker");
                    for p in all {
                        t.observe(&p, false, now);
                    }
                    let mut gone = 0;
                    for track in t
                        .pods
                        .iter_mut()
                        .filter(|(uid, _)| !present.contains(*uid))
                        .map(|(_, t)| t)
                    {
                        if track.deleted.is_none() {
                            track.deleted = Some(now);
                            gone += 1;
                        }
                    }
                    t.deleted += gone;
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
}

fn pod_template(app: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"labels": {"app": app, BENCH_LABEL: "true"}},
        "spec": {"containers": [{"name": "main", "image": "shoal/pause:1",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
    })
}

fn run(args: Args) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (runtime, natsd) = common::start_nats_with(dir.path(), !args.no_auth, args.tls)?;
    let url = natsd.url();
    let identities = common::Identities::of(&runtime, &natsd)?;
    common::tracing_mode::export_to(&url, &identities.api);
    identities.issue_fleet(&runtime, &natsd, args.nodes)?;
    let cp = common::start_control_plane(url.clone(), &identities, true)?;
    println!(
        "control plane: API + controllers on one actix thread, the scheduler on another; node grace {:?}, default unreachable toleration {:?}",
        cp.tunables.node_monitor_grace, cp.tunables.default_unreachable_toleration
    );

    let result = runtime.block_on(bench(&args, &url, &natsd, &identities, &cp));
    drop(natsd);
    result
}

async fn bench(
    args: &Args,
    url: &str,
    natsd: &shoal_bus::natsd::Natsd,
    identities: &common::Identities,
    cp: &common::ControlPlane,
) -> Result<()> {
    // The generator acts as an operator would.
    let nats = shoal_bus::connect(url, "bench-generator", &identities.admin).await?;
    let api = ApiClient::new(nats.clone()).with_deadline(Duration::from_secs(60));

    // 1. The write capacity of this machine's JetStream, before anything else loads it. The
    // baseline publishes straight into the state stream: only the API's identity may.
    let raw_nats = shoal_bus::connect(url, "bench-raw", &identities.api).await?;
    let raw = common::raw_publishes(&raw_nats, args.raw_count, args.concurrency).await?;
    println!("\n== raw JetStream publish (baseline) ==");
    println!(
        "{raw:.0} msgs/s ({} pod-sized messages, {} awaiting acks)",
        args.raw_count, args.concurrency
    );

    // 2. The fleet.
    let heartbeat = Duration::from_millis(args.heartbeat_ms);
    println!(
        "\n== hollow fleet: {} nodes, heartbeat every {:?} ==",
        args.nodes, heartbeat
    );
    println!(
        "heartbeat load: {:.0} Lease writes/s ({:.0}% of the raw JetStream rate)",
        args.nodes as f64 / heartbeat.as_secs_f64(),
        100.0 * args.nodes as f64 / heartbeat.as_secs_f64() / raw
    );
    let start = Instant::now();
    let fleet_args = (url.to_string(), identities.clone(), args.nodes, heartbeat);
    let mut fleet = tokio::task::spawn_blocking(move || {
        HollowFleet::spawn(&fleet_args.0, &fleet_args.1, fleet_args.2, fleet_args.3)
    })
    .await??;
    let nodes: Informer<Node> = cp.informers.get();
    let mut last = Instant::now();
    loop {
        let all = nodes.list(None, &Selector::everything());
        let ready = all.iter().filter(|n| is_ready(n)).count();
        if ready >= args.nodes {
            break;
        }
        if last.elapsed() >= Duration::from_secs(5) {
            last = Instant::now();
            println!(
                "  [{:>5.0} s] nodes registered {}, Ready {}",
                start.elapsed().as_secs_f64(),
                all.len(),
                ready
            );
        }
        if start.elapsed() > Duration::from_secs(args.stall_seconds.max(60) * 3) {
            println!("  gave up waiting: only {ready} nodes Ready");
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "{} nodes Ready after {:.1} s",
        args.nodes,
        start.elapsed().as_secs_f64()
    );
    println!("memory (idle fleet): {}", memory_line(Some(fleet.pid())));

    // 3. The workload.
    let pods: Informer<Pod> = cp.informers.get();
    let tracker = Arc::new(Mutex::new(Tracker::default()));
    spawn_tracker(pods.clone(), tracker.clone());
    let writes = WriteCounts::start(&cp.informers, &api).await;
    let traffic_before = common::BusTraffic::read(natsd).await;
    println!("\n== workload: {} pods, {:?} ==", args.pods, args.workload);
    let t0 = Utc::now();
    let start = Instant::now();
    let create_latencies = Arc::new(Mutex::new(Vec::new()));
    let creator = {
        let (api, args_pods, workload, per, conc) = (
            api.clone(),
            args.pods,
            args.workload,
            args.replicas_per_deployment.max(1),
            args.concurrency,
        );
        let lat = create_latencies.clone();
        tokio::spawn(async move { create_workload(api, args_pods, workload, per, conc, lat).await })
    };
    let mut peak_parent = 0u64;
    let mut peak_line = String::new();
    let mut last_change = (Instant::now(), 0usize, 0usize);
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (seen, bound, running) = {
            let t = tracker.lock().expect("tracker");
            (t.pods.len(), t.bound, t.running)
        };
        let m = cp.scheduler.snapshot();
        let elapsed = start.elapsed().as_secs_f64();
        println!(
            "  [{elapsed:>5.0} s] created {seen:>6}  bound {bound:>6}  Running {running:>6}  ({:.0} Running/s)  scheduler: attempts {} conflicts {} unschedulable {}",
            running as f64 / elapsed, m.attempts, m.conflicts, m.unschedulable
        );
        if let Some((rss, _)) = common::rss_kib(std::process::id()) {
            if rss > peak_parent {
                peak_parent = rss;
                peak_line = memory_line(Some(fleet.pid()));
            }
        }
        if running >= args.pods {
            break;
        }
        if (bound, running) != (last_change.1, last_change.2) {
            last_change = (Instant::now(), bound, running);
        } else if last_change.0.elapsed() > Duration::from_secs(args.stall_seconds) {
            println!(
                "  no progress for {} s: reporting what completed",
                args.stall_seconds
            );
            break;
        }
    }
    match creator.await? {
        Ok(()) => {}
        Err(e) => println!("  creates failed: {e:#}"),
    }
    let end_line = memory_line(Some(fleet.pid()));
    writes.report(&api, args.pods).await;
    if let (Some(before), Some(after)) = (traffic_before, common::BusTraffic::read(natsd).await) {
        println!(
            "bus traffic during the workload, per pod: {}",
            after.per(&before, args.pods)
        );
    }
    let rates = report_workload(
        args,
        &tracker.lock().expect("tracker"),
        t0,
        &create_latencies.lock().expect("latencies"),
    );
    println!("{}", rates.line());
    println!("\n== memory at {} pods ==", args.pods);
    println!("now:                       {end_line}");
    println!("when this process peaked:  {peak_line}");
    println!("(this process = API + scheduler + controllers + the generator's per-pod timestamps; goal <= 2 GiB for the control plane at 150,000 pods)");

    // 4. Failover.
    if args.skip_failover {
        return Ok(());
    }
    if args.workload != Workload::Deployments {
        println!(
            "\n== failover skipped: bare pods are not replaced; use --workload deployments =="
        );
        return Ok(());
    }
    failover(args, cp, &mut fleet, &pods, &nodes, &tracker).await
}

fn is_ready(node: &Node) -> bool {
    find_condition(&node.status.conditions, "Ready").is_some_and(|c| c.status == "True")
}

async fn create_workload(
    api: ApiClient,
    pods: usize,
    workload: Workload,
    per_deployment: usize,
    concurrency: usize,
    latencies: Arc<Mutex<Vec<Duration>>>,
) -> Result<()> {
    let sem = Arc::new(Semaphore::new(concurrency));
    let mut tasks = Vec::new();
    let mut create = |obj: serde_json::Value, is_pod: bool| -> Result<()> {
        let api = api.clone();
        let sem = sem.clone();
        let latencies = latencies.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await?;
            let t = Instant::now();
            if is_pod {
                let pod: Pod = serde_json::from_value(obj)?;
                api.create(&pod).await?;
            } else {
                let d: Deployment = serde_json::from_value(obj)?;
                api.create(&d).await?;
            }
            latencies.lock().expect("latencies").push(t.elapsed());
            anyhow::Ok(())
        }));
        Ok(())
    };
    match workload {
        Workload::Pods => {
            for i in 0..pods {
                let mut pod = pod_template("direct");
                pod["apiVersion"] = "v1".into();
                pod["kind"] = "Pod".into();
                pod["metadata"]["name"] = format!("direct-{i:06}").into();
                pod["metadata"]["namespace"] = NAMESPACE.into();
                create(pod, true)?;
            }
        }
        Workload::Deployments => {
            let mut left = pods;
            let mut d = 0;
            while left > 0 {
                let replicas = left.min(per_deployment);
                left -= replicas;
                let app = format!("bench-{d:04}");
                let deployment = serde_json::json!({
                    "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": app, "namespace": NAMESPACE},
                    "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                             "template": pod_template(&app)}
                });
                create(deployment, false)?;
                d += 1;
            }
        }
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// A run's two figures `--compare-auth` compares.
struct Rates {
    /// Pods created per second through the API, first create to last (API clock).
    creates: f64,
    /// Pods Running per second, first create to last Running.
    running: f64,
}

impl Rates {
    const PREFIX: &'static str = "rates:";

    /// One line a parent process parses back ([`Rates::parse`]).
    fn line(&self) -> String {
        format!(
            "{} creates/s {:.1} running/s {:.1}",
            Rates::PREFIX,
            self.creates,
            self.running
        )
    }

    fn parse(line: &str) -> Option<Rates> {
        let mut words = line.strip_prefix(Rates::PREFIX)?.split_whitespace();
        let mut value = |name: &str| {
            (words.next()? == name)
                .then(|| words.next()?.parse::<f64>().ok())
                .flatten()
        };
        Some(Rates {
            creates: value("creates/s")?,
            running: value("running/s")?,
        })
    }
}

fn report_workload(
    args: &Args,
    tracker: &Tracker,
    t0: Time,
    create_latencies: &[Duration],
) -> Rates {
    let created: Vec<Time> = tracker.pods.values().filter_map(|t| t.created).collect();
    let create_span = match (created.iter().min(), created.iter().max()) {
        (Some(first), Some(last)) => between(*first, *last),
        _ => Duration::ZERO,
    };
    let mut to_bound = Vec::new();
    let mut to_running = Vec::new();
    let mut bound_to_running = Vec::new();
    let mut last_running: Option<Time> = None;
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for t in tracker.pods.values() {
        let Some(created) = t.created else { continue };
        if let Some(b) = t.bound {
            to_bound.push(between(created, b));
            *per_node.entry(t.node.clone()).or_default() += 1;
        }
        if let Some(r) = t.running {
            to_running.push(between(created, r));
            last_running = last_running.max(Some(r));
            if let Some(b) = t.bound {
                bound_to_running.push(between(b, r));
            }
        }
    }
    let running = to_running.len();
    let span = last_running.map(|l| between(t0, l)).unwrap_or_default();
    println!(
        "\n== scheduling: {} pods on {} hollow nodes ({:?}) ==",
        args.pods, args.nodes, args.workload
    );
    let rates = Rates {
        creates: created.len() as f64 / create_span.as_secs_f64().max(1e-9),
        running: running as f64 / span.as_secs_f64().max(1e-9),
    };
    println!(
        "Running {running}/{} in {:.1} s (first create → last Running): {:.0} pods/s   (goal >= 1,000 pods/s)",
        args.pods,
        span.as_secs_f64(),
        rates.running
    );
    println!(
        "pods created {} in {:.1} s: {:.0} creates/s",
        created.len(),
        create_span.as_secs_f64(),
        rates.creates
    );
    println!("create → bound:    {}", describe(&mut to_bound));
    println!("create → Running:  {}", describe(&mut to_running));
    println!("bound → Running:   {}", describe(&mut bound_to_running));
    let mut lat = create_latencies.to_vec();
    println!("API create calls:  {}", describe(&mut lat));
    if !per_node.is_empty() {
        let (min, max) = (
            per_node.values().min().copied().unwrap_or(0),
            per_node.values().max().copied().unwrap_or(0),
        );
        println!(
            "spread: {} nodes used, {min}..{max} pods per node",
            per_node.len()
        );
    }
    rates
}

async fn failover(
    args: &Args,
    cp: &common::ControlPlane,
    fleet: &mut HollowFleet,
    pods: &Informer<Pod>,
    nodes: &Informer<Node>,
    tracker: &Arc<Mutex<Tracker>>,
) -> Result<()> {
    let count =
        ((args.nodes as f64 * args.failover_percent / 100.0).round() as usize).clamp(1, args.nodes);
    let stride = args.nodes / count;
    let victims_nodes: Vec<String> = (0..count).map(|k| common::node_name(k * stride)).collect();
    let victim_pods: HashSet<String> = victims_nodes
        .iter()
        .flat_map(|n| pods.by_index(INDEX_NODE, n))
        .filter(|p| {
            p.metadata.labels.contains_key(BENCH_LABEL) && p.metadata.controller_ref().is_some()
        })
        .map(|p| p.metadata.uid.clone())
        .collect();
    println!(
        "\n== failover: stopping the agents of {count} nodes ({}%), {} pods on them ==",
        args.failover_percent,
        victim_pods.len()
    );
    println!(
        "node monitor grace {:?} + default unreachable toleration {:?}; heartbeat every {} ms",
        cp.tunables.node_monitor_grace,
        cp.tunables.default_unreachable_toleration,
        args.heartbeat_ms
    );
    let t_stop = Utc::now();
    fleet.stop_nodes(&victims_nodes)?;

    let mut not_ready: HashMap<String, Time> = HashMap::new();
    let start = Instant::now();
    let mut last_print = Instant::now();
    let mut last_progress = (Instant::now(), 0usize);
    let replacements_running = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Utc::now();
        for n in &victims_nodes {
            if !not_ready.contains_key(n) && nodes.get("", n).is_some_and(|node| !is_ready(&node)) {
                not_ready.insert(n.clone(), now);
            }
        }
        let (evicted, replaced) = {
            let t = tracker.lock().expect("tracker");
            let evicted = victim_pods
                .iter()
                .filter(|uid| t.pods.get(*uid).is_some_and(|p| p.deleted.is_some()))
                .count();
            let replaced = t
                .pods
                .values()
                .filter(|p| p.created.is_some_and(|c| c >= t_stop) && p.running.is_some())
                .count();
            (evicted, replaced)
        };
        if last_print.elapsed() >= Duration::from_secs(2) {
            last_print = Instant::now();
            println!(
                "  [{:>5.1} s] nodes NotReady {}/{}  evicted {}/{}  replacements Running {}",
                start.elapsed().as_secs_f64(),
                not_ready.len(),
                count,
                evicted,
                victim_pods.len(),
                replaced
            );
        }
        if replaced >= victim_pods.len() {
            break replaced;
        }
        if replaced != last_progress.1 {
            last_progress = (Instant::now(), replaced);
        } else if last_progress.0.elapsed() > Duration::from_secs(args.stall_seconds.max(60)) {
            println!("  no progress: reporting what completed");
            break replaced;
        }
    };

    // Pair, per ReplicaSet, the evicted pods (in eviction order) with the replacements (in
    // creation order): which replacement "is" which victim does not matter for percentiles.
    let t = tracker.lock().expect("tracker");
    let mut victims_by_rs: HashMap<String, Vec<&Track>> = HashMap::new();
    for uid in &victim_pods {
        if let Some(p) = t.pods.get(uid) {
            victims_by_rs
                .entry(p.owner.clone().unwrap_or_default())
                .or_default()
                .push(p);
        }
    }
    let mut new_by_rs: HashMap<String, Vec<&Track>> = HashMap::new();
    for p in t
        .pods
        .values()
        .filter(|p| p.created.is_some_and(|c| c >= t_stop))
    {
        new_by_rs
            .entry(p.owner.clone().unwrap_or_default())
            .or_default()
            .push(p);
    }
    let (mut from_stop, mut from_not_ready, mut from_eviction, mut elsewhere) =
        (Vec::new(), Vec::new(), Vec::new(), 0);
    let victim_set: HashSet<&String> = victims_nodes.iter().collect();
    for (rs, mut victims) in victims_by_rs {
        victims.sort_by_key(|p| p.deleted);
        let mut fresh = new_by_rs.remove(&rs).unwrap_or_default();
        fresh.sort_by_key(|p| p.created);
        for (v, r) in victims.iter().zip(fresh.iter()) {
            let Some(running) = r.running else { continue };
            if !victim_set.contains(&r.node) {
                elsewhere += 1;
            }
            from_stop.push(between(t_stop, running));
            if let Some(nr) = not_ready.get(&v.node) {
                from_not_ready.push(between(*nr, running));
            }
            if let Some(d) = v.deleted {
                from_eviction.push(between(d, running));
            }
        }
    }
    let mut marked: Vec<Duration> = not_ready.values().map(|nr| between(t_stop, *nr)).collect();
    println!(
        "\n== failover results ({} of {} pods replaced, {elsewhere} on other nodes) ==",
        replacements_running.min(victim_pods.len()),
        victim_pods.len()
    );
    println!(
        "agent stop → node NotReady:              {}",
        describe(&mut marked)
    );
    println!(
        "agent stop → replacement Running:        {}",
        describe(&mut from_stop)
    );
    println!(
        "node NotReady → replacement Running:     {}   (goal p99 <= 10 s)",
        describe(&mut from_not_ready)
    );
    println!(
        "eviction → replacement Running:          {}",
        describe(&mut from_eviction)
    );
    println!("memory: {}", memory_line(Some(fleet.pid())));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Rates;

    #[test]
    fn a_runs_rates_line_parses_back_and_other_lines_do_not() {
        let line = Rates {
            creates: 1234.5,
            running: 987.0,
        }
        .line();
        let parsed = Rates::parse(&line).expect("its own line parses");
        assert_eq!((parsed.creates, parsed.running), (1234.5, 987.0));
        assert!(Rates::parse("rates: creates/s x running/s 1").is_none());
        assert!(Rates::parse("rates: running/s 1 creates/s 2").is_none());
        assert!(Rates::parse("Running 100/100 in 0.5 s").is_none());
    }
}
