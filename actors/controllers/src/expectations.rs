//! Expectations, by revision: after a controller writes (creates or deletes pods for an
//! owner), it remembers the state-log revision of its last write, and before it decides for
//! that owner again it waits until the pod cache has caught up with that revision. A burst of
//! creates is thus never repeated because the cache had not seen them yet.
//!
//! NOTE: this is stronger than Kubernetes' add/delete counters (which the informer lowers as
//! events arrive): the state log is totally ordered, so "the cache reflects revision N" means
//! every earlier write of ours is visible, whichever object it touched. A cache that does not
//! catch up within [`EXPIRY`] is logged and ignored, as Kubernetes expires expectations.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use bus_schemas::Resource;
use shoal_bus::Informer;

pub const EXPIRY: Duration = Duration::from_secs(5);

#[derive(Default)]
pub struct Expectations {
    revisions: Mutex<HashMap<String, u64>>,
}

impl Expectations {
    /// Records that the cache must reach `revision` before `owner_uid` is decided again.
    pub fn expect(&self, owner_uid: &str, revision: Option<u64>) {
        let Some(revision) = revision else { return };
        let mut map = self.revisions.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map.entry(owner_uid.to_string()).or_insert(0);
        *entry = (*entry).max(revision);
    }

    pub fn pending(&self, owner_uid: &str) -> Option<u64> {
        let map = self.revisions.lock().unwrap_or_else(|e| e.into_inner());
        map.get(owner_uid).copied()
    }

    /// Waits until `informer` reflects every write recorded for `owner_uid`.
    pub async fn wait<K: Resource>(&self, owner_uid: &str, informer: &Informer<K>) {
        let Some(revision) = self.pending(owner_uid) else {
            return;
        };
        if informer.revision() < revision
            && tokio::time::timeout(EXPIRY, informer.wait_for_revision(revision))
                .await
                .is_err()
        {
            tracing::warn!(
                owner = owner_uid,
                revision,
                "cache did not catch up; expectation expired"
            );
        }
        let mut map = self.revisions.lock().unwrap_or_else(|e| e.into_inner());
        if map.get(owner_uid).is_some_and(|r| *r <= revision) {
            map.remove(owner_uid);
        }
    }

    pub fn forget(&self, owner_uid: &str) {
        let mut map = self.revisions.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(owner_uid);
    }
}
