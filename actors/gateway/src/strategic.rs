//! Strategic merge patch, the patch kubectl's `apply`, `edit`, `cordon` and `rollout` send,
//! and the Python client's default for dict bodies.
//!
//! Like a JSON merge patch, except lists of the core kinds keyed by a field (containers and
//! env by `name`, volumeMounts by `mountPath`, ports by port number, …) merge element by
//! element instead of being replaced, and the directives `$patch` (replace, delete, merge),
//! `$retainKeys`, `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>` are
//! honoured. The merge keys are upstream's `x-kubernetes-patch-merge-key` values for the
//! fields Shoal's kinds have.

use serde_json::{Map, Value};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{field}: {message}")]
pub struct PatchError {
    pub field: String,
    pub message: String,
}

fn err(field: &str, message: impl Into<String>) -> PatchError {
    PatchError {
        field: field.to_string(),
        message: message.into(),
    }
}

/// How a list field merges: by a key field, as a set of primitives, or replaced whole.
enum ListStrategy {
    MergeByKey(&'static str),
    PrimitiveSet,
    Replace,
}

/// `path` is the dotted path of the list field (`spec.template.spec.containers`).
fn strategy(path: &str, field: &str) -> ListStrategy {
    use ListStrategy::*;
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "readinessGates" => match field {
            "readinessGates" => MergeByKey("conditionType"),
            _ => MergeByKey("name"),
        },
        "volumeMounts" => MergeByKey("mountPath"),
        "volumeDevices" => MergeByKey("devicePath"),
        // Container ports are keyed by containerPort, a Service's by port.
        "ports" if path.contains("containers") => MergeByKey("containerPort"),
        "ports" => MergeByKey("port"),
        "conditions" | "addresses" => MergeByKey("type"),
        "hostAliases" => MergeByKey("ip"),
        "ownerReferences" => MergeByKey("uid"),
        "topologySpreadConstraints" => MergeByKey("topologyKey"),
        "finalizers" => PrimitiveSet,
        _ => Replace,
    }
}

/// Applies `patch` to `target` in place.
pub fn apply(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    merge_value(target, patch, "")
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn merge_value(target: &mut Value, patch: &Value, path: &str) -> Result<(), PatchError> {
    let Some(patch_map) = patch.as_object() else {
        *target = patch.clone();
        return Ok(());
    };
    match patch_map.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replaced = patch_map.clone();
            replaced.remove("$patch");
            *target = Value::Object(strip_directives(replaced));
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => return Err(err(path, format!("unknown $patch directive {other:?}"))),
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let target_map = target.as_object_mut().expect("made an object above");
    let mut orders: Vec<(String, Vec<Value>)> = Vec::new();
    let mut retain: Option<Vec<String>> = None;
    for (key, value) in patch_map {
        if key == "$patch" {
            continue;
        }
        if key == "$retainKeys" {
            let keys = value
                .as_array()
                .ok_or_else(|| err(&join(path, key), "must be a list of field names"))?;
            retain = Some(
                keys.iter()
                    .filter_map(|k| k.as_str().map(String::from))
                    .collect(),
            );
            continue;
        }
        if let Some(field) = key.strip_prefix("$setElementOrder/") {
            let order = value
                .as_array()
                .ok_or_else(|| err(&join(path, key), "must be a list"))?;
            orders.push((field.to_string(), order.clone()));
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let remove = value
                .as_array()
                .ok_or_else(|| err(&join(path, key), "must be a list"))?;
            if let Some(list) = target_map.get_mut(field).and_then(Value::as_array_mut) {
                list.retain(|v| !remove.contains(v));
            }
            continue;
        }
        if value.is_null() {
            target_map.remove(key);
            continue;
        }
        let field_path = join(path, key);
        match value {
            Value::Array(items) => {
                let current = target_map.remove(key).unwrap_or(Value::Null);
                let merged = merge_list(current, items, &field_path, key)?;
                target_map.insert(key.clone(), merged);
            }
            Value::Object(_) => {
                let slot = target_map.entry(key.clone()).or_insert(Value::Null);
                merge_value(slot, value, &field_path)?;
                if slot.is_null() {
                    target_map.remove(key);
                }
            }
            scalar => {
                target_map.insert(key.clone(), scalar.clone());
            }
        }
    }
    for (field, order) in orders {
        if let Some(list) = target_map.get_mut(&field).and_then(Value::as_array_mut) {
            let key = match strategy(&join(path, &field), &field) {
                ListStrategy::MergeByKey(k) => Some(k),
                _ => None,
            };
            reorder(list, &order, key);
        }
    }
    if let Some(keep) = retain {
        target_map.retain(|k, _| keep.iter().any(|r| r == k));
    }
    Ok(())
}

fn strip_directives(mut map: Map<String, Value>) -> Map<String, Value> {
    map.retain(|k, _| !k.starts_with('$'));
    map
}

fn merge_list(
    current: Value,
    patch: &[Value],
    path: &str,
    field: &str,
) -> Result<Value, PatchError> {
    let mut current = match current {
        Value::Array(items) => items,
        _ => Vec::new(),
    };
    // `[{"$patch": "replace"}, …]`: the rest of the patch list replaces the list.
    let replace_all = patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"));
    if replace_all {
        let rest = patch
            .iter()
            .filter(|p| p.get("$patch").is_none())
            .cloned()
            .collect();
        return Ok(Value::Array(rest));
    }
    match strategy(path, field) {
        ListStrategy::Replace => Ok(Value::Array(patch.to_vec())),
        ListStrategy::PrimitiveSet => {
            for item in patch {
                if !current.contains(item) {
                    current.push(item.clone());
                }
            }
            Ok(Value::Array(current))
        }
        ListStrategy::MergeByKey(key) => {
            for (i, item) in patch.iter().enumerate() {
                let item_path = format!("{path}[{i}]");
                let Some(key_value) = item.get(key) else {
                    return Err(err(
                        &item_path,
                        format!("does not contain the merge key {key:?}"),
                    ));
                };
                let position = current.iter().position(|c| c.get(key) == Some(key_value));
                if item.get("$patch").and_then(Value::as_str) == Some("delete") {
                    if let Some(p) = position {
                        current.remove(p);
                    }
                    continue;
                }
                match position {
                    Some(p) => merge_value(&mut current[p], item, &item_path)?,
                    None => {
                        let mut fresh = Value::Object(Map::new());
                        merge_value(&mut fresh, item, &item_path)?;
                        current.push(fresh);
                    }
                }
            }
            Ok(Value::Array(current))
        }
    }
}

/// Puts the elements named in `order` first, in that order; others keep their relative
/// order after them.
fn reorder(list: &mut Vec<Value>, order: &[Value], key: Option<&str>) {
    let identity = |v: &Value| -> Value {
        match key {
            Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
            None => v.clone(),
        }
    };
    let wanted: Vec<Value> = order.iter().map(identity).collect();
    let mut ordered = Vec::with_capacity(list.len());
    for w in &wanted {
        if let Some(p) = list.iter().position(|v| &identity(v) == w) {
            ordered.push(list.remove(p));
        }
    }
    ordered.append(list);
    *list = ordered;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(target: Value, patch: Value) -> Value {
        let mut t = target;
        apply(&mut t, &patch).unwrap();
        t
    }

    #[test]
    fn containers_merge_by_name() {
        let target = json!({"spec": {"containers": [
            {"name": "a", "image": "x:1", "env": [{"name": "K", "value": "1"}]},
            {"name": "b", "image": "y:1"}]}});
        let out = patched(
            target,
            json!({"spec": {"containers": [{"name": "a", "image": "x:2",
                                              "env": [{"name": "L", "value": "2"}]}]}}),
        );
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 2);
        assert_eq!(containers[0]["image"], "x:2");
        assert_eq!(containers[0]["env"].as_array().unwrap().len(), 2);
        assert_eq!(containers[1]["image"], "y:1");
    }

    #[test]
    fn delete_directive_and_null_remove() {
        let target = json!({"metadata": {"labels": {"a": "1", "b": "2"}},
                            "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let out = patched(
            target,
            json!({"metadata": {"labels": {"a": null}},
                   "spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(out["spec"]["containers"], json!([{"name": "b"}]));
    }

    #[test]
    fn set_element_order_reorders_and_is_not_stored() {
        let target = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let out = patched(
            target,
            json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                            "containers": [{"name": "b", "image": "z"}]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "b", "image": "z"}, {"name": "a"}])
        );
    }

    #[test]
    fn ports_key_by_number_and_lists_without_key_replace() {
        let target = json!({"spec": {"ports": [{"port": 80, "name": "http"}],
                                     "template": {"spec": {"containers": [{"name": "c",
                                        "ports": [{"containerPort": 80}], "args": ["a", "b"]}]}}}});
        let out = patched(
            target,
            json!({"spec": {"ports": [{"port": 443, "name": "https"}],
                            "template": {"spec": {"containers": [{"name": "c", "args": ["z"],
                                "ports": [{"containerPort": 81}]}]}}}}),
        );
        assert_eq!(out["spec"]["ports"].as_array().unwrap().len(), 2);
        let c = &out["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["ports"].as_array().unwrap().len(), 2);
        assert_eq!(c["args"], json!(["z"]));
    }

    #[test]
    fn a_merge_list_element_without_its_key_is_an_error_with_its_path() {
        let mut target = json!({});
        let e = apply(
            &mut target,
            &json!({"spec": {"containers": [{"image": "x"}]}}),
        )
        .unwrap_err();
        assert_eq!(e.field, "spec.containers[0]");
    }

    #[test]
    fn retain_keys_and_primitive_sets() {
        let target = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
                            "metadata": {"finalizers": ["a"]}});
        let out = patched(
            target,
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}},
                   "metadata": {"finalizers": ["b"], "$deleteFromPrimitiveList/finalizers": ["a"]}}),
        );
        assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
    }
}
