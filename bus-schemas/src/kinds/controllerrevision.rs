//! ControllerRevision (apps/v1): one immutable snapshot of a StatefulSet's pod template,
//! numbered, so pods below a rollout's partition are recreated from the template they had,
//! and `rollout history|undo` have something to list and restore.

use serde::{Deserialize, Serialize};

use super::common::{immutable, non_negative};
use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerRevision {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The snapshot; for a StatefulSet `{"spec": {"template": …}}`, as Kubernetes stores it.
    #[serde(default)]
    pub data: serde_json::Value,
    #[serde(default)]
    pub revision: i64,
}

crate::body_resource!(
    ControllerRevision,
    KindInfo {
        kind: "ControllerRevision",
        api_version: "apps/v1",
        plural: "controllerrevisions",
        short_names: &[],
        namespaced: true,
        has_status: false,
    }
);

impl ControllerRevision {
    fn validate_fields(&self) -> Vec<Cause> {
        non_negative(self.revision, "revision")
            .into_iter()
            .collect()
    }

    /// The snapshot never changes; only its number may move (an undo makes an old
    /// revision the newest again).
    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        if self.data != old.data {
            return vec![immutable("data", &"{...}")];
        }
        Vec::new()
    }

    fn default_fields(&mut self) {}

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}
