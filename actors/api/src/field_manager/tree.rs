//! Objects as JSON trees walked by field path: the fields a value names, what changed between
//! two versions, merging an applied value in, and removing a field.

use serde_json::Value;

use super::fieldset::{self, FieldPath, FieldSet};
use super::schema::{self, ListKind};

fn child(path: &FieldPath, element: String) -> FieldPath {
    let mut next = path.clone();
    next.push(element);
    next
}

/// The keyed elements of two lists at `path`, if both can be merged by key.
fn keyed_elements(path: &FieldPath, items: &[Value]) -> Option<Vec<String>> {
    match schema::list_kind(path) {
        ListKind::Keyed(keys) => schema::item_elements(items, keys),
        _ => None,
    }
}

/// Every field `value` (found at `path`) names.
pub fn fields_of(value: &Value, path: &FieldPath) -> FieldSet {
    let mut set = FieldSet::new();
    collect_fields(value, path, &mut set);
    set
}

fn collect_fields(value: &Value, path: &FieldPath, set: &mut FieldSet) {
    match value {
        Value::Object(map) => {
            if (map.is_empty() || schema::is_map(path)) && !path.is_empty() {
                set.insert(path.clone());
            }
            for (name, v) in map {
                collect_fields(v, &child(path, fieldset::field(name)), set);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            if matches!(schema::list_kind(path), ListKind::Set) {
                for item in items {
                    set.insert(child(path, fieldset::set_item(item)));
                }
            } else if let Some(elements) = keyed_elements(path, items) {
                for (item, element) in items.iter().zip(elements) {
                    collect_item(item, &child(path, element), set);
                }
            } else {
                set.insert(path.clone());
            }
        }
        _ => set.insert(path.clone()),
    }
}

fn collect_item(item: &Value, item_path: &FieldPath, set: &mut FieldSet) {
    set.insert(item_path.clone());
    if let Value::Object(map) = item {
        for (name, v) in map {
            collect_fields(v, &child(item_path, fieldset::field(name)), set);
        }
    }
}

/// What a write changed: fields set or altered, and fields that are gone.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    pub changed: FieldSet,
    pub removed: FieldSet,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.removed.is_empty()
    }
}

/// The fields that differ between `old` and `new` (both at `path`).
pub fn diff(old: &Value, new: &Value, path: &FieldPath) -> Diff {
    let mut out = Diff::default();
    diff_into(old, new, path, &mut out);
    out
}

fn diff_into(old: &Value, new: &Value, path: &FieldPath, out: &mut Diff) {
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(a), Value::Object(b)) if !a.is_empty() && !b.is_empty() => {
            for (name, va) in a {
                let p = child(path, fieldset::field(name));
                match b.get(name) {
                    Some(vb) => diff_into(va, vb, &p, out),
                    None => out.removed.union_with(&fields_of(va, &p)),
                }
            }
            for (name, vb) in b {
                if !a.contains_key(name) {
                    out.changed
                        .union_with(&fields_of(vb, &child(path, fieldset::field(name))));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if matches!(schema::list_kind(path), ListKind::Set) => {
            for item in a.iter().filter(|i| !b.contains(i)) {
                out.removed.insert(child(path, fieldset::set_item(item)));
            }
            for item in b.iter().filter(|i| !a.contains(i)) {
                out.changed.insert(child(path, fieldset::set_item(item)));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            match (keyed_elements(path, a), keyed_elements(path, b)) {
                (Some(ka), Some(kb)) if !a.is_empty() && !b.is_empty() => {
                    for (item, element) in a.iter().zip(&ka) {
                        let p = child(path, element.clone());
                        match kb.iter().position(|e| e == element) {
                            Some(j) => diff_into(item, &b[j], &p, out),
                            None => collect_item(item, &p, &mut out.removed),
                        }
                    }
                    for (item, element) in b.iter().zip(&kb) {
                        if !ka.contains(element) {
                            collect_item(item, &child(path, element.clone()), &mut out.changed);
                        }
                    }
                }
                _ => replaced(old, new, path, out),
            }
        }
        _ => replaced(old, new, path, out),
    }
}

/// `old` gave way to a different `new` wholesale (a scalar, an atomic list, a change of type).
fn replaced(old: &Value, new: &Value, path: &FieldPath, out: &mut Diff) {
    let before = fields_of(old, path);
    let after = fields_of(new, path);
    out.removed.union_with(&before.difference(&after));
    out.changed.union_with(&after);
}

/// `applied` merged into `live`: what `applied` names wins; the rest of `live` stays.
/// Keyed lists merge item by item (live order, new items after); sets gain new items.
pub fn merge(live: &Value, applied: &Value, path: &FieldPath) -> Value {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            let mut out = l.clone();
            for (name, va) in a {
                let merged = match l.get(name) {
                    Some(vl) => merge(vl, va, &child(path, fieldset::field(name))),
                    None => va.clone(),
                };
                out.insert(name.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(a)) if matches!(schema::list_kind(path), ListKind::Set) => {
            let mut out = l.clone();
            out.extend(a.iter().filter(|i| !l.contains(i)).cloned());
            Value::Array(out)
        }
        (Value::Array(l), Value::Array(a)) => {
            match (keyed_elements(path, l), keyed_elements(path, a)) {
                (Some(kl), Some(ka)) => {
                    let mut out = l.clone();
                    for (item, element) in a.iter().zip(&ka) {
                        match kl.iter().position(|e| e == element) {
                            Some(i) => out[i] = merge(&l[i], item, &child(path, element.clone())),
                            None => out.push(item.clone()),
                        }
                    }
                    Value::Array(out)
                }
                _ => applied.clone(),
            }
        }
        _ => applied.clone(),
    }
}

/// The value at `path`, if present.
pub fn value_at<'a>(root: &'a Value, path: &FieldPath) -> Option<&'a Value> {
    let mut node = root;
    for (depth, element) in path.iter().enumerate() {
        node = step(node, &path[..depth].to_vec(), element)?;
    }
    Some(node)
}

fn step<'a>(node: &'a Value, at: &FieldPath, element: &str) -> Option<&'a Value> {
    if let Some(name) = element.strip_prefix("f:") {
        return node.as_object()?.get(name);
    }
    let items = node.as_array()?;
    if element.starts_with("k:") {
        let elements = keyed_elements(at, items)?;
        let i = elements.iter().position(|e| e == element)?;
        return items.get(i);
    }
    items.iter().find(|i| fieldset::set_item(i) == element)
}

/// Removes the field at `path` (a field, a keyed item or a set item); absent is fine.
pub fn remove(root: &mut Value, path: &FieldPath) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut node = root;
    for (depth, element) in parent_path.iter().enumerate() {
        let at = path[..depth].to_vec();
        let next = if let Some(name) = element.strip_prefix("f:") {
            node.as_object_mut().and_then(|m| m.get_mut(name))
        } else {
            let position = node
                .as_array()
                .and_then(|items| position_of(items, &at, element));
            match (position, node.as_array_mut()) {
                (Some(i), Some(items)) => items.get_mut(i),
                _ => None,
            }
        };
        match next {
            Some(n) => node = n,
            None => return,
        }
    }
    if let Some(name) = last.strip_prefix("f:") {
        if let Some(map) = node.as_object_mut() {
            map.remove(name);
        }
    } else if let Some(position) = node
        .as_array()
        .and_then(|items| position_of(items, &parent_path.to_vec(), last))
    {
        if let Some(items) = node.as_array_mut() {
            items.remove(position);
        }
    }
}

fn position_of(items: &[Value], at: &FieldPath, element: &str) -> Option<usize> {
    if element.starts_with("k:") {
        keyed_elements(at, items)?.iter().position(|e| e == element)
    } else {
        items.iter().position(|i| fieldset::set_item(i) == element)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(elements: &[&str]) -> FieldPath {
        elements.iter().map(|e| e.to_string()).collect()
    }

    const WEB: &str = r#"k:{"name":"web"}"#;

    fn pod_spec() -> Value {
        json!({
            "metadata": {"labels": {"app": "web"}, "finalizers": ["a"]},
            "spec": {
                "containers": [{
                    "name": "web", "image": "busybox", "args": ["httpd", "-f"],
                    "ports": [{"containerPort": 80}],
                    "resources": {}
                }],
                "tolerations": [{"key": "k", "operator": "Exists"}]
            }
        })
    }

    #[test]
    fn fields_of_names_leaves_items_maps_and_sets() {
        let set = fields_of(&pod_spec(), &Vec::new());
        let want = [
            p(&["f:metadata", "f:labels"]),
            p(&["f:metadata", "f:labels", "f:app"]),
            p(&["f:metadata", "f:finalizers", r#"v:"a""#]),
            p(&["f:spec", "f:containers", WEB]),
            p(&["f:spec", "f:containers", WEB, "f:name"]),
            p(&["f:spec", "f:containers", WEB, "f:image"]),
            p(&["f:spec", "f:containers", WEB, "f:args"]),
            p(&["f:spec", "f:containers", WEB, "f:resources"]),
            p(&[
                "f:spec",
                "f:containers",
                WEB,
                "f:ports",
                r#"k:{"containerPort":80,"protocol":"TCP"}"#,
            ]),
            p(&[
                "f:spec",
                "f:containers",
                WEB,
                "f:ports",
                r#"k:{"containerPort":80,"protocol":"TCP"}"#,
                "f:containerPort",
            ]),
            p(&["f:spec", "f:tolerations"]),
        ];
        for path in &want {
            assert!(set.contains(path), "missing {path:?}");
        }
        assert_eq!(set.len(), want.len(), "{set:?}");
    }

    #[test]
    fn diff_reports_changes_and_removals_by_key_not_position() {
        let old = json!({"spec": {"containers": [
            {"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        let new = json!({"spec": {"containers": [
            {"name": "b", "image": "y2"}, {"name": "c", "image": "z"}]}});
        let d = diff(&old, &new, &Vec::new());
        let b = r#"k:{"name":"b"}"#;
        let a = r#"k:{"name":"a"}"#;
        let c = r#"k:{"name":"c"}"#;
        assert!(d
            .changed
            .contains(&p(&["f:spec", "f:containers", b, "f:image"])));
        assert!(d.changed.contains(&p(&["f:spec", "f:containers", c])));
        assert!(d
            .changed
            .contains(&p(&["f:spec", "f:containers", c, "f:image"])));
        assert!(!d
            .changed
            .contains(&p(&["f:spec", "f:containers", b, "f:name"])));
        assert!(d.removed.contains(&p(&["f:spec", "f:containers", a])));
        assert!(d
            .removed
            .contains(&p(&["f:spec", "f:containers", a, "f:image"])));
        assert!(diff(&old, &old, &Vec::new()).is_empty());
    }

    #[test]
    fn diff_of_atomic_lists_and_sets() {
        let old = json!({"spec": {"tolerations": [{"key": "a"}]}, "metadata": {"finalizers": ["x", "y"]}});
        let new = json!({"spec": {"tolerations": [{"key": "b"}]}, "metadata": {"finalizers": ["y", "z"]}});
        let d = diff(&old, &new, &Vec::new());
        assert!(d.changed.contains(&p(&["f:spec", "f:tolerations"])));
        assert!(d
            .changed
            .contains(&p(&["f:metadata", "f:finalizers", r#"v:"z""#])));
        assert!(d
            .removed
            .contains(&p(&["f:metadata", "f:finalizers", r#"v:"x""#])));
        assert!(!d.removed.contains(&p(&["f:spec", "f:tolerations"])));
    }

    #[test]
    fn merge_keeps_what_applied_does_not_name() {
        let live = json!({
            "metadata": {"labels": {"app": "web", "team": "blue"}},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "web", "image": "v1", "imagePullPolicy": "IfNotPresent"},
                {"name": "sidecar", "image": "s"}]}
        });
        let applied = json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "v2"}, {"name": "new", "image": "n"}]}
        });
        let merged = merge(&live, &applied, &Vec::new());
        assert_eq!(
            merged,
            json!({
                "metadata": {"labels": {"app": "web", "team": "blue"}},
                "spec": {"nodeName": "n1", "containers": [
                    {"name": "web", "image": "v2", "imagePullPolicy": "IfNotPresent"},
                    {"name": "sidecar", "image": "s"},
                    {"name": "new", "image": "n"}]}
            })
        );
    }

    #[test]
    fn merge_replaces_atomic_lists_and_unions_sets() {
        let live = json!({"args": ["a", "b"], "finalizers": ["x"]});
        let applied = json!({"args": ["c"], "finalizers": ["y"]});
        let merged = merge(&live, &applied, &Vec::new());
        assert_eq!(merged, json!({"args": ["c"], "finalizers": ["x", "y"]}));
    }

    #[test]
    fn merge_matches_ports_whose_protocol_was_defaulted() {
        let c = r#"k:{"name":"web"}"#;
        let path = p(&["f:spec", "f:containers", c, "f:ports"]);
        let live = json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}]);
        let applied = json!([{"containerPort": 80, "name": "www"}]);
        assert_eq!(
            merge(&live, &applied, &path),
            json!([{"containerPort": 80, "protocol": "TCP", "name": "www"}])
        );
    }

    #[test]
    fn remove_and_value_at_follow_keys_and_set_items() {
        let mut doc = pod_spec();
        let image = p(&["f:spec", "f:containers", WEB, "f:image"]);
        assert_eq!(value_at(&doc, &image), Some(&json!("busybox")));
        remove(&mut doc, &image);
        assert_eq!(value_at(&doc, &image), None);
        remove(&mut doc, &p(&["f:metadata", "f:finalizers", r#"v:"a""#]));
        assert_eq!(doc["metadata"]["finalizers"], json!([]));
        remove(&mut doc, &p(&["f:spec", "f:containers", WEB]));
        assert_eq!(doc["spec"]["containers"], json!([]));
        // Absent paths are no-ops.
        remove(
            &mut doc,
            &p(&["f:spec", "f:containers", r#"k:{"name":"gone"}"#, "f:image"]),
        );
        remove(&mut doc, &p(&["f:nothing", "f:here"]));
    }
}
