//! Namespace: a scope for names, and the unit that deleting removes everything within.

use serde::{Deserialize, Serialize};

use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;
use crate::validation::dns1123_label;

/// A scope for names: objects of one kind are unique by name within a namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Namespace {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: NamespaceSpec,
    #[serde(default)]
    pub status: NamespaceStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NamespaceStatus {
    /// `Active` or `Terminating`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
}

crate::spec_status_resource!(
    Namespace,
    KindInfo {
        kind: "Namespace",
        api_version: "v1",
        plural: "namespaces",
        short_names: &["ns"],
        namespaced: false,
        has_status: true,
    }
);

impl Namespace {
    fn validate_fields(&self) -> Vec<Cause> {
        let mut causes = Vec::new();
        if !self.metadata.name.is_empty() {
            if let Err(e) = dns1123_label(&self.metadata.name) {
                causes.push(Cause::invalid("metadata.name", e));
            }
        }
        causes
    }

    fn validate_update_fields(&self, _old: &Self) -> Vec<Cause> {
        Vec::new()
    }

    fn default_fields(&mut self) {
        if self.status.phase.is_empty() {
            self.status.phase = "Active".into();
        }
    }

    fn kind_field_value(&self, field: &str) -> Option<String> {
        match field {
            "status.phase" => Some(self.status.phase.clone()),
            _ => None,
        }
    }
}
