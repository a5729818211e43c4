//! How a benchmark process traces. Untraced by default (plain logs), as the published
//! figures were measured. With `SHOAL_BENCH_TRACING=on` it installs Shoal's telemetry the
//! way `shoal up` does: spans sampled by the standard `OTEL_TRACES_SAMPLER` /
//! `OTEL_TRACES_SAMPLER_ARG` variables and exported to the cluster's `SHOAL_TRACES` stream.
//! `bench_tracing` sets these for the runs it compares, so tracing's cost is measured on
//! the real export path rather than on spans that go nowhere; [`UNSENT`] is for runs by
//! hand that ask what that path costs.

pub const SWITCH: &str = "SHOAL_BENCH_TRACING";
/// Set (with tracing on): spans are made and queued as ever, but the export thread sends
/// them nowhere, to tell what encoding, sending and storing them costs from what making them
/// does.
pub const UNSENT: &str = "SHOAL_BENCH_SPANS_UNSENT";

/// Sets up a benchmark process to run untraced (`None`) or traced at a sample `ratio`,
/// whatever the caller's environment says: the comparisons must differ in this alone.
#[allow(dead_code)] // `shoal-loadtest` includes this module too, and starts no such process.
pub fn trace_child(command: &mut std::process::Command, ratio: Option<f64>) {
    command.env_remove("OTEL_SDK_DISABLED").env_remove(UNSENT);
    match ratio {
        None => {
            command.env_remove(SWITCH);
        }
        Some(r) => {
            command
                .env(SWITCH, "on")
                .env("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
                .env("OTEL_TRACES_SAMPLER_ARG", r.to_string())
                .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
        }
    }
}

/// Keeps the span pipeline alive; dropping it flushes what is queued.
pub struct Tracing(#[allow(dead_code)] Option<shoal_telemetry::Telemetry>);

fn enabled() -> bool {
    std::env::var(SWITCH).is_ok_and(|v| v == "on")
}

/// The sample ratio `trace_child` gave this process (None: untraced).
#[allow(dead_code)] // Only `bench_span` asks.
pub fn sample_ratio() -> Option<f64> {
    if !enabled() {
        return None;
    }
    std::env::var("OTEL_TRACES_SAMPLER_ARG").ok()?.parse().ok()
}

/// Installs the process's subscriber; `process` names the spans' default actor.
pub fn init(process: &str) -> Tracing {
    let log_filter = std::env::var("SHOAL_LOG").unwrap_or_else(|_| "warn".into());
    if !enabled() {
        tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_new(&log_filter)
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
            )
            .with_writer(std::io::stderr)
            .init();
        return Tracing(None);
    }
    match shoal_telemetry::init(shoal_telemetry::TelemetryConfig {
        service: format!("shoal-bench-{process}"),
        default_actor: process.into(),
        log_filter,
        log_format: shoal_telemetry::LogFormat::Text,
        otlp_endpoint: None,
    }) {
        Ok(telemetry) => Tracing(Some(telemetry)),
        Err(e) => {
            eprintln!("{SWITCH}=on but tracing could not start: {e}");
            std::process::exit(2);
        }
    }
}

/// Names the cluster the spans go to, once its nats-server is up, and the identity they are
/// exported with: the API's here, whose spans (and the other actors' of this process) it may
/// publish under any actor's name.
pub fn export_to(url: &str, auth: &shoal_bus::auth::ClientAuth) {
    if enabled() && std::env::var(UNSENT).is_err() {
        let auth = auth.clone();
        shoal_telemetry::jetstream::export_as(url, move |options| auth.apply(options));
    }
}
