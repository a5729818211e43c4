//! Manifests as people write them: YAML or JSON, several documents per file, `kind: List`
//! wrappers. Each document keeps its index so errors can say which one is wrong.

use serde::Deserialize;

use crate::codec;
use crate::resource::{KindInfo, Resource};
use crate::status::Cause;
use crate::validation::validate_meta;

/// One document of a manifest, parsed but not yet typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Position in the file, from 0, as kubectl counts.
    pub index: usize,
    pub value: serde_json::Value,
}

impl Document {
    pub fn kind(&self) -> &str {
        self.value
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or("")
    }
    pub fn name(&self) -> &str {
        self.value
            .pointer("/metadata/name")
            .and_then(|k| k.as_str())
            .unwrap_or("")
    }
}

/// A document that could not be used, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentError {
    pub index: usize,
    pub kind: String,
    pub name: String,
    pub causes: Vec<Cause>,
}

impl std::fmt::Display for DocumentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match (self.kind.is_empty(), self.name.is_empty()) {
            (false, false) => format!(" ({} {:?})", self.kind, self.name),
            (false, true) => format!(" ({})", self.kind),
            _ => String::new(),
        };
        let causes: Vec<String> = self.causes.iter().map(|c| c.to_string()).collect();
        write!(f, "document {}{what}: {}", self.index, causes.join("; "))
    }
}

/// Splits a manifest into documents. JSON (one value, or a `List`) and multi-document YAML
/// are both accepted; empty YAML documents are skipped but still counted.
pub fn parse(text: &str) -> Result<Vec<Document>, DocumentError> {
    let mut out = Vec::new();
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| DocumentError {
            index: 0,
            kind: String::new(),
            name: String::new(),
            causes: vec![Cause::invalid(
                format!("line {}", e.line()),
                format!("invalid JSON: {e}"),
            )],
        })?;
        push_expanded(&mut out, 0, value);
        return Ok(out);
    }
    for (index, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = serde_norway::Value::deserialize(doc).map_err(|e| DocumentError {
            index,
            kind: String::new(),
            name: String::new(),
            causes: vec![Cause::invalid(
                e.location()
                    .map(|l| format!("line {}", l.line()))
                    .unwrap_or_default(),
                format!("invalid YAML: {e}"),
            )],
        })?;
        if value.is_null() {
            continue;
        }
        let json: serde_json::Value = serde_json::to_value(&value).map_err(|e| DocumentError {
            index,
            kind: String::new(),
            name: String::new(),
            causes: vec![Cause::invalid(
                "",
                format!("YAML value has no JSON form: {e}"),
            )],
        })?;
        push_expanded(&mut out, index, json);
    }
    Ok(out)
}

fn push_expanded(out: &mut Vec<Document>, index: usize, value: serde_json::Value) {
    let is_list = value
        .get("kind")
        .and_then(|k| k.as_str())
        .is_some_and(|k| k.ends_with("List"))
        && value.get("items").is_some_and(|i| i.is_array());
    match value {
        serde_json::Value::Array(items) => {
            for item in items {
                out.push(Document { index, value: item });
            }
        }
        serde_json::Value::Object(mut map) if is_list => {
            if let Some(serde_json::Value::Array(items)) = map.remove("items") {
                for item in items {
                    out.push(Document { index, value: item });
                }
            }
        }
        value => out.push(Document { index, value }),
    }
}

/// Types a document as `K`, defaults it and validates it as the API would on create.
pub fn decode<K: Resource>(doc: &Document) -> Result<K, DocumentError> {
    let fail = |causes| DocumentError {
        index: doc.index,
        kind: doc.kind().to_string(),
        name: doc.name().to_string(),
        causes,
    };
    let mut obj: K = codec::from_json_value_strict(doc.value.clone()).map_err(fail)?;
    let api_version = obj.type_meta().0.to_string();
    if !api_version.is_empty() && api_version != K::INFO.api_version {
        return Err(fail(vec![Cause::not_supported(
            "apiVersion",
            &api_version,
            &[K::INFO.api_version],
        )]));
    }
    obj.set_type_meta();
    let meta = obj.meta_mut();
    if K::INFO.namespaced && meta.namespace.is_empty() {
        meta.namespace = "default".into();
    }
    let mut check = obj.clone();
    check.apply_defaults();
    let mut causes = Vec::new();
    if check.meta().name.is_empty() && !check.meta().generate_name.is_empty() {
        check.meta_mut().name = format!("{}x", check.meta().generate_name);
    }
    causes.extend(validate_meta(&K::INFO, check.meta()));
    causes.extend(check.validate_kind());
    if causes.is_empty() {
        Ok(obj)
    } else {
        Err(fail(causes))
    }
}

/// The kind a document names, or an error naming the document.
pub fn kind_of(doc: &Document) -> Result<&'static KindInfo, DocumentError> {
    let kind = doc.kind();
    let fail = |cause| DocumentError {
        index: doc.index,
        kind: kind.to_string(),
        name: doc.name().to_string(),
        causes: vec![cause],
    };
    if kind.is_empty() {
        return Err(fail(Cause::required("kind")));
    }
    crate::kinds::KINDS
        .iter()
        .find(|k| k.kind == kind)
        .ok_or_else(|| {
            fail(Cause::not_supported(
                "kind",
                kind,
                &crate::kinds::KINDS
                    .iter()
                    .map(|k| k.kind)
                    .collect::<Vec<_>>(),
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_keeps_indexes() {
        let text = "kind: Pod\nmetadata: {name: a}\n---\n---\nkind: Service\nmetadata: {name: b}\n";
        let docs = parse(text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].index, 0);
        assert_eq!(docs[1].index, 2);
        assert_eq!(docs[1].kind(), "Service");
    }

    #[test]
    fn json_lists_expand() {
        let text = r#"{"kind":"List","items":[{"kind":"Pod"},{"kind":"Node"}]}"#;
        let docs = parse(text).unwrap();
        assert_eq!(
            docs.iter().map(|d| d.kind()).collect::<Vec<_>>(),
            ["Pod", "Node"]
        );
    }

    #[test]
    fn broken_yaml_names_the_document() {
        let err = parse("kind: Pod\n---\nkind: [unclosed\n").unwrap_err();
        assert_eq!(err.index, 1);
        assert!(err.to_string().contains("invalid YAML"), "{err}");
    }

    #[test]
    fn unknown_kind_is_reported() {
        let docs = parse("kind: Widget\nmetadata: {name: w}\n").unwrap();
        let err = kind_of(&docs[0]).unwrap_err();
        assert_eq!(err.causes[0].field, "kind");
    }
}
