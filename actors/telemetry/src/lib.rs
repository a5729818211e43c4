//! Traces and metrics for every Shoal actor.
//!
//! # Layout
//! - [`init`] (here): installs the process's `tracing` subscriber: logs (text, or JSON with
//!   `trace_id`/`span_id`) and the OpenTelemetry layer that turns `tracing` spans into
//!   OpenTelemetry spans, exported to OTLP (when an endpoint is set) and to `SHOAL_TRACES`.
//! - [`propagation`]: W3C trace context in NATS headers and traceparent strings.
//! - [`sampling`]: the sampler from `OTEL_TRACES_SAMPLER`/`OTEL_TRACES_SAMPLER_ARG`.
//! - [`queue`]: the bounded export queue that drops (and counts) rather than slow an actor.
//! - [`jetstream`]: the exporter to the `SHOAL_TRACES` stream; [`otlp_encode`]: its OTLP
//!   protobuf, written straight from the SDK's spans.
//! - [`traceview`]: reading one trace back from `SHOAL_TRACES` (for `shoal trace`).
//! - [`work`]: starting traced work, which costs nothing when its trace is not sampled.
//! - [`logfmt`]: the JSON log line format.
//! - [`metrics`]: every actor's Prometheus families; [`serve`]: `/metrics` and NATS health.
//! - [`step!`] (here) and [`steps`]: a short step of a span's work, an event on that span.
//! - `span_actors` (feature `test-support`): the actor each span names, for tests.

pub mod jetstream;
pub mod logfmt;
pub mod metrics;
pub mod otlp_encode;
pub mod propagation;
pub mod queue;
pub mod sampling;
pub mod serve;
#[cfg(any(test, feature = "test-support"))]
pub mod span_actors;
pub mod steps;
pub mod traceview;
pub mod work;

pub use jetstream::ACTOR_ATTRIBUTE;

/// Records a short step of the current span's work (decoding, admission, filtering…) as an
/// event on that span: its name, `duration_us`, `outcome = "failed"` when it failed, and the
/// given fields (`key = value`, or a variable's name). `shoal trace` shows it as a line under
/// its span. How it is recorded, and why not as a `tracing` event: [`steps`].
///
/// NOTE: why a step carries so little. A traced pod start records about 16 steps; with
/// every step left out, a scheduling run at a 1.0 ratio ran 5 % faster. Each text field is
/// an allocated string, so a step records no `outcome` when it went well (most do) and none
/// of what its span already says (the request's kind, the scheduling attempt's node count).
///
/// NOTE: why an event rather than a child span. A span costs its registry slot, its own
/// OpenTelemetry span and its export; a step lasts microseconds and happens on every
/// request, so at a 1.0 sample ratio child spans for them were a third of the API's spans.
/// The Kubernetes API server records the same steps of a request as events on its span.
/// Outside a recorded span (tracing off, or a trace sampled out) it does nothing, and its
/// fields are not evaluated.
#[macro_export]
macro_rules! step {
    ($name:literal, $started:expr, $ok:expr $(, $($field:tt)+)?) => {
        $crate::steps::record($name, &$started, $ok, || {
            $crate::__step_fields!([] $($($field)+)?)
        })
    };
}

/// A count or size as a traced field: `tracing-opentelemetry` records `i64` fields as
/// numbers, but has no recorder for `u64` (or `usize`), so it formats those into a string,
/// an allocation and a trip through `fmt` each, exported as text. Saturates at `i64::MAX`.
pub fn int<N: TryInto<i64>>(n: N) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

pub use metrics::metrics;
// Actors name counter handles they keep (a lookup once, then an atomic add per event).
/// The OTLP types `shoal trace` prints and tests receive.
pub use opentelemetry_proto;
pub use prometheus_client;
pub use prost;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct TelemetryConfig {
    /// `service.name` of the process's spans.
    pub service: String,
    /// The actor of spans that name none: `cli`, `up`, `node`.
    pub default_actor: String,
    /// Log filter directives (SHOAL_LOG syntax).
    pub log_filter: String,
    pub log_format: LogFormat,
    /// Base URL of an OTLP collector (`--otlp-endpoint`, else `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub otlp_endpoint: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(transparent)]
    Sampling(#[from] sampling::SamplingError),
    #[error("OTEL_EXPORTER_OTLP_PROTOCOL={0:?}: use grpc or http/protobuf")]
    Protocol(String),
    #[error("starting a span export thread: {0}")]
    Thread(#[from] std::io::Error),
    #[error("a tracing subscriber is already installed")]
    AlreadyInstalled,
}

/// Flushes the process's spans when dropped (or by [`Telemetry::shutdown`]).
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Sends what has ended so far, waiting a few seconds at most.
    pub fn flush(&self) {
        if let Some(p) = &self.provider {
            let _ = p.force_flush();
        }
    }

    pub fn shutdown(mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

/// Set once this process's OpenTelemetry layer is installed: before (and without) it,
/// spans carry no context to continue or skip.
static INSTALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process records spans through OpenTelemetry.
pub fn installed() -> bool {
    INSTALLED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether tracing is turned off (`OTEL_SDK_DISABLED=true`, the standard switch).
pub fn tracing_disabled() -> bool {
    std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The spans that become OpenTelemetry spans: Shoal's own, at info and above, whatever the
/// log level (dependencies' spans are theirs to trace).
fn traced_targets() -> Targets {
    Targets::new()
        .with_target("shoal", LevelFilter::INFO)
        .with_default(LevelFilter::OFF)
}

fn otlp_exporter(endpoint: &str) -> Result<opentelemetry_otlp::SpanExporter, String> {
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|_| "http/protobuf".into());
    let built = match protocol.as_str() {
        "grpc" => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build(),
        _ => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
            .build(),
    };
    built.map_err(|e| format!("OTLP exporter to {endpoint}: {e}"))
}

fn tracer_provider(
    config: &TelemetryConfig,
    sampling: sampling::Sampling,
) -> Result<SdkTracerProvider, TelemetryError> {
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|_| "http/protobuf".into());
    if protocol != "grpc" && protocol != "http/protobuf" {
        return Err(TelemetryError::Protocol(protocol));
    }
    let resource = Resource::builder()
        .with_service_name(config.service.clone())
        .with_attribute(KeyValue::new("shoal.process", config.default_actor.clone()))
        .with_attribute(KeyValue::new("process.pid", i64::from(std::process::id())))
        .build();
    let dropped = &metrics().process.dropped_spans;
    let actor = config.default_actor.clone();
    let mut builder = SdkTracerProvider::builder()
        .with_sampler(sampling.sampler())
        .with_resource(resource.clone())
        .with_span_processor(queue::BoundedProcessor::start(
            "jetstream",
            resource.clone(),
            dropped
                .get_or_create(&[metrics::label("exporter", "jetstream")])
                .clone(),
            move || Ok(jetstream::JetStreamExporter::new(&actor)),
        )?);
    if let Some(endpoint) = config.otlp_endpoint.clone().filter(|e| !e.is_empty()) {
        builder = builder.with_span_processor(queue::BoundedProcessor::start(
            "otlp",
            resource,
            dropped
                .get_or_create(&[metrics::label("exporter", "otlp")])
                .clone(),
            move || otlp_exporter(&endpoint),
        )?);
    }
    Ok(builder.build())
}

/// The layer that turns Shoal's `tracing` spans into OpenTelemetry spans of `provider`,
/// whose sampler follows `sampling`. Installing it makes [`work`] skip what that sampler
/// would drop.
pub fn otel_layer<S>(provider: &SdkTracerProvider, sampling: sampling::Sampling) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    sampling::follow(sampling);
    INSTALLED.store(true, std::sync::atomic::Ordering::Relaxed);
    // Every traced span pays for what the layer records before the sampler has decided, so
    // only what an operator reads is kept: no per-span thread name (a String each), code
    // location or busy/idle timings (two clock reads per poll of an instrumented future).
    // Context activation stays: it gives each span its ids when first entered, which JSON
    // log lines carry, and makes the entered span the OpenTelemetry context's, where
    // `step!` adds its events.
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("shoal"))
        .with_threads(false)
        .with_location(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(traced_targets())
}

/// Installs the process's subscriber. Call once, first thing.
pub fn init(config: TelemetryConfig) -> Result<Telemetry, TelemetryError> {
    let filter = EnvFilter::try_new(&config.log_filter).unwrap_or_else(|_| EnvFilter::new("warn"));
    let logs: Box<dyn Layer<Registry> + Send + Sync> = match config.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .event_format(logfmt::JsonWithTrace)
            .with_filter(filter)
            .boxed(),
    };
    // The sampler's variables are read once: the SDK's sampler and `work`'s skipping of
    // decided-against traces must follow the same settings.
    let (provider, traces) = if tracing_disabled() {
        (None, None)
    } else {
        let sampling = sampling::Sampling::from_env()?;
        let provider = tracer_provider(&config, sampling)?;
        let layer = otel_layer(&provider, sampling);
        (Some(provider), Some(layer))
    };
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .try_init()
        .map_err(|_| TelemetryError::AlreadyInstalled)?;
    Ok(Telemetry { provider })
}
