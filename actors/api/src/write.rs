//! The write verbs: create, update, update-status, patch. Deletion is its own verb, in
//! [`crate::deletion`]; apply (server-side apply) is in [`crate::apply`].
//!
//! Every write is a compare-and-swap on the object's subject. A request that named a
//! resourceVersion gets Conflict when it is stale; one that did not (an unconditional update,
//! a status report, a patch) is retried against the newest version.
//!
//! A verb decides the next version and hands it to [`ApiServer::write_change`] (or, for a
//! create, [`ApiServer::store_new`]). Every change of spec and metadata goes through
//! [`ApiServer::prepare_spec_change`], so a new way of deciding the next version (server-side
//! apply) gets defaults, server-owned fields, admission and validation by calling it.

use bus_schemas::api::PatchRequest;
use bus_schemas::codec;
use bus_schemas::status::Cause;
use bus_schemas::validation::validate_meta;
use bus_schemas::{ManagedFieldsEntry, Reason, Resource, Status};
use chrono::Utc;
use shoal_bus::store::StoreError;

use crate::reply::Reply;
use crate::request::Request;
use crate::state::{
    decode_object, default_namespace, stamp_new, store_error, ApiServer, MAX_UNCONDITIONAL_RETRIES,
};
use crate::{admission, field_manager, service_ips};

pub use bus_schemas::wellknown::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN};

/// How many generated names a create with `generateName` tries before AlreadyExists.
const GENERATE_NAME_ATTEMPTS: u8 = 8;

fn validate<K: Resource>(obj: &K, old: Option<&K>) -> Result<(), Status> {
    let started = std::time::Instant::now();
    let validated = validate_untimed(obj, old);
    shoal_telemetry::step!("api.validate", started, validated.is_ok());
    validated
}

fn validate_untimed<K: Resource>(obj: &K, old: Option<&K>) -> Result<(), Status> {
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
    pub(crate) async fn create<K: Resource>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let obj = decode_object::<K>(req.payload)?;
        let created = self.create_object(req, obj).await?;
        self.reply_written(&created, true).await
    }

    /// The reply to a create or a change of spec: the object, with what the namespace's pod
    /// security `warn` level says about the pod spec it carries.
    pub(crate) async fn reply_written<K: Resource>(
        &self,
        obj: &K,
        created: bool,
    ) -> Result<Reply, Status> {
        let warnings = crate::pod_security::warnings(self, obj, created).await;
        Ok(Reply::ok(obj)?.with_warnings(&warnings))
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
        let managed_fields = match &req.field_manager {
            Some(manager) => {
                let operation = if req.is_apply() {
                    ManagedFieldsEntry::APPLY
                } else {
                    ManagedFieldsEntry::UPDATE
                };
                self.created_fields
                    .record(&mut obj, manager, operation, Utc::now())?
            }
            None => Vec::new(),
        };
        obj.meta_mut().managed_fields = managed_fields;
        stamp_new(&mut obj);
        admission::admit(self, &mut obj, None).await?;
        validate(&obj, None)?;
        service_ips::allocate(self, &mut obj).await?;
        self.store_new(req, obj).await
    }

    /// Turns the version a client sent into the one to store over `current`: status and
    /// server-owned fields come from `current`, then defaults, admission and validation.
    pub(crate) async fn prepare_spec_change<K: Resource>(
        &self,
        next: &mut K,
        current: &K,
    ) -> Result<(), Status> {
        next.meta_mut().namespace = current.meta().namespace.clone();
        next.keep_status_of(current);
        next.apply_defaults();
        merge_server_fields(next, current);
        admission::admit(self, next, Some(current)).await?;
        validate(next, Some(current))
    }

    /// Gives the request's field manager the fields this update or patch changes (see
    /// [`field_manager::record_update`]); a writer without a manager leaves ownership as is.
    fn record_manager<K: Resource>(
        &self,
        req: &Request<'_>,
        next: &mut K,
        current: &mut K,
    ) -> Result<(), Status> {
        let Some(manager) = &req.field_manager else {
            return Ok(());
        };
        let encode = |obj: &K| {
            serde_json::to_value(obj)
                .map_err(|e| Status::internal(format!("encoding for managed fields: {e}")))
        };
        // Both sides are encoded without their entries: the managed view leaves them out, and
        // turning every entry's FieldsV1 text into a tree only to drop it showed in profiles
        // of the bind path.
        next.meta_mut().managed_fields.clear();
        let entries = std::mem::take(&mut current.meta_mut().managed_fields);
        let encoded = encode(current);
        current.meta_mut().managed_fields = entries;
        let recorded = field_manager::record_update(
            &encoded?,
            &encode(next)?,
            manager,
            &current.meta().managed_fields,
            K::INFO.api_version,
            Utc::now(),
        );
        next.meta_mut().managed_fields = recorded;
        Ok(())
    }

    pub(crate) async fn update<K: Resource>(
        &self,
        req: &Request<'_>,
        status_only: bool,
    ) -> Result<Reply, Status> {
        let incoming = decode_object::<K>(req.payload)?;
        let updated = self.update_object(req, incoming, status_only).await?;
        if status_only {
            return Reply::ok(&updated);
        }
        self.reply_written(&updated, false).await
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
            let Some((mut current, revision, cached)) = self
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
                self.prepare_spec_change(&mut next, &current).await?;
                self.record_manager(req, &mut next, &mut current)?;
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

    pub(crate) async fn patch<K: Resource>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let patch: PatchRequest = codec::from_msgpack_strict(req.payload)
            .map_err(|causes| Status::invalid("PatchRequest", "", causes))?;
        let patch_doc: serde_json::Value = serde_json::from_str(&patch.patch)
            .map_err(|e| Status::bad_request(format!("patch is not valid JSON: {e}")))?;
        let ns = default_namespace::<K>(&patch.namespace);
        for attempt in 0..MAX_UNCONDITIONAL_RETRIES {
            let Some((mut current, revision, cached)) = self
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
                self.prepare_spec_change(&mut next, &current).await?;
                self.record_manager(req, &mut next, &mut current)?;
                next
            };
            match self
                .write_change(req, next, &current, revision, cached)
                .await
            {
                Ok(stored) if patch.status => return Reply::ok(&stored),
                Ok(stored) => return self.reply_written(&stored, false).await,
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
    // Only the API writes ownership: what a client sends is ignored, as the write itself
    // decides who owns what (`record_manager`, `crate::apply`).
    meta.managed_fields = cur.managed_fields.clone();
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
