//! Key rotation: after a new key is put first in the key file, the API re-seals every
//! Secret still sealed with an older key, so the old key can then be removed.

use bus_schemas::kinds::Secret;
use bus_schemas::selector::Selector;
use bus_schemas::Resource;
use shoal_bus::EventType;

use super::seal;
use crate::request::Request;
use crate::state::ApiServer;

impl ApiServer {
    /// Re-writes every Secret sealed with a key other than the primary one. Each write is a
    /// CAS on the version read, so replicas doing this at once, or a user's update racing
    /// it, lose nothing: the loser's write fails and the winner's is under the new key.
    pub async fn reseal_secrets(&self) -> usize {
        let Some(keys) = self.secret_keys.clone() else {
            return 0;
        };
        let secrets = self.informers.get::<Secret>();
        if let Err(e) = secrets.wait_synced().await {
            tracing::warn!(error = %e, "Secrets not re-sealed: their cache did not load");
            return 0;
        }
        let mut resealed = 0;
        for cached in secrets.list(None, &Selector::everything()) {
            let mut sealed = Secret::clone(&cached);
            if !seal::needs_reseal(&keys, &mut sealed) {
                continue;
            }
            let revision = sealed.meta().revision().unwrap_or(0);
            let Ok(opened) = self.opened(cached.clone()) else {
                tracing::warn!(secret = %format!("{}/{}", sealed.metadata.namespace, sealed.metadata.name),
                    "Secret sealed with a key no longer in the key file; left as it is");
                continue;
            };
            let req = Request::new("shoal.v1.api.secret.update", None, &[]);
            match self
                .put(&req, EventType::Modified, Secret::clone(&opened), revision)
                .await
            {
                Ok(_) => resealed += 1,
                Err(e) => {
                    tracing::debug!(error = %e, "re-seal lost a race; the newer write is sealed already")
                }
            }
        }
        if resealed > 0 {
            tracing::info!(
                resealed,
                primary = keys.primary(),
                "Secrets re-sealed with the primary key"
            );
        }
        resealed
    }
}
