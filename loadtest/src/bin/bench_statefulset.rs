//! StatefulSet start-up on hollow nodes: `podManagementPolicy: OrderedReady` (each pod waits
//! for the one before it to be Running and Ready) against `Parallel` (all at once), time from
//! the StatefulSet's create to `status.readyReplicas == replicas`. Prints figures; never
//! asserts.
//!
//! Layout (as `bench_scheduling`): a nats-server child, the API actor, scheduler and
//! controllers in this process, and the hollow agents in a child process. The rounds
//! alternate the two policies on the same cluster, so both see the same load; each round
//! deletes its set and waits until its pods are gone before the next starts.
//!
//! The hollow runtime reports a container running as soon as it is asked to start one, so
//! the figures are the control plane's and the agents' report path: the StatefulSet
//! controller, the API, the scheduler and each node's status report, once per ordinal for
//! OrderedReady.
//!
//! Run: `cargo build --release -p shoal-loadtest && $CARGO_TARGET_DIR/release/bench_statefulset`

#[path = "common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bus_schemas::api::{DeleteOptions, ListOptions};
use bus_schemas::kinds::{Pod, StatefulSet};
use clap::Parser;
use shoal_bus::ApiClient;

use common::HollowFleet;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "StatefulSet OrderedReady vs Parallel: create → all Ready, on hollow nodes")]
struct Args {
    #[arg(long, default_value_t = 50)]
    replicas: usize,
    #[arg(long, default_value_t = 10)]
    nodes: usize,
    /// Rounds per policy (alternating).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long, default_value_t = 2000)]
    heartbeat_ms: u64,
    /// A round that has not finished by then is reported as a failure.
    #[arg(long, default_value_t = 300)]
    give_up_seconds: u64,
    /// (internal) Be the hollow-node child process.
    #[arg(long, hide = true)]
    hollow_only: bool,
    #[arg(long, hide = true)]
    url: Option<String>,
    /// (internal) The hollow-node child's identity directory.
    #[arg(long, hide = true)]
    auth_dir: Option<std::path::PathBuf>,
}

const POLL: Duration = Duration::from_millis(10);
const POLICIES: [&str; 2] = ["OrderedReady", "Parallel"];

fn main() -> Result<()> {
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
    let _cp = common::start_control_plane(url.clone(), &identities, true)?;
    let fleet = HollowFleet::spawn(
        &url,
        &identities,
        args.nodes,
        Duration::from_millis(args.heartbeat_ms),
    )?;
    let outcome = runtime.block_on(bench(&args, &url, &identities.admin));
    drop(fleet);
    drop(natsd);
    outcome
}

fn stateful_set(name: &str, replicas: usize, policy: &str) -> Result<StatefulSet> {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "main",
                    "image": "shoal/busybox:1.35", "command": ["sleep", "3600"],
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}
            }
        }
    }))
    .context("benchmark StatefulSet")
}

/// `admin`: the client acts as an operator would.
async fn bench(args: &Args, url: &str, admin: &shoal_bus::auth::ClientAuth) -> Result<()> {
    let nats = shoal_bus::connect(url, "bench-client", admin).await?;
    let api = ApiClient::new(nats).with_deadline(Duration::from_secs(30));
    wait_nodes_ready(&api, args.nodes).await?;
    println!(
        "{} hollow nodes Ready; {} rounds per policy of a {}-replica StatefulSet",
        args.nodes, args.rounds, args.replicas
    );

    let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for round in 0..args.rounds * 2 {
        let which = round % 2;
        let policy = POLICIES[which];
        let name = format!("bench-{}-{round}", policy.to_ascii_lowercase());
        let took = one_round(&api, &name, args.replicas, policy, args.give_up_seconds).await?;
        eprintln!(
            "  round {}: {policy:<12} all {} Ready in {:.2} s",
            round + 1,
            args.replicas,
            took.as_secs_f64()
        );
        times[which].push(took);
        remove(&api, &name).await?;
    }

    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let ordered = median(&mut times[0]);
    let parallel = median(&mut times[1]);
    println!();
    println!(
        "== StatefulSet of {} on {} hollow nodes: create → all Ready (median of {}) ==",
        args.replicas, args.nodes, args.rounds
    );
    println!(
        "OrderedReady {:.2} s ({:.1} ms per ordinal)   runs: {}",
        ordered.as_secs_f64(),
        ordered.as_secs_f64() * 1000.0 / args.replicas as f64,
        seconds(&times[0])
    );
    println!(
        "Parallel     {:.2} s   runs: {}",
        parallel.as_secs_f64(),
        seconds(&times[1])
    );
    println!(
        "OrderedReady / Parallel: {:.1}x",
        ordered.as_secs_f64() / parallel.as_secs_f64().max(1e-9)
    );
    Ok(())
}

fn seconds(samples: &[Duration]) -> String {
    samples
        .iter()
        .map(|d| format!("{:.2}", d.as_secs_f64()))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn wait_nodes_ready(api: &ApiClient, nodes: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let listed = api
            .list::<bus_schemas::kinds::Node>(&Default::default())
            .await?;
        let ready = listed
            .items
            .iter()
            .filter(|n| {
                bus_schemas::meta::find_condition(&n.status.conditions, "Ready")
                    .is_some_and(|c| c.status == "True")
            })
            .count();
        if ready >= nodes {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {ready}/{nodes} hollow nodes Ready after 5 minutes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn one_round(
    api: &ApiClient,
    name: &str,
    replicas: usize,
    policy: &str,
    give_up_seconds: u64,
) -> Result<Duration> {
    let set = stateful_set(name, replicas, policy)?;
    let started = Instant::now();
    api.create(&set).await.context("creating the StatefulSet")?;
    let mut last_ready = 0;
    loop {
        let set: StatefulSet = api.get("default", name).await?;
        let ready = set.status.ready_replicas as usize;
        if ready >= replicas {
            return Ok(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(give_up_seconds) {
            bail!("{name} ({policy}): {ready}/{replicas} Ready after {give_up_seconds} s");
        }
        if ready / 10 > last_ready / 10 {
            eprintln!("    {ready}/{replicas} Ready");
        }
        last_ready = ready;
        tokio::time::sleep(POLL).await;
    }
}

/// Deletes the set with its pods, and waits until they are gone.
async fn remove(api: &ApiClient, name: &str) -> Result<()> {
    let options = DeleteOptions {
        namespace: "default".into(),
        name: name.into(),
        propagation_policy: Some("Background".into()),
        ..Default::default()
    };
    api.delete::<StatefulSet>(&options).await?;
    let selector = ListOptions {
        namespace: "default".into(),
        label_selector: format!("app={name}"),
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left = api.list::<Pod>(&selector).await?.items.len();
        if left == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{left} pods of {name} still exist 2 minutes after its deletion");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
