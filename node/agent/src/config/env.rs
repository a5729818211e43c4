//! A container's environment: `envFrom` first, then `env` (which overrides it), as
//! Kubernetes builds it. A missing ConfigMap, Secret or key that is not optional stops the
//! start (CreateContainerConfigError naming what is missing); an `envFrom` key that is not a
//! valid variable name is skipped and reported.

use bus_schemas::kinds::common::env_var_name;
use bus_schemas::kinds::container::Container;
use bus_schemas::kinds::Pod;

use super::downward::{self, NodeFacts};
use crate::agent::AgentCtx;
use crate::spec::ConfigError;

/// The resolved variables, and the `envFrom` keys left out for their names.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Env {
    pub vars: Vec<(String, String)>,
    /// One message per source with skipped keys, as Kubernetes' event says it.
    pub skipped: Vec<String>,
}

impl Env {
    fn set(&mut self, name: String, value: String) {
        match self.vars.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((name, value)),
        }
    }
}

/// Kubernetes' wording, which people search for.
pub fn missing(kind: &str, name: &str) -> ConfigError {
    ConfigError(format!("{kind} \"{name}\" not found"))
}

pub fn missing_key(kind: &str, name: &str, key: &str) -> ConfigError {
    ConfigError(format!("couldn't find key {key} in {kind} {name}"))
}

/// Raw key/value pairs of a ConfigMap (`data` and `binaryData`) or Secret, None when it
/// does not exist: what environment variables and volume files are both made from.
pub async fn object_values(
    ctx: &AgentCtx,
    namespace: &str,
    secret: bool,
    name: &str,
) -> Result<Option<Vec<(String, Vec<u8>)>>, ConfigError> {
    let sources = &ctx.config_sources;
    if secret {
        let found = sources
            .secret(ctx, namespace, name)
            .await
            .map_err(ConfigError)?;
        Ok(found.map(|s| {
            s.data
                .iter()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect()
        }))
    } else {
        Ok(sources.config_map(namespace, name).await.map(|cm| {
            cm.data
                .iter()
                .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
                .chain(cm.binary_data.iter().map(|(k, v)| (k.clone(), v.0.clone())))
                .collect()
        }))
    }
}

/// Values of one ConfigMap or Secret as text.
pub async fn values(
    ctx: &AgentCtx,
    namespace: &str,
    secret: bool,
    name: &str,
) -> Result<Option<Vec<(String, String)>>, ConfigError> {
    let raw = object_values(ctx, namespace, secret, name).await?;
    Ok(raw.map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v)| {
                let text = String::from_utf8(v)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                (k, text)
            })
            .collect()
    }))
}

pub async fn resolve(
    ctx: &AgentCtx,
    pod: &Pod,
    container: &Container,
    node: &NodeFacts,
) -> Result<Env, ConfigError> {
    let ns = &pod.metadata.namespace;
    let mut env = Env::default();
    for from in &container.env_from {
        let (kind, source) = match (&from.config_map_ref, &from.secret_ref) {
            (Some(cm), _) => ("configmap", cm),
            (None, Some(secret)) => ("secret", secret),
            (None, None) => continue,
        };
        let Some(found) = values(ctx, ns, kind == "secret", &source.name).await? else {
            if source.optional == Some(true) {
                continue;
            }
            return Err(missing(kind, &source.name));
        };
        let mut invalid = Vec::new();
        for (key, value) in found {
            let name = format!("{}{key}", from.prefix);
            if env_var_name(&name).is_err() {
                invalid.push(name);
                continue;
            }
            env.set(name, value);
        }
        if !invalid.is_empty() {
            env.skipped.push(format!(
                "Keys [{}] from the EnvFrom {kind} {ns}/{} were skipped since they are considered invalid environment variable names.",
                invalid.join(", "),
                source.name
            ));
        }
    }
    for var in &container.env {
        let Some(from) = &var.value_from else {
            env.set(var.name.clone(), var.value.clone());
            continue;
        };
        let value = if let Some(field) = &from.field_ref {
            downward::field_value(pod, &field.field_path, node).ok_or_else(|| {
                ConfigError(format!(
                    "env {}: unsupported fieldRef {:?}",
                    var.name, field.field_path
                ))
            })?
        } else if let Some(resource) = &from.resource_field_ref {
            downward::resource_value(pod, container, resource, node)
                .map_err(|e| ConfigError(format!("env {}: {e}", var.name)))?
        } else {
            let (kind, secret, name, key, optional) =
                match (&from.config_map_key_ref, &from.secret_key_ref) {
                    (Some(k), _) => ("configmap", false, &k.name, &k.key, k.optional),
                    (None, Some(k)) => ("secret", true, &k.name, &k.key, k.optional),
                    (None, None) => continue,
                };
            let optional = optional == Some(true);
            let Some(found) = values(ctx, ns, secret, name).await? else {
                if optional {
                    continue;
                }
                return Err(missing(kind, name));
            };
            match found.into_iter().find(|(k, _)| k == key) {
                Some((_, v)) => v,
                None if optional => continue,
                None => return Err(missing_key(kind, name, key)),
            }
        };
        env.set(var.name.clone(), value);
    }
    Ok(env)
}
