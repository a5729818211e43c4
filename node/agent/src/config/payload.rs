//! The files a configuration volume holds now: one per key (or per listed item) of a
//! ConfigMap or Secret, one per downward-API item, all of them for a projected volume.

use bus_schemas::kinds::config_sources::{DownwardApiVolumeFile, KeyToPath, DEFAULT_MODE};
use bus_schemas::kinds::pod_spec::Volume;
use bus_schemas::kinds::Pod;

use super::atomic_writer::{File, Payload};
use super::downward::{self, NodeFacts};
use super::env::{missing, missing_key, object_values};
use crate::agent::AgentCtx;
use crate::spec::ConfigError;

/// Whether the volume is one this module writes.
pub fn is_config_volume(volume: &Volume) -> bool {
    volume.config_map.is_some()
        || volume.secret.is_some()
        || volume.downward_api.is_some()
        || volume.projected.is_some()
}

fn mode(item: Option<i32>, default: Option<i32>) -> u32 {
    item.or(default).unwrap_or(DEFAULT_MODE) as u32 & 0o777
}

/// Adds the files of one ConfigMap or Secret source.
#[allow(clippy::too_many_arguments)]
async fn add_object(
    ctx: &AgentCtx,
    payload: &mut Payload,
    namespace: &str,
    secret: bool,
    name: &str,
    items: &[KeyToPath],
    optional: Option<bool>,
    default_mode: Option<i32>,
) -> Result<(), ConfigError> {
    let kind = if secret { "secret" } else { "configmap" };
    let optional = optional == Some(true);
    let Some(values) = object_values(ctx, namespace, secret, name).await? else {
        return if optional {
            Ok(())
        } else {
            Err(missing(kind, name))
        };
    };
    if items.is_empty() {
        for (key, data) in values {
            let mode = mode(None, default_mode);
            payload.insert(key, File { data, mode });
        }
        return Ok(());
    }
    for item in items {
        match values.iter().find(|(k, _)| *k == item.key) {
            Some((_, data)) => {
                let file = File {
                    data: data.clone(),
                    mode: mode(item.mode, default_mode),
                };
                payload.insert(item.path.clone(), file);
            }
            None if optional => {}
            None => return Err(missing_key(kind, name, &item.key)),
        }
    }
    Ok(())
}

fn add_downward(
    pod: &Pod,
    payload: &mut Payload,
    items: &[DownwardApiVolumeFile],
    default_mode: Option<i32>,
    node: &NodeFacts,
) -> Result<(), ConfigError> {
    for item in items {
        let text = if let Some(field) = &item.field_ref {
            downward::field_value(pod, &field.field_path, node).ok_or_else(|| {
                ConfigError(format!(
                    "downwardAPI {}: unsupported fieldRef {:?}",
                    item.path, field.field_path
                ))
            })?
        } else if let Some(resource) = &item.resource_field_ref {
            let container = pod.spec.containers.first().cloned().unwrap_or_default();
            downward::resource_value(pod, &container, resource, node)
                .map_err(|e| ConfigError(format!("downwardAPI {}: {e}", item.path)))?
        } else {
            continue;
        };
        let file = File {
            data: text.into_bytes(),
            mode: mode(item.mode, default_mode),
        };
        payload.insert(item.path.clone(), file);
    }
    Ok(())
}

/// The files `volume` should hold for `pod` now.
pub async fn build(
    ctx: &AgentCtx,
    pod: &Pod,
    volume: &Volume,
    node: &NodeFacts,
) -> Result<Payload, ConfigError> {
    let ns = &pod.metadata.namespace;
    let mut payload = Payload::new();
    if let Some(cm) = &volume.config_map {
        add_object(
            ctx,
            &mut payload,
            ns,
            false,
            &cm.name,
            &cm.items,
            cm.optional,
            cm.default_mode,
        )
        .await?;
    }
    if let Some(s) = &volume.secret {
        add_object(
            ctx,
            &mut payload,
            ns,
            true,
            &s.secret_name,
            &s.items,
            s.optional,
            s.default_mode,
        )
        .await?;
    }
    if let Some(d) = &volume.downward_api {
        add_downward(pod, &mut payload, &d.items, d.default_mode, node)?;
    }
    if let Some(projected) = &volume.projected {
        let mode = projected.default_mode;
        for source in &projected.sources {
            if let Some(cm) = &source.config_map {
                add_object(
                    ctx,
                    &mut payload,
                    ns,
                    false,
                    &cm.name,
                    &cm.items,
                    cm.optional,
                    mode,
                )
                .await?;
            }
            if let Some(s) = &source.secret {
                add_object(
                    ctx,
                    &mut payload,
                    ns,
                    true,
                    &s.name,
                    &s.items,
                    s.optional,
                    mode,
                )
                .await?;
            }
            if let Some(d) = &source.downward_api {
                add_downward(pod, &mut payload, &d.items, mode, node)?;
            }
        }
    }
    Ok(payload)
}
