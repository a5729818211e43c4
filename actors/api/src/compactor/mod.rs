//! The compactor: keeps the state log's size following the live set, not the history.
//!
//! Deleted objects' subjects are purged once their tombstone is older than the operator's
//! retention; Events not written again for their TTL are deleted (a tombstone, so watchers
//! hear of it) and purged in turn. Before each round's purges the compaction record is
//! advanced to the highest tombstone purged, so a watch from below it is answered Expired and
//! relists (docs/architecture.md, "State log").
//!
//! Every API replica runs one; the record doubles as their lease (a CAS write every round),
//! so one compacts and the others stand by.
//!
//! - [`plan`]: what is due, from the headers the scan saw (pure).
//! - this module: the scan, the record, the purges.

pub mod plan;

use std::time::{Duration, SystemTime};

use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use bus_schemas::kinds::Event;
use bus_schemas::state_log::CompactionRecord;
use bus_schemas::{subjects, Resource};
use futures::{StreamExt, TryStreamExt};
use shoal_bus::store::{EventType, Store, StoreError, WriteMeta};
use tokio::sync::mpsc;

use plan::{Plan, Seen};

/// How long deleted objects and Events stay in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionConfig {
    /// How long a deleted object's tombstone stays watchable before its subject is purged.
    pub deleted_retention: Duration,
    /// How long an Event lives after its last write (Kubernetes' `--event-ttl`).
    pub event_ttl: Duration,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            deleted_retention: Duration::from_secs(3600),
            event_ttl: Duration::from_secs(3600),
        }
    }
}

impl CompactionConfig {
    /// A quarter of the shorter of the two, within [100 ms, 5 s]: purges land within a
    /// quarter of their due time, and the lease renews well inside [`LEASE`].
    fn period(&self) -> Duration {
        (self.deleted_retention.min(self.event_ttl) / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(5))
    }
}

/// A holder that has not renewed for this long is replaced.
const LEASE: Duration = Duration::from_secs(15);
/// How often the holder renews while it has nothing to record.
const RENEW: Duration = Duration::from_secs(5);
/// Purges and Event expiries in flight at once.
const IN_FLIGHT: usize = 64;

/// Runs until dropped (the API actor aborts it on shutdown).
pub async fn run(store: Store, config: CompactionConfig, identity: String) {
    let period = config.period();
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut leading: Option<Leading> = None;
    loop {
        ticks.tick().await;
        match round(&store, &config, &identity, &mut leading).await {
            Ok(()) => {}
            Err(e) => {
                // From scratch next round: the scan restarts from the record.
                tracing::warn!(error = %e, "compaction round failed; rescanning");
                leading = None;
            }
        }
    }
}

/// The holder's state: what the scan has seen, and what it still waits for.
struct Leading {
    scan: Scan,
    plan: Plan,
}

async fn round(
    store: &Store,
    config: &CompactionConfig,
    identity: &str,
    leading: &mut Option<Leading>,
) -> Result<(), StoreError> {
    let (base, record) = store.compaction_record().await?.unwrap_or_default();
    let now = SystemTime::now();
    let now_ms = unix_ms(now);
    if record.holder != identity
        && !record.holder.is_empty()
        && record.renewed_ms + LEASE.as_millis() as u64 > now_ms
    {
        if leading.take().is_some() {
            tracing::info!(holder = %record.holder, "another API replica compacts now; standing by");
        }
        return Ok(());
    }
    if leading.is_none() {
        tracing::info!(from = record.revision + 1, "compacting the state log");
        *leading = Some(Leading {
            scan: Scan::start(store, record.revision + 1),
            plan: Plan::new(config.deleted_retention, config.event_ttl),
        });
    }
    let state = leading.as_mut().expect("just set");
    state.scan.drain(&mut state.plan)?;
    let due = state.plan.due(now);
    let next = CompactionRecord {
        revision: record.revision.max(due.revision()),
        holder: identity.to_string(),
        renewed_ms: now_ms,
    };
    // Quiet rounds write nothing until the lease wants renewing, so an idle log stays still.
    let renew_due = record.holder != identity
        || now_ms.saturating_sub(record.renewed_ms) >= RENEW.as_millis() as u64;
    if next.revision == record.revision && !renew_due {
        expire_events(store, &due.expiries).await?;
        return Ok(());
    }
    match store.write_compaction_record(&next, base).await {
        Ok(_) => {}
        Err(StoreError::Conflict { .. }) => {
            // Another replica wrote first: it holds the lease; our plan may be stale.
            *leading = None;
            return Ok(());
        }
        Err(e) => return Err(e),
    }
    expire_events(store, &due.expiries).await?;
    // Many purges in flight: one at a time, each a round trip and (with `sync_interval:
    // always`) a sync, the compactor fell behind a churn of a few hundred deletes a second.
    futures::stream::iter(due.purges.iter().map(Ok))
        .try_for_each_concurrent(IN_FLIGHT, |(subject, revision)| async move {
            store.purge_through(subject, *revision).await.map(|_| ())
        })
        .await?;
    if !due.purges.is_empty() || !due.expiries.is_empty() {
        tracing::debug!(
            purged = due.purges.len(),
            expired = due.expiries.len(),
            compacted = next.revision,
            "compacted the state log"
        );
    }
    Ok(())
}

/// [`expire_event`] for every due Event, many at a time.
async fn expire_events(store: &Store, expiries: &[(String, u64)]) -> Result<(), StoreError> {
    futures::stream::iter(expiries.iter().map(Ok))
        .try_for_each_concurrent(IN_FLIGHT, |(subject, revision)| {
            expire_event(store, subject, *revision)
        })
        .await
}

/// Deletes an Event's version `revision` unless it was written again since: a tombstone
/// carrying its final object, which the plan purges after the retention like any other.
async fn expire_event(store: &Store, subject: &str, revision: u64) -> Result<(), StoreError> {
    let Some(last) = store.get_at(revision).await? else {
        return Ok(());
    };
    match store
        .write(
            subject,
            EventType::Deleted,
            last.payload.to_vec(),
            revision,
            &WriteMeta::default(),
        )
        .await
    {
        Ok(_) | Err(StoreError::Conflict { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A headers-only read of the whole log from a revision: the compactor needs each
/// message's subject, event type and time, never its object.
struct Scan {
    rx: mpsc::Receiver<Result<Seen, String>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Scan {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Scan {
    fn start(store: &Store, from: u64) -> Scan {
        let (tx, rx) = mpsc::channel(16 * 1024);
        let task = tokio::spawn(scan(store.clone(), from, tx));
        Scan { rx, task }
    }

    /// Feeds the plan everything scanned so far.
    fn drain(&mut self, plan: &mut Plan) -> Result<(), StoreError> {
        loop {
            match self.rx.try_recv() {
                Ok(Ok(seen)) => plan.observe(seen),
                Ok(Err(e)) => return Err(StoreError::Unavailable(e)),
                Err(mpsc::error::TryRecvError::Empty) => return Ok(()),
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    return Err(StoreError::Unavailable("compaction scan stopped".into()))
                }
            }
        }
    }
}

async fn scan(store: Store, from: u64, tx: mpsc::Sender<Result<Seen, String>>) {
    if let Err(e) = scan_from(&store, from, &tx).await {
        let _ = tx.send(Err(e)).await;
    }
}

async fn scan_from(
    store: &Store,
    from: u64,
    tx: &mpsc::Sender<Result<Seen, String>>,
) -> Result<(), String> {
    let stream = store
        .jetstream()
        .get_stream(subjects::OBJECTS_STREAM)
        .await
        .map_err(|e| e.to_string())?;
    let consumer = stream
        .create_consumer(OrderedConfig {
            filter_subject: subjects::OBJECTS_ALL.to_string(),
            deliver_policy: DeliverPolicy::ByStartSequence {
                start_sequence: from.max(1),
            },
            headers_only: true,
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    let mut messages = consumer.messages().await.map_err(|e| e.to_string())?;
    let events = format!("shoal.v1.obj.{}.", Event::INFO.token());
    while let Some(msg) = messages.next().await {
        let msg = msg.map_err(|e| e.to_string())?;
        if msg.subject.as_str() == subjects::COMPACTION_RECORD {
            continue;
        }
        let info = msg.info().map_err(|e| e.to_string())?;
        let tombstone = msg
            .headers
            .as_ref()
            .and_then(|h| h.get(subjects::HEADER_EVENT))
            .is_some_and(|v| v.as_str() == EventType::Deleted.as_str());
        let seen = Seen {
            subject: msg.subject.to_string(),
            revision: info.stream_sequence,
            stored_at: SystemTime::from(info.published),
            tombstone,
            event: msg.subject.starts_with(events.as_str()),
        };
        if tx.send(Ok(seen)).await.is_err() {
            return Ok(());
        }
    }
    Err("compaction scan ended".into())
}
