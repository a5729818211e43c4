//! Conversion between a kind's bus version and the older versions the gateway also serves
//! (see [`crate::resources`]): HorizontalPodAutoscaler autoscaling/v2 ↔ autoscaling/v1, as
//! Kubernetes converts them.
//!
//! autoscaling/v1 holds one CPU utilization target; everything else a v2 object says
//! (other metrics, behavior, the conditions and current metrics) travels in annotations
//! while the object is read and written as v1, so that a v1 round trip loses nothing. The
//! annotations carry v2 JSON.

use bus_schemas::{Cause, Reason, Status};
use serde_json::{json, Map, Value};

use crate::resources::RestResource;

/// Metrics other than the CPU utilization target (a JSON list of v2 MetricSpec).
pub const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// spec.behavior (v2 HorizontalPodAutoscalerBehavior JSON).
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// status.conditions (a JSON list).
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// status.currentMetrics other than the CPU utilization (a JSON list of v2 MetricStatus).
pub const CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";

/// Turns an object of the bus version into the version `r` serves (in place); anything else
/// (a Status, a bookmark) passes unchanged.
pub fn to_served(value: &mut Value, r: &RestResource) {
    if !r.is_converted() || value.get("kind").and_then(Value::as_str) != Some(r.kind()) {
        return;
    }
    if r.kind() == "HorizontalPodAutoscaler" {
        hpa_to_v1(value, r.api_version());
    }
}

/// Turns an object of the version `r` serves into the bus version; a malformed annotation
/// the conversion reads is refused with its path.
pub fn to_bus(mut value: Value, r: &RestResource) -> Result<Value, Status> {
    if r.is_converted() && r.kind() == "HorizontalPodAutoscaler" {
        hpa_to_v2(&mut value, r.info.api_version)?;
    }
    Ok(value)
}

fn is_cpu_utilization(metric: &Value) -> bool {
    metric["type"] == "Resource"
        && metric.pointer("/resource/name") == Some(&json!("cpu"))
        && metric.pointer("/resource/target/type") == Some(&json!("Utilization"))
}

fn is_cpu_current(metric: &Value) -> bool {
    metric["type"] == "Resource"
        && metric.pointer("/resource/name") == Some(&json!("cpu"))
        && metric
            .pointer("/resource/current/averageUtilization")
            .is_some()
}

fn annotations(value: &mut Value) -> Option<&mut Map<String, Value>> {
    let meta = value.get_mut("metadata")?.as_object_mut()?;
    meta.entry("annotations")
        .or_insert_with(|| json!({}))
        .as_object_mut()
}

fn hpa_to_v1(value: &mut Value, api_version: &str) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    object.insert("apiVersion".into(), api_version.into());
    let mut keep = Vec::new();
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        let metrics = match spec.remove("metrics") {
            Some(Value::Array(m)) => m,
            _ => Vec::new(),
        };
        let (cpu, others): (Vec<Value>, Vec<Value>) =
            metrics.into_iter().partition(is_cpu_utilization);
        if let Some(target) = cpu
            .first()
            .and_then(|m| m.pointer("/resource/target/averageUtilization"))
        {
            spec.insert("targetCPUUtilizationPercentage".into(), target.clone());
        }
        if !others.is_empty() {
            keep.push((METRICS_ANNOTATION, Value::Array(others)));
        }
        if let Some(behavior) = spec.remove("behavior") {
            keep.push((BEHAVIOR_ANNOTATION, behavior));
        }
    }
    if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) {
        let current = match status.remove("currentMetrics") {
            Some(Value::Array(m)) => m,
            _ => Vec::new(),
        };
        let (cpu, others): (Vec<Value>, Vec<Value>) = current.into_iter().partition(is_cpu_current);
        if let Some(utilization) = cpu
            .first()
            .and_then(|m| m.pointer("/resource/current/averageUtilization"))
        {
            status.insert(
                "currentCPUUtilizationPercentage".into(),
                utilization.clone(),
            );
        }
        if !others.is_empty() {
            keep.push((CURRENT_METRICS_ANNOTATION, Value::Array(others)));
        }
        if let Some(conditions) = status.remove("conditions") {
            if conditions.as_array().is_some_and(|c| !c.is_empty()) {
                keep.push((CONDITIONS_ANNOTATION, conditions));
            }
        }
    }
    if keep.is_empty() {
        return;
    }
    if let Some(annotations) = annotations(value) {
        for (key, kept) in keep {
            annotations.insert(key.into(), kept.to_string().into());
        }
    }
}

/// Takes a JSON annotation the v1 form carries, parsed.
fn take_annotation(value: &mut Value, key: &str) -> Result<Option<Value>, Status> {
    let Some(text) = value
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
        .and_then(|a| a.remove(key))
    else {
        return Ok(None);
    };
    let parsed = text
        .as_str()
        .ok_or_else(|| format!("must be a string, not {text}"))
        .and_then(|t| serde_json::from_str(t).map_err(|e| format!("is not valid JSON: {e}")));
    parsed.map(Some).map_err(|detail| {
        let field = format!("metadata.annotations[{key}]");
        Status::new(
            Reason::Invalid,
            format!("HorizontalPodAutoscaler {field} {detail}"),
        )
        .with_details(
            "HorizontalPodAutoscaler",
            "",
            vec![Cause::invalid(&field, detail)],
        )
    })
}

fn hpa_to_v2(value: &mut Value, api_version: &str) -> Result<(), Status> {
    let metrics = take_annotation(value, METRICS_ANNOTATION)?;
    let behavior = take_annotation(value, BEHAVIOR_ANNOTATION)?;
    let conditions = take_annotation(value, CONDITIONS_ANNOTATION)?;
    let current = take_annotation(value, CURRENT_METRICS_ANNOTATION)?;
    if let Some(annotations) = value
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        if annotations.is_empty() {
            value
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
                .map(|m| m.remove("annotations"));
        }
    }
    let Some(object) = value.as_object_mut() else {
        return Ok(());
    };
    object.insert("apiVersion".into(), api_version.into());
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        let mut list = Vec::new();
        if let Some(target) = spec.remove("targetCPUUtilizationPercentage") {
            list.push(json!({"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": target}}}));
        }
        if let Some(Value::Array(others)) = metrics {
            list.extend(others);
        }
        if !list.is_empty() {
            spec.insert("metrics".into(), Value::Array(list));
        }
        if let Some(behavior) = behavior {
            spec.insert("behavior".into(), behavior);
        }
    }
    if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) {
        let mut list = Vec::new();
        if let Some(utilization) = status.remove("currentCPUUtilizationPercentage") {
            list.push(json!({"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": utilization}}}));
        }
        if let Some(Value::Array(others)) = current {
            list.extend(others);
        }
        if !list.is_empty() {
            status.insert("currentMetrics".into(), Value::Array(list));
        }
        if let Some(conditions) = conditions {
            status.insert("conditions".into(), conditions);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources;

    fn v1() -> RestResource {
        resources::find("autoscaling", "v1", "horizontalpodautoscalers").unwrap()
    }

    fn v2_object() -> Value {
        json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "memory",
                        "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                    {"type": "Resource", "resource": {"name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 60}}},
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}},
            },
            "status": {
                "currentReplicas": 2, "desiredReplicas": 3,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 73}}}],
                "conditions": [{"type": "AbleToScale", "status": "True"}],
            },
        })
    }

    #[test]
    fn v2_to_v1_keeps_the_cpu_target_in_place_and_the_rest_in_annotations() {
        let mut object = v2_object();
        to_served(&mut object, &v1());
        assert_eq!(object["apiVersion"], "autoscaling/v1");
        assert_eq!(object["spec"]["targetCPUUtilizationPercentage"], 60);
        assert!(object["spec"].get("metrics").is_none());
        assert_eq!(object["status"]["currentCPUUtilizationPercentage"], 73);
        let annotations = &object["metadata"]["annotations"];
        assert!(annotations[METRICS_ANNOTATION]
            .as_str()
            .unwrap()
            .contains("memory"));
        assert!(annotations[BEHAVIOR_ANNOTATION].is_string());
        assert!(annotations[CONDITIONS_ANNOTATION].is_string());
    }

    #[test]
    fn a_v1_round_trip_loses_nothing() {
        let original = v2_object();
        let mut object = original.clone();
        to_served(&mut object, &v1());
        let back = to_bus(object, &v1()).unwrap();
        assert_eq!(back["apiVersion"], "autoscaling/v2");
        assert!(back["metadata"].get("annotations").is_none());
        assert_eq!(back["spec"]["behavior"], original["spec"]["behavior"]);
        assert_eq!(back["status"], original["status"]);
        // The CPU target comes back first; the other metrics keep their order.
        let metrics = back["spec"]["metrics"].as_array().unwrap();
        assert_eq!(metrics.len(), 2);
        assert_eq!(metrics[0], original["spec"]["metrics"][1]);
        assert_eq!(metrics[1], original["spec"]["metrics"][0]);
    }

    #[test]
    fn kubectl_autoscale_v1_body_becomes_a_cpu_metric() {
        let body = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                     "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}});
        let v2 = to_bus(body, &v1()).unwrap();
        assert_eq!(
            v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            60
        );
        assert!(v2["spec"].get("targetCPUUtilizationPercentage").is_none());
    }

    #[test]
    fn a_malformed_annotation_is_refused_with_its_path() {
        let body = json!({"metadata": {"name": "web",
            "annotations": {METRICS_ANNOTATION: "[not json"}}, "spec": {"maxReplicas": 1}});
        let status = to_bus(body, &v1()).unwrap_err();
        assert!(
            status.message.contains(METRICS_ANNOTATION),
            "{}",
            status.message
        );
    }

    #[test]
    fn bus_versions_pass_through() {
        let r = resources::of_kind("HorizontalPodAutoscaler").unwrap();
        let mut object = v2_object();
        to_served(&mut object, &r);
        assert_eq!(object, v2_object());
    }
}
