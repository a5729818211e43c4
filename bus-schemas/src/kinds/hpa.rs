//! HorizontalPodAutoscaler. STUB: being completed by the kinds helper.

use serde::{Deserialize, Serialize};

use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscaler {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: HorizontalPodAutoscalerSpec,
    #[serde(default)]
    pub status: HorizontalPodAutoscalerStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerSpec {}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerStatus {}

crate::spec_status_resource!(
    HorizontalPodAutoscaler,
    KindInfo {
        kind: "HorizontalPodAutoscaler",
        api_version: "autoscaling/v2",
        plural: "horizontalpodautoscalers",
        short_names: &["hpa"],
        namespaced: true,
        has_status: true,
    }
);

impl HorizontalPodAutoscaler {
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
