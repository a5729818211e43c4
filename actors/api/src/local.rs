//! A cluster on this machine for tests and benchmarks: a nats-server child with its store in a
//! temporary directory, the state stream, and API replicas in this process. Real parts only:
//! the server is the same nats-server `shoal up` runs.

use std::path::PathBuf;

use bus_schemas::roles::Role;
use shoal_bus::auth::ClientAuth;
use shoal_bus::natsd::{Natsd, NatsdError};
use shoal_bus::shutdown::{self, Trigger};
use shoal_bus::store::{ensure_stream, StreamSettings};
use shoal_bus::{ApiClient, InformerFactory, Store};

pub struct LocalCluster {
    pub natsd: Natsd,
    /// The API replicas' Secret encryption keys.
    pub secret_key_file: PathBuf,
    pub nats: async_nats::Client,
    pub store: Store,
    pub informers: InformerFactory,
    /// What API replicas started from now on keep of deleted objects and Events.
    pub compaction: crate::compactor::CompactionConfig,
    replicas: Vec<Trigger>,
    _dir: Option<tempfile::TempDir>,
}

#[derive(Debug, thiserror::Error)]
pub enum LocalClusterError {
    #[error(transparent)]
    Natsd(#[from] NatsdError),
    #[error("connecting: {0}")]
    Connect(String),
    #[error(transparent)]
    Store(#[from] shoal_bus::StoreError),
    #[error("bootstrap: {0}")]
    Bootstrap(#[from] shoal_bus::ApiError),
}

impl LocalCluster {
    /// Starts nats-server in a fresh temporary directory and one API replica.
    /// Must run inside an actix system (`#[actix::test]`).
    pub async fn start() -> Result<LocalCluster, LocalClusterError> {
        LocalCluster::start_compacting(Default::default()).await
    }

    /// As [`LocalCluster::start`], with API replicas compacting the log as `compaction`
    /// says (tests shorten the retention to seconds).
    pub async fn start_compacting(
        compaction: crate::compactor::CompactionConfig,
    ) -> Result<LocalCluster, LocalClusterError> {
        let dir = tempfile::tempdir().map_err(|e| LocalClusterError::Connect(e.to_string()))?;
        let mut cluster = LocalCluster::start_in_with(dir.path().to_path_buf(), compaction).await?;
        cluster._dir = Some(dir);
        Ok(cluster)
    }

    pub async fn start_in(dir: PathBuf) -> Result<LocalCluster, LocalClusterError> {
        LocalCluster::start_in_with(dir, Default::default()).await
    }

    async fn start_in_with(
        dir: PathBuf,
        compaction: crate::compactor::CompactionConfig,
    ) -> Result<LocalCluster, LocalClusterError> {
        let natsd = Natsd::start_in(&dir).await?;
        // The state log is the API's to create, as in `shoal up`.
        let api = connect_as(&natsd, &Role::Api, "shoal-local-bootstrap").await?;
        let js = async_nats::jetstream::new(api);
        ensure_stream(&js, &StreamSettings::default()).await?;
        // The test itself acts as the operator does.
        let nats = connect_as(&natsd, &Role::Admin, "shoal-local").await?;
        let store = Store::open(nats.clone()).await?;
        let informers = InformerFactory::new(store.clone());
        let mut cluster = LocalCluster {
            secret_key_file: dir.join("secrets.key"),
            natsd,
            nats,
            store,
            informers,
            compaction,
            replicas: Vec::new(),
            _dir: None,
        };
        cluster.add_api_replica().await?;
        crate::bootstrap(&cluster.api()).await?;
        Ok(cluster)
    }

    /// Starts one more API replica with its own NATS connection; returns its index.
    pub async fn add_api_replica(&mut self) -> Result<usize, LocalClusterError> {
        let nats = self.connect_as(&Role::Api, "shoal-api").await?;
        let (trigger, shutdown) = shutdown::channel();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let secret_key_file = self.secret_key_file.clone();
        let compaction = self.compaction;
        actix::spawn(async move {
            let config = crate::ApiConfig {
                secret_key_file: Some(secret_key_file),
                compaction,
                ..Default::default()
            };
            let result = crate::run_with_ready(config, nats, shutdown.wait(), ready_tx).await;
            if let Err(e) = result {
                tracing::error!(error = %e, "API replica failed");
            }
        });
        let _ = ready_rx.await;
        self.replicas.push(trigger);
        Ok(self.replicas.len() - 1)
    }

    /// Stops one API replica.
    pub fn stop_api_replica(&mut self, index: usize) {
        if let Some(trigger) = self.replicas.get(index) {
            trigger.fire();
        }
    }

    pub fn url(&self) -> String {
        self.natsd.url()
    }

    /// A connection with `role`'s credential: how a test starts an actor as the cluster
    /// would, confined to what that actor may do on the bus.
    pub async fn connect_as(
        &self,
        role: &Role,
        name: &str,
    ) -> Result<async_nats::Client, LocalClusterError> {
        connect_as(&self.natsd, role, name).await
    }

    /// The credential of `role` (issued on first use): for processes a test starts.
    pub async fn creds(&self, role: &Role) -> Result<ClientAuth, LocalClusterError> {
        Ok(self.natsd.creds(role).await?)
    }

    pub fn api(&self) -> ApiClient {
        ApiClient::new(self.nats.clone())
    }
}

async fn connect_as(
    natsd: &Natsd,
    role: &Role,
    name: &str,
) -> Result<async_nats::Client, LocalClusterError> {
    let auth = natsd.creds(role).await?;
    shoal_bus::connect(&natsd.url(), name, &auth)
        .await
        .map_err(|e| LocalClusterError::Connect(format!("as {role}: {e}")))
}

/// Polls `check` every 50 ms until it returns true; panics with `what` after `timeout`.
/// How tests wait for a condition instead of sleeping a guessed time.
pub async fn eventually<F, Fut>(what: &str, timeout: std::time::Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// This test process's tracing as an actor installs it; call it before the cluster starts
/// (one per process: nextest runs each test in its own).
pub fn install_tracing(service: &str) -> shoal_telemetry::Telemetry {
    shoal_telemetry::init(shoal_telemetry::TelemetryConfig {
        service: service.into(),
        default_actor: "test".into(),
        log_filter: "warn".into(),
        log_format: shoal_telemetry::LogFormat::Text,
        otlp_endpoint: None,
    })
    .expect("the test process's tracing installs")
}

/// Exports this process's spans to the cluster's `SHOAL_TRACES`, as an actor's are.
pub async fn export_traces(cluster: &LocalCluster) {
    let auth = cluster
        .creds(&Role::Api)
        .await
        .expect("an actor credential");
    shoal_telemetry::jetstream::export_as(&cluster.url(), move |o| auth.apply(o));
}

/// Every span of `trace` that `SHOAL_TRACES` holds (none when it cannot be read).
pub async fn spans_of(reader: &async_nats::Client, trace: &str) -> Vec<ExportedSpan> {
    shoal_telemetry::traceview::read_trace(reader, trace)
        .await
        .map(|batches| {
            batches
                .into_iter()
                .flat_map(|rs| rs.scope_spans)
                .flat_map(|ss| ss.spans)
                .collect()
        })
        .unwrap_or_default()
}

/// A span as `SHOAL_TRACES` holds it.
pub type ExportedSpan = shoal_telemetry::opentelemetry_proto::tonic::trace::v1::Span;

/// The spans of `trace` in `SHOAL_TRACES` once `complete` holds of them, this process's
/// queued spans flushed before each look; panics with `what` after 30 s.
pub async fn exported_spans(
    telemetry: &shoal_telemetry::Telemetry,
    reader: &async_nats::Client,
    trace: &str,
    what: &str,
    complete: impl Fn(&[ExportedSpan]) -> bool,
) -> Vec<ExportedSpan> {
    let limit = std::time::Duration::from_secs(30);
    let start = std::time::Instant::now();
    loop {
        telemetry.flush();
        let spans = spans_of(reader, trace).await;
        if complete(&spans) {
            return spans;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
