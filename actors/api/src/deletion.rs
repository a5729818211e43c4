//! The delete verb: graceful deletion. Marks the object (deletionTimestamp, and the finalizer
//! its propagation policy asks for) while finalizers or a running pod's grace period hold
//! it, and removes it once nothing does; the policy itself is in [`crate::termination`].

use bus_schemas::api::DeleteOptions;
use bus_schemas::codec;
use bus_schemas::{Resource, Status};
use chrono::Utc;
use shoal_bus::store::StoreError;

use crate::admission;
use crate::reply::Reply;
use crate::request::Request;
use crate::state::{default_namespace, store_error, ApiServer, MAX_UNCONDITIONAL_RETRIES};
use crate::termination::{self, Propagation};

impl ApiServer {
    pub(crate) async fn delete<K: Resource>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let options: DeleteOptions = codec::from_msgpack_strict(req.payload)
            .map_err(|causes| Status::invalid("DeleteOptions", "", causes))?;
        let deleted = self.delete_object::<K>(req, &options).await?;
        Reply::ok(&deleted)
    }

    pub(crate) async fn delete_object<K: Resource>(
        &self,
        req: &Request<'_>,
        options: &DeleteOptions,
    ) -> Result<K, Status> {
        let ns = default_namespace::<K>(&options.namespace);
        let name = &options.name;
        let propagation = Propagation::parse(options.propagation_policy.as_deref(), name)?;
        for attempt in 0..MAX_UNCONDITIONAL_RETRIES {
            let Some((current, revision)) =
                self.current_for_attempt::<K>(&ns, name, attempt).await?
            else {
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
                        bus_schemas::api::DELETE_PRECONDITIONS_FAILED,
                    ));
                }
            }
            if let Some(node) = &req.from_node {
                admission::check_node_owns::<K>(node, &current)?;
            }
            let mut next = current.clone();
            propagation.add_finalizer(next.meta_mut());
            let grace = termination::grace_period(&next, options.grace_period_seconds);
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
                    termination::on_delete(&mut next);
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
