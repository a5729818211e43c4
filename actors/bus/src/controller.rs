//! The reconcile runner: `reconcile(Arc<K>, Arc<Ctx>) -> Result<Action, E>`, driven by an
//! informer and a work queue; a failure is retried with the queue's per-key backoff. Level-triggered: a reconcile reads the
//! cache as it is now, so a restart, a missed event or a resync all converge the same way.

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::Resource;
use tokio::sync::broadcast::error::RecvError;

use crate::informer::{Informer, ObjectKey};
use crate::reconcile_span::{reconcile_span, reconciled};
use crate::workqueue::WorkQueue;
use shoal_telemetry::work::Traced;

/// What to do after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing until the object (or something mapped to it) changes.
    AwaitChange,
    /// Look again after this long even if nothing changes (deadlines, TTLs).
    RequeueAfter(Duration),
}

/// Which reconciles are spans in their object's trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceReconciles {
    Every,
    /// Only those of objects being deleted; the others carry the object's trace to whatever
    /// they write without a span of their own.
    ///
    /// NOTE: for housekeeping controllers that look at every change of a busy kind and
    /// nearly always find nothing to do (the garbage collectors see every write of every
    /// pod). As spans, their "nothing to do" was 7 of the two dozen spans of a scheduled
    /// pod's trace: noise to a reader, and cost at a 1.0 ratio. What they do write still
    /// shows in the trace, as the API's span of the request.
    WhileDeleting,
    /// Only those continuing a trace their object carries; a change that carries none is
    /// routine and starts no trace.
    ///
    /// NOTE: for the node lifecycle controller, which reconciles a Node on every heartbeat
    /// (its Lease changed) and nearly always finds it still Ready. Heartbeats and node status
    /// start no trace, so as new roots these were one-span traces, 500 a second for 1,000
    /// nodes. A reconcile that does act still shows: its writes start a trace at the API.
    ContinuingOnly,
}

#[derive(Debug, Clone)]
pub struct ControllerConfig {
    pub name: &'static str,
    pub concurrency: usize,
    pub resync: Duration,
    pub trace: TraceReconciles,
}

impl ControllerConfig {
    pub fn new(name: &'static str) -> Self {
        ControllerConfig {
            name,
            concurrency: 4,
            resync: Duration::from_secs(300),
            trace: TraceReconciles::Every,
        }
    }
}

/// Feeds a work queue from every change of the informer's kind.
pub fn feed_from_informer<K: Resource>(informer: &Informer<K>, queue: Arc<WorkQueue<ObjectKey>>) {
    feed_mapped(informer, queue, |change_key, _obj| vec![change_key.clone()]);
}

/// Feeds a work queue with keys computed from changes of another kind (e.g. a pod change
/// enqueues its owning ReplicaSet). A lagging receiver re-enqueues everything it maps.
pub fn feed_mapped<K, T, F>(informer: &Informer<K>, queue: Arc<WorkQueue<T>>, map: F)
where
    K: Resource,
    T: Clone + Eq + Hash + Send + 'static,
    F: Fn(&ObjectKey, &K) -> Vec<T> + Send + 'static,
{
    let mut rx = informer.subscribe();
    let informer = informer.clone();
    let queue = Arc::downgrade(&queue);
    tokio::spawn(async move {
        loop {
            let Some(q) = queue.upgrade() else { return };
            match rx.recv().await {
                Ok(change) => {
                    for key in map(&change.key, &change.new) {
                        q.add(key);
                    }
                    if let Some(old) = &change.old {
                        for key in map(&change.key, old) {
                            q.add(key);
                        }
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    for key in informer.keys() {
                        if let Some(obj) = informer.get(&key.namespace, &key.name) {
                            for k in map(&key, &obj) {
                                q.add(k);
                            }
                        }
                    }
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
}

/// Runs a controller until `shutdown` resolves. Waits for the informer's initial sync first.
pub async fn run<K, Ctx, E, R, RFut>(
    config: ControllerConfig,
    informer: Informer<K>,
    queue: Arc<WorkQueue<ObjectKey>>,
    ctx: Arc<Ctx>,
    reconcile: R,
    shutdown: impl Future<Output = ()>,
) where
    K: Resource,
    Ctx: Send + Sync + 'static,
    E: std::fmt::Display + Send + 'static,
    R: Fn(Arc<K>, Arc<Ctx>) -> RFut + Send + Sync + 'static,
    RFut: Future<Output = Result<Action, E>> + Send + 'static,
{
    if let Err(e) = informer.wait_synced().await {
        tracing::error!(controller = config.name, error = %e, "cannot sync; not acting");
        return;
    }
    feed_from_informer(&informer, queue.clone());
    for key in informer.keys() {
        queue.add(key);
    }
    let resync = {
        let (informer, queue) = (informer.clone(), Arc::downgrade(&queue));
        let period = config.resync;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let Some(q) = queue.upgrade() else { return };
                for key in informer.keys() {
                    q.add_routine(key);
                }
            }
        })
    };
    let reconcile = Arc::new(reconcile);
    let mut workers = Vec::new();
    for _ in 0..config.concurrency.max(1) {
        let (queue, informer, ctx) = (queue.clone(), informer.clone(), ctx.clone());
        let reconcile = reconcile.clone();
        let (name, trace) = (config.name, config.trace);
        workers.push(tokio::spawn(async move {
            while let Some(key) = queue.next().await {
                let Some(obj) = informer.get(&key.namespace, &key.name) else {
                    queue.done(key, Ok(None));
                    continue;
                };
                // NOTE: a resync is no part of the change the object last saw: continuing
                // that change's trace, every resync of every object added a span to it, so a
                // rollout's trace never ended. A resync that finds something to write starts
                // a trace of its own, at the API.
                let traced = if queue.is_routine_run(&key) {
                    Traced::none()
                } else {
                    let traceparent = informer.traceparent(&key.namespace, &key.name);
                    let spanned = match trace {
                        TraceReconciles::Every => true,
                        TraceReconciles::WhileDeleting => obj.meta().deletion_timestamp.is_some(),
                        TraceReconciles::ContinuingOnly => traceparent.is_some(),
                    };
                    if spanned {
                        reconcile_span(name, &key, &*obj, traceparent.as_deref())
                    } else {
                        Traced::carrying(traceparent.as_deref())
                    }
                };
                let started = std::time::Instant::now();
                let result = traced.run(reconcile(obj.clone(), ctx.clone())).await;
                reconciled(traced.span(), name, &result, started.elapsed(), queue.len());
                match result {
                    Ok(Action::AwaitChange) => queue.done(key, Ok(None)),
                    Ok(Action::RequeueAfter(d)) => queue.done(key, Ok(Some(d))),
                    Err(e) => {
                        let failures = queue.failures(&key);
                        // A first failure is mostly a routine conflict of optimistic
                        // concurrency (a cache a write behind) that the retry settles; one
                        // that repeats is worth an operator's attention.
                        if failures == 0 {
                            tracing::debug!(controller = name, object = %key, error = %e,
                                "reconcile failed; retrying");
                        } else {
                            tracing::warn!(controller = name, object = %key, failures, error = %e,
                                "reconcile failed");
                        }
                        queue.done(key, Err(()));
                    }
                }
            }
        }));
    }
    shutdown.await;
    queue.shutdown();
    resync.abort();
    for w in workers {
        let _ = w.await;
    }
}
