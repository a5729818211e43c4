//! The HorizontalPodAutoscaler row, and its metrics as kubectl words them (`describe hpa`
//! shows the same current and target values).

use bus_schemas::kinds::{HorizontalPodAutoscaler, VerticalPodAutoscaler};
use bus_schemas::Time;
use serde_json::Value;

use super::cells::age;
use super::{Cell, Column, Row};

impl Row for HorizontalPodAutoscaler {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Reference"),
        Column::normal("Targets"),
        Column::normal("MinPods"),
        Column::normal("MaxPods").integer(),
        Column::normal("Replicas").integer(),
        Column::normal("Age"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        let target = &self.spec.scale_target_ref;
        vec![
            self.metadata.name.as_str().into(),
            format!("{}/{}", target.kind, target.name).into(),
            // TARGETS pairs each metric's spec with its status entry, as kubectl prints them.
            serde_json::to_value(self)
                .map(|v| targets(&v))
                .unwrap_or_else(|_| "<unknown>".into())
                .into(),
            // Kubernetes defaults minReplicas to 1. A string column upstream.
            self.spec.min_replicas.unwrap_or(1).to_string().into(),
            self.spec.max_replicas.into(),
            self.status.current_replicas.into(),
            age(self.metadata.creation_timestamp, now).into(),
        ]
    }
}

fn text(v: &Value, pointer: &str) -> String {
    match v.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// The current and target side of one metric, kubectl's way: `73%` and `60%`, `120m` and
/// `100m`, `<unknown>`, and `(avg)` after per-replica targets of External metrics.
pub fn metric_values(spec: &Value, status: Option<&Value>) -> (String, String) {
    let type_ = text(spec, "/type");
    let source = match type_.as_str() {
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        "Pods" => "pods",
        "Object" => "object",
        "External" => "external",
        _ => return ("<unknown>".into(), "<unknown>".into()),
    };
    let target = spec
        .pointer(&format!("/{source}/target"))
        .cloned()
        .unwrap_or_default();
    let current = status
        .and_then(|s| s.pointer(&format!("/{source}/current")))
        .cloned()
        .unwrap_or_default();
    let or_unknown = |s: String| {
        if s.is_empty() {
            "<unknown>".to_string()
        } else {
            s
        }
    };
    let (cur, tgt) = match text(&target, "/type").as_str() {
        "Utilization" => {
            let cur = text(&current, "/averageUtilization");
            (
                or_unknown(if cur.is_empty() {
                    cur
                } else {
                    format!("{cur}%")
                }),
                format!("{}%", text(&target, "/averageUtilization")),
            )
        }
        "Value" => (
            or_unknown(text(&current, "/value")),
            text(&target, "/value"),
        ),
        _ => {
            let avg = if type_ == "External" || type_ == "Object" {
                " (avg)"
            } else {
                ""
            };
            (
                or_unknown(text(&current, "/averageValue")),
                format!("{}{avg}", text(&target, "/averageValue")),
            )
        }
    };
    (cur, tgt)
}

/// `cpu: 73%/60%` (resource metrics are named, others not), as the TARGETS column shows.
fn metric_pair(spec: &Value, status: Option<&Value>) -> String {
    let (cur, tgt) = metric_values(spec, status);
    let prefix = match text(spec, "/type").as_str() {
        "Resource" => format!("{}: ", text(spec, "/resource/name")),
        // kubectl names only the resource, not the container.
        "ContainerResource" => format!("{}: ", text(spec, "/containerResource/name")),
        _ => String::new(),
    };
    format!("{prefix}{cur}/{tgt}")
}

/// An HPA's metric specs and their current values, at the same positions (a status may be
/// shorter than the specs while the autoscaler has not read every metric yet).
pub fn metrics_with_status(hpa: &Value) -> (Vec<Value>, Vec<Value>) {
    let array = |pointer: &str| {
        hpa.pointer(pointer)
            .and_then(|m| m.as_array())
            .cloned()
            .unwrap_or_default()
    };
    (array("/spec/metrics"), array("/status/currentMetrics"))
}

/// The TARGETS column: every metric, the first two shown as kubectl does.
pub fn targets(hpa: &Value) -> String {
    let (specs, statuses) = metrics_with_status(hpa);
    if specs.is_empty() {
        return "<none>".into();
    }
    let shown = specs
        .iter()
        .enumerate()
        .take(2)
        .map(|(i, spec)| metric_pair(spec, statuses.get(i)))
        .collect::<Vec<_>>()
        .join(", ");
    if specs.len() > 2 {
        format!("{shown} + {} more...", specs.len() - 2)
    } else {
        shown
    }
}

/// The columns the upstream VerticalPodAutoscaler CRD prints: the first container's target,
/// and whether a recommendation is there at all.
impl Row for VerticalPodAutoscaler {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Mode"),
        Column::normal("CPU"),
        Column::normal("Mem"),
        Column::normal("Provided"),
        Column::normal("Age"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        let first = self
            .status
            .recommendation
            .as_ref()
            .and_then(|r| r.container_recommendations.first());
        let target = |resource: &str| {
            first
                .and_then(|r| r.target.get(resource))
                .map(|q| q.to_string())
                .unwrap_or_default()
        };
        let provided = bus_schemas::meta::find_condition(
            &self.status.conditions,
            bus_schemas::kinds::vpa::RECOMMENDATION_PROVIDED,
        )
        .map(|c| c.status.clone())
        .unwrap_or_default();
        vec![
            self.metadata.name.as_str().into(),
            self.spec
                .update_policy
                .as_ref()
                .and_then(|p| p.update_mode.clone())
                .unwrap_or_default()
                .into(),
            target("cpu").into(),
            target("memory").into(),
            provided.into(),
            age(self.metadata.creation_timestamp, now).into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::targets;
    use serde_json::json;

    // kubectl's formatHPAMetrics: resource metrics named by their resource only (a
    // ContainerResource too), two shown, then ` + N more...` after the comma-joined pair.
    #[test]
    fn targets_read_as_kubectl_prints_them() {
        let cpu = json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 60}}});
        let app_memory = json!({"type": "ContainerResource", "containerResource": {
            "name": "memory", "container": "app",
            "target": {"type": "AverageValue", "averageValue": "100Mi"}}});
        let queue = json!({"type": "External", "external": {"metric": {"name": "queue"},
            "target": {"type": "AverageValue", "averageValue": "30"}}});
        let hpa = json!({
            "spec": {"metrics": [cpu, app_memory, queue]},
            "status": {"currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 73}}},
                {"type": "ContainerResource", "containerResource": {"name": "memory",
                    "container": "app", "current": {"averageValue": "80Mi"}}},
            ]}
        });
        assert_eq!(
            targets(&hpa),
            "cpu: 73%/60%, memory: 80Mi/100Mi + 1 more..."
        );

        let two = json!({"spec": {"metrics": [hpa["spec"]["metrics"][0].clone(),
            hpa["spec"]["metrics"][2].clone()]}});
        assert_eq!(targets(&two), "cpu: <unknown>/60%, <unknown>/30 (avg)");
        assert_eq!(targets(&json!({"spec": {}})), "<none>");
    }
}
