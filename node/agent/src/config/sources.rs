//! Where a node reads ConfigMaps and Secrets. ConfigMaps come from the shared cache. The
//! state log holds Secrets encrypted, so the cache only says that a Secret exists and at
//! which revision; its values come from the API (`shoal.v1.node.<node>.secret`), which
//! answers only for Secrets this node's pods use, and are fetched again when the revision
//! moves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bus_schemas::api::ObjectRef;
use bus_schemas::codec;
use bus_schemas::kinds::{ConfigMap, Secret};
use bus_schemas::subjects::NodeReport;
use shoal_bus::{Informer, InformerFactory};

use crate::agent::AgentCtx;

pub struct ConfigSources {
    pub config_maps: Informer<ConfigMap>,
    pub secrets: Informer<Secret>,
    /// Opened Secrets by namespace and name; each carries its revision.
    opened: Mutex<HashMap<(String, String), Arc<Secret>>>,
    /// What `resourceFieldRef` reads for a limit a container does not set.
    pub allocatable_cpu_milli: i128,
    pub allocatable_memory_bytes: i128,
}

impl ConfigSources {
    pub fn new(informers: &InformerFactory, facts: &crate::machine::MachineFacts) -> ConfigSources {
        ConfigSources {
            config_maps: informers.get(),
            secrets: informers.get(),
            opened: Mutex::new(HashMap::new()),
            allocatable_cpu_milli: i128::from(facts.cpus) * 1000,
            allocatable_memory_bytes: i128::from(facts.memory_bytes),
        }
    }

    pub async fn config_map(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>> {
        // Before the cache has loaded, "absent" would be a lie that fails a container start.
        let _ = self.config_maps.wait_synced().await;
        self.config_maps.get(namespace, name)
    }

    /// The Secret with its values, None when it does not exist; Err when the API could not
    /// be asked (the start is retried).
    pub async fn secret(
        &self,
        ctx: &AgentCtx,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<Secret>>, String> {
        let _ = self.secrets.wait_synced().await;
        let key = (namespace.to_string(), name.to_string());
        let Some(sealed) = self.secrets.get(namespace, name) else {
            self.opened.lock().expect("secret cache lock").remove(&key);
            return Ok(None);
        };
        let revision = &sealed.metadata.resource_version;
        if let Some(known) = self.opened.lock().expect("secret cache lock").get(&key) {
            if &known.metadata.resource_version == revision {
                return Ok(Some(known.clone()));
            }
        }
        let request = ObjectRef {
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        let body = codec::to_msgpack(&request).map_err(|e| e.to_string())?;
        let reply = match ctx.report(NodeReport::Secret, body).await {
            Ok(reply) => reply,
            Err(e) if e.starts_with("404") => return Ok(None),
            Err(e) => return Err(format!("secret {namespace}/{name}: {e}")),
        };
        let secret: Secret = codec::from_msgpack(&reply).map_err(|e| e.to_string())?;
        let secret = Arc::new(secret);
        self.opened
            .lock()
            .expect("secret cache lock")
            .insert(key, secret.clone());
        Ok(Some(secret))
    }
}

/// Whether `pod` reads the ConfigMap (or, with `secret`, the Secret) `namespace/name`.
pub fn pod_uses(pod: &bus_schemas::kinds::Pod, namespace: &str, name: &str, secret: bool) -> bool {
    if pod.metadata.namespace != namespace {
        return false;
    }
    let refs = bus_schemas::kinds::config_sources::References::of(&pod.spec);
    if secret {
        refs.secrets.contains(name)
    } else {
        refs.config_maps.contains(name)
    }
}
