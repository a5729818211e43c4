//! Lease. STUB: being completed by the kinds helper.

use serde::{Deserialize, Serialize};

use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: LeaseSpec,
    #[serde(default)]
    pub status: LeaseStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseSpec {}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseStatus {}

crate::spec_status_resource!(
    Lease,
    KindInfo {
        kind: "Lease",
        api_version: "coordination.k8s.io/v1",
        plural: "leases",
        short_names: &[],
        namespaced: true,
        has_status: true,
    }
);

impl Lease {
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
