//! Placement: node and pod (anti-)affinity, and the tolerations that let pods onto tainted nodes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{forbidden, in_range, invalid_value, not_supported, required_msg};
use super::node::Taint;
use crate::selector::LabelSelector;
use crate::status::Cause;
use crate::validation::{dns1123_label, label_key, label_value};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Affinity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeAffinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_affinity: Option<PodAffinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_anti_affinity: Option<PodAntiAffinity>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<NodeSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_during_scheduling_ignored_during_execution: Vec<PreferredSchedulingTerm>,
}

/// Terms joined by OR.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeSelector {
    #[serde(default)]
    pub node_selector_terms: Vec<NodeSelectorTerm>,
}

/// Requirements joined by AND.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<NodeSelectorRequirement>,
    /// Requirements on node fields; only `metadata.name` is supported, as in Kubernetes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_fields: Vec<NodeSelectorRequirement>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    #[serde(default)]
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt` or `Lt`.
    #[serde(default)]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PreferredSchedulingTerm {
    /// 1-100.
    #[serde(default)]
    pub weight: i32,
    #[serde(default)]
    pub preference: NodeSelectorTerm,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodAffinity {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_during_scheduling_ignored_during_execution: Vec<PodAffinityTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_during_scheduling_ignored_during_execution: Vec<WeightedPodAffinityTerm>,
}

/// Same shape as [`PodAffinity`]; the scheduler reads it as "keep away from".
pub type PodAntiAffinity = PodAffinity;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodAffinityTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Empty means the pod's own namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub topology_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WeightedPodAffinityTerm {
    /// 1-100.
    #[serde(default)]
    pub weight: i32,
    #[serde(default)]
    pub pod_affinity_term: PodAffinityTerm,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// Empty with operator `Exists` tolerates every taint.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// `Equal` (the default when empty) or `Exists`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operator: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Empty matches every effect.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub effect: String,
    /// How long a NoExecute taint is tolerated before eviction; None is forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

const NODE_SELECTOR_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
pub const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

impl NodeSelectorRequirement {
    /// Whether a node with `labels` satisfies this expression.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator.as_str() {
            "In" => value.is_some_and(|v| self.values.contains(v)),
            "NotIn" => value.is_none_or(|v| !self.values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            "Gt" | "Lt" => {
                let parsed = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                );
                match parsed {
                    (Some(have), Some(bound)) if self.operator == "Gt" => have > bound,
                    (Some(have), Some(bound)) => have < bound,
                    _ => false,
                }
            }
            _ => false,
        }
    }

    fn validate(&self, path: &str, is_field: bool) -> Vec<Cause> {
        let mut causes = Vec::new();
        let key_at = format!("{path}.key");
        if is_field {
            if self.key != "metadata.name" {
                causes.push(Cause::not_supported(&key_at, &self.key, &["metadata.name"]));
            }
            causes.extend(not_supported(
                &format!("{path}.operator"),
                &self.operator,
                &["In", "NotIn"],
            ));
            if self.values.len() != 1 {
                let detail = "must be only one value when `operator` is 'In' or 'NotIn' for node field selector";
                causes.push(required_msg(&format!("{path}.values"), detail));
            }
            return causes;
        }
        if let Err(e) = label_key(&self.key) {
            causes.push(invalid_value(&key_at, &self.key, &e));
        }
        let values_at = format!("{path}.values");
        match self.operator.as_str() {
            "In" | "NotIn" if self.values.is_empty() => causes.push(required_msg(
                &values_at,
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !self.values.is_empty() => causes.push(forbidden(
                &values_at,
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "Gt" | "Lt" => {
                let one_int = self.values.len() == 1 && self.values[0].parse::<i64>().is_ok();
                if !one_int {
                    let detail = "must be specified single value when `operator` is 'Lt' or 'Gt'";
                    causes.push(required_msg(&values_at, detail));
                }
            }
            op => causes.extend(not_supported(
                &format!("{path}.operator"),
                op,
                NODE_SELECTOR_OPERATORS,
            )),
        }
        causes
    }
}

impl NodeSelectorTerm {
    /// All requirements hold. An empty term matches nothing, as in Kubernetes.
    pub fn matches(&self, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        let fields = BTreeMap::from([("metadata.name".to_string(), node_name.to_string())]);
        self.match_expressions.iter().all(|r| r.matches(labels))
            && self.match_fields.iter().all(|r| r.matches(&fields))
    }

    fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        for (i, req) in self.match_expressions.iter().enumerate() {
            causes.extend(req.validate(&format!("{path}.matchExpressions[{i}]"), false));
        }
        for (i, req) in self.match_fields.iter().enumerate() {
            causes.extend(req.validate(&format!("{path}.matchFields[{i}]"), true));
        }
        causes
    }
}

impl NodeSelector {
    /// Any term matches.
    pub fn matches(&self, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
        self.node_selector_terms
            .iter()
            .any(|t| t.matches(labels, node_name))
    }

    pub(crate) fn validate(&self, path: &str) -> Vec<Cause> {
        let at = format!("{path}.nodeSelectorTerms");
        if self.node_selector_terms.is_empty() {
            return vec![required_msg(
                &at,
                "must have at least one node selector term",
            )];
        }
        let terms = self.node_selector_terms.iter().enumerate();
        terms
            .flat_map(|(i, t)| t.validate(&format!("{at}[{i}]")))
            .collect()
    }
}

impl PodAffinityTerm {
    fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let Some(selector) = &self.label_selector {
            causes.extend(selector.validate(&format!("{path}.labelSelector")));
        }
        if let Some(selector) = &self.namespace_selector {
            causes.extend(selector.validate(&format!("{path}.namespaceSelector")));
        }
        for (i, ns) in self.namespaces.iter().enumerate() {
            if let Err(e) = dns1123_label(ns) {
                causes.push(invalid_value(&format!("{path}.namespaces[{i}]"), ns, &e));
            }
        }
        let at = format!("{path}.topologyKey");
        if self.topology_key.is_empty() {
            causes.push(required_msg(&at, "can not be empty"));
        } else if let Err(e) = label_key(&self.topology_key) {
            causes.push(invalid_value(&at, &self.topology_key, &e));
        }
        causes
    }
}

impl PodAffinity {
    fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        let required = &self.required_during_scheduling_ignored_during_execution;
        for (i, term) in required.iter().enumerate() {
            let at = format!("{path}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
            causes.extend(term.validate(&at));
        }
        let preferred = &self.preferred_during_scheduling_ignored_during_execution;
        for (i, term) in preferred.iter().enumerate() {
            let at = format!("{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            causes.extend(in_range(term.weight, 1, 100, &format!("{at}.weight")));
            causes.extend(
                term.pod_affinity_term
                    .validate(&format!("{at}.podAffinityTerm")),
            );
        }
        causes
    }
}

impl Affinity {
    pub fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let Some(node) = &self.node_affinity {
            let at = format!("{path}.nodeAffinity");
            if let Some(required) = &node.required_during_scheduling_ignored_during_execution {
                let at = format!("{at}.requiredDuringSchedulingIgnoredDuringExecution");
                causes.extend(required.validate(&at));
            }
            let preferred = &node.preferred_during_scheduling_ignored_during_execution;
            for (i, term) in preferred.iter().enumerate() {
                let at = format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
                causes.extend(in_range(term.weight, 1, 100, &format!("{at}.weight")));
                causes.extend(term.preference.validate(&format!("{at}.preference")));
            }
        }
        if let Some(pod) = &self.pod_affinity {
            causes.extend(pod.validate(&format!("{path}.podAffinity")));
        }
        if let Some(anti) = &self.pod_anti_affinity {
            causes.extend(anti.validate(&format!("{path}.podAntiAffinity")));
        }
        causes
    }
}

impl Toleration {
    /// Kubernetes' ToleratesTaint: effect and key match, and the value too unless `Exists`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if !self.effect.is_empty() && self.effect != taint.effect {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator.as_str() {
            "Exists" => true,
            "" | "Equal" => self.value == taint.value,
            _ => false,
        }
    }

    pub fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        if !self.key.is_empty() {
            if let Err(e) = label_key(&self.key) {
                causes.push(invalid_value(&format!("{path}.key"), &self.key, &e));
            }
        }
        match self.operator.as_str() {
            "Exists" => {
                if !self.value.is_empty() {
                    let detail = "value must be empty when `operator` is 'Exists'";
                    causes.push(invalid_value(
                        &format!("{path}.operator"),
                        &self.value,
                        detail,
                    ));
                }
            }
            "" | "Equal" => {
                if self.key.is_empty() {
                    let detail = "operator must be Exists when `key` is empty, which means \"match all values and all keys\"";
                    causes.push(invalid_value(
                        &format!("{path}.operator"),
                        &self.operator,
                        detail,
                    ));
                }
                if let Err(e) = label_value(&self.value) {
                    causes.push(invalid_value(&format!("{path}.value"), &self.value, &e));
                }
            }
            op => causes.push(Cause::not_supported(
                format!("{path}.operator"),
                op,
                &["Equal", "Exists"],
            )),
        }
        if !self.effect.is_empty() {
            causes.extend(not_supported(
                &format!("{path}.effect"),
                &self.effect,
                TAINT_EFFECTS,
            ));
        }
        if self.toleration_seconds.is_some() && self.effect != "NoExecute" {
            let detail = "effect must be 'NoExecute' when `tolerationSeconds` is set";
            causes.push(invalid_value(
                &format!("{path}.effect"),
                &self.effect,
                detail,
            ));
        }
        causes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn node_selector_terms_match() {
        let labels = BTreeMap::from([
            ("zone".to_string(), "a".to_string()),
            ("cores".to_string(), "8".to_string()),
        ]);
        assert!(req("zone", "In", &["a", "b"]).matches(&labels));
        assert!(req("zone", "NotIn", &["b"]).matches(&labels));
        assert!(req("gpu", "DoesNotExist", &[]).matches(&labels));
        assert!(req("cores", "Gt", &["4"]).matches(&labels));
        assert!(!req("cores", "Lt", &["4"]).matches(&labels));
        let term = NodeSelectorTerm {
            match_expressions: vec![req("zone", "In", &["a"])],
            match_fields: vec![req("metadata.name", "In", &["n1"])],
        };
        assert!(term.matches(&labels, "n1"));
        assert!(!term.matches(&labels, "n2"));
        assert!(!NodeSelectorTerm::default().matches(&labels, "n1"));
    }

    #[test]
    fn requirement_validation() {
        assert!(req("zone", "In", &["a"]).validate("r", false).is_empty());
        assert_eq!(
            req("zone", "In", &[]).validate("r", false)[0].field,
            "r.values"
        );
        assert_eq!(
            req("zone", "Exists", &["a"]).validate("r", false)[0].field,
            "r.values"
        );
        assert_eq!(
            req("zone", "Gt", &["x"]).validate("r", false)[0].field,
            "r.values"
        );
        assert_eq!(
            req("zone", "Near", &[]).validate("r", false)[0].field,
            "r.operator"
        );
        assert_eq!(
            req("spec.x", "In", &["a"]).validate("r", true)[0].field,
            "r.key"
        );
    }

    #[test]
    fn tolerations() {
        let taint = Taint {
            key: "dedicated".into(),
            value: "db".into(),
            effect: "NoSchedule".into(),
            time_added: None,
        };
        let equal = Toleration {
            key: "dedicated".into(),
            value: "db".into(),
            ..Default::default()
        };
        assert!(equal.tolerates(&taint));
        let exists_all = Toleration {
            operator: "Exists".into(),
            ..Default::default()
        };
        assert!(exists_all.tolerates(&taint));
        let wrong_effect = Toleration {
            effect: "NoExecute".into(),
            ..exists_all.clone()
        };
        assert!(!wrong_effect.tolerates(&taint));

        let bad = Toleration {
            operator: "Exists".into(),
            value: "x".into(),
            toleration_seconds: Some(5),
            ..Default::default()
        };
        let fields: Vec<String> = bad.validate("t").into_iter().map(|c| c.field).collect();
        assert_eq!(fields, ["t.operator", "t.effect"]);
        let no_key = Toleration {
            value: "x".into(),
            ..Default::default()
        };
        assert_eq!(no_key.validate("t")[0].field, "t.operator");
    }
}
