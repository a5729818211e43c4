//! The directories a pod's claims mount, read from the shared caches.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bus_schemas::kinds::{PersistentVolume, PersistentVolumeClaim, Pod};
use shoal_bus::{Informer, InformerFactory};

pub struct Claims {
    pub claims: Informer<PersistentVolumeClaim>,
    pub volumes: Informer<PersistentVolume>,
}

impl Claims {
    pub fn new(informers: &InformerFactory) -> Claims {
        Claims {
            claims: informers.get(),
            volumes: informers.get(),
        }
    }

    /// The host directory of each of the pod's claim volumes, by volume name. Err names the
    /// first claim that is missing, not bound yet, or bound to a volume this node cannot
    /// mount: the pod waits, and the worker tries again on its next pass.
    pub async fn mounts(&self, pod: &Pod) -> Result<BTreeMap<String, PathBuf>, String> {
        let mut mounts = BTreeMap::new();
        let namespace = &pod.metadata.namespace;
        for volume in &pod.spec.volumes {
            let Some(source) = &volume.persistent_volume_claim else {
                continue;
            };
            // Before the caches have loaded, "absent" would be a lie that holds the pod back.
            let _ = self.claims.wait_synced().await;
            let _ = self.volumes.wait_synced().await;
            let name = &source.claim_name;
            let claim = self
                .claims
                .get(namespace, name)
                .ok_or_else(|| format!("persistentvolumeclaim {name:?} not found"))?;
            if !claim.is_bound() {
                return Err(format!(
                    "persistentvolumeclaim {name:?} is not bound yet (phase {})",
                    claim.phase()
                ));
            }
            let pv_name = &claim.spec.volume_name;
            let pv = self
                .volumes
                .get("", pv_name)
                .ok_or_else(|| format!("persistentvolume {pv_name:?} not found"))?;
            let path = pv.path().filter(|p| !p.is_empty()).ok_or_else(|| {
                format!("persistentvolume {pv_name:?} has no hostPath or local path")
            })?;
            mounts.insert(volume.name.clone(), PathBuf::from(path));
        }
        Ok(mounts)
    }
}
