//! The state every verb shares: the store and the informer caches, the lookups that read
//! them, and the primitives that write the log. The bottom layer of the crate: it imports
//! nothing else from it but the request, so policy modules and verbs can all build on it.

use std::sync::Arc;

use bus_schemas::codec::{self, MAX_OBJECT_BYTES};
use bus_schemas::status::Cause;
use bus_schemas::subjects;
use bus_schemas::{Reason, Resource, Status};
use chrono::Utc;
use shoal_bus::store::{EventType, RawEvent, StoreError, WriteMeta};
use shoal_bus::{InformerFactory, Store};

use crate::created_fields::CreatedFields;
use crate::request::Request;
use crate::secrets::{seal, KeyRing};
use crate::telemetry;

/// Which copy of the log answers a read of one object.
#[derive(Debug, Clone, Copy)]
enum Read {
    /// Whichever replica answers first: reads that may trail a moment.
    AnyReplica,
    /// Any replica for an object it holds; only the leader for "absent".
    AbsenceFromLeader,
    /// The stream's leader: never behind the last acknowledged write.
    Leader,
}

/// How many times a write without a resourceVersion is retried against newer versions.
pub(crate) const MAX_UNCONDITIONAL_RETRIES: usize = 16;

pub struct ApiServer {
    pub(crate) store: Store,
    pub(crate) informers: InformerFactory,
    pub(crate) max_payload: usize,
    /// Encrypts Secret values on their way to the log; None refuses Secrets.
    pub(crate) secret_keys: Option<Arc<KeyRing>>,
    pub(crate) created_fields: CreatedFields,
}

pub(crate) fn decode_object<K: Resource>(payload: &[u8]) -> Result<K, Status> {
    let started = std::time::Instant::now();
    let decoded = decode_untimed::<K>(payload);
    shoal_telemetry::step!(
        "api.decode",
        started,
        decoded.is_ok(),
        bytes = shoal_telemetry::int(payload.len())
    );
    decoded
}

fn decode_untimed<K: Resource>(payload: &[u8]) -> Result<K, Status> {
    if payload.len() > MAX_OBJECT_BYTES {
        return Err(too_large(payload.len()));
    }
    let obj: K = codec::from_msgpack_strict(payload)
        .map_err(|causes| Status::invalid(K::INFO.kind, "", causes))?;
    let (api_version, kind) = obj.type_meta();
    let mut causes = Vec::new();
    if !kind.is_empty() && kind != K::INFO.kind {
        causes.push(Cause::invalid(
            "kind",
            format!("{kind:?} sent to the {} API", K::INFO.kind),
        ));
    }
    if !api_version.is_empty() && api_version != K::INFO.api_version {
        causes.push(Cause::not_supported(
            "apiVersion",
            api_version,
            &[K::INFO.api_version],
        ));
    }
    if !causes.is_empty() {
        return Err(Status::invalid(K::INFO.kind, &obj.meta().name, causes));
    }
    Ok(obj)
}

fn too_large(len: usize) -> Status {
    Status::new(
        Reason::RequestEntityTooLarge,
        format!("object is {len} bytes; the limit is {MAX_OBJECT_BYTES} bytes"),
    )
}

/// Decodes a stored version as it was written: sealed values stay sealed.
pub(crate) fn decode_sealed<K: Resource>(raw: &RawEvent) -> Result<K, Status> {
    let mut obj: K = codec::from_msgpack(&raw.payload).map_err(|e| {
        Status::internal(format!(
            "stored {} at revision {} is undecodable: {e}",
            raw.subject, raw.revision
        ))
    })?;
    obj.meta_mut().resource_version = raw.revision.to_string();
    Ok(obj)
}

pub(crate) fn default_namespace<K: Resource>(namespace: &str) -> String {
    if K::INFO.namespaced && namespace.is_empty() {
        "default".to_string()
    } else {
        namespace.to_string()
    }
}

pub(crate) fn subject_of<K: Resource>(namespace: &str, name: &str) -> String {
    subjects::object(&K::INFO.token(), namespace, name)
}

pub(crate) fn store_error(kind: &str, namespace: &str, name: &str, e: StoreError) -> Status {
    match e {
        StoreError::Conflict { .. } => Status::conflict(
            kind,
            namespace,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ),
        StoreError::TooLarge(detail) => Status::new(Reason::RequestEntityTooLarge, detail),
        StoreError::StreamMissing => Status::new(Reason::ServiceUnavailable, e.to_string()),
        StoreError::Unavailable(detail) => {
            Status::new(Reason::ServiceUnavailable, format!("state log unavailable: {detail}"))
        }
    }
}

/// Sets what the server alone decides about a new object (uid, creation time, generation)
/// and fills defaults: the first step of every create, whoever asks for it.
pub(crate) fn stamp_new<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.namespace = default_namespace::<K>(&meta.namespace);
    meta.uid = uuid::Uuid::new_v4().to_string();
    meta.creation_timestamp = Some(Utc::now());
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.generation = 1;
    meta.resource_version.clear();
    obj.apply_defaults();
}

impl ApiServer {
    pub fn new(store: Store, informers: InformerFactory, max_payload: usize) -> Self {
        ApiServer {
            store,
            informers,
            max_payload,
            secret_keys: None,
            created_fields: CreatedFields::default(),
        }
    }

    /// Encrypts Secret values with `keys` (without, Secrets are refused).
    pub fn with_secret_keys(mut self, keys: Arc<KeyRing>) -> Self {
        self.secret_keys = Some(keys);
        self
    }

    /// Decodes a stored version with its sealed values opened: what every verb works on.
    pub(crate) fn decode_stored<K: Resource>(&self, raw: &RawEvent) -> Result<K, Status> {
        let mut obj = decode_sealed::<K>(raw)?;
        seal::open(self.secret_keys.as_deref(), &mut obj)?;
        Ok(obj)
    }

    /// An object from a cache (whose sealed values are sealed) as the verbs see it.
    pub(crate) fn opened<K: Resource>(&self, obj: Arc<K>) -> Result<Arc<K>, Status> {
        if !K::SEALED {
            return Ok(obj);
        }
        let mut obj = K::clone(&obj);
        seal::open(self.secret_keys.as_deref(), &mut obj)?;
        Ok(Arc::new(obj))
    }

    /// The version this very request stored, if the log still keeps it: the answer to a
    /// retry whose first attempt succeeded but whose reply was lost. Not only the newest
    /// version: by the time a create is retried, a scheduler may already have written the
    /// pod again (found by a test killing an API replica under load).
    pub(crate) async fn own_earlier_attempt<K: Resource>(
        &self,
        req: &Request<'_>,
        namespace: &str,
        name: &str,
    ) -> Option<K> {
        let id = req.request_id.as_deref()?;
        let subject = subject_of::<K>(namespace, name);
        let newest = self.store.get_raw(&subject).await.ok()??;
        let mine = if newest.request_id.as_deref() == Some(id) {
            newest
        } else {
            self.store
                .history(&subject)
                .await
                .ok()?
                .into_iter()
                .rev()
                .find(|raw| raw.request_id.as_deref() == Some(id))?
        };
        self.decode_stored::<K>(&mine).ok()
    }

    /// Current live version of an object, with its revision; None if absent or deleted.
    pub(crate) async fn current<K: Resource>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<(K, u64)>, Status> {
        self.current_read::<K>(namespace, name, Read::AnyReplica)
            .await
    }

    /// The base of a compare-and-swap write's attempt `attempt` (from 0): after a lost race
    /// the version is read from the stream's leader, since a replica that trails it would
    /// hand every retry the same old version. A write's "not found" is always the leader's
    /// (`Store::get_raw_absence_confirmed`): a node agent that was told its pod is gone
    /// stops confirming the deletion, and the pod would stay terminating for good.
    pub(crate) async fn current_for_attempt<K: Resource>(
        &self,
        namespace: &str,
        name: &str,
        attempt: usize,
    ) -> Result<Option<(K, u64)>, Status> {
        let read = if attempt > 0 {
            Read::Leader
        } else {
            Read::AbsenceFromLeader
        };
        self.current_read::<K>(namespace, name, read).await
    }

    async fn current_read<K: Resource>(
        &self,
        namespace: &str,
        name: &str,
        read: Read,
    ) -> Result<Option<(K, u64)>, Status> {
        let subject = subject_of::<K>(namespace, name);
        let raw = match read {
            Read::AnyReplica => self.store.get_raw(&subject).await,
            Read::AbsenceFromLeader => self.store.get_raw_absence_confirmed(&subject).await,
            Read::Leader => self.store.get_raw_from_leader(&subject).await,
        }
        .map_err(|e| store_error(K::INFO.kind, namespace, name, e))?;
        match raw {
            Some(raw) if !raw.is_tombstone() => {
                let obj = self.decode_stored::<K>(&raw)?;
                Ok(Some((obj, raw.revision)))
            }
            _ => Ok(None),
        }
    }

    /// The object as this process's cache holds it, if a synced cache of its kind runs here.
    /// A cached object whose sealed values do not open counts as not cached: the log read
    /// that follows reports why.
    fn cached<K: Resource>(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let obj = self.informers.existing::<K>()?.get(namespace, name)?;
        self.opened(obj).ok()
    }

    /// An object for a policy check (does the namespace exist, what is this class's value):
    /// from this process's cache when it holds it, else from the log. A cached "absent"
    /// is never trusted, as the object may have been created a moment ago.
    pub(crate) async fn cached_or_current<K: Resource>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<K>, Status> {
        match self.cached::<K>(namespace, name) {
            Some(obj) => Ok(Some(K::clone(&obj))),
            None => Ok(self
                .current::<K>(namespace, name)
                .await?
                .map(|(obj, _)| obj)),
        }
    }

    /// The version a write starts from. The first attempt takes it from this process's cache
    /// when the cache holds it (at the revision the client expects, if it named one): every
    /// write is a CAS on that revision, so a stale cache costs a conflict and a retry from the
    /// log, never a lost update, and it saves a read from the log on the hot path (binds,
    /// status reports, ledger records). Later attempts, and anything the cache lacks, read
    /// the log. The flag says whether the version came from the cache.
    pub(crate) async fn base_for_write<K: Resource>(
        &self,
        namespace: &str,
        name: &str,
        attempt: usize,
        wanted: Option<u64>,
    ) -> Result<Option<(K, u64, bool)>, Status> {
        if attempt == 0 {
            if let Some(obj) = self.cached::<K>(namespace, name) {
                let revision = obj.meta().revision().unwrap_or(0);
                if revision > 0 && wanted.is_none_or(|w| w == revision) {
                    return Ok(Some((K::clone(&obj), revision, true)));
                }
            }
        }
        // Attempt 0 read the cache, 1 a replica; from 2 on the leader answers.
        Ok(self
            .current_for_attempt::<K>(namespace, name, attempt.saturating_sub(1))
            .await?
            .map(|(obj, revision)| (obj, revision, false)))
    }

    /// Writes `obj` with CAS against `expected`; returns the stored object.
    pub(crate) async fn put<K: Resource>(
        &self,
        req: &Request<'_>,
        event: EventType,
        mut obj: K,
        expected: u64,
    ) -> Result<K, StoreError> {
        obj.meta_mut().resource_version.clear();
        obj.set_type_meta();
        let bytes = if K::SEALED {
            let mut sealed = obj.clone();
            seal::seal(self.secret_keys.as_deref(), &mut sealed)
                .map_err(|status| StoreError::Unavailable(status.message))?;
            codec::to_msgpack(&sealed)
        } else {
            codec::to_msgpack(&obj)
        };
        let bytes = bytes.map_err(|e| StoreError::TooLarge(e.to_string()))?;
        if bytes.len() > MAX_OBJECT_BYTES {
            return Err(StoreError::TooLarge(format!(
                "object is {} bytes encoded; the limit is {MAX_OBJECT_BYTES} bytes",
                bytes.len()
            )));
        }
        let meta = obj.meta();
        let subject = subject_of::<K>(&meta.namespace, &meta.name);
        let traceparent = telemetry::event_traceparent(req.traceparent.as_deref());
        let write_meta = WriteMeta {
            traceparent: traceparent.as_deref(),
            ..req.write_meta()
        };
        let started = std::time::Instant::now();
        let written = self
            .store
            .write(&subject, event, bytes, expected, &write_meta)
            .await;
        telemetry::cas_written(
            K::INFO.kind,
            &meta.namespace,
            &meta.name,
            expected,
            started,
            &written,
        );
        let written = written?;
        if written.duplicate {
            // A retry of a request already stored: answer with what the first attempt wrote.
            if let Some(raw) = self.store.get_at(written.revision).await? {
                if let Ok(stored) = self.decode_stored::<K>(&raw) {
                    return Ok(stored);
                }
            }
        }
        obj.meta_mut().resource_version = written.revision.to_string();
        Ok(obj)
    }

    /// Stores a new, stamped object where none lives (a tombstone may: names are reused after
    /// deletion). AlreadyExists if a live object holds the name, unless it is this very
    /// request's earlier attempt, which is then the answer.
    pub(crate) async fn store_new<K: Resource>(
        &self,
        req: &Request<'_>,
        obj: K,
    ) -> Result<K, Status> {
        let (ns, name) = (obj.meta().namespace.clone(), obj.meta().name.clone());
        let mut expected = 0;
        for _ in 0..MAX_UNCONDITIONAL_RETRIES {
            match self.put(req, EventType::Added, obj.clone(), expected).await {
                Ok(stored) => return Ok(stored),
                Err(StoreError::Conflict { .. }) => {
                    let subject = subject_of::<K>(&ns, &name);
                    let last = self
                        .store
                        .get_raw_from_leader(&subject)
                        .await
                        .map_err(|e| store_error(K::INFO.kind, &ns, &name, e))?;
                    match last {
                        Some(raw) if raw.is_tombstone() => expected = raw.revision,
                        // The compactor purged the tombstone we expected: nothing is there.
                        None => expected = 0,
                        _ => {
                            if let Some(mine) = self.own_earlier_attempt::<K>(req, &ns, &name).await
                            {
                                return Ok(mine);
                            }
                            return Err(Status::already_exists(K::INFO.kind, &ns, &name));
                        }
                    }
                }
                Err(e) => return Err(store_error(K::INFO.kind, &ns, &name, e)),
            }
        }
        Err(Status::conflict(
            K::INFO.kind,
            &ns,
            &name,
            "too many concurrent writers",
        ))
    }

    /// Removes exactly the version read at `revision`, bypassing graceful deletion: for
    /// objects the server keeps for itself, which carry no finalizers and run nothing. A
    /// version that changed since is left alone (Conflict); one already gone is NotFound.
    pub(crate) async fn remove_exact<K: Resource>(
        &self,
        req: &Request<'_>,
        mut obj: K,
        revision: u64,
    ) -> Result<K, Status> {
        let (ns, name) = (obj.meta().namespace.clone(), obj.meta().name.clone());
        let meta = obj.meta_mut();
        meta.deletion_timestamp = Some(Utc::now());
        meta.deletion_grace_period_seconds = Some(0);
        self.put(req, EventType::Deleted, obj, revision)
            .await
            .map_err(|e| store_error(K::INFO.kind, &ns, &name, e))
    }
}
