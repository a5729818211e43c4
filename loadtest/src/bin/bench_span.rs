//! What tracing costs an actor's thread per request, apart from everything else: the API's
//! request span with its four steps (decode, admission, validation, the CAS write), three
//! awaits inside it (each a poll that enters and leaves the span) and the traceparent the
//! object event carries, on one thread, with tracing off, at a 0.01 sample ratio and at 1.0.
//!
//! `bench_tracing` measures the whole cluster, where two cores are shared by nats-server, the
//! control plane and 1,000 hollow nodes and one run differs from the next by up to 15 %: it
//! cannot tell a change of a few percent in the cost of a span from the noise. This can, and
//! says where a traced run's extra time goes in-process. The spans are exported nowhere (no
//! cluster): encoding and storing them is `bench_tracing`'s to measure. Each setting runs in
//! its own process, as a process installs one tracing pipeline for its life.

#[allow(dead_code)]
#[path = "../stats.rs"]
mod stats;
#[allow(dead_code)]
#[path = "../tracing_mode.rs"]
mod tracing_mode;

use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use stats::median;

// As every Shoal binary: the traced path is allocation-heavy, so the allocator matters.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CHILD: &str = "SHOAL_BENCH_SPAN_CHILD";

#[derive(Parser)]
#[command(about = "In-process cost of a traced API request: tracing off, at 0.01 and at 1.0")]
struct Args {
    /// Requests per measured round.
    #[arg(long, default_value_t = 200_000)]
    requests: u32,
    /// Measured rounds per setting (after one warm-up round); the median counts.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
}

/// Returns pending once, waking itself: a poll that leaves and re-enters the span, without
/// `yield_now`'s trip through the I/O driver (a system call that was half of the untraced
/// time).
struct PendingOnce(bool);

impl std::future::Future for PendingOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// One request as the API serves it, as far as tracing is concerned.
async fn request(n: u32) {
    let traced = shoal_api::telemetry::request_span("shoal.v1.api.pod.create", None);
    traced
        .run(async {
            let started = Instant::now();
            for _ in 0..3 {
                PendingOnce(false).await;
            }
            shoal_telemetry::step!(
                "api.decode",
                started,
                true,
                bytes = shoal_telemetry::int(880usize)
            );
            shoal_telemetry::step!("api.admission", started, true);
            shoal_telemetry::step!("api.validate", started, true);
            let written = Ok(shoal_bus::Written {
                revision: u64::from(n) + 1,
                duplicate: false,
            });
            shoal_api::telemetry::cas_written("Pod", "default", "web-7f9c", 0, started, &written);
            std::hint::black_box(shoal_api::telemetry::event_traceparent(None));
        })
        .await;
    traced.span().record("code", "201");
}

/// Microseconds per request, one figure per measured round.
fn child(args: &Args) -> Vec<f64> {
    let _tracing = tracing_mode::init("api");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async {
        let mut figures = Vec::new();
        for round in 0..=args.rounds {
            let started = Instant::now();
            for n in 0..args.requests {
                request(n).await;
            }
            let per = started.elapsed().as_secs_f64() * 1e6 / f64::from(args.requests);
            if round > 0 {
                figures.push(per);
            }
        }
        figures
    })
}

fn run_setting(args: &Args, ratio: Option<f64>) -> Result<Vec<f64>> {
    let exe = std::env::current_exe().context("locating this binary")?;
    let mut command = Command::new(exe);
    command
        .arg("--requests")
        .arg(args.requests.to_string())
        .arg("--rounds")
        .arg(args.rounds.to_string())
        .env(CHILD, "1");
    tracing_mode::trace_child(&mut command, ratio);
    let out = command.output().context("running a measuring process")?;
    if !out.status.success() {
        bail!(
            "the measuring process failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|f| f.parse::<f64>().context("reading a figure"))
        .collect()
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.rounds == 0 || args.requests == 0 {
        bail!("--rounds and --requests must be at least 1");
    }
    if std::env::var_os(CHILD).is_some() {
        let figures = child(&args);
        let line: Vec<String> = figures.iter().map(|f| format!("{f:.3}")).collect();
        println!("{}", line.join(" "));
        return Ok(());
    }
    println!(
        "one traced API request on one thread ({} requests a round, median of {} rounds)",
        args.requests, args.rounds
    );
    let mut off = None;
    for (label, ratio) in [("off", None), ("0.01", Some(0.01)), ("1", Some(1.0))] {
        eprintln!("tracing {label} …");
        let figures = run_setting(&args, ratio)?;
        let per = median(&figures);
        let runs: Vec<String> = figures.iter().map(|f| format!("{f:.2}")).collect();
        let base = *off.get_or_insert(per);
        println!(
            "  tracing {label:>4}: {per:6.2} µs a request   (+{:.2} µs)   runs: {}",
            per - base,
            runs.join(", ")
        );
    }
    Ok(())
}
