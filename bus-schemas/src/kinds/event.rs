//! Event: something that happened to an object, as `kubectl describe` lists them
//! (the core/v1 shape, which kubectl and most tools read).

use serde::{Deserialize, Serialize};

use super::common::{
    invalid_value, is_default, is_zero_i32, non_negative, not_supported, ObjectReference,
};
use crate::meta::{ObjectMeta, Time};
use crate::resource::KindInfo;
use crate::status::Cause;

/// A report of something that happened to an object, for people reading `describe`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Event {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub involved_object: ObjectReference,
    /// A CamelCase word machines can match on, e.g. `Scheduled`, `BackOff`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "is_default")]
    pub source: EventSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_timestamp: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_timestamp: Option<Time>,
    /// How many times this event (same object, reason and message) occurred.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub count: i32,
    /// `Normal` or `Warning`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_time: Option<Time>,
    /// What was done (or failed), e.g. `Binding`, `Pulling`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reporting_component: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reporting_instance: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EventSource {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub component: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
}

crate::body_resource!(
    Event,
    KindInfo {
        kind: "Event",
        api_version: "v1",
        plural: "events",
        short_names: &["ev"],
        namespaced: true,
        has_status: false,
    }
);

const EVENT_TYPES: &[&str] = &["Normal", "Warning"];

impl Event {
    pub fn is_warning(&self) -> bool {
        self.type_ == "Warning"
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let mut causes = Vec::new();
        if !self.type_.is_empty() {
            causes.extend(not_supported("type", &self.type_, EVENT_TYPES));
        }
        causes.extend(non_negative(self.count, "count"));
        // An event lives with the object it is about, so deleting a namespace takes its events.
        let involved_ns = &self.involved_object.namespace;
        if !involved_ns.is_empty() && *involved_ns != self.metadata.namespace {
            let detail = "does not match event.namespace";
            causes.push(invalid_value(
                "involvedObject.namespace",
                involved_ns,
                detail,
            ));
        }
        if self.involved_object.kind.is_empty() {
            causes.push(Cause::required("involvedObject.kind"));
        }
        causes
    }

    fn validate_update_fields(&self, _old: &Self) -> Vec<Cause> {
        Vec::new()
    }

    fn default_fields(&mut self) {}

    fn kind_field_value(&self, field: &str) -> Option<String> {
        let o = &self.involved_object;
        let value = match field {
            "involvedObject.kind" => &o.kind,
            "involvedObject.namespace" => &o.namespace,
            "involvedObject.name" => &o.name,
            "involvedObject.uid" => &o.uid,
            "involvedObject.apiVersion" => &o.api_version,
            "involvedObject.resourceVersion" => &o.resource_version,
            "involvedObject.fieldPath" => &o.field_path,
            "reason" => &self.reason,
            "type" => &self.type_,
            "source" => &self.source.component,
            "reportingComponent" => &self.reporting_component,
            _ => return None,
        };
        Some(value.clone())
    }
}
