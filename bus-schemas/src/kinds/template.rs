//! Pod templates and the selector rules every workload controller shares.

use serde::{Deserialize, Serialize};

use super::common::{immutable, invalid_value, is_default, render_labels, validate_label_map};
use super::pod_spec::{PodSpec, RESTART_POLICIES};
use crate::meta::ObjectMeta;
use crate::selector::LabelSelector;
use crate::status::Cause;
use crate::validation::label_key;

/// The pods a workload stamps out: metadata (labels the selector finds them by) and a spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateSpec {
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodSpec,
}

impl PodTemplateSpec {
    pub fn apply_defaults(&mut self) {
        self.spec.apply_defaults();
    }

    /// Validates the template at `path` (`spec.template`): its labels and annotations, its
    /// pod spec, and that its restartPolicy is one the controller can honour.
    pub fn validate(&self, path: &str, restart_policies: &[&str]) -> Vec<Cause> {
        let mut causes =
            validate_label_map(&self.metadata.labels, &format!("{path}.metadata.labels"));
        for key in self.metadata.annotations.keys() {
            if let Err(e) = label_key(key) {
                causes.push(invalid_value(
                    &format!("{path}.metadata.annotations[{key}]"),
                    key,
                    &e,
                ));
            }
        }
        let spec_path = format!("{path}.spec");
        causes.extend(self.spec.validate(&spec_path));
        // A policy unknown to pods at all was reported by the pod spec validation already.
        let policy = self.spec.restart_policy.as_str();
        if RESTART_POLICIES.contains(&policy) && !restart_policies.contains(&policy) {
            let at = format!("{spec_path}.restartPolicy");
            causes.push(Cause::not_supported(at, policy, restart_policies));
        }
        causes
    }
}

/// A workload's selector must be present, valid, non-empty, and select its own template:
/// otherwise the controller would create pods it never sees and create more forever.
pub(crate) fn validate_selector(
    selector: Option<&LabelSelector>,
    template: &PodTemplateSpec,
    path: &str,
) -> Vec<Cause> {
    let at = format!("{path}.selector");
    let Some(selector) = selector else {
        return vec![Cause::required(at)];
    };
    if selector.is_empty() {
        return vec![invalid_value(
            &at,
            "{}",
            "empty selector is invalid for this workload",
        )];
    }
    let causes = selector.validate(&at);
    if !causes.is_empty() {
        return causes;
    }
    if !selector.matches(&template.metadata.labels) {
        let labels = render_labels(&template.metadata.labels);
        return vec![Cause::invalid(
            format!("{path}.template.metadata.labels"),
            format!("Invalid value: {labels:?}: `selector` does not match template `labels`"),
        )];
    }
    Vec::new()
}

pub(crate) fn validate_selector_unchanged(
    new: Option<&LabelSelector>,
    old: Option<&LabelSelector>,
    path: &str,
) -> Option<Cause> {
    (new != old).then(|| immutable(&format!("{path}.selector"), &new))
}
