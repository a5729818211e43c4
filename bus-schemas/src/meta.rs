//! Metadata shared by every object: the uniform shape Borg lacked and Kubernetes settled on.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use crate::fields_v1::FieldsV1;

/// A point in time as RFC 3339 text on every encoding, so JSON, YAML and msgpack readers agree.
pub type Time = DateTime<Utc>;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Empty for cluster-scoped kinds; defaulted to `default` for namespaced ones.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The state log's stream sequence of this object's last write, as decimal text
    /// (text, as in Kubernetes, so clients treat it as opaque).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
    /// Kubernetes' generateName: the API appends a random suffix when `name` is empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub generate_name: String,
    /// Which field manager owns which fields (Kubernetes' server-side apply bookkeeping):
    /// written only by the API, from the writers' `Shoal-Field-Manager` header.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_fields: Vec<ManagedFieldsEntry>,
}

/// One manager's fields, as Kubernetes records them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedFieldsEntry {
    pub manager: String,
    /// `Apply` (server-side apply) or `Update` (create, update, patch).
    pub operation: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
    /// Always `FieldsV1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fields_type: String,
    /// The owned fields (FieldsV1): JSON text on the bus, the tree for people.
    #[serde(
        default,
        rename = "fieldsV1",
        skip_serializing_if = "FieldsV1::is_empty"
    )]
    pub fields_v1: FieldsV1,
}

impl ManagedFieldsEntry {
    pub const APPLY: &'static str = "Apply";
    pub const UPDATE: &'static str = "Update";
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

impl ObjectMeta {
    /// The resourceVersion as the state log sequence; `None` when unset or not a number.
    pub fn revision(&self) -> Option<u64> {
        self.resource_version.parse().ok()
    }

    pub fn is_deleting(&self) -> bool {
        self.deletion_timestamp.is_some()
    }

    /// The owner reference marked `controller: true`, if any.
    pub fn controller_ref(&self) -> Option<&OwnerReference> {
        self.owner_references
            .iter()
            .find(|r| r.controller == Some(true))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

/// `apiVersion` and `kind`, carried by every object and every manifest document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeMeta {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
}

/// A condition as every Kubernetes status carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// "True", "False" or "Unknown".
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// Finds a condition by type in a status's condition list.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Sets a condition, keeping lastTransitionTime when the status does not change.
/// Returns whether anything changed, so callers can skip no-op status writes.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition, now: Time) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            let same = existing.status == new.status
                && existing.reason == new.reason
                && existing.message == new.message
                && existing.observed_generation == new.observed_generation;
            if same {
                return false;
            }
            new.last_transition_time = if existing.status == new.status {
                existing.last_transition_time
            } else {
                Some(now)
            };
            *existing = new;
            true
        }
        None => {
            new.last_transition_time.get_or_insert(now);
            conditions.push(new);
            true
        }
    }
}
