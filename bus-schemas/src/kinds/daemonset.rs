//! DaemonSet. STUB: being completed by the kinds helper.

use serde::{Deserialize, Serialize};

use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSet {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DaemonSetSpec,
    #[serde(default)]
    pub status: DaemonSetStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetSpec {}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetStatus {}

crate::spec_status_resource!(
    DaemonSet,
    KindInfo {
        kind: "DaemonSet",
        api_version: "apps/v1",
        plural: "daemonsets",
        short_names: &["ds"],
        namespaced: true,
        has_status: true,
    }
);

impl DaemonSet {
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
