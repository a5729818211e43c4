//! How the lists and maps of the core kinds merge, by where they sit.
//!
//! Kubernetes declares this per field in its Go types (`listType`, `listMapKey`,
//! `patchMergeKey`); the same facts for Shoal's kinds live here, keyed by the field's name
//! and, where one name means two things (`ports`), by its parent. A list not named here is
//! atomic: the manager that sets it owns it whole, as Kubernetes does for `tolerations`,
//! `args` or `command`.

use serde_json::{Map, Value};

use super::fieldset::{self, FieldPath};

/// A field of a merge key, and the value the server defaults it to when absent.
pub struct KeyField {
    pub name: &'static str,
    pub default: Option<&'static str>,
}

const fn key(name: &'static str) -> KeyField {
    KeyField {
        name,
        default: None,
    }
}

const BY_NAME: &[KeyField] = &[key("name")];
const CONTAINER_PORT: &[KeyField] = &[
    key("containerPort"),
    KeyField {
        name: "protocol",
        default: Some("TCP"),
    },
];
const SERVICE_PORT: &[KeyField] = &[
    key("port"),
    KeyField {
        name: "protocol",
        default: Some("TCP"),
    },
];

const MOUNT_PATH: &[KeyField] = &[key("mountPath")];
const DEVICE_PATH: &[KeyField] = &[key("devicePath")];
const IP: &[KeyField] = &[key("ip")];
const SPREAD: &[KeyField] = &[key("topologyKey"), key("whenUnsatisfiable")];
const RESOURCE_NAME: &[KeyField] = &[key("resourceName")];
const UID: &[KeyField] = &[key("uid")];

pub enum ListKind {
    /// Items are merged by these key fields (Kubernetes' `listType=map`).
    Keyed(&'static [KeyField]),
    /// Items are scalars, each owned on its own (`listType=set`).
    Set,
    /// The list is one value.
    Atomic,
}

/// How the list at `path` merges.
pub fn list_kind(path: &FieldPath) -> ListKind {
    let Some(name) = path.last().and_then(|e| e.strip_prefix("f:")) else {
        return ListKind::Atomic;
    };
    let inside_item = path.len() >= 2 && path[path.len() - 2].starts_with("k:");
    match name {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "schedulingGates"
        | "resourceClaims" => ListKind::Keyed(BY_NAME),
        "ports" if inside_item => ListKind::Keyed(CONTAINER_PORT),
        "ports" => ListKind::Keyed(SERVICE_PORT),
        "volumeMounts" => ListKind::Keyed(MOUNT_PATH),
        "volumeDevices" => ListKind::Keyed(DEVICE_PATH),
        "hostAliases" => ListKind::Keyed(IP),
        "topologySpreadConstraints" => ListKind::Keyed(SPREAD),
        "resizePolicy" => ListKind::Keyed(RESOURCE_NAME),
        "ownerReferences" => ListKind::Keyed(UID),
        "finalizers" => ListKind::Set,
        _ => ListKind::Atomic,
    }
}

/// Whether the object at `path` is a map of free-form keys (owned as a whole too, `.` in
/// FieldsV1) rather than a struct of named fields.
pub fn is_map(path: &FieldPath) -> bool {
    matches!(
        path.last().and_then(|e| e.strip_prefix("f:")),
        Some("labels" | "annotations" | "nodeSelector" | "matchLabels" | "limits" | "requests")
    )
}

/// The path element of a keyed item, or None when the item lacks a key field.
pub fn item_element(item: &Value, keys: &[KeyField]) -> Option<String> {
    let object = item.as_object()?;
    let mut key = Map::new();
    for field in keys {
        let value = match (object.get(field.name), field.default) {
            (Some(v), _) if !v.is_null() => v.clone(),
            (_, Some(default)) => Value::String(default.to_string()),
            _ => return None,
        };
        key.insert(field.name.to_string(), value);
    }
    Some(fieldset::keyed(&key))
}

/// The items' path elements, or None when the list cannot be merged by key (an item lacks
/// a key, or two share one): it is then treated as atomic.
pub fn item_elements(items: &[Value], keys: &[KeyField]) -> Option<Vec<String>> {
    let mut elements = Vec::with_capacity(items.len());
    for item in items {
        let element = item_element(item, keys)?;
        if elements.contains(&element) {
            return None;
        }
        elements.push(element);
    }
    Some(elements)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(elements: &[&str]) -> FieldPath {
        elements.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn ports_are_keyed_by_container_port_in_a_container_and_by_port_in_a_service() {
        let container = path(&["f:spec", "f:containers", r#"k:{"name":"web"}"#, "f:ports"]);
        let ListKind::Keyed(keys) = list_kind(&container) else {
            panic!("container ports are keyed")
        };
        assert_eq!(
            item_element(&json!({"containerPort": 80}), keys).unwrap(),
            r#"k:{"containerPort":80,"protocol":"TCP"}"#
        );
        let ListKind::Keyed(keys) = list_kind(&path(&["f:spec", "f:ports"])) else {
            panic!("service ports are keyed")
        };
        assert_eq!(
            item_element(&json!({"port": 53, "protocol": "UDP"}), keys).unwrap(),
            r#"k:{"port":53,"protocol":"UDP"}"#
        );
    }

    #[test]
    fn every_core_list_has_its_kind() {
        let c = r#"k:{"name":"c"}"#;
        for keyed in [
            path(&["f:spec", "f:containers"]),
            path(&["f:spec", "f:initContainers"]),
            path(&["f:spec", "f:volumes"]),
            path(&["f:spec", "f:containers", c, "f:env"]),
            path(&["f:spec", "f:containers", c, "f:volumeMounts"]),
            path(&["f:metadata", "f:ownerReferences"]),
            path(&["f:spec", "f:topologySpreadConstraints"]),
        ] {
            assert!(matches!(list_kind(&keyed), ListKind::Keyed(_)), "{keyed:?}");
        }
        assert!(matches!(
            list_kind(&path(&["f:metadata", "f:finalizers"])),
            ListKind::Set
        ));
        for atomic in [
            path(&["f:spec", "f:tolerations"]),
            path(&["f:spec", "f:containers", c, "f:args"]),
            path(&["f:spec", "f:containers", c, "f:command"]),
        ] {
            assert!(matches!(list_kind(&atomic), ListKind::Atomic), "{atomic:?}");
        }
    }

    #[test]
    fn lists_without_usable_keys_are_not_keyed() {
        assert!(item_elements(&[json!({"name": "a"}), json!({"value": "x"})], BY_NAME).is_none());
        assert!(item_elements(&[json!({"name": "a"}), json!({"name": "a"})], BY_NAME).is_none());
        assert_eq!(
            item_elements(&[json!({"name": "a"}), json!({"name": "b"})], BY_NAME)
                .unwrap()
                .len(),
            2
        );
    }
}
