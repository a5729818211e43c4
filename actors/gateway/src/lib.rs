//! The Kubernetes API gateway: a stateless HTTP(S) actor that speaks the Kubernetes REST API
//! to stock kubectl and client libraries and turns every call into bus requests (to the API
//! actors) and watches (of the state log). It keeps no state of its own, so any number of
//! replicas can run, and a client's resourceVersion (a state-log sequence) means the same to
//! each of them.
//!
//! # Layout
//! - [`server`]: accept loop, TLS, authentication and authorization of every request, body
//!   limit, routing to the handlers below.
//! - [`authn`]: who is calling: bearer tokens checked against the identity registry.
//! - [`authz`]: what the caller's role may do, decided from the bus subjects a request uses;
//!   Kubernetes' 403.
//! - [`reviews`]: `kubectl auth can-i` (access and rules reviews) and `kubectl auth whoami`.
//! - [`route`]: URL paths parsed into what they name.
//! - [`resources`]: the catalogue of REST resources (group, version, plural, subresources).
//! - [`convert`]: older served versions to and from the bus version (HPA autoscaling/v1).
//! - [`discovery`]: `/version`, `/api`, `/apis`, resource lists, aggregated discovery.
//! - [`openapi`]: OpenAPI v3 index and per-group-version documents, with the kinds' schemas
//!   generated from the bus-schemas types (what `kubectl explain` reads).
//! - [`objects`]: list, get, create, replace, patch (server-side apply included), delete,
//!   status, eviction.
//! - [`field_manager`]: `fieldManager`/`force` into the bus' field-manager headers.
//! - [`strategic`]: strategic merge patch.
//! - [`scale`], [`logs`], [`metrics`]: the scale and log subresources, `metrics.k8s.io`.
//! - [`exec`]: `pods/exec` over WebSocket (remote-command v5/v4) through the agent's exec:
//!   one-shot, or a streaming session for `-i`/`-t`; [`websocket`]: the RFC 6455 framing.
//! - [`watch`]: watch streams from a resourceVersion, bookmarks, 410 Expired.
//! - [`watch_hub`]: one state-log consumer per watched filter, shared by this replica's
//!   watches, each caught up privately from its own revision first.
//! - [`table`]: server-side printing: `shoal-tables`' rows (the same as `shoal get`'s) as
//!   Kubernetes Tables.
//! - [`bus`]: untyped bus requests; client JSON into typed, strictly checked msgpack.
//! - [`http`]: request, responses, content negotiation, Status errors.
//! - [`protobuf`]: the protobuf bodies kubectl's typed clients send (autoscale's HPA).
//! - [`tls`], [`kubeconfig`]: the generated CA and serving certificate; the kubeconfig.

// NOTE: the error type is a Status (message, reason and field-path causes): it travels only
// on failure paths, where one allocation more or less does not matter.
#![allow(clippy::result_large_err)]

pub mod authn;
pub mod authz;
pub mod bus;
pub mod convert;
pub mod discovery;
pub mod exec;
pub mod field_manager;
pub mod http;
pub mod kubeconfig;
pub mod logs;
pub mod metrics;
pub mod objects;
pub mod openapi;
pub mod protobuf;
pub mod resources;
pub mod reviews;
pub mod route;
pub mod scale;
pub mod server;
pub mod strategic;
pub mod table;
pub mod tls;
pub mod watch;
pub mod watch_hub;
pub mod websocket;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use shoal_bus::{ApiClient, Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("listening on {addr}: {detail}")]
    Listen { addr: SocketAddr, detail: String },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub listen: SocketAddr,
    /// Serve HTTPS with these credentials; None serves plain HTTP.
    pub tls: Option<tls::Credentials>,
    /// The identity directory (`<data dir>/auth`) whose bearer tokens callers present; each
    /// caller acts with its identity's role. Nobody else is admitted (see [`authn`]).
    pub identities: std::path::PathBuf,
}

/// Serves the Kubernetes API until `shutdown` resolves.
pub async fn run(
    config: GatewayConfig,
    nats: async_nats::Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), GatewayError> {
    let (ready, _) = tokio::sync::oneshot::channel();
    run_with_ready(config, nats, shutdown, ready).await
}

/// As [`run`], and reports the bound address (useful with port 0) once listening.
pub async fn run_with_ready(
    config: GatewayConfig,
    nats: async_nats::Client,
    shutdown: impl Future<Output = ()>,
    ready: tokio::sync::oneshot::Sender<SocketAddr>,
) -> Result<(), GatewayError> {
    let store = Store::open(nats.clone()).await?;
    let tls = match &config.tls {
        Some(creds) => Some(tls::server_config(creds)?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| GatewayError::Listen {
            addr: config.listen,
            detail: e.to_string(),
        })?;
    let addr = listener.local_addr().unwrap_or(config.listen);
    let bus = bus::Bus {
        // A client's request waits at most this long for the API actors.
        api: ApiClient::new(nats.clone()).with_deadline(Duration::from_secs(30)),
        nats,
        store,
        watches: watch_hub::WatchHub::default(),
    };
    let _ = ready.send(addr);
    tracing::info!(%addr, tls = config.tls.is_some(), "Kubernetes API gateway listening");
    let callers = authn::Authenticator::new(config.identities.clone());
    server::serve(listener, tls, bus, callers, shutdown).await;
    Ok(())
}
