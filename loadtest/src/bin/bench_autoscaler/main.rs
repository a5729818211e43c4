//! The autoscaler's benchmarks (issue 12), each a subcommand runnable alone, bounded in time,
//! printing its figures beside the Kubernetes default it is compared with; never asserting
//! timings.
//!
//! - `step`: real busybox pods on a real node sampling usage every second; a CPU load step →
//!   the sample that crosses the target → the HPA's decision → the new replicas Ready.
//! - `from-zero`: a consumer Deployment at 0 scaled on `jetstream_consumer_lag`; one message
//!   published → consumed and acked by the pod the HPA started (a real container running this
//!   binary's `consume`).
//! - `stability`: synthetic usage oscillating ±5 % around the target for pods on a hollow
//!   node, published as that node; rescales counted (expected 0).
//! - `scale`: N HPAs over N one-pod Deployments on hollow nodes with synthetic usage; the
//!   autoscaler's pass duration and its process's memory.
//!
//! # Layout
//! - `autoscaler_process`: the autoscaler (and, for real nodes, the controllers) as `shoal up
//!   --join URL --actors …`, a process of their own; its `/metrics` pass durations and RSS.
//! - `hollow_cluster`: the hollow-node cluster of `stability` and `scale`.
//! - `usage`: synthetic usage samples, published as the node hosting the pod would.
//! - `objects`: the Deployments, HPAs and namespace the benchmarks create, and waiting.
//! - `step`, `from_zero`, `consume`, `stability`, `scale`: one benchmark (or its pod) each.
//!
//! Every part connects with its own identity: the control plane and node as in the other
//! benchmarks, the generator as `admin`, the autoscaler process as `autoscaler`, synthetic
//! samples as the hollow node, the application (stream, messages, the consumer pod) as
//! `app:<name>`. The step benchmark reads usage samples, which only the autoscaler's role may
//! subscribe to, with the autoscaler's identity.

#[path = "../common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../../control_plane.rs"]
mod control_plane;
#[allow(dead_code)]
#[path = "../../real_node.rs"]
mod real_node;

mod autoscaler_process;
mod consume;
mod from_zero;
mod hollow_cluster;
mod objects;
mod scale;
mod stability;
mod step;
mod usage;

use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

// The control plane and the hollow fleet churn through many small, short-lived objects;
// mimalloc keeps their memory compact where glibc's per-thread arenas fragment.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "The autoscaler's benchmarks: step response, from zero, stability, scale")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// (internal) Be the hollow-node child process of `scale` / `stability`.
    #[arg(long, hide = true)]
    hollow_only: bool,
    #[arg(long, hide = true)]
    url: Option<String>,
    #[arg(long, hide = true, default_value_t = 1)]
    nodes: usize,
    #[arg(long, hide = true, default_value_t = 10_000)]
    heartbeat_ms: u64,
    #[arg(long, hide = true)]
    auth_dir: Option<std::path::PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// CPU load step on real pods → sample crossing the target → decision → replicas Ready.
    Step(step::StepArgs),
    /// One message to an idle JetStream work queue → consumed by the pod scaled from zero.
    FromZero(from_zero::FromZeroArgs),
    /// Usage oscillating ±5 % around the target (synthetic, hollow node) → rescales.
    Stability(stability::StabilityArgs),
    /// N HPAs on hollow nodes with synthetic usage: pass duration and autoscaler RSS.
    Scale(scale::ScaleArgs),
    /// (the from-zero pod's program) Consume and ack a JetStream work queue, reporting each.
    #[command(hide = true)]
    Consume(consume::ConsumeArgs),
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if cli.hollow_only {
        let url = cli.url.context("--hollow-only needs --url")?;
        return common::hollow_main(
            &url,
            cli.auth_dir.as_deref(),
            cli.nodes,
            Duration::from_millis(cli.heartbeat_ms),
        );
    }
    let Some(command) = cli.command else {
        anyhow::bail!("name a benchmark: step, from-zero, stability or scale (--help)");
    };
    if let Command::Consume(args) = command {
        return consume::run(args);
    }
    common::init_tracing();
    match command {
        Command::Step(args) => step::run(args),
        Command::FromZero(args) => from_zero::run(args),
        Command::Stability(args) => stability::run(args),
        Command::Scale(args) => scale::run(args),
        Command::Consume(_) => unreachable!("handled above"),
    }
}
