//! `shoal-loadtest chaos`: a three-host cluster (three nats-servers at R3 and, per host, an
//! API+naming process, a controllers+scheduler process and a process of hollow nodes) under
//! continuous churn while faults are injected; then a Jepsen-style check of the history the
//! client recorded.
//!
//! - [`cluster`]: the hosts (network namespaces), servers and actor processes, and the faults.
//! - [`churn`]: the workload, recording every acknowledged write.
//! - [`check`]: the history checker (pure: the recorded history and a final read in, findings
//!   out).
//! - [`inspect`]: inside the processes once settled: each node's real containers against the
//!   pods bound to it, each actor process's caches against fresh lists.
//! - [`throughput`]: R3 against R1 write throughput in the same cluster.

mod check;
mod churn;
mod cluster;
mod inspect;
mod throughput;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::stats::ms;

#[derive(Args, Clone)]
pub struct ChaosArgs {
    /// Seconds of churn under faults (the settle and the checks come after).
    #[arg(long, default_value_t = 300)]
    pub seconds: u64,
    /// Seconds between the end of one fault and the next.
    #[arg(long, default_value_t = 15)]
    pub fault_every: u64,
    /// Hollow nodes per host.
    #[arg(long, default_value_t = 2)]
    pub nodes_per_host: usize,
    /// Deployments churned.
    #[arg(long, default_value_t = 3)]
    pub deployments: usize,
    /// Seconds the cluster may take to settle after the churn stops.
    #[arg(long, default_value_t = 180)]
    pub settle_seconds: u64,
    /// Writes per stream in the R3-vs-R1 throughput phase.
    #[arg(long, default_value_t = 2000)]
    pub throughput_writes: usize,
    /// The `shoal` binary the actor processes run (default: next to this one).
    #[arg(long)]
    pub shoal_bin: Option<PathBuf>,
    /// The faults injected, in turn (e.g. `--faults cut` to study host cuts alone).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "actor,server,cut"
    )]
    pub faults: Vec<cluster::FaultKind>,
}

fn shoal_bin(args: &ChaosArgs) -> Result<PathBuf> {
    let path = match &args.shoal_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .map(|d| d.join("shoal"))
            .context("locating the shoal binary")?,
    };
    if !path.is_file() {
        bail!(
            "the shoal binary {} is missing: build it (`cargo build -p shoal-cli`, with --release for a release run) or pass --shoal-bin",
            path.display()
        );
    }
    Ok(path)
}

/// `SHOAL_CHAOS_DEBUG` set: every convergence poll is printed and the processes' logs are
/// kept, however the run ends.
pub fn debugging() -> bool {
    std::env::var_os("SHOAL_CHAOS_DEBUG").is_some()
}

pub fn run(args: ChaosArgs) -> Result<()> {
    let shoal = shoal_bin(&args)?;
    let fabric = cluster::fabric()?;
    let dir = tempfile::tempdir()?;
    let plan = cluster::Plan::new(&fabric, dir.path(), shoal);
    let client_netns = plan.client_netns.clone();
    let started = Instant::now();
    let report = shoal_bus::netns::spawn_in(&client_netns, move || run_on_client(args, plan))
        .join()
        .map_err(|_| anyhow::anyhow!("the chaos client panicked"))?
        .context("entering the client host")??;
    drop(fabric);
    println!("chaos run: {:.0} s in all", started.elapsed().as_secs_f64());
    report.print();
    if report.findings.is_empty() {
        if !report.unsettled.is_empty() || debugging() {
            // Not a violation of the history, but the logs are what explains it.
            let kept = dir.keep();
            println!("the processes' logs are kept in {}", kept.display());
        }
        Ok(())
    } else {
        // The processes' logs explain a violation: they outlive the run then.
        let kept = dir.keep();
        bail!(
            "{} violation(s) found; the processes' logs are in {}",
            report.findings.len(),
            kept.display()
        )
    }
}

pub struct Report {
    pub faults: Vec<cluster::FaultRecord>,
    pub history: churn::Counts,
    pub findings: Vec<String>,
    pub throughput: throughput::Figures,
    pub settle: Duration,
    pub unsettled: Vec<String>,
}

impl Report {
    fn print(&self) {
        println!("faults injected: {}", self.faults.len());
        for f in &self.faults {
            println!(
                "  {:>6.1}s  {:<40} converged in {}",
                f.at.as_secs_f64(),
                f.what,
                f.converged.describe()
            );
        }
        let mut conv: Vec<Duration> = self.faults.iter().filter_map(|f| f.converged.all).collect();
        if !conv.is_empty() {
            let s = crate::stats::summarize(&mut conv);
            println!(
                "convergence after a fault: p50 {} p99 {} (max {})",
                ms(s.p50),
                ms(s.p99),
                ms(s.max)
            );
        }
        let h = &self.history;
        println!(
            "writes: {} acknowledged ({} creates, {} counter CAS), {} indeterminate, {} lost, {} duplicated",
            h.acked_creates + h.acked_cas,
            h.acked_creates,
            h.acked_cas,
            h.indeterminate,
            h.lost,
            h.duplicated
        );
        println!(
            "churn: {} scales, {} rollouts, {} pod deletes; settled in {}",
            h.scales,
            h.rollouts,
            h.pod_deletes,
            ms(self.settle)
        );
        if !self.unsettled.is_empty() {
            println!(
                "not settled: {} pod(s) not Running on a Ready node: {}",
                self.unsettled.len(),
                self.unsettled.join(", ")
            );
        }
        let t = &self.throughput;
        println!(
            "write throughput: R3 {:.0}/s, R1 {:.0}/s (R3/R1 = {:.2}) over {} writes each",
            t.r3_per_sec,
            t.r1_per_sec,
            t.r3_per_sec / t.r1_per_sec.max(f64::MIN_POSITIVE),
            t.writes
        );
        if self.findings.is_empty() {
            println!("checks: all passed");
        } else {
            for f in &self.findings {
                println!("VIOLATION: {f}");
            }
        }
    }
}

async fn run_on_client(args: ChaosArgs, plan: cluster::Plan) -> Result<Report> {
    let mut world = cluster::World::start(plan, &args).await?;
    let throughput = throughput::measure(&world.api_nats, args.throughput_writes).await?;
    println!(
        "cluster up: 3 servers, {} actor processes; churning for {} s",
        world.processes.len(),
        args.seconds
    );
    let api = shoal_bus::ApiClient::new(world.nats.clone()).with_deadline(Duration::from_secs(8));
    let workload = churn::Workload::start(api.clone(), args.deployments).await?;
    let start = Instant::now();
    let mut faults = Vec::new();
    let mut round = 0usize;
    while start.elapsed() < Duration::from_secs(args.seconds) {
        tokio::time::sleep(Duration::from_secs(args.fault_every)).await;
        if start.elapsed() >= Duration::from_secs(args.seconds) {
            break;
        }
        let record = world.inject(round, &args.faults, start, &api).await;
        println!(
            "  fault {}: {} (converged in {})",
            round + 1,
            record.what,
            record.converged.describe()
        );
        faults.push(record);
        round += 1;
    }
    let history = workload.stop().await;
    let settle_start = Instant::now();
    let final_state = check::settle(
        &api,
        args.deployments,
        Duration::from_secs(args.settle_seconds),
    )
    .await;
    let settle = settle_start.elapsed();
    let (counts, mut findings) = check::check(&history, &final_state);
    let nodes: Vec<String> = final_state.ready_nodes.iter().cloned().collect();
    findings.extend(inspect::containers(&api, &world.nats, &nodes).await);
    findings.extend(inspect::caches(&api, &world.nats, world.processes.len()).await);
    println!(
        "inside the processes: {} node runtimes against their bound pods, {} actor processes' caches against fresh lists",
        nodes.len(),
        world.processes.len()
    );
    let unsettled = final_state.unsettled.clone();
    world.stop().await;
    Ok(Report {
        faults,
        history: counts,
        findings,
        throughput,
        settle,
        unsettled,
    })
}
