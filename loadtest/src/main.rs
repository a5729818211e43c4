//! `shoal-loadtest`: benchmarks that print figures (never pass/fail on timings).
//!
//! # Layout
//! - `api`: API create throughput and latency beside raw JetStream publishes to the same
//!   stream, p99 at a fixed offered rate, and list-by-selector latency.
//! - `stats`: percentiles and rates.

mod api;
mod stats;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "shoal-loadtest", about = "Shoal benchmarks: print figures, measured side by side")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// API create throughput/latency vs raw JetStream (sync_interval: always), and lists.
    Api(api::ApiArgs),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHOAL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match Cli::parse().command {
        Command::Api(args) => api::run(args),
    }
}
