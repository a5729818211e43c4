//! Workload controllers: ReplicaSet, Deployment, DaemonSet, StatefulSet, Job, CronJob, Endpoints, garbage
//! collection, namespace deletion, node lifecycle and the binding of claims to volumes made
//! by hand.
//!
//! # Layout
//! - [`run`]: starts every controller (optionally behind leader election) until shutdown.
//!   Each controller module declares its own triggers in a `start` function (its work
//!   queue, the changes mapped to its keys, its runner); `start_all` only lists them.
//! - One module per controller, each split into a pure `decide` (desired + observed → the
//!   writes to make, unit-tested without NATS) and an async `reconcile` that gathers inputs
//!   from the informer caches and performs the writes through the API:
//!   [`replicaset`], [`deployment`], [`daemonset`], [`statefulset`], [`job`], [`cronjob`],
//!   [`endpoints`], [`gc`], [`namespace`], [`nodelifecycle`], [`podgc`], [`volumebinding`]
//!   (claims → PersistentVolumes made by hand, smallest fit first, and their release once
//!   the claim is gone; volumes of `shoal.io/local-path` are the node agents'). GC runs one loop per
//!   kind except Namespaces, which the namespace
//!   controller owns with a loop of its own. The Deployment controller is a directory with one file per part
//!   (hashing and naming, strategies, progress, history, rollback), as Kubernetes splits it.
//! - A failed reconcile is retried by the work queue with per-key back-off
//!   ([`shoal_bus::backoff`]); there is no per-controller error policy.
//! - Shared pieces: [`context`] (API client, caches, tunables), [`clock`] (the time CronJobs
//!   read: the system's, or one a test sets), [`podutil`] (templates,
//!   owner references, readiness), [`expectations`] (read-your-writes before deciding
//!   again), [`events`] (the Event recorder), [`error`].
//!
//! Controllers never call each other: each watches objects through the shared informers and
//! writes back through the API, so any of them can be restarted and reconciles from what it
//! observes. Leader election (one Lease for the whole controller set) lives in
//! [`shoal_bus::leader`].

pub mod clock;
pub mod context;
pub mod create;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod endpoints;
pub mod error;
pub mod events;
pub mod expectations;
pub mod gc;
pub mod job;
pub mod namespace;
pub mod nodelifecycle;
pub mod podgc;
pub mod podutil;
pub mod replica_failure;
pub mod replicaset;
pub mod statefulset;
pub mod volumebinding;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::Resource;
use shoal_bus::controller::{self, Action, ControllerConfig, TraceReconciles};
use shoal_bus::leader::{LeaderElectionConfig, LeaderElector, Leadership};
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use shoal_bus::{ApiClient, Informer, InformerFactory, ObjectKey, Store};
use tokio::task::JoinHandle;

pub use context::{Ctx, Tunables};
pub use error::{ControllersError, ReconcileError};

/// How the controllers run.
#[derive(Clone, Default)]
pub struct ControllersConfig {
    /// Shares another actor's caches (the one-machine cluster hosts every actor).
    pub informers: Option<InformerFactory>,
    /// With `Some`, only the holder of this Lease runs the controllers; others stand by.
    pub leader_election: Option<LeaderElectionConfig>,
    pub tunables: Tunables,
}

impl ControllersConfig {
    /// Leader election on the Lease `shoal-system/shoal-controllers` with this identity.
    pub fn with_leader_election(mut self, identity: impl Into<String>) -> Self {
        self.leader_election = Some(LeaderElectionConfig::new(
            "shoal-system",
            "shoal-controllers",
            identity,
        ));
        self
    }
}

/// The controllers' name in `metadata.managedFields`.
pub const FIELD_MANAGER: &str = "shoal-controllers";

/// Runs every controller until `shutdown` resolves. Works inside an actix system or any
/// tokio runtime. With leader election, waits to lead first, stops the controllers when
/// leadership is lost and campaigns again; on shutdown the lease is released.
pub async fn run(
    config: ControllersConfig,
    nats: async_nats::Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ControllersError> {
    let informers = match config.informers.clone() {
        Some(f) => f,
        None => InformerFactory::new(Store::open(nats.clone()).await?),
    };
    let api = ApiClient::new(nats).with_field_manager(FIELD_MANAGER);
    tokio::pin!(shutdown);
    loop {
        let mut leadership: Option<Leadership> = None;
        if let Some(le) = &config.leader_election {
            let elector = LeaderElector::new(api.clone(), le.clone());
            tokio::select! {
                l = elector.acquire() => leadership = Some(l),
                _ = &mut shutdown => return Ok(()),
            }
        }
        let (trigger, sd) = shoal_bus::shutdown::channel();
        let ctx = Ctx::new(api.clone(), informers.clone(), config.tunables.clone());
        // Each controller waits for its own kind's cache, but reads others too (the
        // ReplicaSet controller the pods, the Deployment controller the ReplicaSets): nothing
        // may act before every cache holds its initial list, or a pod cache still loading
        // reads as "no pods" and every ReplicaSet creates all its replicas again (a
        // controllers process taking over a cluster that runs pods did exactly that).
        let synced = tokio::select! {
            r = caches_synced(&ctx) => Some(r),
            _ = &mut shutdown => None,
            _ = lost(&mut leadership) => {
                tracing::warn!("lost leadership while loading caches; campaigning again");
                continue;
            }
        };
        if !matches!(synced, Some(Ok(()))) {
            if let Some(l) = leadership {
                l.release().await;
            }
            return synced.unwrap_or(Ok(())).map_err(Into::into);
        }
        let tasks = start_all(ctx, sd);
        let stop = tokio::select! {
            _ = &mut shutdown => true,
            _ = lost(&mut leadership) => false,
        };
        trigger.fire();
        for task in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
        }
        if stop {
            if let Some(l) = leadership {
                l.release().await;
            }
            return Ok(());
        }
        tracing::warn!("lost leadership; controllers stopped, campaigning again");
    }
}

/// Waits until every cache the controllers read holds its initial list.
async fn caches_synced(ctx: &Ctx) -> Result<(), shoal_bus::StoreError> {
    ctx.pods.wait_synced().await?;
    ctx.replicasets.wait_synced().await?;
    ctx.deployments.wait_synced().await?;
    ctx.daemonsets.wait_synced().await?;
    ctx.jobs.wait_synced().await?;
    ctx.cronjobs.wait_synced().await?;
    ctx.statefulsets.wait_synced().await?;
    ctx.revisions.wait_synced().await?;
    ctx.nodes.wait_synced().await?;
    ctx.leases.wait_synced().await?;
    ctx.namespaces.wait_synced().await?;
    ctx.services.wait_synced().await?;
    ctx.claims.wait_synced().await?;
    ctx.volumes.wait_synced().await?;
    ctx.classes.wait_synced().await?;
    ctx.endpoints.wait_synced().await
}

async fn lost(leadership: &mut Option<Leadership>) {
    match leadership {
        Some(l) => l.lost().await,
        None => std::future::pending().await,
    }
}

pub(crate) fn controller_config(name: &'static str, ctx: &Ctx) -> ControllerConfig {
    let mut config = ControllerConfig::new(name);
    config.concurrency = ctx.tunables.concurrency;
    config.resync = ctx.tunables.resync;
    config
}

/// Runs `reconcile` over `informer`'s objects, fed by `queue`, until `sd`.
pub(crate) fn spawn<K, R, RFut>(
    name: &'static str,
    informer: Informer<K>,
    queue: Arc<WorkQueue<ObjectKey>>,
    ctx: &Arc<Ctx>,
    reconcile: R,
    sd: &Shutdown,
) -> JoinHandle<()>
where
    K: Resource,
    R: Fn(Arc<K>, Arc<Ctx>) -> RFut + Send + Sync + 'static,
    RFut: Future<Output = Result<Action, ReconcileError>> + Send + 'static,
{
    spawn_traced(
        name,
        TraceReconciles::Every,
        informer,
        queue,
        ctx,
        reconcile,
        sd,
    )
}

/// [`spawn`], with only the reconciles `trace` says as spans.
pub(crate) fn spawn_traced<K, R, RFut>(
    name: &'static str,
    trace: TraceReconciles,
    informer: Informer<K>,
    queue: Arc<WorkQueue<ObjectKey>>,
    ctx: &Arc<Ctx>,
    reconcile: R,
    sd: &Shutdown,
) -> JoinHandle<()>
where
    K: Resource,
    R: Fn(Arc<K>, Arc<Ctx>) -> RFut + Send + Sync + 'static,
    RFut: Future<Output = Result<Action, ReconcileError>> + Send + 'static,
{
    let mut config = controller_config(name, ctx);
    config.trace = trace;
    tokio::spawn(controller::run(
        config,
        informer,
        queue,
        ctx.clone(),
        reconcile,
        sd.clone().wait(),
    ))
}

/// The key of the object's controller when it is of kind `K`.
pub(crate) fn owner_key<K: Resource>(meta: &bus_schemas::ObjectMeta) -> Vec<ObjectKey> {
    meta.controller_ref()
        .filter(|r| r.kind == K::INFO.kind)
        .map(|r| vec![ObjectKey::new(meta.namespace.clone(), r.name.clone())])
        .unwrap_or_default()
}

/// Starts every controller; each declares its own triggers (what it owns and watches).
fn start_all(ctx: Arc<Ctx>, sd: Shutdown) -> Vec<JoinHandle<()>> {
    let mut tasks = volumebinding::start(&ctx, &sd);
    tasks.extend([
        replicaset::start(&ctx, &sd),
        deployment::start(&ctx, &sd),
        daemonset::start(&ctx, &sd),
        job::start(&ctx, &sd),
        cronjob::start(&ctx, &sd),
        statefulset::start(&ctx, &sd),
        nodelifecycle::start(&ctx, &sd),
        endpoints::start(&ctx, &sd),
        endpoints::start_cleanup(&ctx, &sd),
        namespace::start(&ctx, &sd),
        podgc::start(&ctx, &sd),
        tokio::spawn(gc::run(ctx.clone(), sd.clone())),
    ]);
    tasks
}
