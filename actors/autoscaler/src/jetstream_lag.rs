//! JetStream consumer lag as a built-in External metric: `jetstream_consumer_lag` with the
//! selector labels `stream` and `consumer` is the consumer's pending plus ack-pending
//! messages, read from JetStream's consumer info directly (KEDA's NATS scaler polls the HTTP
//! monitoring endpoint instead, every 30 s by default).
//!
//! One watcher per referenced consumer keeps the value fresh: it refreshes every period, and
//! at once when a message arrives on one of the stream's subjects while the lag is zero, so
//! a workload scaled to zero gets its first replica from the first message (push), not from
//! the next periodic pass.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bus_schemas::kinds::hpa::MetricIdentifier;
use bus_schemas::kinds::HorizontalPodAutoscaler;
use futures::StreamExt;
use tokio::sync::Notify;

pub use bus_schemas::kinds::hpa::JETSTREAM_LAG_METRIC as METRIC_NAME;

/// A consumer of a stream, as an HPA's metric selector names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConsumerRef {
    pub stream: String,
    pub consumer: String,
}

impl ConsumerRef {
    /// The consumer an External metric identifier names, if it is this source's metric.
    /// `Some(Err)` when it is, but the selector does not name both labels.
    pub fn of(metric: &MetricIdentifier) -> Option<Result<ConsumerRef, String>> {
        if metric.name != METRIC_NAME {
            return None;
        }
        let labels: BTreeMap<String, String> = metric
            .selector
            .as_ref()
            .map(|s| s.match_labels.clone())
            .unwrap_or_default();
        Some(match (labels.get("stream"), labels.get("consumer")) {
            (Some(stream), Some(consumer)) if !stream.is_empty() && !consumer.is_empty() => {
                Ok(ConsumerRef {
                    stream: stream.clone(),
                    consumer: consumer.clone(),
                })
            }
            _ => Err(format!(
                "external metric {METRIC_NAME} needs selector.matchLabels \"stream\" and \"consumer\""
            )),
        })
    }
}

/// Every consumer the HPAs' External metrics name.
pub fn referenced<'a>(
    hpas: impl IntoIterator<Item = &'a HorizontalPodAutoscaler>,
) -> HashSet<ConsumerRef> {
    hpas.into_iter()
        .flat_map(|hpa| hpa.spec.metrics.iter())
        .filter(|m| m.type_ == "External")
        .filter_map(|m| m.external.as_ref())
        .filter_map(|e| ConsumerRef::of(&e.metric)?.ok())
        .collect()
}

/// The latest lag read per consumer.
#[derive(Clone, Default)]
pub struct LagTable {
    values: Arc<RwLock<HashMap<ConsumerRef, Result<u64, String>>>>,
}

impl LagTable {
    /// The built-in External source: the lag in milli-units, as External values are kept.
    pub fn answer(&self, metric: &MetricIdentifier) -> Option<Result<i64, String>> {
        let consumer = match ConsumerRef::of(metric)? {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let values = self.values.read().expect("lag lock");
        Some(match values.get(&consumer) {
            Some(Ok(lag)) => Ok(i64::try_from(*lag).unwrap_or(i64::MAX / 1000) * 1000),
            Some(Err(e)) => Err(e.clone()),
            None => Err(format!(
                "unable to get external metric {METRIC_NAME}: consumer {}/{} not read yet",
                consumer.stream, consumer.consumer
            )),
        })
    }

    fn set(&self, consumer: &ConsumerRef, value: Result<u64, String>) -> Option<u64> {
        let mut values = self.values.write().expect("lag lock");
        let before = values.get(consumer).and_then(|v| v.as_ref().ok().copied());
        values.insert(consumer.clone(), value);
        before
    }

    fn last(&self, consumer: &ConsumerRef) -> Option<u64> {
        let values = self.values.read().expect("lag lock");
        values.get(consumer).and_then(|v| v.as_ref().ok().copied())
    }

    fn forget(&self, consumer: &ConsumerRef) {
        self.values.write().expect("lag lock").remove(consumer);
    }
}

/// Keeps one watcher per referenced consumer, started and stopped as HPAs come and go.
pub struct LagWatchers {
    js: async_nats::jetstream::Context,
    nats: async_nats::Client,
    pub table: LagTable,
    period: Duration,
    prompt: Arc<Notify>,
    running: HashMap<ConsumerRef, tokio::task::JoinHandle<()>>,
}

impl LagWatchers {
    pub fn new(nats: async_nats::Client, period: Duration, prompt: Arc<Notify>) -> Self {
        LagWatchers {
            js: async_nats::jetstream::new(nats.clone()),
            nats,
            table: LagTable::default(),
            period,
            prompt,
            running: HashMap::new(),
        }
    }

    /// Starts watchers for newly referenced consumers and stops those no HPA names now.
    pub fn follow(&mut self, wanted: &HashSet<ConsumerRef>) {
        self.running.retain(|consumer, task| {
            let keep = wanted.contains(consumer) && !task.is_finished();
            if !keep {
                task.abort();
                self.table.forget(consumer);
            }
            keep
        });
        for consumer in wanted {
            if !self.running.contains_key(consumer) {
                let task = tokio::spawn(watch(
                    self.js.clone(),
                    self.nats.clone(),
                    consumer.clone(),
                    self.table.clone(),
                    self.period,
                    self.prompt.clone(),
                ));
                self.running.insert(consumer.clone(), task);
            }
        }
    }
}

impl Drop for LagWatchers {
    fn drop(&mut self) {
        for task in self.running.values() {
            task.abort();
        }
    }
}

/// Pending plus ack-pending messages of the consumer.
async fn read_lag(
    js: &async_nats::jetstream::Context,
    consumer: &ConsumerRef,
) -> Result<(u64, Vec<String>), String> {
    let mut stream = js
        .get_stream(&consumer.stream)
        .await
        .map_err(|e| format!("stream {}: {e}", consumer.stream))?;
    let info = stream
        .consumer_info(&consumer.consumer)
        .await
        .map_err(|e| format!("consumer {}/{}: {e}", consumer.stream, consumer.consumer))?;
    let lag = info.num_pending + info.num_ack_pending as u64;
    let subjects = stream
        .info()
        .await
        .map(|i| i.config.subjects.clone())
        .unwrap_or_default();
    Ok((lag, subjects))
}

/// Refreshes one consumer's lag every `period`, and at once on a message to its stream while
/// the lag is zero (the only time a message can wake a workload).
async fn watch(
    js: async_nats::jetstream::Context,
    nats: async_nats::Client,
    consumer: ConsumerRef,
    table: LagTable,
    period: Duration,
    prompt: Arc<Notify>,
) {
    let mut arrivals: Option<Arrivals> = None;
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_read = Instant::now()
        .checked_sub(period)
        .unwrap_or_else(Instant::now);
    loop {
        let woken_by_message = tokio::select! {
            _ = tick.tick() => false,
            Some(_) = next_message(&mut arrivals) => true,
        };
        // A busy stream sends a message per publish: while the lag is positive, the
        // periodic read is enough.
        if woken_by_message
            && table.last(&consumer).is_some_and(|lag| lag > 0)
            && last_read.elapsed() < period
        {
            continue;
        }
        last_read = Instant::now();
        match read_lag(&js, &consumer).await {
            Ok((lag, subjects)) => {
                // A changed lag is worth a pass now: from zero it wakes the workload, to
                // zero it lets it go.
                if table.set(&consumer, Ok(lag)) != Some(lag) {
                    prompt.notify_one();
                }
                if arrivals.is_none() {
                    arrivals = subscribe_all(&nats, &subjects).await;
                }
            }
            Err(e) => {
                table.set(&consumer, Err(format!("unable to read {METRIC_NAME}: {e}")));
            }
        }
    }
}

type Arrivals = futures::stream::SelectAll<async_nats::Subscriber>;

async fn next_message(arrivals: &mut Option<Arrivals>) -> Option<()> {
    match arrivals {
        Some(subs) => subs.next().await.map(|_| ()),
        None => std::future::pending().await,
    }
}

/// One feed of every subject the stream captures.
async fn subscribe_all(nats: &async_nats::Client, subjects: &[String]) -> Option<Arrivals> {
    if subjects.is_empty() {
        return None;
    }
    let mut subs = Vec::with_capacity(subjects.len());
    for subject in subjects {
        subs.push(nats.subscribe(subject.clone()).await.ok()?);
    }
    Some(futures::stream::select_all(subs))
}
