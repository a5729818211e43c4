//! HorizontalPodAutoscaler (autoscaling/v2): scales a workload's replicas to track metrics.

use serde::{Deserialize, Serialize};

use super::common::{
    at_least, forbidden, in_range, invalid_value, is_zero_i32, not_supported, required_msg,
};
use crate::meta::{Condition, ObjectMeta, Time};
use crate::quantity::Quantity;
use crate::resource::KindInfo;
use crate::selector::LabelSelector;
use crate::status::Cause;

/// The External metric the autoscaler reads itself: a JetStream consumer's pending plus
/// ack-pending messages; its selector's matchLabels name `stream` and `consumer`.
pub const JETSTREAM_LAG_METRIC: &str = "jetstream_consumer_lag";

/// Annotation: a target at zero replicas wakes only when an External or Object metric is
/// above this quantity (KEDA's activation threshold).
pub const ACTIVATION_ANNOTATION: &str = "autoscaling.shoal.io/activation-threshold";

/// Scales a workload's replicas between a minimum and a maximum to keep metrics (CPU, memory,
/// custom or external) at their targets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerSpec {
    /// The workload whose scale subresource the autoscaler sets (a Deployment, ReplicaSet or
    /// StatefulSet).
    #[serde(default)]
    pub scale_target_ref: CrossVersionObjectReference,
    /// The fewest replicas the autoscaler sets; 1 by default, 0 allowed with an object or
    /// external metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// The most replicas the autoscaler sets.
    #[serde(default)]
    pub max_replicas: i32,
    /// The largest replica count any metric asks for wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricSpec>,
    /// Stabilization windows and rate limits for scaling up and down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CrossVersionObjectReference {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MetricSpec {
    /// `Resource`, `ContainerResource`, `Pods`, `Object` or `External`; names the one source
    /// field that is set.
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceMetricSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_resource: Option<ContainerResourceMetricSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<PodsMetricSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectMetricSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalMetricSource>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourceMetricSource {
    /// `cpu` or `memory`.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub target: MetricTarget,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContainerResourceMetricSource {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub container: String,
    #[serde(default)]
    pub target: MetricTarget,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodsMetricSource {
    #[serde(default)]
    pub metric: MetricIdentifier,
    #[serde(default)]
    pub target: MetricTarget,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ObjectMetricSource {
    #[serde(default)]
    pub described_object: CrossVersionObjectReference,
    #[serde(default)]
    pub metric: MetricIdentifier,
    #[serde(default)]
    pub target: MetricTarget,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExternalMetricSource {
    #[serde(default)]
    pub metric: MetricIdentifier,
    #[serde(default)]
    pub target: MetricTarget,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MetricIdentifier {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MetricTarget {
    /// `Utilization`, `Value` or `AverageValue`; names the field that is set.
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_value: Option<Quantity>,
    /// Percent of the pods' requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_utilization: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerBehavior {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up: Option<HpaScalingRules>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<HpaScalingRules>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HpaScalingRules {
    /// Recommendations over this window are considered, damping flapping. Unset on scaleDown
    /// means the controller's default (300 seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stabilization_window_seconds: Option<i32>,
    /// `Max`, `Min` or `Disabled`: which policy's limit applies when several do.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub select_policy: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<HpaScalingPolicy>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HpaScalingPolicy {
    /// `Pods` or `Percent`.
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub value: i32,
    #[serde(default)]
    pub period_seconds: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_time: Option<Time>,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub current_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub desired_replicas: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub current_metrics: Vec<MetricStatus>,
    /// `AbleToScale`, `ScalingActive`, `ScalingLimited`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MetricStatus {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceMetricStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_resource: Option<ContainerResourceMetricStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<PodsMetricStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectMetricStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalMetricStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourceMetricStatus {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub current: MetricValueStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContainerResourceMetricStatus {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub container: String,
    #[serde(default)]
    pub current: MetricValueStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodsMetricStatus {
    #[serde(default)]
    pub metric: MetricIdentifier,
    #[serde(default)]
    pub current: MetricValueStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ObjectMetricStatus {
    #[serde(default)]
    pub metric: MetricIdentifier,
    #[serde(default)]
    pub current: MetricValueStatus,
    #[serde(default)]
    pub described_object: CrossVersionObjectReference,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExternalMetricStatus {
    #[serde(default)]
    pub metric: MetricIdentifier,
    #[serde(default)]
    pub current: MetricValueStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MetricValueStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_value: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_utilization: Option<i32>,
}

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

const METRIC_TYPES: &[&str] = &[
    "Resource",
    "ContainerResource",
    "Pods",
    "Object",
    "External",
];
const SELECT_POLICIES: &[&str] = &["Max", "Min", "Disabled"];
const POLICY_TYPES: &[&str] = &["Pods", "Percent"];
/// Kubernetes' default when an HPA names no metric: 80% average CPU utilization.
const DEFAULT_CPU_UTILIZATION: i32 = 80;
const MAX_STABILIZATION_WINDOW_SECONDS: i32 = 3600;
const MAX_PERIOD_SECONDS: i32 = 1800;

fn scale_up_default() -> HpaScalingRules {
    let policy = |type_: &str, value| HpaScalingPolicy {
        type_: type_.into(),
        value,
        period_seconds: 15,
    };
    HpaScalingRules {
        stabilization_window_seconds: Some(0),
        select_policy: "Max".into(),
        policies: vec![policy("Pods", 4), policy("Percent", 100)],
    }
}

fn scale_down_default() -> HpaScalingRules {
    HpaScalingRules {
        // Left unset so the controller's own default (300s) applies, as in Kubernetes.
        stabilization_window_seconds: None,
        select_policy: "Max".into(),
        policies: vec![HpaScalingPolicy {
            type_: "Percent".into(),
            value: 100,
            period_seconds: 15,
        }],
    }
}

/// Fills what the user left unset from the defaults, field by field.
fn default_rules(rules: &mut Option<HpaScalingRules>, defaults: HpaScalingRules) {
    let Some(rules) = rules else {
        *rules = Some(defaults);
        return;
    };
    if rules.stabilization_window_seconds.is_none() {
        rules.stabilization_window_seconds = defaults.stabilization_window_seconds;
    }
    if rules.select_policy.is_empty() {
        rules.select_policy = defaults.select_policy;
    }
    if rules.policies.is_empty() {
        rules.policies = defaults.policies;
    }
}

impl MetricTarget {
    fn validate(&self, path: &str, allowed: &[&str]) -> Vec<Cause> {
        let mut causes = Vec::new();
        let type_at = format!("{path}.type");
        if self.type_.is_empty() {
            causes.push(Cause::required(type_at));
            return causes;
        }
        if let Some(c) = not_supported(&type_at, &self.type_, allowed) {
            causes.push(c);
            return causes;
        }
        let positive = |q: &Option<Quantity>, field: &str, causes: &mut Vec<Cause>| match q {
            None => causes.push(required_msg(
                &format!("{path}.{field}"),
                &format!("must be set when type is {}", self.type_),
            )),
            Some(q) if q.milli_value() <= 0 => causes.push(invalid_value(
                &format!("{path}.{field}"),
                q.to_string(),
                "must be positive",
            )),
            Some(_) => {}
        };
        match self.type_.as_str() {
            "Utilization" => match self.average_utilization {
                None => causes.push(required_msg(
                    &format!("{path}.averageUtilization"),
                    "must be set when type is Utilization",
                )),
                Some(v) => causes.extend(at_least(v, 1, &format!("{path}.averageUtilization"))),
            },
            "Value" => positive(&self.value, "value", &mut causes),
            _ => positive(&self.average_value, "averageValue", &mut causes),
        }
        causes
    }
}

impl MetricSpec {
    fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        let type_at = format!("{path}.type");
        if self.type_.is_empty() {
            causes.push(Cause::required(type_at));
        } else {
            causes.extend(not_supported(&type_at, &self.type_, METRIC_TYPES));
        }
        let set = [
            ("Resource", "resource", self.resource.is_some()),
            (
                "ContainerResource",
                "containerResource",
                self.container_resource.is_some(),
            ),
            ("Pods", "pods", self.pods.is_some()),
            ("Object", "object", self.object.is_some()),
            ("External", "external", self.external.is_some()),
        ];
        for (type_, field, present) in set {
            let at = format!("{path}.{field}");
            if type_ == self.type_ && !present {
                causes.push(required_msg(
                    &at,
                    "must populate information for the given metric source",
                ));
            } else if type_ != self.type_ && present {
                causes.push(forbidden(&at, "must populate the given metric source only"));
            }
        }
        let resource_targets = ["Utilization", "AverageValue"];
        if let Some(src) = &self.resource {
            let at = format!("{path}.resource");
            if src.name.is_empty() {
                causes.push(Cause::required(format!("{at}.name")));
            }
            causes.extend(
                src.target
                    .validate(&format!("{at}.target"), &resource_targets),
            );
        }
        if let Some(src) = &self.container_resource {
            let at = format!("{path}.containerResource");
            for (field, value) in [("name", &src.name), ("container", &src.container)] {
                if value.is_empty() {
                    causes.push(Cause::required(format!("{at}.{field}")));
                }
            }
            causes.extend(
                src.target
                    .validate(&format!("{at}.target"), &resource_targets),
            );
        }
        if let Some(src) = &self.pods {
            let at = format!("{path}.pods");
            causes.extend(src.metric.validate(&format!("{at}.metric")));
            causes.extend(
                src.target
                    .validate(&format!("{at}.target"), &["AverageValue"]),
            );
        }
        if let Some(src) = &self.object {
            let at = format!("{path}.object");
            causes.extend(
                src.described_object
                    .validate(&format!("{at}.describedObject")),
            );
            causes.extend(src.metric.validate(&format!("{at}.metric")));
            causes.extend(
                src.target
                    .validate(&format!("{at}.target"), &["Value", "AverageValue"]),
            );
        }
        if let Some(src) = &self.external {
            let at = format!("{path}.external");
            causes.extend(src.metric.validate(&format!("{at}.metric")));
            if src.metric.name == JETSTREAM_LAG_METRIC {
                let labels = src.metric.selector.as_ref().map(|s| &s.match_labels);
                for label in ["stream", "consumer"] {
                    if labels
                        .and_then(|l| l.get(label))
                        .is_none_or(|v| v.is_empty())
                    {
                        causes.push(required_msg(
                            &format!("{at}.metric.selector.matchLabels.{label}"),
                            &format!("{JETSTREAM_LAG_METRIC} names the consumer it reads"),
                        ));
                    }
                }
            }
            causes.extend(
                src.target
                    .validate(&format!("{at}.target"), &["Value", "AverageValue"]),
            );
        }
        causes
    }
}

impl MetricIdentifier {
    fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        if self.name.is_empty() {
            causes.push(Cause::required(format!("{path}.name")));
        }
        if let Some(selector) = &self.selector {
            causes.extend(selector.validate(&format!("{path}.selector")));
        }
        causes
    }
}

impl CrossVersionObjectReference {
    pub(crate) fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        for (field, value) in [("kind", &self.kind), ("name", &self.name)] {
            let at = format!("{path}.{field}");
            if value.is_empty() {
                causes.push(Cause::required(at));
            } else if value.contains('/') || value.contains('%') || value == "." || value == ".." {
                causes.push(invalid_value(
                    &at,
                    value,
                    "may not contain '/' or '%', or be '.' or '..'",
                ));
            }
        }
        causes
    }
}

impl HpaScalingRules {
    fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let Some(window) = self.stabilization_window_seconds {
            let at = format!("{path}.stabilizationWindowSeconds");
            causes.extend(in_range(window, 0, MAX_STABILIZATION_WINDOW_SECONDS, &at));
        }
        if !self.select_policy.is_empty() {
            causes.extend(not_supported(
                &format!("{path}.selectPolicy"),
                &self.select_policy,
                SELECT_POLICIES,
            ));
        }
        if self.policies.is_empty() {
            causes.push(required_msg(
                &format!("{path}.policies"),
                "must specify at least one Policy",
            ));
        }
        for (i, policy) in self.policies.iter().enumerate() {
            let at = format!("{path}.policies[{i}]");
            causes.extend(not_supported(
                &format!("{at}.type"),
                &policy.type_,
                POLICY_TYPES,
            ));
            causes.extend(at_least(policy.value, 1, &format!("{at}.value")));
            causes.extend(in_range(
                policy.period_seconds,
                1,
                MAX_PERIOD_SECONDS,
                &format!("{at}.periodSeconds"),
            ));
        }
        causes
    }
}

impl HorizontalPodAutoscaler {
    /// The floor (unset counts as 1, the default).
    pub fn min_replicas(&self) -> i32 {
        self.spec.min_replicas.unwrap_or(1)
    }

    /// Scale to zero needs a metric that does not come from the pods themselves: with no
    /// pods left, nothing else could ever ask for the first one again.
    pub fn may_scale_to_zero(&self) -> bool {
        self.spec
            .metrics
            .iter()
            .any(|m| matches!(m.type_.as_str(), "Object" | "External"))
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let spec = &self.spec;
        let mut causes = spec.scale_target_ref.validate("spec.scaleTargetRef");
        if let Some(threshold) = self.metadata.annotations.get(ACTIVATION_ANNOTATION) {
            let at = format!("metadata.annotations[{ACTIVATION_ANNOTATION}]");
            match threshold.parse::<Quantity>() {
                Ok(q) if q.milli_value() >= 0 => {}
                _ => causes.push(invalid_value(
                    &at,
                    threshold,
                    "must be a quantity of at least 0",
                )),
            }
        }
        if let Some(min) = spec.min_replicas {
            if min == 0 && !self.may_scale_to_zero() {
                causes.push(invalid_value(
                    "spec.minReplicas",
                    min,
                    "must be greater than or equal to 1 (0 only with an Object or External metric)",
                ));
            } else {
                causes.extend(at_least(min, 0, "spec.minReplicas"));
            }
        }
        if spec.max_replicas < 1 {
            causes.push(invalid_value(
                "spec.maxReplicas",
                spec.max_replicas,
                "must be greater than 0",
            ));
        } else if spec.max_replicas < self.min_replicas() {
            let detail = "must be greater than or equal to `minReplicas`";
            causes.push(invalid_value("spec.maxReplicas", spec.max_replicas, detail));
        }
        for (i, metric) in spec.metrics.iter().enumerate() {
            causes.extend(metric.validate(&format!("spec.metrics[{i}]")));
        }
        if let Some(behavior) = &spec.behavior {
            if let Some(up) = &behavior.scale_up {
                causes.extend(up.validate("spec.behavior.scaleUp"));
            }
            if let Some(down) = &behavior.scale_down {
                causes.extend(down.validate("spec.behavior.scaleDown"));
            }
        }
        causes
    }

    fn validate_update_fields(&self, _old: &Self) -> Vec<Cause> {
        Vec::new()
    }

    fn default_fields(&mut self) {
        let spec = &mut self.spec;
        spec.min_replicas.get_or_insert(1);
        if spec.metrics.is_empty() {
            spec.metrics.push(MetricSpec {
                type_: "Resource".into(),
                resource: Some(ResourceMetricSource {
                    name: "cpu".into(),
                    target: MetricTarget {
                        type_: "Utilization".into(),
                        average_utilization: Some(DEFAULT_CPU_UTILIZATION),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            });
        }
        // Only a behavior the user started is completed; none means the controller's defaults.
        if let Some(behavior) = &mut spec.behavior {
            default_rules(&mut behavior.scale_up, scale_up_default());
            default_rules(&mut behavior.scale_down, scale_down_default());
        }
    }

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}
