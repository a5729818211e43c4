//! What tracing costs an actor's thread per request, apart from everything else: reading the
//! trace context from the request's headers, the API's request span with its four steps
//! (decode, admission, validation, the CAS write), three awaits inside it (each a poll that
//! enters and leaves the span) and the traceparent the object event carries, on one thread,
//! with tracing off, at a 0.01 sample ratio and at 1.0.
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

/// The headers a request arrives with, as the bus client sends them: a request id and a
/// timeout, and, from a sender that traces, the traceparent of its trace. Two of a pod's
/// three requests (its binding and its status) come from an actor continuing the pod's trace,
/// whose sampler kept it at the ratio's rate: here request `n`'s trace is kept when `n` falls
/// in the ratio's share of each hundred.
fn request_headers(n: u32, ratio: Option<f64>) -> async_nats::HeaderMap {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        shoal_bus::client::HEADER_REQUEST_ID,
        "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
    );
    headers.insert(shoal_bus::client::HEADER_TIMEOUT_MS, "5000");
    if let Some(ratio) = ratio {
        let kept = f64::from(n % 100) < ratio * 100.0;
        let traceparent = format!(
            "00-{:032x}-{:016x}-{}",
            0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_0000_u128 + u128::from(n),
            0x00f0_67aa_0ba9_02b7_u64,
            if kept { "01" } else { "00" }
        );
        headers.insert(
            shoal_telemetry::propagation::TRACEPARENT_HEADER,
            traceparent.as_str(),
        );
    }
    headers
}

/// One request as the API serves it, as far as tracing is concerned.
async fn request(n: u32, headers: &async_nats::HeaderMap) {
    let traced = shoal_api::telemetry::request_span("shoal.v1.api.pod.create", Some(headers));
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
    let ratio = tracing_mode::sample_ratio();
    // Built before the clock starts: the sender's work, not the API's.
    let headers: Vec<async_nats::HeaderMap> = (0..100).map(|n| request_headers(n, ratio)).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async {
        let mut figures = Vec::new();
        for round in 0..=args.rounds {
            let started = Instant::now();
            for n in 0..args.requests {
                request(n, &headers[(n % 100) as usize]).await;
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
