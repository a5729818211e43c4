//! The scheduler loop. One task owns the cache and the queue (no locks); informer changes
//! flow in through broadcast receivers, API writes run as spawned tasks that report back
//! over a channel. Binds are pipelined: a decision only assumes the pod and queues it for its
//! node; each node has at most one allocation-record write in flight, which carries every
//! pod queued for that node meanwhile, and the pod binds that follow run concurrently.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bus_schemas::kinds::{Lease, Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use bus_schemas::selector::Selector;
use shoal_bus::informer::Change;
use shoal_bus::{ApiClient, EventType, Informer, InformerFactory, ObjectKey, Store};
use shoal_telemetry::work::Traced;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, mpsc, Semaphore};

use crate::bind::{self, AllocOutcome, BindOutcome};
use crate::cache::{key_string, ClusterCache};
use crate::decide::{Decider, Decision};
use crate::filter::PodCtx;
use crate::ledger::{self, AllocationView, LedgerEntry, ALLOCATION_NAMESPACE};
use crate::metrics::SchedulerMetrics;
use crate::queue::SchedulingQueue;
use crate::resources::Resources;
use crate::telemetry;
use crate::volumes::{self, VolumePlan};
use crate::{explain, preempt, SchedulerConfig, SchedulerError};

/// How long to wait before deciding again after losing a race on a pod (the informer needs a
/// moment to show what won).
const POD_CONFLICT_RETRY: Duration = Duration::from_millis(50);
/// How long to wait when a node's allocation record is ahead of the pod cache.
const CACHE_BEHIND_RETRY: Duration = Duration::from_millis(20);
/// Decisions per turn of the loop before looking at informer events again.
const DECISIONS_PER_TURN: usize = 64;
const EVENTS_PER_TURN: usize = 1024;

struct PendingBind {
    key: ObjectKey,
    pod: Arc<Pod>,
    requests: Resources,
    /// The allocation record revision the decision was made against.
    decided_at: u64,
    /// The attempt's place in its trace: the bind is its child.
    trace: Traced,
    /// Unbound WaitForFirstConsumer claims that get the node written on them first.
    select_claims: Vec<String>,
}

/// The storage caches volume binding reads: only consulted for pods with claims.
struct StorageCaches {
    claims: Informer<PersistentVolumeClaim>,
    volumes: Informer<PersistentVolume>,
    classes: Informer<StorageClass>,
}

impl StorageCaches {
    fn plan(&self, pod: &Pod) -> Result<Option<VolumePlan>, String> {
        let claim = |ns: &str, name: &str| self.claims.get(ns, name);
        let volume = |name: &str| self.volumes.get("", name);
        let class = |name: &str| self.classes.get("", name);
        let all_volumes = || self.volumes.list(None, &Default::default());
        volumes::plan(
            pod,
            &volumes::Lookups {
                claim: &claim,
                volume: &volume,
                class: &class,
                all_volumes: &all_volumes,
            },
        )
    }
}

#[derive(Default)]
struct NodeWrites {
    in_flight: bool,
    queued: Vec<PendingBind>,
    /// One of our entries on this node is over (its bind failed): prune it soon, so that
    /// no reader keeps reserving room for it.
    dirty: bool,
}

enum Report {
    Alloc {
        node: String,
        base: u64,
        outcome: AllocOutcome,
        batch: Vec<ObjectKey>,
    },
    Bind {
        key: ObjectKey,
        node: String,
        outcome: BindOutcome,
        /// The attempt's trace, which what follows a bind continues.
        trace: Traced,
    },
}

struct Runner {
    cfg: SchedulerConfig,
    api: ApiClient,
    pods: Informer<Pod>,
    nodes: Informer<Node>,
    allocs: Informer<Lease>,
    storage: StorageCaches,
    cache: ClusterCache,
    queue: SchedulingQueue,
    decider: Decider,
    /// The allocation records themselves (to write their next version), by node.
    leases: HashMap<String, Lease>,
    writes: HashMap<String, NodeWrites>,
    /// Where this instance preempted for a pod (the informer may not show it yet).
    nominations: HashMap<ObjectKey, String>,
    reports: mpsc::UnboundedSender<Report>,
    permits: Arc<Semaphore>,
    metrics: Arc<SchedulerMetrics>,
}

pub async fn run(
    config: SchedulerConfig,
    nats: async_nats::Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SchedulerError> {
    let store = Store::open(nats.clone()).await?;
    let informers = config
        .informers
        .clone()
        .unwrap_or_else(|| InformerFactory::new(store.clone()));
    let api = ApiClient::new(nats).with_field_manager(crate::FIELD_MANAGER);
    bind::ensure_namespace(&api, ALLOCATION_NAMESPACE)
        .await
        .map_err(|source| SchedulerError::Bootstrap {
            namespace: ALLOCATION_NAMESPACE.into(),
            source,
        })?;
    let pods = informers.get::<Pod>();
    let nodes = informers.get::<Node>();
    // Our own informer: the allocation records are the scheduler's business only.
    let allocs = Informer::<Lease>::builder()
        .namespace(ALLOCATION_NAMESPACE)
        .start(store);
    // Subscribe before the initial build, so nothing between build and stream is missed
    // (older buffered events are recognised by revision and skipped).
    let pod_rx = pods.subscribe();
    let node_rx = nodes.subscribe();
    let alloc_rx = allocs.subscribe();
    let storage = StorageCaches {
        claims: informers.get(),
        volumes: informers.get(),
        classes: informers.get(),
    };
    let storage_rx = (storage.claims.subscribe(), storage.volumes.subscribe());
    let mut shutdown = std::pin::pin!(shutdown);
    let synced = async {
        pods.wait_synced().await?;
        nodes.wait_synced().await?;
        storage.claims.wait_synced().await?;
        storage.volumes.wait_synced().await?;
        storage.classes.wait_synced().await?;
        allocs.wait_synced().await
    };
    tokio::select! {
        r = synced => r?,
        _ = &mut shutdown => return Ok(()),
    }
    let (reports, report_rx) = mpsc::unbounded_channel();
    let identity = config.identity.clone();
    let mut runner = Runner {
        queue: SchedulingQueue::new(config.queue.clone()),
        permits: Arc::new(Semaphore::new(config.max_in_flight.max(1))),
        metrics: config.metrics.clone(),
        cfg: config,
        api,
        pods,
        nodes,
        allocs,
        storage,
        cache: ClusterCache::with_identity(&identity),
        decider: Decider::default(),
        leases: HashMap::new(),
        writes: HashMap::new(),
        nominations: HashMap::new(),
        reports,
    };
    runner.resync();
    tracing::info!(identity = %runner.cfg.identity, names = ?runner.cfg.scheduler_names,
        nodes = runner.cache.nodes().len(), pending = runner.queue.len(), "scheduler started");
    runner
        .run_loop(pod_rx, node_rx, alloc_rx, storage_rx, report_rx, shutdown)
        .await
}

/// Turns a broadcast receive into "a change", "resync needed" or "stopped".
enum Received<T> {
    Change(T),
    Lagged,
    Empty,
    Closed,
}

fn try_take<T: Clone>(rx: &mut broadcast::Receiver<T>) -> Received<T> {
    match rx.try_recv() {
        Ok(c) => Received::Change(c),
        Err(TryRecvError::Lagged(_)) => Received::Lagged,
        Err(TryRecvError::Empty) => Received::Empty,
        Err(TryRecvError::Closed) => Received::Closed,
    }
}

fn taken<T>(r: Result<T, RecvError>) -> Received<T> {
    match r {
        Ok(c) => Received::Change(c),
        Err(RecvError::Lagged(_)) => Received::Lagged,
        Err(RecvError::Closed) => Received::Closed,
    }
}

impl Runner {
    /// Applies one received change (a lagging receiver resyncs everything). Returns whether
    /// anything was taken; a closed informer is fatal.
    // The error carries an ApiError (a Status): large, but only on the fatal path.
    #[allow(clippy::result_large_err)]
    fn take<T>(
        &mut self,
        received: Received<Change<T>>,
        kind: &'static str,
        on: fn(&mut Self, Change<T>),
    ) -> Result<bool, SchedulerError> {
        match received {
            Received::Change(c) => on(self, c),
            Received::Lagged => self.resync(),
            Received::Empty => return Ok(false),
            Received::Closed => return Err(SchedulerError::InformerStopped { kind }),
        }
        Ok(true)
    }

    fn serves(&self, pod: &Pod) -> bool {
        pod.spec.node_name.is_empty()
            && !pod.metadata.is_deleting()
            && !pod.is_terminal()
            && self.cfg.scheduler_names.contains(&pod.spec.scheduler_name)
    }

    async fn run_loop(
        mut self,
        mut pod_rx: broadcast::Receiver<Change<Pod>>,
        mut node_rx: broadcast::Receiver<Change<Node>>,
        mut alloc_rx: broadcast::Receiver<Change<Lease>>,
        (mut claim_rx, mut volume_rx): (
            broadcast::Receiver<Change<PersistentVolumeClaim>>,
            broadcast::Receiver<Change<PersistentVolume>>,
        ),
        mut report_rx: mpsc::UnboundedReceiver<Report>,
        mut shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> Result<(), SchedulerError> {
        let mut last_housekeeping = Instant::now();
        let mut last_log = Instant::now();
        loop {
            let mut progressed = false;
            for _ in 0..EVENTS_PER_TURN {
                if !self.take(try_take(&mut pod_rx), "Pod", Self::on_pod)? {
                    break;
                }
                progressed = true;
            }
            for _ in 0..EVENTS_PER_TURN {
                if !self.take(try_take(&mut node_rx), "Node", Self::on_node)? {
                    break;
                }
                progressed = true;
            }
            for _ in 0..EVENTS_PER_TURN {
                if !self.take(try_take(&mut alloc_rx), "Lease", Self::on_alloc)? {
                    break;
                }
                progressed = true;
            }
            while let Ok(report) = report_rx.try_recv() {
                self.on_report(report);
                progressed = true;
            }
            // A claim or volume appearing or binding can make a waiting pod schedulable.
            let mut storage_changed = false;
            while !matches!(
                claim_rx.try_recv(),
                Err(TryRecvError::Empty | TryRecvError::Closed)
            ) {
                storage_changed = true;
            }
            while !matches!(
                volume_rx.try_recv(),
                Err(TryRecvError::Empty | TryRecvError::Closed)
            ) {
                storage_changed = true;
            }
            if storage_changed {
                self.queue.move_all_unschedulable(Instant::now());
                progressed = true;
            }
            let now = Instant::now();
            self.queue.flush(now);
            if now.duration_since(last_housekeeping) >= Duration::from_secs(1) {
                last_housekeeping = now;
                self.queue.flush_unschedulable_timeouts(now);
            }
            if now.duration_since(last_log) >= self.cfg.metrics_log_interval {
                last_log = now;
                let m = self.metrics.snapshot();
                tracing::info!(identity = %self.cfg.identity, scheduled = m.scheduled,
                    conflicts = m.conflicts, unschedulable = m.unschedulable,
                    preemptions = m.preemptions, attempts = m.attempts, queued = self.queue.len(),
                    "scheduler metrics");
            }
            let mut decided = 0;
            while decided < DECISIONS_PER_TURN {
                let Some(key) = self.queue.pop() else { break };
                self.schedule_one(key);
                decided += 1;
            }
            if progressed || decided > 0 {
                if futures::poll!(shutdown.as_mut()).is_ready() {
                    return Ok(());
                }
                tokio::task::yield_now().await;
                continue;
            }
            let deadline = self
                .queue
                .next_deadline()
                .unwrap_or(now + Duration::from_secs(1))
                .min(now + Duration::from_secs(1));
            tokio::select! {
                _ = shutdown.as_mut() => return Ok(()),
                r = pod_rx.recv() => {
                    self.take(taken(r), "Pod", Self::on_pod)?;
                }
                r = node_rx.recv() => {
                    self.take(taken(r), "Node", Self::on_node)?;
                }
                r = alloc_rx.recv() => {
                    self.take(taken(r), "Lease", Self::on_alloc)?;
                }
                Some(report) = report_rx.recv() => self.on_report(report),
                // The informers live as long as the process: a closed channel means shutdown.
                r = claim_rx.recv() => {
                    if matches!(r, Err(RecvError::Closed)) {
                        return Ok(());
                    }
                    self.queue.move_all_unschedulable(Instant::now());
                }
                r = volume_rx.recv() => {
                    if matches!(r, Err(RecvError::Closed)) {
                        return Ok(());
                    }
                    self.queue.move_all_unschedulable(Instant::now());
                }
                _ = tokio::time::sleep_until(deadline.into()) => {}
            }
        }
    }

    /// Rebuilds the cache from the informers (at start and after a lagging receiver),
    /// keeping this instance's assumed pods and in-flight writes.
    // NOTE: after a resync the cache's pod revision is the informer revision read before
    // listing, a lower bound of what the list shows. Records written from it may claim a
    // slightly older `podsRevision` than the state they pruned against; readers then wait a
    // few milliseconds less than they should. Resyncs are rare (start-up, overload).
    fn resync(&mut self) {
        let assumed = self.cache.reset_keep_assumed();
        let revision = self.pods.revision();
        let everything = Selector::everything();
        for node in self.nodes.list(None, &everything) {
            self.cache.upsert_node(node);
        }
        for pod in self.pods.list(None, &everything) {
            self.cache.apply_pod(pod, 0);
        }
        self.cache.pod_revision = self.cache.pod_revision.max(revision);
        for (key, entry) in assumed {
            let same = self
                .cache
                .pod(&key)
                .is_some_and(|p| p.node.is_empty() && p.pod.metadata.uid == entry.pod.metadata.uid);
            if same {
                self.cache.assume(&key, &entry.node);
            }
        }
        for lease in self.allocs.list(Some(ALLOCATION_NAMESPACE), &everything) {
            self.install_alloc((*lease).clone(), false);
        }
        let now = Instant::now();
        let wanted: Vec<(ObjectKey, i32)> = self
            .cache
            .pods()
            .filter(|(_, e)| !e.assumed && self.serves(&e.pod))
            .map(|(k, e)| (k.clone(), e.priority))
            .collect();
        for (key, priority) in wanted {
            if !self.queue.contains(&key) {
                self.queue.add(key, priority, now);
            }
        }
        self.queue.move_all_unschedulable(now);
    }

    fn on_pod(&mut self, change: Change<Pod>) {
        let now = Instant::now();
        let key = change.key;
        if change.event == EventType::Deleted {
            let delta = self.cache.delete_pod(&key, change.revision);
            self.queue.forget(&key);
            self.nominations.remove(&key);
            if delta.freed {
                self.queue.move_all_unschedulable(now);
            }
            return;
        }
        let pod = change.new;
        let delta = self.cache.apply_pod(pod.clone(), change.revision);
        if delta.freed {
            self.queue.move_all_unschedulable(now);
        }
        let assumed = self.cache.pod(&key).is_some_and(|e| e.assumed);
        if self.serves(&pod) {
            if assumed {
                return;
            }
            // Only a change that can change the outcome requeues an unschedulable pod: our
            // own status writes must not turn into retries.
            let relevant = change.old.as_ref().is_none_or(|old| {
                old.spec != pod.spec || old.metadata.labels != pod.metadata.labels
            });
            if relevant || !self.queue.contains(&key) {
                self.queue.add(key, pod.spec.priority.unwrap_or(0), now);
            }
        } else if !assumed {
            self.queue.forget(&key);
            self.nominations.remove(&key);
        }
    }

    fn on_node(&mut self, change: Change<Node>) {
        let now = Instant::now();
        if change.event == EventType::Deleted {
            self.cache.remove_node(&change.key.name);
            return;
        }
        if self.cache.upsert_node(change.new) {
            self.queue.move_all_unschedulable(now);
        }
    }

    fn on_alloc(&mut self, change: Change<Lease>) {
        if change.event == EventType::Deleted {
            // Only when nothing of ours is in flight: our write will report what it finds.
            let node = &change.key.name;
            if !self.writes.get(node).is_some_and(|w| w.in_flight) {
                self.leases.remove(node);
                self.cache.reset_alloc(node);
            }
            return;
        }
        // Entries released elsewhere free room: give unschedulable pods another look.
        let released = change.old.as_ref().is_some_and(|old| {
            AllocationView::from_lease(old).ledger.pending.len()
                > AllocationView::from_lease(&change.new).ledger.pending.len()
        });
        self.install_alloc((*change.new).clone(), false);
        if released {
            self.queue.move_all_unschedulable(Instant::now());
        }
    }

    /// Keeps a node's allocation record, unless we hold a newer one (or `force`: the API
    /// just told us what it is).
    fn install_alloc(&mut self, lease: Lease, force: bool) {
        let node = lease.metadata.name.clone();
        let view = AllocationView::from_lease(&lease);
        let have = self
            .leases
            .get(&node)
            .and_then(|l| l.metadata.revision())
            .unwrap_or(0);
        if !force && view.revision < have {
            return;
        }
        if force {
            self.cache.reset_alloc(&node);
        }
        self.cache.set_alloc(&node, view);
        self.leases.insert(node, lease);
    }

    fn schedule_one(&mut self, key: ObjectKey) {
        let now = Instant::now();
        let Some(entry) = self.cache.pod(&key) else {
            self.queue.forget(&key);
            return;
        };
        if entry.assumed || !self.serves(&entry.pod) {
            self.queue.forget(&key);
            return;
        }
        let pod = entry.pod.clone();
        SchedulerMetrics::inc(&self.metrics.attempts);
        let traced = telemetry::schedule_span(
            &key,
            &pod,
            self.pods.traceparent(&key.namespace, &key.name).as_deref(),
            self.cache.nodes().len(),
        );
        let _entered = traced.enter();
        let span = traced.span();
        let volumes = match self.storage.plan(&pod) {
            Ok(plan) => plan,
            Err(reason) => {
                // No node can help: the claims must change first (a claim or volume event
                // moves the pod back to the active queue).
                span.record("outcome", "unschedulable");
                telemetry::attempt("unschedulable");
                SchedulerMetrics::inc(&self.metrics.unschedulable);
                let message = format!(
                    "0/{} nodes are available: {reason}.",
                    self.cache.nodes().len()
                );
                self.spawn_unschedulable(pod, message, None, &traced);
                self.queue.unschedulable(&key, now);
                return;
            }
        };
        let select_claims = volumes
            .as_ref()
            .map(|v| v.to_select.clone())
            .unwrap_or_default();
        let decision = {
            let mut ctx = PodCtx::new(&pod, &key, &self.cache);
            ctx.volumes = volumes;
            match self
                .decider
                .decide(&ctx, &self.cache, &self.cfg.sampling, &self.cfg.weights)
            {
                Decision::Bind { node } => Ok(node),
                Decision::Unfit(unfit) => {
                    span.record("unfit_nodes", unfit.total);
                    if unfit.cache_behind > 0 {
                        Err(None)
                    } else {
                        let preemption = self.preemption_for(&ctx, &unfit.preemptable);
                        Err(Some((
                            explain::message(unfit.total, &unfit.reasons),
                            preemption,
                        )))
                    }
                }
            }
        };
        match decision {
            Ok(i) => {
                let node = self.cache.nodes()[i].name.clone();
                span.record("node", node.as_str());
                span.record("outcome", "assumed");
                tracing::debug!(pod = %key, node = %node, "assumed");
                let decided_at = self.cache.nodes()[i].alloc.revision;
                let requests = Resources::of_pod(&pod);
                self.cache.assume(&key, &node);
                self.writes
                    .entry(node.clone())
                    .or_default()
                    .queued
                    .push(PendingBind {
                        key,
                        pod,
                        requests,
                        decided_at,
                        trace: traced.clone(),
                        select_claims,
                    });
                self.kick(&node);
            }
            // Some node's record is ahead of our pod cache: decide again in a moment.
            Err(None) => {
                span.record("outcome", "retry");
                telemetry::attempt("retry");
                self.queue.retry_after(&key, CACHE_BEHIND_RETRY, now)
            }
            Err(Some((message, preemption))) => {
                span.record("outcome", "unschedulable");
                telemetry::attempt("unschedulable");
                tracing::debug!(pod = %key, %message, preempt = preemption.is_some(), "unschedulable");
                match preemption {
                    Some(candidate) => self.preempt(&key, pod, candidate, message, &traced),
                    None => {
                        SchedulerMetrics::inc(&self.metrics.unschedulable);
                        self.spawn_unschedulable(pod, message, None, &traced);
                    }
                }
                self.queue.unschedulable(&key, now);
            }
        }
    }

    /// A preemption candidate, unless the pod already waits for victims to go.
    fn preemption_for(&self, ctx: &PodCtx<'_>, nodes: &[usize]) -> Option<preempt::Candidate> {
        if nodes.is_empty() || !preempt::may_preempt(ctx) {
            return None;
        }
        let nominated = self
            .nominations
            .get(ctx.key)
            .map(String::as_str)
            .unwrap_or(&ctx.pod.status.nominated_node_name);
        if let Some(info) = self.cache.node(nominated) {
            let victims_leaving = info
                .pods
                .iter()
                .filter_map(|k| self.cache.pod(k))
                .any(|e| e.pod.metadata.is_deleting());
            if victims_leaving {
                return None;
            }
        }
        preempt::select(ctx, &self.cache, nodes)
    }

    fn preempt(
        &mut self,
        key: &ObjectKey,
        pod: Arc<Pod>,
        candidate: preempt::Candidate,
        message: String,
        trace: &Traced,
    ) {
        let node = self.cache.nodes()[candidate.node].name.clone();
        let victims: Vec<Arc<Pod>> = candidate
            .victims
            .iter()
            .filter_map(|k| self.cache.pod(k).map(|e| e.pod.clone()))
            .collect();
        SchedulerMetrics::inc(&self.metrics.preemptions);
        tracing::info!(pod = %key, node = %node, victims = victims.len(), "preempting");
        self.nominations.insert(key.clone(), node.clone());
        self.cache.nominate(key, &node);
        let (api, permits, instance) = (
            self.api.clone(),
            self.permits.clone(),
            self.cfg.identity.clone(),
        );
        tokio::spawn(trace.run(async move {
            let _permit = permits.acquire_owned().await;
            // Nominate first, so every scheduler sees the room reserved before it frees up.
            if let Err(e) = bind::report_unschedulable(&api, &pod, &message, Some(&node)).await {
                tracing::warn!(pod = %pod.metadata.name, error = %e, "cannot write nomination");
            }
            for victim in victims {
                if let Err(e) = bind::evict(&api, victim.clone(), &pod, &node, &instance).await {
                    tracing::warn!(victim = %victim.metadata.name, error = %e, "eviction failed");
                }
            }
            let _ = bind::record_event(
                &api,
                &pod,
                "Warning",
                "FailedScheduling",
                &message,
                &instance,
            )
            .await;
        }));
    }

    /// Writes why the pod waits (its PodScheduled condition and a FailedScheduling event), in
    /// the attempt's trace: a pod's trace goes on through the attempts that fail it.
    fn spawn_unschedulable(
        &self,
        pod: Arc<Pod>,
        message: String,
        nominated: Option<String>,
        trace: &Traced,
    ) {
        let (api, permits, instance) = (
            self.api.clone(),
            self.permits.clone(),
            self.cfg.identity.clone(),
        );
        tokio::spawn(trace.run(async move {
            let _permit = permits.acquire_owned().await;
            if let Err(e) =
                bind::report_unschedulable(&api, &pod, &message, nominated.as_deref()).await
            {
                tracing::warn!(pod = %pod.metadata.name, error = %e, "cannot write PodScheduled");
            }
            if let Err(e) = bind::record_event(
                &api,
                &pod,
                "Warning",
                "FailedScheduling",
                &message,
                &instance,
            )
            .await
            {
                tracing::warn!(pod = %pod.metadata.name, error = %e, "cannot record event");
            }
        }));
    }

    /// Starts the next allocation-record write for `node`, if none is in flight.
    fn kick(&mut self, node: &str) {
        let Some(w) = self.writes.get_mut(node) else {
            return;
        };
        if w.in_flight || (w.queued.is_empty() && !w.dirty) {
            return;
        }
        let dirty = std::mem::take(&mut w.dirty);
        let queued = std::mem::take(&mut w.queued);
        let now = Instant::now();
        let Some(info) = self.cache.node(node) else {
            for b in queued {
                self.cache.forget(&b.key);
                self.queue.retry_later(&b.key, now);
            }
            return;
        };
        let view = info.alloc.clone();
        let (valid, stale): (Vec<PendingBind>, Vec<PendingBind>) = queued
            .into_iter()
            .partition(|b| b.decided_at == view.revision);
        for b in stale {
            // Decided against a record that changed since: decide again.
            SchedulerMetrics::inc(&self.metrics.conflicts);
            telemetry::conflict();
            self.cache.forget(&b.key);
            self.queue.retry_after(&b.key, Duration::ZERO, now);
        }
        if valid.is_empty() && !dirty {
            return;
        }
        let mut next_ledger = view.ledger.clone();
        let before = next_ledger.pending.len();
        next_ledger
            .pending
            .retain(|e| !self.cache.ledger_entry_over(e, node));
        let pruned = next_ledger.pending.len() != before;
        if pruned {
            next_ledger.pods_revision = next_ledger.pods_revision.max(self.cache.pod_revision);
        }
        if valid.is_empty() && !pruned {
            return;
        }
        let at_ms = chrono::Utc::now().timestamp_millis();
        for b in &valid {
            let pod_key = key_string(&b.key);
            next_ledger.pending.retain(|e| e.pod != pod_key);
            next_ledger.pending.push(LedgerEntry {
                pod: pod_key,
                uid: b.pod.metadata.uid.clone(),
                seen_at: self.cache.pod_revision,
                requests: b.requests.to_ints(),
                writer: self.cfg.identity.clone(),
                at_ms,
            });
        }
        let current = if view.revision == 0 {
            None
        } else {
            self.leases.get(node)
        };
        let next =
            ledger::next_record(node, current, &next_ledger, view.binds + valid.len() as u64);
        let create = current.is_none();
        if let Some(w) = self.writes.get_mut(node) {
            w.in_flight = true;
        }
        let (api, permits, reports) =
            (self.api.clone(), self.permits.clone(), self.reports.clone());
        let node = node.to_string();
        let base = view.revision;
        tokio::spawn(async move {
            // One permit covers the record write and the binds it admits: were the binds to
            // queue for permits of their own behind newer record writes, a flooded API would
            // hold them past the bind window and every admission would be wasted.
            let permit = permits.acquire_owned().await;
            let outcome = bind::write_allocation(&api, &node, &next, create).await;
            let written = matches!(outcome, AllocOutcome::Written(_));
            let written_at = Instant::now();
            let batch_keys = valid.iter().map(|b| b.key.clone()).collect();
            let _ = reports.send(Report::Alloc {
                node: node.clone(),
                base,
                outcome,
                batch: batch_keys,
            });
            if !written {
                return;
            }
            let binds = valid.into_iter().map(|b| {
                let (api, reports, node) = (api.clone(), reports.clone(), node.clone());
                async move {
                    // Past the window other schedulers may already ignore our entry.
                    let started = Instant::now();
                    let selected = if b.select_claims.is_empty() {
                        Ok(())
                    } else {
                        bind::select_node_for_claims(&api, &b.pod, &b.select_claims, &node).await
                    };
                    let outcome = if let Err(why) = selected {
                        BindOutcome::Failed(why)
                    } else if written_at.elapsed() > ledger::BIND_WINDOW {
                        BindOutcome::Failed("bind window passed before the bind was sent".into())
                    } else {
                        b.trace.run(bind::bind_pod(&api, &b.pod, &node)).await
                    };
                    // Only the span: a step is recorded inside a span or not at all, so a
                    // carried trace's context need not be attached for it.
                    b.trace
                        .span()
                        .in_scope(|| telemetry::bind_step(&node, &outcome, started));
                    let _ = reports.send(Report::Bind {
                        key: b.key,
                        node,
                        outcome,
                        trace: b.trace,
                    });
                }
            });
            futures::future::join_all(binds).await;
            drop(permit);
        });
    }

    fn on_report(&mut self, report: Report) {
        let now = Instant::now();
        match report {
            Report::Alloc {
                node,
                base,
                outcome,
                batch,
            } => {
                if let Some(w) = self.writes.get_mut(&node) {
                    w.in_flight = false;
                }
                match outcome {
                    AllocOutcome::Written(lease) => {
                        let lease = *lease;
                        let new_rev = lease.metadata.revision().unwrap_or(0);
                        self.install_alloc(lease, false);
                        // Pods decided while our write was in flight saw the old record plus
                        // our own assumptions: still valid against the new one.
                        if let Some(w) = self.writes.get_mut(&node) {
                            for b in &mut w.queued {
                                if b.decided_at == base {
                                    b.decided_at = new_rev;
                                }
                            }
                        }
                    }
                    AllocOutcome::Conflict(fresh) => {
                        SchedulerMetrics::inc(&self.metrics.conflicts);
                        telemetry::conflict();
                        tracing::debug!(node = %node, pods = batch.len(), "allocation conflict; deciding again");
                        match fresh {
                            Some(lease) => self.install_alloc(*lease, true),
                            None => {
                                self.leases.remove(&node);
                                self.cache.reset_alloc(&node);
                            }
                        }
                        for key in batch {
                            self.cache.forget(&key);
                            self.queue.retry_after(&key, Duration::ZERO, now);
                        }
                        self.queue.move_all_unschedulable(now);
                    }
                    AllocOutcome::Failed(why) => {
                        tracing::warn!(node = %node, error = %why, "allocation record write failed");
                        for key in batch {
                            self.cache.forget(&key);
                            self.queue.retry_later(&key, now);
                        }
                    }
                }
                self.kick(&node);
            }
            Report::Bind {
                key,
                node,
                outcome,
                trace,
            } => match outcome {
                BindOutcome::Bound(pod) => {
                    SchedulerMetrics::inc(&self.metrics.scheduled);
                    telemetry::attempt("scheduled");
                    telemetry::bound(&pod);
                    self.queue.forget(&key);
                    self.nominations.remove(&key);
                    let (api, permits) = (self.api.clone(), self.permits.clone());
                    let pod = *pod;
                    let was = pod.status.nominated_node_name.is_empty()
                        && bus_schemas::meta::find_condition(
                            &pod.status.conditions,
                            "PodScheduled",
                        )
                        .is_none();
                    if !was {
                        tokio::spawn(trace.run(async move {
                            let _permit = permits.acquire_owned().await;
                            let _ = bind::clear_unschedulable(&api, &pod).await;
                        }));
                    }
                }
                failed => {
                    self.cache.forget(&key);
                    match failed {
                        BindOutcome::Conflict => {
                            SchedulerMetrics::inc(&self.metrics.conflicts);
                            telemetry::conflict();
                            self.queue.retry_after(&key, POD_CONFLICT_RETRY, now);
                        }
                        BindOutcome::Gone => self.queue.forget(&key),
                        BindOutcome::Failed(why) => {
                            tracing::warn!(pod = %key, error = %why, "bind failed");
                            self.queue.retry_later(&key, now);
                        }
                        BindOutcome::Bound(_) => {}
                    }
                    // Our entry on that node is over: release it for everyone, and let our
                    // own unschedulable pods see the room.
                    self.writes.entry(node.clone()).or_default().dirty = true;
                    self.kick(&node);
                    self.queue.move_all_unschedulable(now);
                }
            },
        }
    }
}
