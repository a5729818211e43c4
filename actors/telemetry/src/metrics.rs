//! Prometheus metrics of every actor, in one registry per process, each actor's families
//! under its own `actor` label, served as text on `/metrics` (see [`crate::serve`]).
//!
//! Every family is registered up front, whichever actors the process hosts: a scrape shows
//! what exists (empty families print only their HELP/TYPE), and recording is a lookup in a
//! static, never a registration on a hot path.

use std::borrow::Cow;
use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels<const N: usize> = [(&'static str, String); N];
type Histograms<const N: usize> = Family<Labels<N>, Histogram, fn() -> Histogram>;

/// Request and reconcile latencies: 1 ms to ~33 s.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// Pod start, as kubelet_pod_start_sli_duration_seconds buckets it: 0.5 s to 20 min.
fn pod_start() -> Histogram {
    Histogram::new([
        0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
        300.0, 360.0, 480.0, 600.0, 900.0, 1200.0,
    ])
}

pub struct ApiMetrics {
    pub requests: Family<Labels<3>, Counter>,
    pub request_seconds: Histograms<2>,
    pub lane_dropped: Family<Labels<1>, Counter>,
    pub cas_conflicts: Family<Labels<1>, Counter>,
}

pub struct InformerMetrics {
    /// Seconds from a write being stored to this process's cache applying it.
    pub lag_seconds: Histograms<1>,
}

pub struct ControllerMetrics {
    pub queue_depth: Family<Labels<1>, Gauge>,
    pub reconcile_seconds: Histograms<2>,
}

pub struct SchedulerMetrics {
    pub attempts: Family<Labels<1>, Counter>,
    pub e2e_seconds: Histogram,
    pub conflicts: Counter,
}

pub struct NodeMetrics {
    pub pod_start_seconds: Histogram,
    pub container_restarts: Counter,
    pub probe_results: Family<Labels<2>, Counter>,
}

pub struct AutoscalerMetrics {
    pub decisions: Family<Labels<1>, Counter>,
    pub pass_seconds: Histogram,
    pub dropped_samples: Family<Labels<1>, Counter>,
}

pub struct NamingMetrics {
    pub dns_answers: Family<Labels<1>, Counter>,
}

pub struct ProcessMetrics {
    /// 1 while this process's NATS connection is up.
    pub nats_connected: Gauge,
    /// nats-server's own health endpoint, as this process last saw it (1 ok).
    pub nats_server_healthy: Gauge,
    pub dropped_spans: Family<Labels<1>, Counter>,
}

pub struct Metrics {
    registry: Registry,
    pub api: ApiMetrics,
    pub informers: InformerMetrics,
    pub controllers: ControllerMetrics,
    pub scheduler: SchedulerMetrics,
    pub node: NodeMetrics,
    pub naming: NamingMetrics,
    pub autoscaler: AutoscalerMetrics,
    pub process: ProcessMetrics,
}

fn actor<'r>(registry: &'r mut Registry, name: &'static str) -> &'r mut Registry {
    registry.sub_registry_with_label((Cow::Borrowed("actor"), Cow::Borrowed(name)))
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("shoal");
        let api = ApiMetrics {
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(latency),
            lane_dropped: Family::default(),
            cas_conflicts: Family::default(),
        };
        {
            let r = actor(&mut registry, "api");
            r.register(
                "api_requests",
                "API requests served, by kind, verb and code",
                api.requests.clone(),
            );
            r.register(
                "api_request_duration_seconds",
                "API request latency, by kind and verb",
                api.request_seconds.clone(),
            );
            r.register(
                "api_lane_dropped",
                "Requests dropped unanswered because their sender had stopped waiting, by lane",
                api.lane_dropped.clone(),
            );
            r.register(
                "api_cas_conflicts",
                "Compare-and-swap writes that met a newer version, by kind",
                api.cas_conflicts.clone(),
            );
        }
        let informers = InformerMetrics {
            lag_seconds: Family::new_with_constructor(latency),
        };
        actor(&mut registry, "informers").register(
            "informer_lag_seconds",
            "Seconds from a write being stored to this process's cache applying it, by kind",
            informers.lag_seconds.clone(),
        );
        let controllers = ControllerMetrics {
            queue_depth: Family::default(),
            reconcile_seconds: Family::new_with_constructor(latency),
        };
        {
            let r = actor(&mut registry, "controllers");
            r.register(
                "controller_workqueue_depth",
                "Keys waiting in a controller's work queue",
                controllers.queue_depth.clone(),
            );
            r.register(
                "controller_reconcile_duration_seconds",
                "Reconcile latency, by controller and result",
                controllers.reconcile_seconds.clone(),
            );
        }
        let scheduler = SchedulerMetrics {
            attempts: Family::default(),
            e2e_seconds: latency(),
            conflicts: Counter::default(),
        };
        {
            let r = actor(&mut registry, "scheduler");
            r.register(
                "scheduler_schedule_attempts",
                "Scheduling attempts, by result (scheduled, unschedulable, error)",
                scheduler.attempts.clone(),
            );
            r.register(
                "scheduler_e2e_scheduling_duration_seconds",
                "From a pod entering the scheduling queue to its bind being written",
                scheduler.e2e_seconds.clone(),
            );
            r.register(
                "scheduler_conflicts",
                "Binds that lost a node's allocation record to another scheduler",
                scheduler.conflicts.clone(),
            );
        }
        let node = NodeMetrics {
            pod_start_seconds: pod_start(),
            container_restarts: Counter::default(),
            probe_results: Family::default(),
        };
        {
            let r = actor(&mut registry, "node");
            r.register(
                "node_pod_start_sli_duration_seconds",
                "From the agent first seeing a pod to all its containers running (image pulls included; the analogue of kubelet_pod_start_sli_duration_seconds)",
                node.pod_start_seconds.clone(),
            );
            r.register(
                "node_container_restarts",
                "Containers restarted after they exited",
                node.container_restarts.clone(),
            );
            r.register(
                "node_probe_results",
                "Probe results, by probe type and result",
                node.probe_results.clone(),
            );
        }
        let naming = NamingMetrics {
            dns_answers: Family::default(),
        };
        actor(&mut registry, "naming").register(
            "naming_dns_answers",
            "DNS answers, by rcode",
            naming.dns_answers.clone(),
        );
        let autoscaler = AutoscalerMetrics {
            decisions: Family::default(),
            pass_seconds: latency(),
            dropped_samples: Family::default(),
        };
        {
            let r = actor(&mut registry, "autoscaler");
            r.register(
                "autoscaler_decisions",
                "HPA decisions, by outcome (scaled_up, scaled_down, unchanged, failed)",
                autoscaler.decisions.clone(),
            );
            r.register(
                "autoscaler_pass_duration_seconds",
                "One pass over every HPA",
                autoscaler.pass_seconds.clone(),
            );
            r.register(
                "autoscaler_dropped_samples",
                "External metric samples dropped, by reason (undecodable, not_a_number, negative, stale)",
                autoscaler.dropped_samples.clone(),
            );
        }
        let process = ProcessMetrics {
            nats_connected: Gauge::default(),
            nats_server_healthy: Gauge::default(),
            dropped_spans: Family::default(),
        };
        {
            let r = actor(&mut registry, "process");
            r.register(
                "nats_connected",
                "1 while this process's NATS connection is up",
                process.nats_connected.clone(),
            );
            r.register(
                "nats_server_healthy",
                "1 when nats-server's /healthz answered ok at the last look",
                process.nats_server_healthy.clone(),
            );
            r.register(
                "telemetry_dropped_spans",
                "Finished spans dropped because an exporter's queue was full or its export failed, by exporter",
                process.dropped_spans.clone(),
            );
        }
        Metrics {
            registry,
            api,
            informers,
            controllers,
            scheduler,
            node,
            naming,
            autoscaler,
            process,
        }
    }

    /// The page a scrape gets (OpenMetrics text).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// This process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

/// One label value, owned.
pub fn label(key: &'static str, value: impl Into<String>) -> (&'static str, String) {
    (key, value.into())
}

pub fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}
