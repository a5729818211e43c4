//! `bench_scheduling --compare-auth`: the same workload with identities off, on, and on with
//! TLS,
//! each run a process of its own (this binary again, with `--no-auth` for the first), so
//! neither run's leftover actors, fleet or memory weigh on the other's figures. Each run
//! prints its rates on one line ([`super::Rates`]); this side echoes the runs and prints
//! both rates and the ratios against the goals.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use super::Rates;

/// The runs compared: a label and the extra flags of its process.
const RUNS: [(&str, &[&str]); 3] = [
    ("identities off", &["--no-auth"]),
    ("identities on", &[]),
    ("identities + TLS", &["--tls"]),
];

pub fn run() -> Result<()> {
    // The same arguments, minus the mode switches this side handles; failover is not part
    // of the comparison (only the create and scheduling phases are compared).
    let passed: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| {
            a != "--compare-auth" && a != "--no-auth" && a != "--tls" && a != "--skip-failover"
        })
        .collect();
    let mut results = Vec::new();
    for (label, flags) in RUNS {
        println!("\n######## {label} ########");
        results.push((
            label,
            one_run(&passed, flags).with_context(|| label.to_string())?,
        ));
    }
    let (_, base) = &results[0];
    println!("\n== identities: API create rate and scheduling throughput ==");
    println!(
        "{:<16} {:>12} {:>12} {:>14} {:>14}",
        "", "creates/s", "Running/s", "creates ratio", "Running ratio"
    );
    for (label, r) in &results {
        println!(
            "{label:<16} {:>12.0} {:>12.0} {:>14.3} {:>14.3}",
            r.creates,
            r.running,
            r.creates / base.creates.max(1e-9),
            r.running / base.running.max(1e-9)
        );
    }
    println!("(ratios against identities off; goal >= 0.95 with identities, >= 0.9 with TLS)");
    Ok(())
}

/// Runs this binary once with `passed` and `flags`, echoing its output; returns its rates.
fn one_run(passed: &[String], flags: &[&str]) -> Result<Rates> {
    let exe = std::env::current_exe().context("locating this binary")?;
    let mut command = Command::new(exe);
    command
        .args(passed)
        .args(flags)
        .arg("--skip-failover")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // An interrupted comparison takes its run (and so the run's nats-server and fleet) along.
    let mut child = shoal_bus::tied::spawn(command, nix::sys::signal::Signal::SIGKILL)
        .context("starting a run")?;
    let stdout = child.stdout.take().context("the run's stdout")?;
    let mut rates = None;
    for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
        println!("  {line}");
        if let Some(r) = Rates::parse(&line) {
            rates = Some(r);
        }
    }
    let status = child.wait().context("waiting for the run")?;
    match rates {
        Some(r) if status.success() => Ok(r),
        Some(_) => bail!("the run printed its rates but then failed: {status}"),
        None => bail!("the run ended ({status}) without printing its rates"),
    }
}
