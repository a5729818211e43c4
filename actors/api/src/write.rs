//! The write verbs: create, update, update-status, apply, patch, delete.
//!
//! Every write is a compare-and-swap on the object's subject. A request that named a
//! resourceVersion gets Conflict when it is stale; one that did not (an unconditional update,
//! a status report, a patch) is retried against the newest version.

use bus_schemas::api::{DeleteOptions, PatchRequest, HEADER_APPLY_RESULT};
use bus_schemas::codec::{self, MAX_OBJECT_BYTES};
use bus_schemas::status::Cause;
use bus_schemas::subjects;
use bus_schemas::validation::validate_meta;
use bus_schemas::{Reason, Resource, Status};
use chrono::Utc;
use shoal_bus::store::{EventType, RawEvent, StoreError, WriteMeta};
use tracing::Instrument;

use crate::admission;
use crate::reply::Reply;
use crate::request::Request;
use crate::server::ApiServer;
use crate::telemetry;

/// How many times a write without a resourceVersion is retried against newer versions.
const MAX_UNCONDITIONAL_RETRIES: usize = 16;
/// How many generated names a create with `generateName` tries before AlreadyExists.
const GENERATE_NAME_ATTEMPTS: u8 = 8;

pub const FINALIZER_ORPHAN: &str = "orphan";
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

#[tracing::instrument(name = "api.decode", level = "info", skip_all, fields(kind = K::INFO.kind, bytes = payload.len()))]
pub(crate) fn decode_object<K: Resource>(payload: &[u8]) -> Result<K, Status> {
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

pub(crate) fn decode_stored<K: Resource>(raw: &RawEvent) -> Result<K, Status> {
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

fn store_error(kind: &str, namespace: &str, name: &str, e: StoreError) -> Status {
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

#[tracing::instrument(name = "api.validate", level = "info", skip_all, fields(kind = K::INFO.kind))]
fn validate<K: Resource>(obj: &K, old: Option<&K>) -> Result<(), Status> {
    let mut causes = validate_meta(&K::INFO, obj.meta());
    causes.extend(obj.validate_kind());
    if let Some(old) = old {
        causes.extend(obj.validate_update(old));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Status::invalid(K::INFO.kind, &obj.meta().name, causes))
    }
}

impl ApiServer {
    /// The version this very request stored, if the log still keeps it: the answer to a
    /// retry whose first attempt succeeded but whose reply was lost. Not only the newest
    /// version: by the time a create is retried, a scheduler may already have written the
    /// pod again (found by a test killing an API replica under load).
    async fn own_earlier_attempt<K: Resource>(
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
        decode_stored::<K>(&mine).ok()
    }

    /// Current live version of an object, with its revision; None if absent or deleted.
    pub(crate) async fn current<K: Resource>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<(K, u64)>, Status> {
        let subject = subject_of::<K>(namespace, name);
        let raw = self
            .store
            .get_raw(&subject)
            .await
            .map_err(|e| store_error(K::INFO.kind, namespace, name, e))?;
        match raw {
            Some(raw) if !raw.is_tombstone() => {
                let obj = decode_stored::<K>(&raw)?;
                Ok(Some((obj, raw.revision)))
            }
            _ => Ok(None),
        }
    }

    /// The object as this process's cache holds it, if a synced cache of its kind runs here.
    fn cached<K: Resource>(&self, namespace: &str, name: &str) -> Option<std::sync::Arc<K>> {
        self.informers.existing::<K>()?.get(namespace, name)
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
        Ok(self
            .current::<K>(namespace, name)
            .await?
            .map(|(obj, revision)| (obj, revision, false)))
    }

    /// Writes `obj` with CAS against `expected`; returns the stored object.
    async fn put<K: Resource>(
        &self,
        req: &Request<'_>,
        event: EventType,
        mut obj: K,
        expected: u64,
    ) -> Result<K, StoreError> {
        obj.meta_mut().resource_version.clear();
        obj.set_type_meta();
        let bytes = codec::to_msgpack(&obj).map_err(|e| StoreError::TooLarge(e.to_string()))?;
        if bytes.len() > MAX_OBJECT_BYTES {
            return Err(StoreError::TooLarge(format!(
                "object is {} bytes encoded; the limit is {MAX_OBJECT_BYTES} bytes",
                bytes.len()
            )));
        }
        let meta = obj.meta();
        let subject = subject_of::<K>(&meta.namespace, &meta.name);
        let span = telemetry::cas_span(K::INFO.kind, &meta.namespace, &meta.name, expected);
        let traceparent =
            span.in_scope(|| telemetry::event_traceparent(req.traceparent.as_deref()));
        let write_meta = WriteMeta {
            traceparent: traceparent.as_deref(),
            ..req.write_meta()
        };
        let written = self
            .store
            .write(&subject, event, bytes, expected, &write_meta)
            .instrument(span.clone())
            .await;
        telemetry::cas_outcome(&span, K::INFO.kind, &written);
        let written = written?;
        if written.duplicate {
            // A retry of a request already stored: answer with what the first attempt wrote.
            if let Some(raw) = self.store.get_at(written.revision).await? {
                if let Ok(stored) = decode_stored::<K>(&raw) {
                    return Ok(stored);
                }
            }
        }
        obj.meta_mut().resource_version = written.revision.to_string();
        Ok(obj)
    }

    pub(crate) async fn create<K: Resource>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let obj = decode_object::<K>(req.payload)?;
        let created = self.create_object(req, obj).await?;
        Reply::ok(&created)
    }

    pub(crate) async fn create_object<K: Resource>(
        &self,
        req: &Request<'_>,
        obj: K,
    ) -> Result<K, Status> {
        let meta = obj.meta();
        let generated = meta.name.is_empty() && !meta.generate_name.is_empty();
        if !generated {
            return self.create_named(req, obj).await;
        }
        // Five characters (27^5 names) collide now and then: a ReplicaSet of 1,000 pods has a
        // 3% chance of a clash, a run of thirty such has about one;
        // the next candidate follows from the request id too, so a retried request walks
        // the same names and finds its own earlier write.
        let mut last = None;
        for attempt in 0..GENERATE_NAME_ATTEMPTS {
            let mut candidate = obj.clone();
            let meta = candidate.meta_mut();
            meta.name = format!(
                "{}{}",
                meta.generate_name,
                generated_suffix(req.request_id.as_deref(), attempt)
            );
            match self.create_named(req, candidate).await {
                Err(status) if status.is(Reason::AlreadyExists) => last = Some(status),
                done => return done,
            }
        }
        Err(last.unwrap_or_else(|| Status::internal("no name generated")))
    }

    async fn create_named<K: Resource>(&self, req: &Request<'_>, mut obj: K) -> Result<K, Status> {
        let meta = obj.meta_mut();
        meta.namespace = default_namespace::<K>(&meta.namespace);
        meta.uid = uuid::Uuid::new_v4().to_string();
        meta.creation_timestamp = Some(Utc::now());
        meta.deletion_timestamp = None;
        meta.deletion_grace_period_seconds = None;
        meta.generation = 1;
        meta.resource_version.clear();
        obj.apply_defaults();
        admission::admit(self, &mut obj, None).await?;
        validate(&obj, None)?;
        admission::reserve(self, &mut obj).await?;
        let (ns, name) = (obj.meta().namespace.clone(), obj.meta().name.clone());
        let mut expected = 0;
        for _ in 0..MAX_UNCONDITIONAL_RETRIES {
            match self.put(req, EventType::Added, obj.clone(), expected).await {
                Ok(stored) => return Ok(stored),
                Err(StoreError::Conflict { .. }) => {
                    let subject = subject_of::<K>(&ns, &name);
                    let last = self
                        .store
                        .get_raw(&subject)
                        .await
                        .map_err(|e| store_error(K::INFO.kind, &ns, &name, e))?;
                    match last {
                        // Only a tombstone stands there: a name may be reused after deletion.
                        Some(raw) if raw.is_tombstone() => expected = raw.revision,
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

    pub(crate) async fn update<K: Resource>(
        &self,
        req: &Request<'_>,
        status_only: bool,
    ) -> Result<Reply, Status> {
        let incoming = decode_object::<K>(req.payload)?;
        let updated = self.update_object(req, incoming, status_only).await?;
        Reply::ok(&updated)
    }

    /// Updates spec and metadata (or only status), with CAS.
    pub(crate) async fn update_object<K: Resource>(
        &self,
        req: &Request<'_>,
        incoming: K,
        status_only: bool,
    ) -> Result<K, Status> {
        let ns = default_namespace::<K>(&incoming.meta().namespace);
        let name = incoming.meta().name.clone();
        let wanted_revision = incoming.meta().revision();
        if !incoming.meta().resource_version.is_empty() && wanted_revision.is_none() {
            return Err(Status::invalid(
                K::INFO.kind,
                &name,
                vec![Cause::invalid(
                    "metadata.resourceVersion",
                    "must be a decimal number",
                )],
            ));
        }
        let mut attempt = 0;
        while attempt < MAX_UNCONDITIONAL_RETRIES {
            attempt += 1;
            let Some((current, revision, cached)) = self
                .base_for_write::<K>(&ns, &name, attempt - 1, wanted_revision)
                .await?
            else {
                return Err(Status::not_found(K::INFO.kind, &ns, &name));
            };
            if let Some(wanted) = wanted_revision {
                if wanted != revision {
                    if let Some(mine) = self.own_earlier_attempt::<K>(req, &ns, &name).await {
                        return Ok(mine);
                    }
                    return Err(Status::conflict(
                        K::INFO.kind,
                        &ns,
                        &name,
                        "the object has been modified; please apply your changes to the latest version and try again",
                    ));
                }
            }
            if let Some(node) = &req.from_node {
                match admission::check_node_owns::<K>(node, &current) {
                    Ok(()) => {}
                    // The cache may not show the bind yet: ask the log before refusing.
                    Err(_) if cached => continue,
                    Err(refused) => return Err(refused),
                }
            }
            let next = if status_only {
                let mut next = current.clone();
                next.take_status_from(&incoming);
                next
            } else {
                let mut next = incoming.clone();
                next.meta_mut().namespace = ns.clone();
                next.keep_status_of(&current);
                next.apply_defaults();
                merge_server_fields(&mut next, &current);
                admission::admit(self, &mut next, Some(&current)).await?;
                validate(&next, Some(&current))?;
                next
            };
            match self
                .write_change(req, next, &current, revision, cached)
                .await
            {
                Ok(stored) => return Ok(stored),
                Err(StoreError::Conflict { .. }) if wanted_revision.is_none() || cached => continue,
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

    /// Writes `next` over `current` unless nothing changed; removes the object instead when a
    /// pending deletion has no finalizers left.
    ///
    /// `cached` says `current` came from the cache: "nothing changed" is then only true of
    /// the cached version, so it is answered as a conflict, and the caller's retry compares
    /// against the log (or the request would be acknowledged without being applied).
    async fn write_change<K: Resource>(
        &self,
        req: &Request<'_>,
        mut next: K,
        current: &K,
        revision: u64,
        cached: bool,
    ) -> Result<K, StoreError> {
        next.meta_mut().resource_version = current.meta().resource_version.clone();
        // Decided last, on the final object: defaults and admission alone are not changes.
        next.meta_mut().generation =
            current.meta().generation + i64::from(next.spec_differs(current));
        if &next == current {
            if cached {
                return Err(StoreError::Conflict {
                    subject: subject_of::<K>(&current.meta().namespace, &current.meta().name),
                    expected: revision,
                });
            }
            return Ok(current.clone());
        }
        if ready_to_remove(&next) {
            let removed = self.put(req, EventType::Deleted, next, revision).await?;
            admission::on_removed(self, &removed).await;
            return Ok(removed);
        }
        self.put(req, EventType::Modified, next, revision).await
    }

    pub(crate) async fn apply<K: Resource>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let incoming = decode_object::<K>(req.payload)?;
        let ns = default_namespace::<K>(&incoming.meta().namespace);
        let name = incoming.meta().name.clone();
        for _ in 0..MAX_UNCONDITIONAL_RETRIES {
            let Some((current, revision)) = self.current::<K>(&ns, &name).await? else {
                match self.create_object(req, incoming.clone()).await {
                    Ok(created) => {
                        return Ok(Reply::ok(&created)?.with_header(HEADER_APPLY_RESULT, "created"))
                    }
                    Err(s) if s.is(Reason::AlreadyExists) => continue,
                    Err(s) => return Err(s),
                }
            };
            let mut next = incoming.clone();
            next.meta_mut().namespace = ns.clone();
            next.keep_status_of(&current);
            next.apply_defaults();
            merge_server_fields(&mut next, &current);
            admission::admit(self, &mut next, Some(&current)).await?;
            validate(&next, Some(&current))?;
            next.meta_mut().resource_version = current.meta().resource_version.clone();
            next.meta_mut().generation =
                current.meta().generation + i64::from(next.spec_differs(&current));
            if next == current {
                return Ok(Reply::ok(&current)?.with_header(HEADER_APPLY_RESULT, "unchanged"));
            }
            match self
                .write_change(req, next, &current, revision, false)
                .await
            {
                Ok(stored) => {
                    return Ok(Reply::ok(&stored)?.with_header(HEADER_APPLY_RESULT, "configured"))
                }
                Err(StoreError::Conflict { .. }) => continue,
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

    pub(crate) async fn patch<K: Resource>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let patch: PatchRequest = codec::from_msgpack_strict(req.payload)
            .map_err(|causes| Status::invalid("PatchRequest", "", causes))?;
        let patch_doc: serde_json::Value = serde_json::from_str(&patch.patch)
            .map_err(|e| Status::bad_request(format!("patch is not valid JSON: {e}")))?;
        let ns = default_namespace::<K>(&patch.namespace);
        for attempt in 0..MAX_UNCONDITIONAL_RETRIES {
            let Some((current, revision, cached)) = self
                .base_for_write::<K>(&ns, &patch.name, attempt, None)
                .await?
            else {
                return Err(Status::not_found(K::INFO.kind, &ns, &patch.name));
            };
            let mut doc = serde_json::to_value(&current)
                .map_err(|e| Status::internal(format!("encoding for patch: {e}")))?;
            crate::merge_patch::apply(&mut doc, &patch_doc);
            let patched: K = codec::from_json_value_strict(doc)
                .map_err(|causes| Status::invalid(K::INFO.kind, &patch.name, causes))?;
            if patched.meta().name != current.meta().name
                || patched.meta().namespace != current.meta().namespace
            {
                return Err(Status::invalid(
                    K::INFO.kind,
                    &patch.name,
                    vec![Cause::invalid(
                        "metadata.name",
                        "a patch cannot rename an object",
                    )],
                ));
            }
            let next = if patch.status {
                let mut next = current.clone();
                next.take_status_from(&patched);
                next
            } else {
                let mut next = patched;
                next.keep_status_of(&current);
                next.apply_defaults();
                merge_server_fields(&mut next, &current);
                admission::admit(self, &mut next, Some(&current)).await?;
                validate(&next, Some(&current))?;
                next
            };
            match self
                .write_change(req, next, &current, revision, cached)
                .await
            {
                Ok(stored) => return Reply::ok(&stored),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(store_error(K::INFO.kind, &ns, &patch.name, e)),
            }
        }
        Err(Status::conflict(
            K::INFO.kind,
            &ns,
            &patch.name,
            "too many concurrent writers",
        ))
    }

    pub(crate) async fn delete<K: Resource>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let options: DeleteOptions = codec::from_msgpack_strict(req.payload)
            .map_err(|causes| Status::invalid("DeleteOptions", "", causes))?;
        let deleted = self.delete_object::<K>(req, &options).await?;
        Reply::ok(&deleted)
    }

    /// Graceful deletion: marks the object (deletionTimestamp) while finalizers or a running
    /// pod's grace period remain, and removes it once nothing holds it.
    pub(crate) async fn delete_object<K: Resource>(
        &self,
        req: &Request<'_>,
        options: &DeleteOptions,
    ) -> Result<K, Status> {
        let ns = default_namespace::<K>(&options.namespace);
        let name = &options.name;
        let policy = options
            .propagation_policy
            .as_deref()
            .unwrap_or("Background");
        if !matches!(policy, "Background" | "Foreground" | "Orphan") {
            return Err(Status::invalid(
                "DeleteOptions",
                name,
                vec![Cause::not_supported(
                    "propagationPolicy",
                    policy,
                    &["Background", "Foreground", "Orphan"],
                )],
            ));
        }
        for _ in 0..MAX_UNCONDITIONAL_RETRIES {
            let Some((current, revision)) = self.current::<K>(&ns, name).await? else {
                return Err(Status::not_found(K::INFO.kind, &ns, name));
            };
            if let Some(pre) = &options.preconditions {
                let uid_ok = pre.uid.as_ref().is_none_or(|u| *u == current.meta().uid);
                let rv_ok = pre
                    .resource_version
                    .as_ref()
                    .is_none_or(|rv| *rv == current.meta().resource_version);
                if !(uid_ok && rv_ok) {
                    return Err(Status::conflict(
                        K::INFO.kind,
                        &ns,
                        name,
                        "the delete preconditions (uid, resourceVersion) do not match",
                    ));
                }
            }
            if let Some(node) = &req.from_node {
                admission::check_node_owns::<K>(node, &current)?;
            }
            let mut next = current.clone();
            let meta = next.meta_mut();
            let add_finalizer = |meta: &mut bus_schemas::ObjectMeta, f: &str| {
                if !meta.finalizers.iter().any(|x| x == f) {
                    meta.finalizers.push(f.to_string());
                }
            };
            match policy {
                "Orphan" => add_finalizer(meta, FINALIZER_ORPHAN),
                "Foreground" => add_finalizer(meta, FINALIZER_FOREGROUND),
                _ => {}
            }
            let grace = admission::grace_period(&next, options.grace_period_seconds);
            let meta = next.meta_mut();
            let now = Utc::now();
            match meta.deletion_timestamp {
                // Already terminating: only a shorter grace period changes anything.
                Some(_) => {
                    if grace < meta.deletion_grace_period_seconds.unwrap_or(i64::MAX) {
                        meta.deletion_grace_period_seconds = Some(grace);
                        meta.deletion_timestamp = Some(now + chrono::Duration::seconds(grace));
                    }
                }
                None => {
                    meta.deletion_timestamp = Some(now + chrono::Duration::seconds(grace));
                    meta.deletion_grace_period_seconds = Some(grace);
                    admission::on_delete(&mut next);
                }
            }
            match self
                .write_change(req, next, &current, revision, false)
                .await
            {
                Ok(stored) => return Ok(stored),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(store_error(K::INFO.kind, &ns, name, e)),
            }
        }
        Err(Status::conflict(
            K::INFO.kind,
            &ns,
            name,
            "too many concurrent writers",
        ))
    }
}

/// Carries what only the server sets from the stored version into a new one. Call after
/// defaulting, so that defaults alone never count as a spec change.
fn merge_server_fields<K: Resource>(next: &mut K, current: &K) {
    let cur = current.meta();
    let meta = next.meta_mut();
    meta.uid = cur.uid.clone();
    meta.creation_timestamp = cur.creation_timestamp;
    meta.deletion_timestamp = cur.deletion_timestamp;
    meta.deletion_grace_period_seconds = cur.deletion_grace_period_seconds;
    meta.generate_name = cur.generate_name.clone();
    meta.generation = cur.generation;
    // Finalizers may only be added while the object is not being deleted.
    if cur.deletion_timestamp.is_some() {
        let kept: Vec<String> = meta
            .finalizers
            .iter()
            .filter(|f| cur.finalizers.contains(f))
            .cloned()
            .collect();
        meta.finalizers = kept;
    }
}

/// Deletion is complete when no finalizer holds the object and no grace period is running.
fn ready_to_remove<K: Resource>(obj: &K) -> bool {
    let meta = obj.meta();
    meta.deletion_timestamp.is_some() && meta.finalizers.is_empty() && !admission::awaits_node(obj)
}

/// The suffix of a generated name. A retried request (same request id, possibly answered
/// by another API replica) must land on the same name, or a create that timed out at the
/// client but was stored becomes a second object; so the suffix comes from the request id
/// when there is one (FNV-1a: stable across processes and versions), at random otherwise.
pub fn generated_suffix(request_id: Option<&str>, attempt: u8) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes: [u8; 8] = match request_id {
        Some(id) => id
            .bytes()
            .chain(std::iter::once(attempt))
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            })
            .to_le_bytes(),
        None => {
            let id = uuid::Uuid::new_v4();
            id.as_bytes()[..8].try_into().unwrap_or([0; 8])
        }
    };
    bytes[..5]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}
