//! `shoal-loadtest`: benchmarks that print figures (never pass/fail on timings).
//!
//! # Layout
//! - `api`: API create throughput and latency beside raw JetStream publishes to the same
//!   stream, p99 at a fixed offered rate, and list-by-selector latency.
//! - `pods`: pod create → Running latency on a real node, through a watch.
//! - `config_propagation`: a ConfigMap update → visible in N running pods' volumes.
//! - `real_node`: one real node (agent, Linux runtime, test image) for `pods` and `configmap`.
//! - `stats`: percentiles and rates.
//! - `tracing_mode`: untraced, or traced as `shoal up` is (for `bench_tracing`).
//! - `chaos`: a three-host R3 cluster under churn and faults, and a history checker.
//! - `src/bin/`: the runtime, scheduling, hollow-node and autoscaler (`bench_autoscaler/`)
//!   benchmarks.

mod api;
mod chaos;
mod config_propagation;
mod control_plane;
mod pods;
mod raw;
mod real_node;
mod stats;
mod tracing_mode;

use clap::{Parser, Subcommand};

// The control plane and the hollow fleet churn through many small, short-lived objects;
// mimalloc keeps their memory compact where glibc's per-thread arenas fragment.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "shoal-loadtest",
    about = "Shoal benchmarks: print figures, measured side by side"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// API create throughput/latency vs raw JetStream (sync_interval: always), and lists.
    Api(api::ApiArgs),
    /// Pod create → Running on a real node (scheduler + agent + containers), p50/p99.
    Pods(pods::PodsArgs),
    /// ConfigMap update → visible in N running pods' volumes on a real node, p50/p99.
    Configmap(config_propagation::ConfigArgs),
    /// A three-host NATS cluster at R3 under churn and faults; checks the history after.
    Chaos(chaos::ChaosArgs),
}

fn main() -> anyhow::Result<()> {
    let _tracing = tracing_mode::init("loadtest");
    match Cli::parse().command {
        Command::Api(args) => api::run(args),
        Command::Pods(args) => pods::run(args),
        Command::Chaos(args) => chaos::run(args),
        Command::Configmap(args) => config_propagation::run(args),
    }
}
