//! The apply verb: Kubernetes' server-side apply. The manifest's fields are merged into the
//! live object under the request's field manager (see [`crate::field_manager`] for the
//! rules); this module only reads, decodes, checks and writes.

use bus_schemas::api::HEADER_APPLY_RESULT;
use bus_schemas::{codec, Cause, Resource, Status};
use chrono::Utc;
use shoal_bus::store::StoreError;

use crate::field_manager::{self, Applier, Conflict};
use crate::reply::Reply;
use crate::request::Request;
use crate::state::{
    decode_object, default_namespace, store_error, ApiServer, MAX_UNCONDITIONAL_RETRIES,
};

impl ApiServer {
    pub(crate) async fn apply<K: Resource>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let incoming = decode_object::<K>(req.payload)?;
        let name = incoming.meta().name.clone();
        let Some(manager) = req.field_manager.clone() else {
            return Err(Status::invalid(
                K::INFO.kind,
                &name,
                vec![Cause::new(
                    "FieldValueRequired",
                    "fieldManager",
                    "apply needs a field manager: send the Shoal-Field-Manager header",
                )],
            ));
        };
        if name.is_empty() {
            return Err(Status::invalid(
                K::INFO.kind,
                "",
                vec![Cause::required("metadata.name")],
            ));
        }
        let ns = default_namespace::<K>(&incoming.meta().namespace);
        let applied = to_json(&incoming)?;
        for attempt in 0..MAX_UNCONDITIONAL_RETRIES {
            let Some((current, revision, cached)) =
                self.base_for_write::<K>(&ns, &name, attempt, None).await?
            else {
                let mut fresh = incoming.clone();
                fresh.meta_mut().namespace = ns.clone();
                match self.create_object(req, fresh).await {
                    Ok(created) => {
                        let reply = self.reply_written(&created, true).await?;
                        return Ok(reply.with_header(HEADER_APPLY_RESULT, "created"));
                    }
                    Err(s) if s.is(bus_schemas::Reason::AlreadyExists) => continue,
                    Err(s) => return Err(s),
                }
            };
            let live = to_json(&current)?;
            let entries = &current.meta().managed_fields;
            let outcome = field_manager::merge_applied(&live, &applied, &manager, entries);
            let mut next: K = codec::from_json_value_strict(outcome.merged)
                .map_err(|causes| Status::invalid(K::INFO.kind, &name, causes))?;
            self.prepare_spec_change(&mut next, &current).await?;
            let applier = Applier {
                manager: &manager,
                force: req.force,
                api_version: K::INFO.api_version,
                now: Utc::now(),
            };
            let settled = field_manager::settle_apply(
                &live,
                &to_json(&next)?,
                &outcome.applied_fields,
                entries,
                &applier,
            )
            .map_err(|conflicts| conflict_status::<K>(&ns, &name, &conflicts))?;
            let content_changed = {
                let mut probe = next.clone();
                let meta = probe.meta_mut();
                meta.resource_version = current.meta().resource_version.clone();
                meta.generation = current.meta().generation;
                probe != current
            };
            next.meta_mut().managed_fields = settled;
            match self
                .write_change(req, next, &current, revision, cached)
                .await
            {
                Ok(stored) => {
                    let result = if content_changed {
                        "configured"
                    } else {
                        "unchanged"
                    };
                    let reply = self.reply_written(&stored, false).await?;
                    return Ok(reply.with_header(HEADER_APPLY_RESULT, result));
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
}

fn to_json<K: Resource>(obj: &K) -> Result<serde_json::Value, Status> {
    serde_json::to_value(obj)
        .map_err(|e| Status::internal(format!("encoding {} for apply: {e}", K::INFO.kind)))
}

/// Kubernetes' wording, so that people who know `kubectl apply --server-side` recognise it:
/// `Apply failed with 1 conflict: conflict with "shoal-scale": .spec.replicas`.
fn conflict_status<K: Resource>(ns: &str, name: &str, conflicts: &[Conflict]) -> Status {
    let count: usize = conflicts.iter().map(|c| c.fields.len()).sum();
    let lines: Vec<String> = conflicts
        .iter()
        .flat_map(|c| {
            c.fields
                .iter()
                .map(move |f| format!("conflict with {:?}: {f}", c.manager))
        })
        .collect();
    let causes = conflicts
        .iter()
        .flat_map(|c| {
            c.fields.iter().map(move |f| {
                Cause::new(
                    "FieldManagerConflict",
                    f.clone(),
                    format!("conflict with {:?}", c.manager),
                )
            })
        })
        .collect();
    let plural = if count == 1 { "" } else { "s" };
    Status::conflict(
        K::INFO.kind,
        ns,
        name,
        &format!(
            "Apply failed with {count} conflict{plural}: {}; apply again with force (--force-conflicts) to take these fields over, or leave them out of the manifest",
            lines.join("; ")
        ),
    )
    .with_details(K::INFO.kind, name, causes)
}
