//! Label and field selectors. INTERFACE STUB: the implementation is being written by a helper.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::status::Cause;

/// The structured selector objects carry (`matchLabels` + `matchExpressions`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    pub key: String,
    /// In, NotIn, Exists, DoesNotExist.
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Validates, naming fields under `path` (e.g. `spec.selector`).
    pub fn validate(&self, _path: &str) -> Vec<Cause> {
        todo!()
    }
    pub fn to_selector(&self) -> Result<Selector, SelectorError> {
        todo!()
    }
    pub fn matches(&self, _labels: &BTreeMap<String, String>) -> bool {
        todo!()
    }
}

/// A parsed label selector: requirements joined by AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    _private: (),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("selector {input:?} is invalid at {position}: {why}")]
pub struct SelectorError {
    pub input: String,
    pub position: usize,
    pub why: String,
}

impl Selector {
    pub fn parse(_input: &str) -> Result<Selector, SelectorError> {
        todo!()
    }
    pub fn everything() -> Selector {
        todo!()
    }
    pub fn is_everything(&self) -> bool {
        todo!()
    }
    pub fn matches(&self, _labels: &BTreeMap<String, String>) -> bool {
        todo!()
    }
}

/// A field selector (`metadata.name=x,spec.nodeName!=`): `=`, `==` and `!=` on named fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    _private: (),
}

impl FieldSelector {
    pub fn parse(_input: &str) -> Result<FieldSelector, SelectorError> {
        todo!()
    }
    pub fn is_everything(&self) -> bool {
        todo!()
    }
    /// `lookup` returns a field's value as text, or None when the object has no such field.
    pub fn matches(&self, _lookup: &dyn Fn(&str) -> Option<String>) -> bool {
        todo!()
    }
}
