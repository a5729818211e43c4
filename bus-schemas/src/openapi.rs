//! OpenAPI v3 schemas of the kinds (feature `openapi`), generated from the Rust types and
//! their doc comments: the types are what the API accepts, so deriving the schemas from
//! them keeps `kubectl explain` and validation from drifting from the contract.

use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};

/// The schemas of some kinds and of every type they use, keyed by the name
/// `#/components/schemas/<name>` refers to them by.
#[derive(Debug, Clone, Default)]
pub struct Schemas {
    pub definitions: Map<String, Value>,
    /// Each kind (`Pod`) with the name of its own schema among the definitions.
    pub kinds: Vec<(&'static str, String)>,
}

/// The fields every kind shares, described once here: their Rust types leave them bare
/// because they mean the same in every kind.
const SHARED_FIELDS: &[(&str, &str)] = &[
    (
        "apiVersion",
        "The versioned schema of this representation of the object (`group/version`, or \
         `version` in the core group), e.g. `apps/v1`.",
    ),
    (
        "kind",
        "The kind of object this is, in CamelCase, e.g. `Deployment`.",
    ),
    (
        "metadata",
        "The object's name, namespace, labels, annotations, owners and the fields the API \
         maintains (uid, resourceVersion, generation, creation and deletion times).",
    ),
    (
        "spec",
        "The desired state of the object, written by its users.",
    ),
    (
        "status",
        "The observed state of the object, written by the actors that act on it; read-only \
         to users.",
    ),
];

/// Generates the schemas of `kinds` (bus kind names); unknown names are skipped.
pub fn schemas(kinds: &[&'static str]) -> Schemas {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut roots = Vec::new();
    for &kind in kinds {
        let reference =
            crate::with_kind!(kind, K => Some(generator.subschema_for::<K>()), _ => None);
        let name = reference
            .as_ref()
            .and_then(|r| r.get("$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next())
            .map(String::from);
        if let Some(name) = name {
            roots.push((kind, name));
        }
    }
    let mut definitions = generator.take_definitions(true);
    for (_, name) in &roots {
        if let Some(properties) = definitions
            .get_mut(name)
            .and_then(|d| d.get_mut("properties"))
            .and_then(Value::as_object_mut)
        {
            for (field, description) in SHARED_FIELDS {
                describe(properties.get_mut(*field), description);
            }
        }
    }
    Schemas {
        definitions,
        kinds: roots,
    }
}

/// Gives a property a description unless its type's doc comment already did.
fn describe(property: Option<&mut Value>, description: &str) {
    let Some(Value::Object(property)) = property else {
        return;
    };
    if property.contains_key("description") {
        return;
    }
    if let Some(reference) = property.remove("$ref") {
        // A reference cannot carry siblings in OpenAPI 3.0: wrap it.
        property.insert("allOf".into(), json!([{ "$ref": reference }]));
    }
    property.insert("description".into(), description.into());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve<'a>(defs: &'a Map<String, Value>, schema: &'a Value) -> &'a Value {
        let reference = schema
            .get("$ref")
            .or_else(|| schema.pointer("/allOf/0/$ref"))
            .and_then(Value::as_str);
        match reference {
            Some(r) => &defs[r.rsplit('/').next().unwrap()],
            None => schema,
        }
    }

    #[test]
    fn pod_fields_carry_their_doc_comments() {
        let s = schemas(&["Pod", "NoSuchKind"]);
        assert_eq!(s.kinds, vec![("Pod", "Pod".to_string())]);
        let defs = &s.definitions;
        let pod = &defs["Pod"];
        assert!(pod["description"].as_str().unwrap().contains("containers"));
        assert!(pod["properties"]["apiVersion"]["description"]
            .as_str()
            .unwrap()
            .contains("apps/v1"));
        let spec = resolve(defs, &pod["properties"]["spec"]);
        let containers = &spec["properties"]["containers"];
        assert_eq!(containers["type"], "array");
        let container = resolve(defs, &containers["items"]);
        let image = &container["properties"]["image"];
        assert_eq!(image["type"], "string");
        assert!(image["description"].as_str().unwrap().contains("image"));
        // Every reference resolves inside the document.
        let text = serde_json::to_string(defs).unwrap();
        for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &part[..part.find('"').unwrap()];
            assert!(defs.contains_key(name), "dangling reference to {name}");
        }
    }

    #[test]
    fn quantities_are_strings() {
        let s = schemas(&["Pod"]);
        assert_eq!(s.definitions["Quantity"]["type"], "string");
    }
}
