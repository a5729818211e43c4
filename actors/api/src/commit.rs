//! The last step of every change: write the new version over the one it was decided
//! against, or remove the object when its deletion is complete, and release what a removed
//! object held. Every verb that changes an existing object ends here.

use bus_schemas::Resource;
use shoal_bus::store::{EventType, StoreError};

use crate::request::Request;
use crate::state::{subject_of, ApiServer};
use crate::{service_ips, termination};

impl ApiServer {
    /// Writes `next` over `current` unless nothing changed; removes the object instead when a
    /// pending deletion has no finalizers left.
    ///
    /// `cached` says `current` came from the cache: "nothing changed" is then only true of
    /// the cached version, so it is answered as a conflict, and the caller's retry compares
    /// against the log (or the request would be acknowledged without being applied).
    pub(crate) async fn write_change<K: Resource>(
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
        if termination::ready_to_remove(&next) {
            let removed = self.put(req, EventType::Deleted, next, revision).await?;
            service_ips::on_removed(self, &removed).await;
            return Ok(removed);
        }
        self.put(req, EventType::Modified, next, revision).await
    }
}
