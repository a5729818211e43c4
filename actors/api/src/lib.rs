//! API actors: the only writers of the state log.
//!
//! # Layout
//! Dependencies point one way, from the top of the request path to the bottom; no module
//! imports one that imports it back.
//! - [`actor`]: the actix adapter: subscriptions in, replies out, one task per request, lanes.
//! - [`server`]: routing by subject to verb and kind; node reports.
//! - [`node_events`]: a node's Events about pods bound to it (checked against the binding).
//! - [`node_volumes`]: a node's local provisioner's writes of volumes pinned to it and of
//!   claims selected for it, through the general verbs once ownership is checked.
//! - the verbs: [`write`] (create, update, update-status, patch; the shared
//!   `prepare_spec_change` every change of spec goes through; writes that name a field
//!   manager record what they changed in `metadata.managedFields`), [`apply`] (server-side
//!   apply, thin over [`field_manager`]), [`deletion`] (graceful
//!   deletion), [`read`] (get, and list served from the shared cache made consistent with the
//!   log), [`scale`] (the scale subresource, get-scale and update-scale, of Deployments and
//!   ReplicaSets).
//! - [`commit`]: the last step of every change: write, or remove a fully deleted object and
//!   release what it held.
//! - policy: [`admission`] (namespaces, priorities, node ownership), [`vpa_admission`]
//!   (new pods sized from a VerticalPodAutoscaler's recommendation), [`pod_security`] (the
//!   namespace's Pod Security Standards level: refusals and warnings), [`termination`] (pure
//!   deletion policy: finalizers, grace periods, when deletion is complete), [`service_ips`]
//!   (ClusterIP allocation, whose reservations are written through the shared state, never
//!   through the verbs).
//! - [`state`]: the bottom: [`ApiServer`]'s store and caches, the lookups every verb uses, and
//!   the primitives that write the log.
//! - [`node_events`]: events node agents report about their own pods.
//! - [`secrets`]: Secret values encrypted at rest (the key ring, sealing on every write and
//!   opening on every read) and the node request that hands a Secret only to a node whose
//!   pods use it.
//! - [`field_manager`]: pure: managed-field sets, merge keys of the core kinds' lists, the
//!   apply merge, conflicts. [`created_fields`] remembers a create's fields by request, so
//!   the thousand pods of one template are worked out once.
//! - [`telemetry`]: the request span (continuing the sender's trace), request metrics, and
//!   what each compare-and-swap write met.
//! - [`merge_patch`], [`reply`], [`request`]: small helpers.
//! - [`compactor`]: beside the request path: purges deleted objects' subjects after the
//!   retention, expires Events, and records the compaction revision watches start above.
//! - [`local`]: a whole control plane on a temporary nats-server, for other crates' tests
//!   (feature `test-support`).
//!
//! Replicas share `shoal.v1.api.>` and `shoal.v1.node.>` as a NATS queue group: any number
//! can run, and losing one loses only its in-flight requests (which clients retry; the
//! request id makes the retry idempotent).

// NOTE: the error type is a Status (message, reason and field-path causes): it travels only
// on failure paths, where one allocation more or less does not matter, and boxing it would
// make every caller's match noisier.
#![allow(clippy::result_large_err)]

pub mod actor;
pub mod admission;
pub mod apply;
pub mod commit;
pub mod compactor;
pub mod created_fields;
pub mod deletion;
pub mod field_manager;
#[cfg(feature = "test-support")]
pub mod local;
pub mod merge_patch;
pub mod node_events;
pub mod node_volumes;
pub mod pod_security;
pub mod read;
pub mod reply;
pub mod request;
pub mod scale;
pub mod secrets;
pub mod server;
pub mod service_ips;
pub mod state;
pub mod telemetry;
pub mod termination;
pub mod vpa_admission;
pub mod write;

use std::future::Future;
use std::sync::Arc;

use actix::Actor;
use bus_schemas::{kinds, subjects};
use shoal_bus::{InformerFactory, Store, StoreError};

pub use bus_schemas::wellknown::NODE_LEASE_NAMESPACE;
pub use state::ApiServer;

#[derive(Debug, thiserror::Error)]
pub enum ApiRunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("subscribing to {subject}: {detail}")]
    Subscribe { subject: String, detail: String },
    #[error(transparent)]
    SecretKeys(#[from] secrets::KeyRingError),
}

#[derive(Clone, Default)]
pub struct ApiConfig {
    /// Shares another process's informers (the one-machine cluster hosts every actor).
    pub informers: Option<InformerFactory>,
    /// The Secret encryption keys (`NAME:BASE64` lines, the first encrypts; created with one
    /// key if missing). None: Secrets are refused rather than stored in clear.
    pub secret_key_file: Option<std::path::PathBuf>,
    /// How long deleted objects and Events stay in the state log.
    pub compaction: compactor::CompactionConfig,
}

/// Serves API requests until `shutdown` resolves. Must run inside an actix system.
pub async fn run(
    config: ApiConfig,
    nats: async_nats::Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ApiRunError> {
    let (ready, _) = tokio::sync::oneshot::channel();
    run_with_ready(config, nats, shutdown, ready).await
}

/// As [`run`], signalling `ready` once requests are being served.
pub async fn run_with_ready(
    config: ApiConfig,
    nats: async_nats::Client,
    shutdown: impl Future<Output = ()>,
    ready: tokio::sync::oneshot::Sender<()>,
) -> Result<(), ApiRunError> {
    let store = Store::open(nats.clone()).await?;
    let informers = config
        .informers
        .unwrap_or_else(|| InformerFactory::new(store.clone()));
    // The kinds written on every pod's path: writes start from these caches instead of a
    // read from the log (see `ApiServer::base_for_write`), and policy checks read them.
    informers.get::<kinds::Namespace>();
    informers.get::<kinds::PriorityClass>();
    informers.get::<kinds::Pod>();
    informers.get::<kinds::Node>();
    informers.get::<kinds::Lease>();
    // Admission reads the default class on every claim's creation.
    informers.get::<kinds::StorageClass>();
    let max_payload = nats.server_info().max_payload;
    let mut server = ApiServer::new(store, informers, max_payload);
    if let Some(path) = &config.secret_key_file {
        let keys = secrets::KeyRing::load_or_create(path)?;
        tracing::info!(primary = keys.primary(), "Secrets are encrypted at rest");
        server = server.with_secret_keys(Arc::new(keys));
    }
    let server = Arc::new(server);
    // After a key rotation, Secrets sealed with an older key are re-sealed with the new one.
    let resealing = server.clone();
    actix::spawn(async move { resealing.reseal_secrets().await });
    let mut subscriptions = Vec::new();
    for subject in [subjects::API_ALL, subjects::NODE_ALL] {
        let sub = nats
            .queue_subscribe(subject, subjects::API_QUEUE_GROUP.to_string())
            .await
            .map_err(|e| ApiRunError::Subscribe {
                subject: subject.into(),
                detail: e.to_string(),
            })?;
        subscriptions.push(sub);
    }
    // Make sure the subscriptions are registered server-side before we report ready.
    let _ = nats.flush().await;
    let compaction_store = server.store.clone();
    let addr = actor::ApiActor::new(server, nats, subscriptions).start();
    tracing::info!(
        "API actor serving {} and {}",
        subjects::API_ALL,
        subjects::NODE_ALL
    );
    let identity = format!("api-{}", uuid::Uuid::new_v4().simple());
    let compacting = tokio::spawn(compactor::run(
        compaction_store,
        config.compaction,
        identity,
    ));
    let _ = ready.send(());
    shutdown.await;
    compacting.abort();
    let _ = addr.send(actor::Shutdown).await;
    Ok(())
}

/// Namespaces every cluster has.
pub const BOOTSTRAP_NAMESPACES: &[&str] = &[
    "default",
    "shoal-system",
    NODE_LEASE_NAMESPACE,
    service_ips::SERVICE_IP_NAMESPACE,
];

/// Namespaces for the cluster's own pods (node agents' helpers, log shippers), which may need
/// the node's namespaces and paths: labelled `privileged`, so the pod security check needs no
/// exception by name.
pub const PRIVILEGED_NAMESPACES: &[&str] = &["shoal-system"];

/// Creates what every cluster has (namespaces, the default `local-path` StorageClass).
/// Idempotent: run at every start; a class someone changed or deleted on purpose since is
/// not put back as it was, only recreated when absent.
pub async fn bootstrap(api: &shoal_bus::ApiClient) -> Result<(), shoal_bus::ApiError> {
    for name in BOOTSTRAP_NAMESPACES {
        let mut ns = bus_schemas::kinds::Namespace::default();
        ns.metadata.name = name.to_string();
        if PRIVILEGED_NAMESPACES.contains(name) {
            ns.metadata.labels.insert(
                bus_schemas::pod_security::ENFORCE_LABEL.into(),
                bus_schemas::pod_security::Level::Privileged.as_str().into(),
            );
        }
        create_if_absent(api, &ns).await?;
    }
    create_if_absent(api, &kinds::StorageClass::local_path()).await
}

async fn create_if_absent<K: bus_schemas::Resource>(
    api: &shoal_bus::ApiClient,
    obj: &K,
) -> Result<(), shoal_bus::ApiError> {
    match api.create(obj).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_already_exists() => Ok(()),
        Err(e) => Err(e),
    }
}
