//! Resumable watches: every event after a revision, exactly once, in log order, across client
//! reconnects and nats-server restarts.
//!
//! NOTE: async-nats' ordered consumer already recreates itself on sequence gaps; this layer
//! adds what it cannot: recreation after the server lost the consumer (restart), and
//! de-duplication by stream sequence, so a resumed consumer that replays is harmless.
//!
//! A watch (or a resume) from a revision at or below the log's compaction revision ends with
//! [`Expired`]: a tombstone it should have seen may have been purged. Its owner relists, as a
//! Kubernetes client does on 410 Gone. The revision is read after the consumer exists: the
//! compactor records it before purging, so any purge the consumer could have missed is in it.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use async_nats::HeaderMap;
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::backoff::Backoff;
use crate::store::{raw_from_stored, RawEvent, Store};

/// Between attempts to resume an interrupted watch.
const RESUME: Backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));

/// The longest a pull of the watch's consumer waits on the server. The client asks for idle
/// heartbeats at half of it and recreates the consumer after two missed ones: an ephemeral
/// consumer lives on the stream's leader, so when that server dies the watch is silent until
/// then. With async-nats' defaults (30 s pulls, 15 s heartbeats) a list behind it waited out
/// its 10 s deadline; the price is one pull request per idle watch every 3 s.
const PULL_EXPIRES: Duration = Duration::from_secs(3);

/// The log no longer holds everything after the watch's revision: relist, then watch from
/// the list's revision (410 Gone / Expired in Kubernetes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("watch from revision {from} expired: the state log is compacted through {compacted}")]
pub struct Expired {
    /// The first revision the watch still needed.
    pub from: u64,
    pub compacted: u64,
}

/// What a watch yields: the next event, or the end of the watch because it expired.
pub type WatchItem = Result<RawEvent, Expired>;

/// A live stream of raw events for subjects matching a filter.
pub struct RawWatch {
    rx: mpsc::Receiver<WatchItem>,
    _task: AbortOnDrop,
}

/// Stops the pumping task when the watch is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl RawWatch {
    /// Watches `filter` starting at revision `from` (inclusive).
    pub fn start(store: Store, filter: String, from: u64) -> RawWatch {
        let (tx, rx) = mpsc::channel(1024);
        let task = tokio::spawn(pump(store, filter, from.max(1), tx));
        RawWatch {
            rx,
            _task: AbortOnDrop(task),
        }
    }

    /// The next event; `Some(Err(Expired))` is the last item of an expired watch.
    pub async fn next(&mut self) -> Option<WatchItem> {
        self.rx.recv().await
    }

    /// Converts into a `futures::Stream` of events.
    pub fn into_stream(self) -> impl futures::Stream<Item = WatchItem> + Send + Unpin {
        let RawWatch { rx, _task } = self;
        Box::pin(futures::stream::unfold(
            (rx, _task),
            |(mut rx, task)| async move { rx.recv().await.map(|ev| (ev, (rx, task))) },
        ))
    }
}

/// Why one consumer's run ended.
enum Interrupted {
    /// Worth another consumer from where it stopped.
    Retry(String),
    Expired(Expired),
}

async fn pump(store: Store, filter: String, mut next: u64, tx: mpsc::Sender<WatchItem>) {
    let mut delays = RESUME.delays();
    loop {
        match stream_from(&store, &filter, &mut next, &tx).await {
            Ok(()) => return, // the receiver is gone
            Err(Interrupted::Expired(expired)) => {
                tracing::info!(filter = %filter, from = expired.from, compacted = expired.compacted,
                    "watch expired: the log was compacted past it");
                let _ = tx.send(Err(expired)).await;
                return;
            }
            Err(Interrupted::Retry(e)) => {
                tracing::warn!(filter = %filter, next, error = %e, "watch interrupted; resuming");
                tokio::time::sleep(delays.next().unwrap_or(RESUME.max)).await;
            }
        }
    }
}

async fn stream_from(
    store: &Store,
    filter: &str,
    next: &mut u64,
    tx: &mpsc::Sender<WatchItem>,
) -> Result<(), Interrupted> {
    let retry = |e: &dyn std::fmt::Display| Interrupted::Retry(e.to_string());
    let stream = store
        .jetstream()
        .get_stream(bus_schemas::subjects::OBJECTS_STREAM)
        .await
        .map_err(|e| retry(&e))?;
    let consumer = stream
        .create_consumer(OrderedConfig {
            filter_subject: filter.to_string(),
            deliver_policy: DeliverPolicy::ByStartSequence {
                start_sequence: *next,
            },
            max_expires: PULL_EXPIRES,
            ..Default::default()
        })
        .await
        .map_err(|e| retry(&e))?;
    let compacted = store.compacted_revision().await.map_err(|e| retry(&e))?;
    if *next <= compacted {
        return Err(Interrupted::Expired(Expired {
            from: *next,
            compacted,
        }));
    }
    let mut messages = consumer.messages().await.map_err(|e| retry(&e))?;
    while let Some(msg) = messages.next().await {
        let msg = msg.map_err(|e| retry(&e))?;
        let info = msg.info().map_err(|e| retry(&e))?;
        let (seq, stored_at) = (
            info.stream_sequence,
            std::time::SystemTime::from(info.published),
        );
        if seq < *next {
            continue;
        }
        let empty = HeaderMap::new();
        let mut raw = raw_from_stored(
            msg.subject.to_string(),
            seq,
            msg.headers.as_ref().unwrap_or(&empty),
            msg.payload.clone(),
        );
        raw.stored_at = Some(stored_at);
        *next = seq + 1;
        if tx.send(Ok(raw)).await.is_err() {
            return Ok(());
        }
    }
    Err(Interrupted::Retry("consumer stream ended".into()))
}
