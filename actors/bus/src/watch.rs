//! Resumable watches: every event after a revision, exactly once, in log order, across client
//! reconnects and nats-server restarts.
//!
//! NOTE: async-nats' ordered consumer already recreates itself on sequence gaps; this layer
//! adds what it cannot: recreation after the server lost the consumer (restart), and
//! de-duplication by stream sequence, so a resumed consumer that replays is harmless.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use async_nats::HeaderMap;
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::backoff::Backoff;
use crate::store::{raw_from_stored, RawEvent, Store};

/// Between attempts to resume an interrupted watch.
const RESUME: Backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));

/// A live stream of raw events for subjects matching a filter.
pub struct RawWatch {
    rx: mpsc::Receiver<RawEvent>,
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

    pub async fn next(&mut self) -> Option<RawEvent> {
        self.rx.recv().await
    }

    /// Converts into a `futures::Stream` of events.
    pub fn into_stream(self) -> impl futures::Stream<Item = RawEvent> + Send + Unpin {
        let RawWatch { rx, _task } = self;
        Box::pin(futures::stream::unfold(
            (rx, _task),
            |(mut rx, task)| async move { rx.recv().await.map(|ev| (ev, (rx, task))) },
        ))
    }
}

async fn pump(store: Store, filter: String, mut next: u64, tx: mpsc::Sender<RawEvent>) {
    let mut delays = RESUME.delays();
    loop {
        match stream_from(&store, &filter, &mut next, &tx).await {
            Ok(()) => return, // the receiver is gone
            Err(e) => {
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
    tx: &mpsc::Sender<RawEvent>,
) -> Result<(), String> {
    let stream = store
        .jetstream()
        .get_stream(bus_schemas::subjects::OBJECTS_STREAM)
        .await
        .map_err(|e| e.to_string())?;
    let consumer = stream
        .create_consumer(OrderedConfig {
            filter_subject: filter.to_string(),
            deliver_policy: DeliverPolicy::ByStartSequence {
                start_sequence: *next,
            },
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    let mut messages = consumer.messages().await.map_err(|e| e.to_string())?;
    while let Some(msg) = messages.next().await {
        let msg = msg.map_err(|e| e.to_string())?;
        let info = msg.info().map_err(|e| e.to_string())?;
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
        if tx.send(raw).await.is_err() {
            return Ok(());
        }
    }
    Err("consumer stream ended".into())
}
