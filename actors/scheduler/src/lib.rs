//! The scheduler actor: places pending pods on nodes, explains why when it cannot, preempts
//! lower-priority pods for higher-priority ones, and shares the cluster with any number of
//! other scheduler instances without ever overcommitting a node.
//!
//! # Layout
//! Pure decision logic (no NATS, no async; unit-tested on plain structs):
//! - [`resources`]: integer resource vectors and the fit check.
//! - [`cache`]: per-node accounting (requests, pod counts, owners, zones) kept up to date
//!   incrementally from informer events, including pods assumed but not yet seen bound.
//! - [`filter`]: can the pod run on a node, and if not, why ([`filter::Reason`]).
//! - [`affinity`]: inter-pod (anti-)affinity, precomputed once per attempt.
//! - [`volumes`]: where a pod's PersistentVolumeClaims let it run (a bound volume's node, or
//!   for a claim only a volume made by hand can serve, a node such a volume admits), and
//!   which unbound `WaitForFirstConsumer` claims get the chosen node written on them.
//! - [`score`]: least-allocated, balanced, spreading, preferred affinities, soft taints.
//! - [`decide`]: one decision over a rotating sample of the nodes.
//! - [`explain`]: the "0/5 nodes are available: …" message.
//! - [`preempt`]: victim selection.
//! - [`queue`]: active / backoff / unschedulable queues.
//! - [`ledger`]: the per-node allocation record that serialises binds across schedulers
//!   (read its NOTE for the anti-overcommit protocol).
//!
//! The runner (all I/O):
//! - [`actor`]: the loop that owns the cache, feeds it from informers, decides, and
//!   pipelines binds (many in flight, one allocation-record write per node at a time).
//! - [`bind`]: the API writes: allocation record CAS, pod bind CAS, status, events, evictions.
//! - [`metrics`]: counters (scheduled, conflicts, unschedulable, preemptions).
//! - [`telemetry`]: the span of each attempt and bind, and the Prometheus metrics.

/// The scheduler's name in `metadata.managedFields`: binds make it the owner of a pod's
/// `spec.nodeName`.
pub const FIELD_MANAGER: &str = "shoal-scheduler";

pub mod actor;
pub mod affinity;
pub mod bind;
pub mod cache;
pub mod decide;
pub mod explain;
pub mod filter;
pub mod ledger;
pub mod metrics;
pub mod preempt;
pub mod queue;
pub mod resources;
pub mod score;
pub mod telemetry;
pub mod volumes;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::pod_spec::DEFAULT_SCHEDULER_NAME;
use shoal_bus::{ApiError, InformerFactory, StoreError};

pub use decide::Sampling;
pub use metrics::{MetricsSnapshot, SchedulerMetrics};
pub use queue::QueueConfig;
pub use score::Weights;

#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("ensuring namespace {namespace}: {source}")]
    Bootstrap { namespace: String, source: ApiError },
    #[error("informer for {kind} stopped")]
    InformerStopped { kind: &'static str },
}

#[derive(Clone)]
pub struct SchedulerConfig {
    /// The `spec.schedulerName`s this instance serves.
    pub scheduler_names: Vec<String>,
    /// Who this instance is (events' reportingInstance, logs).
    pub identity: String,
    /// Shares another actor's informers in the same process; None starts our own.
    pub informers: Option<InformerFactory>,
    pub sampling: Sampling,
    pub weights: Weights,
    pub queue: QueueConfig,
    /// Concurrent API writes (binds, statuses, events) in flight at most.
    pub max_in_flight: usize,
    /// Counters; clone the Arc before `run` to read them.
    pub metrics: Arc<SchedulerMetrics>,
    pub metrics_log_interval: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            scheduler_names: vec![DEFAULT_SCHEDULER_NAME.to_string()],
            identity: format!(
                "scheduler-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ),
            informers: None,
            sampling: Sampling::default(),
            weights: Weights::default(),
            queue: QueueConfig::default(),
            max_in_flight: 512,
            metrics: Arc::new(SchedulerMetrics::default()),
            metrics_log_interval: Duration::from_secs(30),
        }
    }
}

/// Schedules until `shutdown` resolves. Works inside an actix system or a plain tokio runtime.
pub async fn run(
    config: SchedulerConfig,
    nats: async_nats::Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SchedulerError> {
    actor::run(config, nats, shutdown).await
}
