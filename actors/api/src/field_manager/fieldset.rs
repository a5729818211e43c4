//! Sets of field paths, and their FieldsV1 encoding.
//!
//! A path is a list of elements rendered as Kubernetes renders them in FieldsV1:
//! `f:<field>`, `k:<key fields as JSON>` (an item of a list keyed by merge key) and
//! `v:<value as JSON>` (an item of a set). A path in the set is a field its manager owns.
//! In FieldsV1 an owned path with no owned children is `{}`, and an owned path that also has
//! owned children carries a `.` child.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

pub type FieldPath = Vec<String>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet(BTreeSet<FieldPath>);

const SELF: &str = ".";

impl FieldSet {
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    pub fn insert(&mut self, path: FieldPath) {
        self.0.insert(path);
    }

    pub fn contains(&self, path: &FieldPath) -> bool {
        self.0.contains(path)
    }

    /// Whether `path` or any field beneath it is in the set.
    pub fn has_within(&self, path: &FieldPath) -> bool {
        self.0
            .range(path.clone()..)
            .next()
            .is_some_and(|first| first.starts_with(path))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &FieldPath> {
        self.0.iter()
    }

    pub fn union_with(&mut self, other: &FieldSet) {
        self.0.extend(other.0.iter().cloned());
    }

    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&other.0).cloned().collect())
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.intersection(&other.0).cloned().collect())
    }

    /// The FieldsV1 tree of this set.
    pub fn to_fields_v1(&self) -> Value {
        let mut root = Map::new();
        for path in &self.0 {
            let mut node = &mut root;
            for element in path {
                node = node
                    .entry(element.clone())
                    .or_insert_with(|| Value::Object(Map::new()))
                    .as_object_mut()
                    .expect("FieldsV1 nodes are objects");
            }
        }
        // Owned nodes that gained children need their `.`; leaves are owned by being leaves.
        for path in &self.0 {
            let mut node = &mut root;
            for element in path {
                node = node
                    .get_mut(element)
                    .and_then(Value::as_object_mut)
                    .expect("inserted above");
            }
            if !node.is_empty() {
                node.insert(SELF.to_string(), Value::Object(Map::new()));
            }
        }
        Value::Object(root)
    }

    /// Reads a FieldsV1 tree; anything that is not an object of objects is skipped, as a
    /// stored entry is the API's own writing.
    pub fn from_fields_v1(value: &Value) -> FieldSet {
        let mut set = FieldSet::new();
        if let Value::Object(map) = value {
            collect(map, &mut Vec::new(), &mut set);
        }
        set
    }
}

fn collect(map: &Map<String, Value>, path: &mut FieldPath, set: &mut FieldSet) {
    for (element, child) in map {
        if element == SELF {
            if !path.is_empty() {
                set.insert(path.clone());
            }
            continue;
        }
        path.push(element.clone());
        match child {
            Value::Object(children) if !children.is_empty() => collect(children, path, set),
            _ => set.insert(path.clone()),
        }
        path.pop();
    }
}

pub fn field(name: &str) -> String {
    format!("f:{name}")
}

/// `k:{"name":"web"}`: the key fields in name order, compact JSON.
pub fn keyed(key: &Map<String, Value>) -> String {
    let sorted: std::collections::BTreeMap<&String, &Value> = key.iter().collect();
    format!(
        "k:{}",
        serde_json::to_string(&sorted).unwrap_or_else(|_| "{}".into())
    )
}

pub fn set_item(value: &Value) -> String {
    format!("v:{}", serde_json::to_string(value).unwrap_or_default())
}

/// A path as people read it: `.spec.containers[name="web"].image`.
pub fn render(path: &FieldPath) -> String {
    let mut out = String::new();
    for element in path {
        if let Some(name) = element.strip_prefix("f:") {
            out.push('.');
            out.push_str(name);
        } else if let Some(key) = element.strip_prefix("k:") {
            let parts: Vec<String> = serde_json::from_str::<Map<String, Value>>(key)
                .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                .unwrap_or_else(|_| vec![key.to_string()]);
            out.push('[');
            out.push_str(&parts.join(","));
            out.push(']');
        } else if let Some(value) = element.strip_prefix("v:") {
            out.push_str(&format!("[={value}]"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(elements: &[&str]) -> FieldPath {
        elements.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn fields_v1_round_trips_with_self_markers_only_where_a_member_has_children() {
        let mut set = FieldSet::new();
        set.insert(path(&["f:metadata", "f:labels"]));
        set.insert(path(&["f:metadata", "f:labels", "f:app"]));
        set.insert(path(&["f:spec", "f:replicas"]));
        set.insert(path(&["f:spec", "f:containers", r#"k:{"name":"web"}"#]));
        set.insert(path(&[
            "f:spec",
            "f:containers",
            r#"k:{"name":"web"}"#,
            "f:image",
        ]));
        set.insert(path(&["f:metadata", "f:finalizers", r#"v:"keep""#]));
        let v1 = set.to_fields_v1();
        assert_eq!(
            v1,
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}, "f:finalizers": {"v:\"keep\"": {}}},
                "f:spec": {
                    "f:replicas": {},
                    "f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}}}
                }
            })
        );
        assert_eq!(FieldSet::from_fields_v1(&v1), set);
    }

    #[test]
    fn keys_render_sorted_and_paths_read_like_kubernetes_messages() {
        let key = json!({"protocol": "TCP", "containerPort": 80});
        let element = keyed(key.as_object().unwrap());
        assert_eq!(element, r#"k:{"containerPort":80,"protocol":"TCP"}"#);
        let p = path(&["f:spec", "f:containers", r#"k:{"name":"web"}"#, "f:image"]);
        assert_eq!(render(&p), r#".spec.containers[name="web"].image"#);
        assert_eq!(
            render(&path(&["f:metadata", "f:finalizers", r#"v:"a""#])),
            r#".metadata.finalizers[="a"]"#
        );
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::new();
        a.insert(path(&["f:a"]));
        a.insert(path(&["f:b"]));
        let mut b = FieldSet::new();
        b.insert(path(&["f:b"]));
        b.insert(path(&["f:c"]));
        assert_eq!(
            a.difference(&b).iter().collect::<Vec<_>>(),
            [&path(&["f:a"])]
        );
        assert_eq!(
            a.intersection(&b).iter().collect::<Vec<_>>(),
            [&path(&["f:b"])]
        );
        a.union_with(&b);
        assert_eq!(a.len(), 3);
        let mut deep = FieldSet::new();
        deep.insert(path(&["f:metadata", "f:labels", "f:team"]));
        assert!(deep.has_within(&path(&["f:metadata", "f:labels"])));
        assert!(deep.has_within(&path(&["f:metadata"])));
        assert!(!deep.has_within(&path(&["f:metadata", "f:annotations"])));
        assert!(!deep.has_within(&path(&["f:metadata", "f:labels", "f:team", "f:x"])));
    }

    #[test]
    fn malformed_fields_v1_is_skipped_not_fatal() {
        assert!(FieldSet::from_fields_v1(&json!("nonsense")).is_empty());
        let set = FieldSet::from_fields_v1(&json!({"f:a": 3}));
        assert!(set.contains(&path(&["f:a"])));
    }
}
