//! Bodies of API requests and replies that are not objects themselves.
//!
//! create, update, update-status and apply carry the object itself (msgpack, named fields).
//! get and delete carry [`ObjectRef`] / [`DeleteOptions`]; list carries [`ListOptions`];
//! patch carries [`PatchRequest`]. A success reply is the object (or [`ObjectList`]); a failure
//! reply is a [`crate::Status`] and has the `Shoal-Code` header set to its code.

use serde::{Deserialize, Serialize};

/// Header on apply replies: `created`, `configured` or `unchanged`.
pub const HEADER_APPLY_RESULT: &str = "Shoal-Apply";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// `Background` (default), `Foreground` or `Orphan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Preconditions>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListOptions {
    /// Empty lists every namespace.
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub label_selector: String,
    #[serde(default)]
    pub field_selector: String,
    /// Page size; 0 lets the server choose one that fits a NATS message.
    #[serde(default)]
    pub limit: u32,
    /// The `continue` token of the previous page.
    #[serde(default, rename = "continue")]
    pub continue_token: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    /// The state-log sequence the list reflects: watch from the next one to miss nothing.
    #[serde(default)]
    pub resource_version: String,
    #[serde(default, rename = "continue", skip_serializing_if = "String::is_empty")]
    pub continue_token: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "T: Deserialize<'de>"))]
pub struct ObjectList<T> {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
    #[serde(default)]
    pub items: Vec<T>,
}

/// A JSON merge patch (RFC 7386) to one object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchRequest {
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// The patch document as JSON text.
    pub patch: String,
    /// Apply the patch to status (through update-status) instead of the object.
    #[serde(default)]
    pub status: bool,
}
