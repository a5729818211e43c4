//! `shoal label` and `shoal annotate`: `key=value` sets, `key-` removes, `--overwrite`
//! allows replacing a value. Sent as a merge patch, so concurrent changes to other fields
//! are never lost.

use anyhow::{bail, Result};
use bus_schemas::api::PatchRequest;
use bus_schemas::subjects::Verb;
use bus_schemas::validation::{label_key, label_value};
use serde_json::{Map, Value};

use crate::cli::LabelArgs;
use crate::kinds;
use crate::remote::Session;

#[derive(Clone, Copy)]
pub enum Target {
    Labels,
    Annotations,
}

impl Target {
    fn field(self) -> &'static str {
        match self {
            Target::Labels => "labels",
            Target::Annotations => "annotations",
        }
    }
    fn verb(self) -> &'static str {
        match self {
            Target::Labels => "labeled",
            Target::Annotations => "annotated",
        }
    }
}

/// Parses `key=value` / `key-` into a merge-patch map (null removes).
pub fn parse_changes(changes: &[String], target: Target) -> Result<Map<String, Value>> {
    let mut map = Map::new();
    for change in changes {
        if let Some(key) = change.strip_suffix('-') {
            if !change.contains('=') {
                label_key(key).map_err(|e| anyhow::anyhow!("invalid key {key:?}: {e}"))?;
                map.insert(key.to_string(), Value::Null);
                continue;
            }
        }
        let Some((key, value)) = change.split_once('=') else {
            bail!("invalid change {change:?}: use key=value to set or key- to remove");
        };
        label_key(key).map_err(|e| anyhow::anyhow!("invalid key {key:?}: {e}"))?;
        if let Target::Labels = target {
            label_value(value).map_err(|e| anyhow::anyhow!("invalid value for {key:?}: {e}"))?;
        }
        map.insert(key.to_string(), Value::String(value.to_string()));
    }
    Ok(map)
}

pub async fn run(session: &Session, args: LabelArgs, target: Target) -> Result<i32> {
    let (info, name) = match args.kind.split_once('/') {
        Some(_) => {
            let (info, name) = kinds::split_slash(&args.kind)?;
            // `label pod/web a=b`: the name slot then holds the first change.
            let mut changes = vec![args.name.clone()];
            changes.extend(args.changes.iter().cloned());
            return apply_changes(
                session,
                info,
                &name.unwrap_or_default(),
                &changes,
                &args,
                target,
            )
            .await;
        }
        None => (kinds::resolve(&args.kind)?, args.name.clone()),
    };
    apply_changes(session, info, &name, &args.changes, &args, target).await
}

async fn apply_changes(
    session: &Session,
    info: &'static bus_schemas::KindInfo,
    name: &str,
    changes: &[String],
    args: &LabelArgs,
    target: Target,
) -> Result<i32> {
    let changes = parse_changes(changes, target)?;
    let namespace = kinds::namespace_for(info, &args.namespace);
    let current = session.get(info, &namespace, name).await?;
    let existing = current
        .pointer(&format!("/metadata/{}", target.field()))
        .cloned()
        .unwrap_or(Value::Null);
    if !args.overwrite {
        for (key, value) in &changes {
            if let (Some(old), Some(new)) = (existing.get(key), value.as_str()) {
                if old.as_str() != Some(new) {
                    bail!(
                        "{key:?} already has a value ({}), and --overwrite is false",
                        old.as_str().unwrap_or("")
                    );
                }
            }
        }
    }
    let patch = serde_json::json!({ "metadata": { target.field(): Value::Object(changes) } });
    let request = PatchRequest {
        namespace,
        name: name.to_string(),
        patch: patch.to_string(),
        status: false,
    };
    session.call(info, Verb::Patch, &request).await?;
    println!("{}/{} {}", info.singular(), name, target.verb());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_parse_into_a_merge_patch() {
        let m = parse_changes(&["app=web".into(), "tier-".into()], Target::Labels).unwrap();
        assert_eq!(m["app"], Value::String("web".into()));
        assert_eq!(m["tier"], Value::Null);
        assert!(parse_changes(&["bad key=x".into()], Target::Labels).is_err());
        assert!(parse_changes(&["novalue".into()], Target::Labels).is_err());
        assert!(parse_changes(&["note=has spaces ok".into()], Target::Annotations).is_ok());
    }
}
