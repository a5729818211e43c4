//! Resolving the kind names people type.

use anyhow::{anyhow, Result};
use bus_schemas::kinds;
use bus_schemas::KindInfo;

pub fn resolve(name: &str) -> Result<&'static KindInfo> {
    kinds::lookup(name).ok_or_else(|| {
        anyhow!(
            "the server doesn't have a resource type {name:?} (known: {})",
            kinds::KINDS
                .iter()
                .map(|k| k.plural)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// `pods,svc` → [Pod, Service]; also accepts `pod/name` forms through [`split_slash`].
pub fn resolve_list(names: &str) -> Result<Vec<&'static KindInfo>> {
    names
        .split(',')
        .filter(|s| !s.is_empty())
        .map(resolve)
        .collect()
}

/// `pod/web-1` → (Pod, Some("web-1")).
pub fn split_slash(arg: &str) -> Result<(&'static KindInfo, Option<String>)> {
    match arg.split_once('/') {
        Some((kind, name)) => Ok((resolve(kind)?, Some(name.to_string()))),
        None => Ok((resolve(arg)?, None)),
    }
}

pub fn namespace_for(info: &KindInfo, namespace: &Option<String>) -> String {
    if info.namespaced {
        namespace.clone().unwrap_or_else(|| "default".to_string())
    } else {
        String::new()
    }
}
