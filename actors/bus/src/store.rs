//! The state log: one JetStream stream, one subject per object, every write a versioned event.
//!
//! resourceVersion is the stream sequence of an object's last write, so it is globally ordered:
//! a list at revision N followed by a watch from N+1 sees every later change exactly once.
//! Writes are compare-and-swap on the subject's last sequence (JetStream's
//! `Nats-Expected-Last-Subject-Sequence`): a stale write fails as [`StoreError::Conflict`],
//! recognised by the typed error kind, never by message text.
//!
//! Only the API actors call the write half of this module.

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::{self, context::PublishErrorKind, stream};
use async_nats::HeaderMap;
use bus_schemas::state_log::CompactionRecord;
use bus_schemas::subjects::{self, HEADER_EVENT, OBJECTS_STREAM};
use bytes::Bytes;
use shoal_telemetry::propagation::TRACEPARENT_HEADER;

/// How many versions of each object the log keeps (for history and debugging).
pub const VERSIONS_KEPT: i64 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }

    pub fn parse(s: &str) -> Option<EventType> {
        match s {
            "ADDED" => Some(EventType::Added),
            "MODIFIED" => Some(EventType::Modified),
            "DELETED" => Some(EventType::Deleted),
            _ => None,
        }
    }
}

/// One stored version of one object, still encoded.
#[derive(Debug, Clone)]
pub struct RawEvent {
    pub subject: String,
    pub revision: u64,
    pub event: EventType,
    pub payload: Bytes,
    /// The request id of the write that stored this version, if it carried one.
    pub request_id: Option<String>,
    /// The trace context of the work that wrote this version, if it had one.
    pub traceparent: Option<String>,
    /// When the log stored it (set on watched events).
    pub stored_at: Option<std::time::SystemTime>,
}

impl RawEvent {
    pub fn is_tombstone(&self) -> bool {
        self.event == EventType::Deleted
    }
}

/// Context a write carries into the log.
#[derive(Debug, Default, Clone, Copy)]
pub struct WriteMeta<'a> {
    pub request_id: Option<&'a str>,
    pub traceparent: Option<&'a str>,
}

/// The outcome of a stored write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub revision: u64,
    /// The request id was seen before: nothing new was written; `revision` is the first's.
    pub duplicate: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The state stream is gone: an alarm, never "desired state is empty".
    #[error("state stream {OBJECTS_STREAM} is missing: refusing to act on an empty view of the cluster (restore it, or initialise a new cluster with `shoal up`)")]
    StreamMissing,
    #[error("conflict writing {subject}: expected last revision {expected}")]
    Conflict { subject: String, expected: u64 },
    #[error("object too large for the bus: {0}")]
    TooLarge(String),
    #[error("state log unavailable: {0}")]
    Unavailable(String),
}

impl StoreError {
    fn unavailable(e: impl std::fmt::Display) -> StoreError {
        StoreError::Unavailable(e.to_string())
    }
}

#[derive(Debug, Clone)]
pub struct StreamSettings {
    /// JetStream replicas of the cluster's state: the object log, the image store and the
    /// usage samples the autoscaler reads. Container logs and traces stay at R1
    /// (docs/architecture.md, "Several machines").
    pub replicas: usize,
}

/// Replicas of the bulk telemetry streams (container logs, traces): the largest write volume,
/// and losing access to it while its one server is down harms no workload.
pub const TELEMETRY_REPLICAS: usize = 1;

impl Default for StreamSettings {
    fn default() -> Self {
        StreamSettings { replicas: 1 }
    }
}

/// Creates the state stream if absent. Only cluster bootstrap calls this; actors never do.
pub async fn ensure_stream(
    js: &jetstream::Context,
    settings: &StreamSettings,
) -> Result<(), StoreError> {
    js.get_or_create_stream(stream::Config {
        name: OBJECTS_STREAM.to_string(),
        subjects: vec![subjects::OBJECTS_ALL.to_string()],
        storage: stream::StorageType::File,
        max_messages_per_subject: VERSIONS_KEPT,
        num_replicas: settings.replicas,
        allow_direct: true,
        discard: stream::DiscardPolicy::Old,
        // Long enough to cover a client's retries of one request, short enough to keep the
        // server's de-duplication table small at thousands of writes a second.
        duplicate_window: Duration::from_secs(30),
        description: Some("Shoal cluster state log: one subject per object".into()),
        ..Default::default()
    })
    .await
    .map_err(StoreError::unavailable)?;
    // Logs and metrics are telemetry, not state: bounded, and lost without harm.
    js.get_or_create_stream(stream::Config {
        name: subjects::LOGS_STREAM.to_string(),
        subjects: vec![subjects::LOGS_ALL.to_string()],
        storage: stream::StorageType::File,
        max_messages_per_subject: 2000,
        max_bytes: 256 * 1024 * 1024,
        max_age: Duration::from_secs(24 * 3600),
        num_replicas: TELEMETRY_REPLICAS,
        discard: stream::DiscardPolicy::Old,
        description: Some("Shoal container log lines, per pod and container".into()),
        ..Default::default()
    })
    .await
    .map_err(StoreError::unavailable)?;
    shoal_telemetry::jetstream::ensure_stream(js, TELEMETRY_REPLICAS)
        .await
        .map_err(StoreError::Unavailable)?;
    js.get_or_create_stream(stream::Config {
        name: subjects::METRICS_STREAM.to_string(),
        subjects: vec![subjects::METRICS_ALL.to_string()],
        storage: stream::StorageType::Memory,
        max_messages_per_subject: 1,
        max_age: Duration::from_secs(120),
        num_replicas: settings.replicas,
        allow_direct: true,
        discard: stream::DiscardPolicy::Old,
        description: Some("Shoal usage samples: the latest per pod and node".into()),
        ..Default::default()
    })
    .await
    .map_err(StoreError::unavailable)?;
    ensure_image_store(js, settings.replicas).await
}

/// Creates the image registry's object store if absent, at `replicas`: an image a node
/// cannot pull stops its pods as surely as a lost object would.
pub async fn ensure_image_store(
    js: &jetstream::Context,
    replicas: usize,
) -> Result<(), StoreError> {
    if js.get_object_store(subjects::IMAGE_STORE).await.is_ok() {
        return Ok(());
    }
    js.create_object_store(jetstream::object_store::Config {
        bucket: subjects::IMAGE_STORE.to_string(),
        description: Some("Shoal image blobs by digest, and references".into()),
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    })
    .await
    .map(|_| ())
    .map_err(StoreError::unavailable)
}

/// The state stream's replica count: what a component creating a cluster-wide store later
/// (the image registry on first use) should match.
pub async fn state_replicas(js: &jetstream::Context) -> Result<usize, StoreError> {
    let mut stream = js
        .get_stream(OBJECTS_STREAM)
        .await
        .map_err(StoreError::unavailable)?;
    let info = stream.info().await.map_err(StoreError::unavailable)?;
    Ok(info.config.num_replicas)
}

/// Read and CAS-write access to the state log.
#[derive(Clone)]
pub struct Store {
    js: jetstream::Context,
    stream: stream::Stream,
}

impl Store {
    /// Opens the existing state stream; a missing stream is [`StoreError::StreamMissing`].
    pub async fn open(client: async_nats::Client) -> Result<Store, StoreError> {
        let js = jetstream::new(client);
        Store::open_with(js).await
    }

    pub async fn open_with(js: jetstream::Context) -> Result<Store, StoreError> {
        match js.get_stream(OBJECTS_STREAM).await {
            Ok(stream) => Ok(Store { js, stream }),
            Err(e) => match e.kind() {
                jetstream::context::GetStreamErrorKind::JetStream(inner)
                    if inner.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND =>
                {
                    Err(StoreError::StreamMissing)
                }
                _ => Err(StoreError::unavailable(e)),
            },
        }
    }

    pub fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }

    /// The sequence of the newest write in the whole log.
    pub async fn last_revision(&self) -> Result<u64, StoreError> {
        let info = self.stream.get_info().await.map_err(map_info_err)?;
        Ok(info.state.last_sequence)
    }

    /// The revision of the newest write under `filter` (wildcards allowed); 0 if none.
    /// A cache that has seen this revision for its filter is consistent with the log.
    pub async fn last_revision_of(&self, filter: &str) -> Result<u64, StoreError> {
        Ok(self
            .get_raw(filter)
            .await?
            .map(|raw| raw.revision)
            .unwrap_or(0))
    }

    /// The newest version stored under `subject` (a tombstone included), if any.
    pub async fn get_raw(&self, subject: &str) -> Result<Option<RawEvent>, StoreError> {
        match self.stream.direct_get_last_for_subject(subject).await {
            Ok(msg) => Ok(Some(raw_from_message(msg))),
            Err(e) if matches!(e.kind(), stream::DirectGetErrorKind::NotFound) => Ok(None),
            Err(e) => Err(StoreError::unavailable(e)),
        }
    }

    /// As [`Store::get_raw`], except that "absent" (nothing stored, or a tombstone) is only
    /// believed from the stream's leader. A replica that was cut off, or has not caught up
    /// since (it cannot while the stream has no leader), answers a direct get for an object
    /// created without it with "not found"; a write path that passes that on as 404 ends
    /// its caller's retries for an object that exists. Present answers stay cheap, since a
    /// stale version only costs the compare-and-swap a retry.
    pub async fn get_raw_absence_confirmed(
        &self,
        subject: &str,
    ) -> Result<Option<RawEvent>, StoreError> {
        match self.get_raw(subject).await? {
            Some(raw) if !raw.is_tombstone() => Ok(Some(raw)),
            _ => self.get_raw_from_leader(subject).await,
        }
    }

    /// As [`Store::get_raw`], answered by the stream's leader, so never older than the last
    /// acknowledged write. NATS does not promise that of a direct get: any replica may
    /// answer one, and a replica still catching up (after a partition) answers an old
    /// version, on which a retried compare-and-swap loses again. Costs the leader a request,
    /// so it is for retries after a lost race, not for every read.
    pub async fn get_raw_from_leader(&self, subject: &str) -> Result<Option<RawEvent>, StoreError> {
        match self.stream.get_last_raw_message_by_subject(subject).await {
            Ok(msg) => Ok(Some(raw_from_message(msg))),
            Err(e) if matches!(e.kind(), stream::LastRawMessageErrorKind::NoMessageFound) => {
                Ok(None)
            }
            Err(e) => Err(StoreError::unavailable(e)),
        }
    }

    /// Every version the log still keeps under `subject` (at most [`VERSIONS_KEPT`]),
    /// oldest first. For the rare questions the newest version cannot answer, such as
    /// "did this request write any of them?".
    pub async fn history(&self, subject: &str) -> Result<Vec<RawEvent>, StoreError> {
        let mut versions = Vec::new();
        let mut from = 1;
        loop {
            match self
                .stream
                .direct_get_next_for_subject(subject, Some(from))
                .await
            {
                Ok(msg) => {
                    from = msg.sequence + 1;
                    versions.push(raw_from_message(msg));
                }
                Err(e) if matches!(e.kind(), stream::DirectGetErrorKind::NotFound) => {
                    return Ok(versions)
                }
                Err(e) => return Err(StoreError::unavailable(e)),
            }
        }
    }

    /// Appends a version of an object, only if the subject's last revision is `expected`
    /// (0: the subject holds nothing yet).
    ///
    /// `request_id` becomes the JetStream message id: a retried request whose first attempt
    /// was stored is reported as a duplicate with the first attempt's revision, not written
    /// twice.
    pub async fn write(
        &self,
        subject: &str,
        event: EventType,
        payload: Vec<u8>,
        expected: u64,
        meta: &WriteMeta<'_>,
    ) -> Result<Written, StoreError> {
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_EVENT, event.as_str());
        if let Some(tp) = meta.traceparent {
            headers.insert(TRACEPARENT_HEADER, tp);
        }
        if let Some(id) = meta.request_id {
            headers.insert(async_nats::header::NATS_MESSAGE_ID, id);
        }
        let publish = jetstream::message::PublishMessage::build()
            .payload(Bytes::from(payload))
            .headers(headers)
            .expected_last_subject_sequence(expected);
        let sent = self.js.send_publish(subject.to_string(), publish).await;
        let acked = match sent {
            Ok(ack) => ack.await,
            Err(e) => Err(e),
        };
        match acked.map_err(|e| map_publish_err(e, subject, expected)) {
            Ok(ack) => Ok(Written {
                revision: ack.sequence,
                duplicate: ack.duplicate,
            }),
            Err(StoreError::StreamMissing) => Err(self.unanswered_write().await),
            Err(e) => Err(e),
        }
    }

    /// Why no server took a write. NATS answers "no responders" both when the stream is gone
    /// and, on a cluster, while its replicas elect a leader (seconds after a partition heals);
    /// only the second is routine, and telling an operator to re-initialise the cluster then
    /// would be dangerous. So the stream's info decides, briefly: a leaderless stream still
    /// has it.
    async fn unanswered_write(&self) -> StoreError {
        const ASK_WITHIN: Duration = Duration::from_millis(500);
        let info = tokio::time::timeout(ASK_WITHIN, self.stream.get_info()).await;
        match info.map(|answer| answer.map_err(map_info_err)) {
            Ok(Err(StoreError::StreamMissing)) => StoreError::StreamMissing,
            _ => StoreError::Unavailable(format!(
                "no server took the write to {OBJECTS_STREAM}: the stream has no leader at the moment (a NATS cluster elects one within seconds of losing it); retry"
            )),
        }
    }

    /// The version stored at exactly `revision`.
    pub async fn get_at(&self, revision: u64) -> Result<Option<RawEvent>, StoreError> {
        match self.stream.direct_get(revision).await {
            Ok(msg) => Ok(Some(raw_from_message(msg))),
            Err(e) if matches!(e.kind(), stream::DirectGetErrorKind::NotFound) => Ok(None),
            Err(e) => Err(StoreError::unavailable(e)),
        }
    }

    /// The compaction record and its revision in the log (its CAS base); None before the
    /// first compaction.
    pub async fn compaction_record(&self) -> Result<Option<(u64, CompactionRecord)>, StoreError> {
        let Some(raw) = self.get_raw(subjects::COMPACTION_RECORD).await? else {
            return Ok(None);
        };
        match bus_schemas::codec::from_msgpack::<CompactionRecord>(&raw.payload) {
            Ok(record) => Ok(Some((raw.revision, record))),
            Err(e) => {
                // Overwritten by the next compaction; until then nothing is known compacted
                // beyond what the stream's first sequence says.
                tracing::error!(revision = raw.revision, error = %e, "undecodable compaction record; ignored");
                Ok(Some((raw.revision, CompactionRecord::default())))
            }
        }
    }

    /// The compaction revision: a watch must start above it, or it may have missed the
    /// deletion of an object whose tombstone was purged (410 Gone). Versions the stream
    /// drops on its own (the oldest of an object's [`VERSIONS_KEPT`]) do not count: a watch
    /// that misses one still sees the object's newer versions.
    pub async fn compacted_revision(&self) -> Result<u64, StoreError> {
        Ok(self
            .compaction_record()
            .await?
            .map(|(_, record)| record.revision)
            .unwrap_or(0))
    }

    /// Writes the compaction record if the current one is still at `expected` (0: none yet).
    /// API actors only.
    pub async fn write_compaction_record(
        &self,
        record: &CompactionRecord,
        expected: u64,
    ) -> Result<Written, StoreError> {
        let payload = bus_schemas::codec::to_msgpack(record)
            .map_err(|e| StoreError::Unavailable(format!("encoding the compaction record: {e}")))?;
        self.write(
            subjects::COMPACTION_RECORD,
            EventType::Modified,
            payload,
            expected,
            &WriteMeta::default(),
        )
        .await
    }

    /// Removes every version of `subject` at or below `revision` (a tombstone and what came
    /// before it), leaving any later version, so a name reused since keeps its object.
    /// API actors only (the compactor).
    pub async fn purge_through(&self, subject: &str, revision: u64) -> Result<u64, StoreError> {
        let purged = self
            .stream
            .purge()
            .filter(subject)
            .sequence(revision + 1)
            .await
            .map_err(StoreError::unavailable)?;
        Ok(purged.purged)
    }

    /// Lists the newest live version of every object under `filter` (a subject with
    /// wildcards), and the revision the list reflects.
    pub async fn list_raw(&self, filter: &str) -> Result<(Vec<RawEvent>, u64), StoreError> {
        use futures::StreamExt;
        let floor = self.last_revision().await?;
        let consumer = self
            .stream
            .create_consumer(jetstream::consumer::pull::OrderedConfig {
                filter_subject: filter.to_string(),
                deliver_policy: jetstream::consumer::DeliverPolicy::LastPerSubject,
                ..Default::default()
            })
            .await
            .map_err(StoreError::unavailable)?;
        let mut consumer = consumer;
        let pending = consumer
            .info()
            .await
            .map_err(StoreError::unavailable)?
            .num_pending;
        // By subject: the consumer goes on past its snapshot, so a subject written while the
        // list runs arrives again (a newer version, or its tombstone), and only the newest
        // version may stay listed.
        let mut items: HashMap<String, RawEvent> = HashMap::new();
        let mut revision = floor;
        if pending == 0 {
            return Ok((Vec::new(), revision));
        }
        let mut messages = consumer.messages().await.map_err(StoreError::unavailable)?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let mut last_delivered = 0;
        loop {
            let next = match tokio::time::timeout(LIST_IDLE, messages.next()).await {
                Ok(next) => next,
                Err(_) => {
                    // The consumer's pending count is fixed when it is made: a subject the
                    // compactor purges meanwhile is counted but never delivered. The log
                    // itself says whether anything is left after what arrived.
                    if self.nothing_after(filter, last_delivered).await? {
                        break;
                    }
                    if tokio::time::Instant::now() >= deadline {
                        return Err(StoreError::Unavailable(format!(
                            "listing {filter} timed out"
                        )));
                    }
                    continue;
                }
            };
            let Some(msg) = next else { break };
            let msg = msg.map_err(StoreError::unavailable)?;
            let info = msg.info().map_err(StoreError::unavailable)?;
            let (seq, remaining) = (info.stream_sequence, info.pending);
            last_delivered = seq;
            revision = revision.max(seq);
            let raw = raw_from_stored(
                msg.subject.to_string(),
                seq,
                msg.headers.as_ref().unwrap_or(&HeaderMap::new()),
                msg.payload.clone(),
            );
            if raw.is_tombstone() {
                items.remove(&raw.subject);
            } else {
                items.insert(raw.subject.clone(), raw);
            }
            if remaining == 0 {
                break;
            }
        }
        let mut items: Vec<RawEvent> = items.into_values().collect();
        items.sort_by_key(|raw| raw.revision);
        Ok((items, revision))
    }
}

/// How long a list waits for its next message before asking the log whether any is left.
const LIST_IDLE: Duration = Duration::from_millis(500);

impl Store {
    /// True if the log holds no message under `filter` after `revision`.
    async fn nothing_after(&self, filter: &str, revision: u64) -> Result<bool, StoreError> {
        match self
            .stream
            .direct_get_next_for_subject(filter, Some(revision + 1))
            .await
        {
            Ok(_) => Ok(false),
            Err(e) if matches!(e.kind(), stream::DirectGetErrorKind::NotFound) => Ok(true),
            Err(e) => Err(StoreError::unavailable(e)),
        }
    }
}

/// The server's "no such stream" travels as the JetStream API error inside an info request's
/// error (async-nats gives it no kind of its own), so it is found by its error code.
fn map_info_err(e: jetstream::stream::InfoError) -> StoreError {
    let api_error =
        std::error::Error::source(&e).and_then(|source| source.downcast_ref::<jetstream::Error>());
    match api_error {
        Some(api) if api.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND => {
            StoreError::StreamMissing
        }
        _ => StoreError::unavailable(e),
    }
}

fn map_publish_err(
    e: async_nats::jetstream::context::PublishError,
    subject: &str,
    expected: u64,
) -> StoreError {
    // nats-server 2.11 and later also refuse an expected-sequence mismatch with a code of its
    // own (10164, "wrong last sequence" without the numbers) that async-nats reports as Other;
    // both are a lost CAS race, not an outage.
    let wrong_last_constant = std::error::Error::source(&e)
        .and_then(|source| source.downcast_ref::<jetstream::Error>())
        .is_some_and(|api| {
            api.error_code() == jetstream::ErrorCode::STREAM_WRONG_LAST_SEQUENCE_CONSTANT
        });
    if wrong_last_constant {
        return StoreError::Conflict {
            subject: subject.to_string(),
            expected,
        };
    }
    match e.kind() {
        PublishErrorKind::WrongLastSequence => StoreError::Conflict {
            subject: subject.to_string(),
            expected,
        },
        PublishErrorKind::StreamNotFound => StoreError::StreamMissing,
        PublishErrorKind::MaxPayloadExceeded => StoreError::TooLarge(e.to_string()),
        _ => StoreError::unavailable(e),
    }
}

/// A version read back by a get (direct or from the leader).
fn raw_from_message(msg: jetstream::message::StreamMessage) -> RawEvent {
    raw_from_stored(
        msg.subject.to_string(),
        msg.sequence,
        &msg.headers,
        msg.payload,
    )
}

pub(crate) fn raw_from_stored(
    subject: String,
    revision: u64,
    headers: &HeaderMap,
    payload: Bytes,
) -> RawEvent {
    let event = headers
        .get(HEADER_EVENT)
        .and_then(|v| EventType::parse(v.as_str()))
        .unwrap_or(EventType::Modified);
    let request_id = headers
        .get(async_nats::header::NATS_MESSAGE_ID)
        .map(|v| v.as_str().to_string());
    let traceparent = headers
        .get(TRACEPARENT_HEADER)
        .map(|v| v.as_str().to_string());
    RawEvent {
        subject,
        revision,
        event,
        payload,
        request_id,
        traceparent,
        stored_at: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::jetstream::context::PublishError;

    fn refusal(err_code: u64) -> PublishError {
        let api: jetstream::Error = serde_json::from_value(serde_json::json!({
            "code": 400,
            "err_code": err_code,
            "description": "wrong last sequence",
        }))
        .unwrap();
        let kind = if err_code == 10071 {
            PublishErrorKind::WrongLastSequence
        } else {
            PublishErrorKind::Other
        };
        PublishError::with_source(kind, api)
    }

    #[test]
    fn both_wrong_last_sequence_codes_are_a_lost_race() {
        for code in [10071, 10164] {
            assert!(
                matches!(
                    map_publish_err(refusal(code), "s", 7),
                    StoreError::Conflict { expected: 7, .. }
                ),
                "code {code}"
            );
        }
        assert!(!matches!(
            map_publish_err(refusal(10077), "s", 7),
            StoreError::Conflict { .. }
        ));
    }
}
