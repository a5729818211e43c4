//! Deployment. STUB: being completed by the kinds helper.

use serde::{Deserialize, Serialize};

use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DeploymentSpec,
    #[serde(default)]
    pub status: DeploymentStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentSpec {}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStatus {}

crate::spec_status_resource!(
    Deployment,
    KindInfo {
        kind: "Deployment",
        api_version: "apps/v1",
        plural: "deployments",
        short_names: &["deploy"],
        namespaced: true,
        has_status: true,
    }
);

impl Deployment {
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
