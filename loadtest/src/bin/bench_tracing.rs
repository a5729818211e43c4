//! What tracing costs: `shoal-loadtest api` and `bench_scheduling` run with tracing off, at a
//! 0.01 sample ratio and at 1.0, one after the other in this run, each as its own process
//! (a process installs one tracing pipeline for its life). Traced runs export every sampled
//! span to the cluster's `SHOAL_TRACES` stream, as `shoal up` does with no collector. Prints
//! each figure and its ratio to the untraced run (goals: ≥ 0.95× at 0.01, ≥ 0.85× at 1.0).

mod common;
#[allow(dead_code)]
#[path = "../stats.rs"]
mod stats;

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Parser;
use stats::median;

#[derive(Parser)]
#[command(about = "API create rate and scheduling throughput with tracing off, at 0.01 and at 1.0")]
struct Args {
    /// Objects per throughput phase of `shoal-loadtest api`.
    #[arg(long, default_value_t = 10_000)]
    count: usize,
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    #[arg(long, default_value_t = 30_000)]
    pods: usize,
    /// Sample ratios compared with the untraced run.
    #[arg(long, value_delimiter = ',', default_values_t = vec![0.01, 1.0])]
    ratios: Vec<f64>,
    /// Only the API benchmark (the scheduling one takes minutes).
    #[arg(long)]
    skip_scheduling: bool,
    /// Runs of each setting, taken in turn (off, each ratio, off, …): the median counts, as
    /// one run of the same setting differs from the next by up to 15 % on this machine.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
}

/// One benchmark: the binary, its arguments, and how to read its figure from its output.
struct Workload {
    name: &'static str,
    unit: &'static str,
    binary: &'static str,
    args: Vec<String>,
    figure: fn(&str) -> Option<f64>,
}

/// `API create:   4771 creates/s   (p50 …)`
fn api_rate(out: &str) -> Option<f64> {
    let line = out.lines().find(|l| l.starts_with("API create:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// `Running 30000/30000 in 23.1 s (first create → last Running): 1299 pods/s   (goal …)`
fn scheduling_rate(out: &str) -> Option<f64> {
    let line = out
        .lines()
        .find(|l| l.starts_with("Running ") && l.contains("pods/s"))?;
    let before = line.split(" pods/s").next()?;
    before.rsplit(' ').next()?.parse().ok()
}

fn sibling(binary: &str) -> Result<PathBuf> {
    let me = std::env::current_exe().context("locating this benchmark")?;
    let path = me.with_file_name(binary);
    if !path.exists() {
        bail!(
            "{} is missing: build it with `cargo build --release -p shoal-loadtest`",
            path.display()
        );
    }
    Ok(path)
}

/// Runs one benchmark process with tracing off (`None`) or at `ratio`, returning its figure.
fn run(workload: &Workload, ratio: Option<f64>) -> Result<f64> {
    let mut command = Command::new(sibling(workload.binary)?);
    command.args(&workload.args);
    common::tracing_mode::trace_child(&mut command, ratio);
    let output = command
        .output()
        .with_context(|| format!("running {}", workload.binary))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "{} failed ({}):\n{}\n{}",
            workload.binary,
            output.status,
            stdout,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    (workload.figure)(&stdout).with_context(|| {
        format!(
            "no {} figure in {}'s output:\n{stdout}",
            workload.unit, workload.binary
        )
    })
}

fn label(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "off".to_string(), |r| format!("{r}"))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut workloads = vec![Workload {
        name: "API creates (shoal-loadtest api)",
        unit: "creates/s",
        binary: "shoal-loadtest",
        args: vec![
            "api".into(),
            "--count".into(),
            args.count.to_string(),
            "--rate-seconds".into(),
            "1".into(),
        ],
        figure: api_rate,
    }];
    if !args.skip_scheduling {
        workloads.push(Workload {
            name: "scheduling (bench_scheduling)",
            unit: "pods/s",
            binary: "bench_scheduling",
            args: vec![
                "--nodes".into(),
                args.nodes.to_string(),
                "--pods".into(),
                args.pods.to_string(),
                "--skip-failover".into(),
            ],
            figure: scheduling_rate,
        });
    }
    let settings: Vec<Option<f64>> = std::iter::once(None)
        .chain(args.ratios.iter().copied().map(Some))
        .collect();
    let rounds = args.rounds.max(1);
    let total = workloads.len() * settings.len() * rounds;
    let mut results = Vec::new();
    let mut done = 0;
    for workload in &workloads {
        let mut runs: Vec<Vec<f64>> = vec![Vec::new(); settings.len()];
        for _ in 0..rounds {
            for (i, &ratio) in settings.iter().enumerate() {
                done += 1;
                eprintln!(
                    "[{done}/{total}] {} with tracing {} …",
                    workload.name,
                    label(ratio)
                );
                let figure = run(workload, ratio)?;
                eprintln!("        {figure:.0} {}", workload.unit);
                runs[i].push(figure);
            }
        }
        results.push((workload, runs));
    }
    println!("\n== tracing overhead (spans exported to SHOAL_TRACES) ==");
    for (workload, runs) in results {
        let off = median(&runs[0]);
        println!(
            "{}{}:",
            workload.name,
            if rounds > 1 {
                ", median of the runs"
            } else {
                ""
            }
        );
        for (&ratio, figures) in settings.iter().zip(&runs) {
            let goal = match ratio {
                None => String::from("baseline"),
                Some(r) if r <= 0.01 => String::from("goal >= 0.95"),
                Some(_) => String::from("goal >= 0.85"),
            };
            let each: Vec<String> = figures.iter().map(|f| format!("{f:.0}")).collect();
            println!(
                "  tracing {:>4}: {:>8.0} {}   {:.2}× off   ({goal})   runs: {}",
                label(ratio),
                median(figures),
                workload.unit,
                median(figures) / off,
                each.join(", ")
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_read_from_the_benchmarks_own_lines() {
        let api = "raw JetStream publish:       8880 msgs/s\nAPI create:                  4771 creates/s   (p50 12.4 ms)\n";
        assert_eq!(api_rate(api), Some(4771.0));
        let sched = "Running 30000/30000 in 23.1 s (first create → last Running): 1299 pods/s   (goal >= 1,000 pods/s)\n";
        assert_eq!(scheduling_rate(sched), Some(1299.0));
        assert_eq!(api_rate("nothing"), None);
    }

    #[test]
    fn the_median_of_odd_and_even_runs() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
