//! What every controller shares: the API client, the informer caches, the event recorder,
//! the expectations and the tunables.

use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::{
    ControllerRevision, CronJob, DaemonSet, Deployment, Endpoints, Job, Lease, Namespace, Node,
    PersistentVolume, PersistentVolumeClaim, Pod, ReplicaSet, Service, StatefulSet, StorageClass,
};
use shoal_bus::{ApiClient, Informer, InformerFactory};

use crate::events::EventRecorder;
use crate::expectations::Expectations;

/// Tunables of the controllers (durations are short enough for tests to override).
#[derive(Debug, Clone)]
pub struct Tunables {
    /// A node whose Lease was not renewed for this long is NotReady (NodeStatusUnknown).
    pub node_monitor_grace: Duration,
    /// How long pods tolerate the unreachable / not-ready NoExecute taints when they carry no
    /// toleration of their own (Kubernetes' DefaultTolerationSeconds, 300 s there).
    pub default_unreachable_toleration: Duration,
    /// First delay before a Job retries after a failed pod; doubles per failure.
    pub job_backoff_base: Duration,
    pub job_backoff_max: Duration,
    /// Workers per controller. A ReplicaSet's creates go out in slow-start rounds that each
    /// wait for their slowest create, so under a loaded API a worker is mostly waiting: with
    /// 4, thirty 1,000-replica Deployments were created at 680 pods/s while the same API took
    /// 930 direct pod creates/s. Reconciles of different objects are independent.
    pub concurrency: usize,
    /// Periodic resync of every controller (a safety net; changes drive the work).
    pub resync: Duration,
    /// Evictions from unreachable nodes pause while more than this share of the nodes
    /// (and at least two) are not Ready: so many failing at once is more likely the control
    /// plane's or the network's trouble than the machines', and evicting would pile every
    /// pod onto the few survivors while the heartbeats that would clear it wait behind the
    /// evictions' writes (Kubernetes' full-disruption mode; its threshold is 0.55 too).
    pub unhealthy_threshold: f64,
    /// The time CronJobs are scheduled by (tests set their own).
    pub clock: crate::clock::Clock,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            node_monitor_grace: Duration::from_secs(10),
            default_unreachable_toleration: Duration::from_secs(5),
            job_backoff_base: Duration::from_secs(10),
            job_backoff_max: Duration::from_secs(360),
            concurrency: 16,
            resync: Duration::from_secs(60),
            unhealthy_threshold: 0.55,
            clock: Default::default(),
        }
    }
}

pub struct Ctx {
    pub api: ApiClient,
    pub informers: InformerFactory,
    pub pods: Informer<Pod>,
    pub replicasets: Informer<ReplicaSet>,
    pub deployments: Informer<Deployment>,
    pub daemonsets: Informer<DaemonSet>,
    pub jobs: Informer<Job>,
    pub cronjobs: Informer<CronJob>,
    pub statefulsets: Informer<StatefulSet>,
    pub revisions: Informer<ControllerRevision>,
    pub nodes: Informer<Node>,
    pub leases: Informer<Lease>,
    pub namespaces: Informer<Namespace>,
    pub services: Informer<Service>,
    pub endpoints: Informer<Endpoints>,
    pub claims: Informer<PersistentVolumeClaim>,
    pub volumes: Informer<PersistentVolume>,
    pub classes: Informer<StorageClass>,
    pub events: EventRecorder,
    pub expectations: Expectations,
    pub tunables: Tunables,
    pub disruption: crate::nodelifecycle::Disruption,
}

impl Ctx {
    pub fn new(api: ApiClient, informers: InformerFactory, tunables: Tunables) -> Arc<Ctx> {
        Arc::new(Ctx {
            events: EventRecorder::new(api.clone(), "shoal-controllers"),
            pods: informers.get(),
            replicasets: informers.get(),
            deployments: informers.get(),
            daemonsets: informers.get(),
            jobs: informers.get(),
            cronjobs: informers.get(),
            statefulsets: informers.get(),
            revisions: informers.get(),
            nodes: informers.get(),
            leases: informers.get(),
            namespaces: informers.get(),
            services: informers.get(),
            endpoints: informers.get(),
            claims: informers.get(),
            volumes: informers.get(),
            classes: informers.get(),
            api,
            informers,
            expectations: Expectations::default(),
            tunables,
            disruption: Default::default(),
        })
    }
}
