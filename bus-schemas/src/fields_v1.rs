//! A manager's owned fields (Kubernetes' FieldsV1) carried as JSON text.
//!
//! Every Pod write and every informer decode carries the managed fields of three or four
//! managers. Decoded as a JSON tree they cost a map allocation per field on every pass, which
//! measured as most of the control plane's extra cost per pod (bench_scheduling: 1,100 → 640
//! pods/s). Kubernetes keeps FieldsV1 as raw bytes for the same reason: only server-side apply
//! ever looks inside. So on the bus (msgpack) the tree is one string of JSON text; people
//! (JSON, YAML: the gateway, `shoal get -o yaml`) still see the tree itself.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The owned fields as FieldsV1 JSON text: `f:<field>` for a field, `k:<json>` for an item of
/// a list keyed by merge key, `v:<json>` for an item of a set, `.` for the node itself.
/// Empty when absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldsV1 {
    json: String,
}

impl FieldsV1 {
    pub fn from_value(value: &serde_json::Value) -> FieldsV1 {
        if value.is_null() {
            return FieldsV1::default();
        }
        FieldsV1 {
            json: value.to_string(),
        }
    }

    /// The tree; `Null` when absent or when the text is not JSON (a malformed entry is
    /// skipped by server-side apply, never fatal).
    pub fn to_value(&self) -> serde_json::Value {
        if self.json.is_empty() {
            return serde_json::Value::Null;
        }
        serde_json::from_str(&self.json).unwrap_or(serde_json::Value::Null)
    }

    pub fn is_empty(&self) -> bool {
        self.json.is_empty()
    }

    pub fn as_json(&self) -> &str {
        &self.json
    }
}

impl Serialize for FieldsV1 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            self.to_value().serialize(serializer)
        } else {
            serializer.serialize_str(&self.json)
        }
    }
}

/// Accepts the text (the bus) or the tree (people, and state logs written before the text
/// form), whatever the format claims to be: wrapping deserializers do not all forward
/// `is_human_readable`.
impl<'de> Deserialize<'de> for FieldsV1 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<FieldsV1, D::Error> {
        deserializer.deserialize_any(FieldsV1Visitor)
    }
}

struct FieldsV1Visitor;

impl<'de> Visitor<'de> for FieldsV1Visitor {
    type Value = FieldsV1;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a FieldsV1 object, or its JSON text")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<FieldsV1, E> {
        Ok(FieldsV1 {
            json: text.to_owned(),
        })
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<FieldsV1, E> {
        Ok(FieldsV1 { json: text })
    }

    fn visit_unit<E: de::Error>(self) -> Result<FieldsV1, E> {
        Ok(FieldsV1::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<FieldsV1, E> {
        Ok(FieldsV1::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<FieldsV1, A::Error> {
        let tree = serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(FieldsV1::from_value(&tree))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::ManagedFieldsEntry;
    use serde_json::json;

    fn entry(fields: serde_json::Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: "kubectl".into(),
            operation: ManagedFieldsEntry::APPLY.into(),
            fields_type: "FieldsV1".into(),
            fields_v1: FieldsV1::from_value(&fields),
            ..Default::default()
        }
    }

    #[test]
    fn people_see_the_tree_and_the_bus_carries_text() {
        let e = entry(json!({"f:spec": {"f:replicas": {}}}));
        let as_json = serde_json::to_value(&e).unwrap();
        assert_eq!(as_json["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));

        let packed = rmp_serde::to_vec_named(&e).unwrap();
        let raw: serde_json::Value = rmp_serde::from_slice(&packed).unwrap();
        assert_eq!(raw["fieldsV1"], json!(r#"{"f:spec":{"f:replicas":{}}}"#));
        assert_eq!(
            rmp_serde::from_slice::<ManagedFieldsEntry>(&packed).unwrap(),
            e
        );
    }

    #[test]
    fn a_tree_written_before_the_text_form_still_decodes() {
        let old = json!({"manager": "m", "operation": "Update", "fieldsV1": {"f:a": {}}});
        let packed = rmp_serde::to_vec_named(&old).unwrap();
        let e: ManagedFieldsEntry = rmp_serde::from_slice(&packed).unwrap();
        assert_eq!(e.fields_v1.to_value(), json!({"f:a": {}}));
        let from_json: ManagedFieldsEntry = serde_json::from_value(old).unwrap();
        assert_eq!(from_json, e);
    }

    #[test]
    fn absent_fields_stay_absent_in_both_forms() {
        let e = ManagedFieldsEntry {
            manager: "m".into(),
            ..Default::default()
        };
        assert!(serde_json::to_value(&e).unwrap().get("fieldsV1").is_none());
        let packed = rmp_serde::to_vec_named(&e).unwrap();
        assert!(rmp_serde::from_slice::<ManagedFieldsEntry>(&packed)
            .unwrap()
            .fields_v1
            .is_empty());
    }
}
