//! PriorityClass. STUB: being completed by the kinds helper.

use serde::{Deserialize, Serialize};

use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PriorityClass {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
}

crate::body_resource!(
    PriorityClass,
    KindInfo {
        kind: "PriorityClass",
        api_version: "scheduling.k8s.io/v1",
        plural: "priorityclasses",
        short_names: &["pc"],
        namespaced: false,
        has_status: false,
    }
);

impl PriorityClass {
    fn validate_fields(&self) -> Vec<Cause> {
        Vec::new()
    }

    fn validate_update_fields(&self, _old: &Self) -> Vec<Cause> {
        Vec::new()
    }

    fn default_fields(&mut self) {}

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}
