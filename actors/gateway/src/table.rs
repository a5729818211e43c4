//! Server-side printing: `meta.k8s.io/v1` Tables with the columns a Kubernetes 1.32 cluster
//! prints per kind (priority 1 columns are the `-o wide` ones). kubectl 1.32 has no column
//! printers of its own for these kinds, so without this it shows only NAME and AGE.
//!
//! NOTE: `ops/cli/src/table.rs` prints the same columns for `shoal get`; the two should move
//! into one shared module once the CLI's per-kind rows settle.

mod storage;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

struct Column {
    name: &'static str,
    kind: &'static str,
    priority: u8,
}

const fn col(name: &'static str, kind: &'static str, priority: u8) -> Column {
    Column {
        name,
        kind,
        priority,
    }
}

fn columns(kind: &str) -> Vec<Column> {
    if let Some(columns) = storage::columns(kind) {
        return columns;
    }
    let name = col("Name", "string", 0);
    let age = col("Age", "string", 0);
    let workload_wide = [
        col("Containers", "string", 1),
        col("Images", "string", 1),
        col("Selector", "string", 1),
    ];
    match kind {
        "Pod" => vec![
            name,
            col("Ready", "string", 0),
            col("Status", "string", 0),
            col("Restarts", "string", 0),
            age,
            col("IP", "string", 1),
            col("Node", "string", 1),
            col("Nominated Node", "string", 1),
            col("Readiness Gates", "string", 1),
        ],
        "Node" => vec![
            name,
            col("Status", "string", 0),
            col("Roles", "string", 0),
            age,
            col("Version", "string", 0),
            col("Internal-IP", "string", 1),
            col("External-IP", "string", 1),
            col("OS-Image", "string", 1),
            col("Kernel-Version", "string", 1),
            col("Container-Runtime", "string", 1),
        ],
        "Namespace" => vec![name, col("Status", "string", 0), age],
        "ReplicaSet" => {
            let mut c = vec![
                name,
                col("Desired", "integer", 0),
                col("Current", "integer", 0),
                col("Ready", "integer", 0),
                age,
            ];
            c.extend(workload_wide);
            c
        }
        "Deployment" => {
            let mut c = vec![
                name,
                col("Ready", "string", 0),
                col("Up-to-date", "integer", 0),
                col("Available", "integer", 0),
                age,
            ];
            c.extend(workload_wide);
            c
        }
        "DaemonSet" => {
            let mut c = vec![
                name,
                col("Desired", "integer", 0),
                col("Current", "integer", 0),
                col("Ready", "integer", 0),
                col("Up-to-date", "integer", 0),
                col("Available", "integer", 0),
                col("Node Selector", "string", 0),
                age,
            ];
            c.extend(workload_wide);
            c
        }
        "Job" => {
            let mut c = vec![
                name,
                col("Status", "string", 0),
                col("Completions", "string", 0),
                col("Duration", "string", 0),
                age,
            ];
            c.extend(workload_wide);
            c
        }
        "CronJob" => cronjob_columns(name, age),
        "StatefulSet" => vec![
            name,
            col("Ready", "string", 0),
            age,
            col("Containers", "string", 1),
            col("Images", "string", 1),
        ],
        "ControllerRevision" => vec![
            name,
            col("Controller", "string", 0),
            col("Revision", "integer", 0),
            age,
        ],
        "Service" => vec![
            name,
            col("Type", "string", 0),
            col("Cluster-IP", "string", 0),
            col("External-IP", "string", 0),
            col("Port(s)", "string", 0),
            age,
            col("Selector", "string", 1),
        ],
        "Endpoints" => vec![name, col("Endpoints", "string", 0), age],
        "Event" => vec![
            col("Last Seen", "string", 0),
            col("Type", "string", 0),
            col("Reason", "string", 0),
            col("Object", "string", 0),
            col("Message", "string", 0),
            col("Subobject", "string", 1),
            col("Source", "string", 1),
            col("First Seen", "string", 1),
            col("Count", "string", 1),
            col("Name", "string", 1),
        ],
        "HorizontalPodAutoscaler" => vec![
            name,
            col("Reference", "string", 0),
            col("Targets", "string", 0),
            col("MinPods", "string", 0),
            col("MaxPods", "integer", 0),
            col("Replicas", "integer", 0),
            age,
        ],
        "Lease" => vec![name, col("Holder", "string", 0), age],
        "PriorityClass" => vec![
            name,
            col("Value", "integer", 0),
            col("Global-Default", "boolean", 0),
            age,
            col("Preemption-Policy", "string", 1),
        ],
        "ConfigMap" => vec![name, col("Data", "integer", 0), age],
        "Secret" => vec![
            name,
            col("Type", "string", 0),
            col("Data", "integer", 0),
            age,
        ],
        _ => vec![name, age],
    }
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn n(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// How many keys the map at `pointer` holds (kubectl's DATA column).
fn entries(v: &Value, pointer: &str) -> usize {
    v.pointer(pointer)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
}

fn or_none(text: &str) -> Value {
    Value::String(if text.is_empty() {
        "<none>".into()
    } else {
        text.to_string()
    })
}

/// kubectl's short durations: 45s, 5m12s, 17m, 3h20m, 5h, 2d3h, 12d.
pub fn human_duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{m}m{}s", s % 60),
        s if s < 3 * 3600 => format!("{m}m"),
        s if s < 8 * 3600 => format!("{h}h{}m", m % 60),
        s if s < 2 * 86400 => format!("{h}h"),
        s if s < 8 * 86400 => format!("{d}d{}h", h % 24),
        _ => format!("{d}d"),
    }
}

fn age_since(since: &str, now: DateTime<Utc>) -> Value {
    match DateTime::parse_from_rfc3339(since) {
        Ok(t) => Value::String(human_duration((now - t.with_timezone(&Utc)).num_seconds())),
        Err(_) => Value::String("<unknown>".into()),
    }
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| s(c, "/type") == type_)
}

fn map_text(map: Option<&Value>) -> String {
    map.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// A label selector (`matchLabels` + `matchExpressions`) in kubectl's text form.
pub fn selector_text(sel: Option<&Value>) -> String {
    let Some(sel) = sel else {
        return String::new();
    };
    let mut parts = Vec::new();
    let labels = map_text(sel.get("matchLabels"));
    if !labels.is_empty() {
        parts.push(labels);
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let key = s(e, "/key");
        parts.push(match s(e, "/operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            op => format!("{key} {op} ({})", values.join(",")),
        });
    }
    parts.join(",")
}

fn containers_and_images(template_spec: Option<&Value>) -> [Value; 2] {
    let containers = template_spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    let pick = |field: &str| {
        containers
            .into_iter()
            .flatten()
            .map(|c| s(c, &format!("/{field}")))
            .collect::<Vec<_>>()
            .join(",")
    };
    [Value::String(pick("name")), Value::String(pick("image"))]
}

fn workload_wide(o: &Value) -> [Value; 3] {
    let [c, i] = containers_and_images(o.pointer("/spec/template/spec"));
    [c, i, or_none(&selector_text(o.pointer("/spec/selector")))]
}

pub fn pod_status(pod: &Value) -> String {
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    let init_total = pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if let Some(inits) = pod
        .pointer("/status/initContainerStatuses")
        .and_then(Value::as_array)
    {
        let done = inits
            .iter()
            .filter(|c| {
                c.pointer("/state/terminated").is_some() && n(c, "/state/terminated/exitCode") == 0
            })
            .count();
        if done < init_total {
            for c in inits {
                let reason = s(c, "/state/waiting/reason");
                if !reason.is_empty() && reason != "PodInitializing" {
                    return format!("Init:{reason}");
                }
            }
            return format!("Init:{done}/{init_total}");
        }
    }
    for c in pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let waiting = s(c, "/state/waiting/reason");
        if !waiting.is_empty() {
            return waiting.to_string();
        }
        let terminated = s(c, "/state/terminated/reason");
        if !terminated.is_empty() && s(pod, "/status/phase") == "Running" {
            return terminated.to_string();
        }
    }
    let reason = s(pod, "/status/reason");
    if !reason.is_empty() {
        return reason.to_string();
    }
    match s(pod, "/status/phase") {
        "" => "Pending".into(),
        phase => phase.to_string(),
    }
}

fn pod_cells(p: &Value, age: Value) -> Vec<Value> {
    let statuses = p
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array);
    let total = p
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = statuses.map_or(0, |a| {
        a.iter()
            .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
            .count()
    });
    let restarts: i64 = statuses.map_or(0, |a| a.iter().map(|c| n(c, "/restartCount")).sum());
    vec![
        json!(s(p, "/metadata/name")),
        json!(format!("{ready}/{total}")),
        json!(pod_status(p)),
        json!(restarts.to_string()),
        age,
        or_none(s(p, "/status/podIP")),
        or_none(s(p, "/spec/nodeName")),
        or_none(s(p, "/status/nominatedNodeName")),
        json!("<none>"),
    ]
}

fn node_cells(o: &Value, age: Value) -> Vec<Value> {
    let ready = match condition(o, "Ready").map(|c| s(c, "/status")) {
        Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    };
    let status = if o.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        format!("{ready},SchedulingDisabled")
    } else {
        ready.to_string()
    };
    let address = |t: &str| {
        o.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| s(x, "/type") == t))
            .map(|x| s(x, "/address").to_string())
            .unwrap_or_default()
    };
    vec![
        json!(s(o, "/metadata/name")),
        json!(status),
        json!("<none>"),
        age,
        json!(s(o, "/status/nodeInfo/kubeletVersion")),
        or_none(&address("InternalIP")),
        or_none(&address("ExternalIP")),
        or_none(s(o, "/status/nodeInfo/osImage")),
        or_none(s(o, "/status/nodeInfo/kernelVersion")),
        or_none(s(o, "/status/nodeInfo/containerRuntimeVersion")),
    ]
}

fn service_ports(svc: &Value) -> String {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            match n(p, "/nodePort") {
                0 => format!("{}/{proto}", n(p, "/port")),
                node_port => format!("{}:{node_port}/{proto}", n(p, "/port")),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn endpoints_text(ep: &Value) -> String {
    let mut parts = Vec::new();
    for subset in ep
        .pointer("/subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ports: Vec<i64> = subset
            .get("ports")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|p| n(p, "/port")).collect())
            .unwrap_or_default();
        for addr in subset
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let ip = s(addr, "/ip");
            if ports.is_empty() {
                parts.push(ip.to_string());
            }
            parts.extend(ports.iter().map(|port| format!("{ip}:{port}")));
        }
    }
    let more = parts.len().saturating_sub(3);
    let mut text = parts.into_iter().take(3).collect::<Vec<_>>().join(",");
    if more > 0 {
        text.push_str(&format!(" + {more} more..."));
    }
    text
}

fn job_cells(o: &Value, age: Value, now: DateTime<Utc>) -> Vec<Value> {
    let is_true = |t| condition(o, t).is_some_and(|c| s(c, "/status") == "True");
    let status = if is_true("Complete") {
        "Complete"
    } else if is_true("Failed") {
        "Failed"
    } else if is_true("Suspended") {
        "Suspended"
    } else {
        "Running"
    };
    let completions = o
        .pointer("/spec/completions")
        .and_then(Value::as_i64)
        .map_or_else(|| "1".to_string(), |c| c.to_string());
    let parse = |p| {
        o.pointer(p)
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    let duration = match (parse("/status/startTime"), parse("/status/completionTime")) {
        (Some(start), Some(end)) => human_duration((end - start).num_seconds()),
        (Some(start), None) => human_duration((now - start).num_seconds()),
        _ => String::new(),
    };
    let mut cells = vec![
        json!(s(o, "/metadata/name")),
        json!(status),
        json!(format!("{}/{completions}", n(o, "/status/succeeded"))),
        json!(duration),
        age,
    ];
    let [c, i] = containers_and_images(o.pointer("/spec/template/spec"));
    cells.extend([c, i, or_none(&selector_text(o.pointer("/spec/selector")))]);
    cells
}

fn cronjob_columns(name: Column, age: Column) -> Vec<Column> {
    vec![
        name,
        col("Schedule", "string", 0),
        col("Timezone", "string", 0),
        col("Suspend", "boolean", 0),
        col("Active", "integer", 0),
        col("Last Schedule", "string", 0),
        age,
        col("Containers", "string", 1),
        col("Images", "string", 1),
        col("Selector", "string", 1),
    ]
}

fn cronjob_cells(o: &Value, age: Value, now: DateTime<Utc>) -> Vec<Value> {
    let active = o
        .pointer("/status/active")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let last = match s(o, "/status/lastScheduleTime") {
        "" => json!("<none>"),
        t => age_since(t, now),
    };
    let suspend = o
        .pointer("/spec/suspend")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut cells = vec![
        json!(s(o, "/metadata/name")),
        json!(s(o, "/spec/schedule")),
        or_none(s(o, "/spec/timeZone")),
        json!(suspend),
        json!(active),
        last,
        age,
    ];
    let [c, i] = containers_and_images(o.pointer("/spec/jobTemplate/spec/template/spec"));
    cells.extend([
        c,
        i,
        or_none(&selector_text(o.pointer("/spec/jobTemplate/spec/selector"))),
    ]);
    cells
}

fn hpa_targets(o: &Value) -> String {
    let current = o
        .pointer("/status/currentMetrics")
        .and_then(Value::as_array);
    let targets: Vec<String> = o
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, m)| {
            let target = m.pointer("/resource/target/averageUtilization")?.as_i64()?;
            let now = current
                .and_then(|c| c.get(i))
                .and_then(|c| c.pointer("/resource/current/averageUtilization"))
                .and_then(Value::as_i64)
                .map_or_else(|| "<unknown>".to_string(), |v| format!("{v}%"));
            Some(format!("{}: {now}/{target}%", s(m, "/resource/name")))
        })
        .collect();
    if targets.is_empty() {
        "<none>".into()
    } else {
        targets.join(", ")
    }
}

fn cells(kind: &str, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    if let Some(cells) = storage::cells(kind, o, now) {
        return cells;
    }
    let name = json!(s(o, "/metadata/name"));
    let age = age_since(s(o, "/metadata/creationTimestamp"), now);
    match kind {
        "Pod" => pod_cells(o, age),
        "Node" => node_cells(o, age),
        "Namespace" => vec![name, or_none(s(o, "/status/phase")), age],
        "ReplicaSet" => {
            let mut c = vec![
                name,
                json!(n(o, "/spec/replicas")),
                json!(n(o, "/status/replicas")),
                json!(n(o, "/status/readyReplicas")),
                age,
            ];
            c.extend(workload_wide(o));
            c
        }
        "Deployment" => {
            let mut c = vec![
                name,
                json!(format!(
                    "{}/{}",
                    n(o, "/status/readyReplicas"),
                    n(o, "/spec/replicas")
                )),
                json!(n(o, "/status/updatedReplicas")),
                json!(n(o, "/status/availableReplicas")),
                age,
            ];
            c.extend(workload_wide(o));
            c
        }
        "DaemonSet" => {
            let mut c = vec![
                name,
                json!(n(o, "/status/desiredNumberScheduled")),
                json!(n(o, "/status/currentNumberScheduled")),
                json!(n(o, "/status/numberReady")),
                json!(n(o, "/status/updatedNumberScheduled")),
                json!(n(o, "/status/numberAvailable")),
                or_none(&map_text(o.pointer("/spec/template/spec/nodeSelector"))),
                age,
            ];
            c.extend(workload_wide(o));
            c
        }
        "Job" => job_cells(o, age, now),
        "CronJob" => cronjob_cells(o, age, now),
        "StatefulSet" => {
            let replicas = o
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let ready = n(o, "/status/readyReplicas");
            let mut c = vec![name, json!(format!("{ready}/{replicas}")), age];
            c.extend(containers_and_images(o.pointer("/spec/template/spec")));
            c
        }
        "ControllerRevision" => {
            let owner = o
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|refs| {
                    refs.iter()
                        .find(|r| r.get("controller") == Some(&json!(true)))
                });
            let controller = owner.map_or_else(
                || "<none>".to_string(),
                |r| {
                    let kind = s(r, "/kind").to_lowercase();
                    match s(r, "/apiVersion").split_once('/') {
                        Some((group, _)) => format!("{kind}.{group}/{}", s(r, "/name")),
                        None => format!("{kind}/{}", s(r, "/name")),
                    }
                },
            );
            vec![name, json!(controller), json!(n(o, "/revision")), age]
        }
        "Service" => {
            let svc_type = match s(o, "/spec/type") {
                "" => "ClusterIP",
                t => t,
            };
            vec![
                name,
                json!(svc_type),
                or_none(s(o, "/spec/clusterIP")),
                json!("<none>"),
                or_none(&service_ports(o)),
                age,
                or_none(&map_text(o.pointer("/spec/selector"))),
            ]
        }
        "Endpoints" => vec![name, or_none(&endpoints_text(o)), age],
        "Event" => {
            let first = [s(o, "/firstTimestamp"), s(o, "/metadata/creationTimestamp")]
                .into_iter()
                .find(|t| !t.is_empty())
                .unwrap_or("");
            let last = [s(o, "/lastTimestamp"), s(o, "/eventTime"), first]
                .into_iter()
                .find(|t| !t.is_empty())
                .unwrap_or("");
            let object = format!(
                "{}/{}",
                s(o, "/involvedObject/kind").to_lowercase(),
                s(o, "/involvedObject/name")
            );
            vec![
                age_since(last, now),
                json!(s(o, "/type")),
                json!(s(o, "/reason")),
                json!(object),
                json!(s(o, "/message")),
                json!(s(o, "/involvedObject/fieldPath")),
                json!(s(o, "/source/component")),
                age_since(first, now),
                json!(n(o, "/count").max(1).to_string()),
                name,
            ]
        }
        "HorizontalPodAutoscaler" => vec![
            name,
            json!(format!(
                "{}/{}",
                s(o, "/spec/scaleTargetRef/kind"),
                s(o, "/spec/scaleTargetRef/name")
            )),
            json!(hpa_targets(o)),
            json!(o
                .pointer("/spec/minReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .to_string()),
            json!(n(o, "/spec/maxReplicas")),
            json!(n(o, "/status/currentReplicas")),
            age,
        ],
        "Lease" => vec![name, or_none(s(o, "/spec/holderIdentity")), age],
        "PriorityClass" => vec![
            name,
            json!(n(o, "/value")),
            json!(o
                .get("globalDefault")
                .and_then(Value::as_bool)
                .unwrap_or(false)),
            age,
            or_none(s(o, "/preemptionPolicy")),
        ],
        "ConfigMap" => vec![
            name,
            json!(entries(o, "/data") + entries(o, "/binaryData")),
            age,
        ],
        "Secret" => vec![name, json!(s(o, "/type")), json!(entries(o, "/data")), age],
        _ => vec![name, age],
    }
}

/// The `PartialObjectMetadata` kubectl reads namespaces and labels from (`-A`,
/// `--show-labels`).
fn partial_metadata(o: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": o.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A Table of `objects` of one kind. `with_columns` is false for watch events after the
/// first, as upstream sends them.
pub fn table(
    kind: &str,
    objects: &[Value],
    resource_version: &str,
    continue_token: &str,
    with_columns: bool,
) -> Value {
    let now = Utc::now();
    let columns: Vec<Value> = if with_columns {
        columns(kind)
            .iter()
            .map(|c| {
                json!({"name": c.name, "type": c.kind, "format": if c.name == "Name" { "name" } else { "" },
                       "description": "", "priority": c.priority})
            })
            .collect()
    } else {
        Vec::new()
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| json!({"cells": cells(kind, o, now), "object": partial_metadata(o)}))
        .collect();
    let mut metadata = json!({"resourceVersion": resource_version});
    if !continue_token.is_empty() {
        metadata["continue"] = json!(continue_token);
    }
    let mut table = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "rows": rows,
    });
    if with_columns {
        table["columnDefinitions"] = Value::Array(columns);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_has_one_cell_per_column() {
        let obj = json!({"metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        for info in bus_schemas::kinds::KINDS {
            let t = table(info.kind, std::slice::from_ref(&obj), "7", "", true);
            let columns = t["columnDefinitions"].as_array().unwrap().len();
            let cells = t["rows"][0]["cells"].as_array().unwrap().len();
            assert_eq!(columns, cells, "{}", info.kind);
        }
    }

    #[test]
    fn pod_rows_read_like_kubectl() {
        let pod = json!({
            "metadata": {"name": "web-1", "namespace": "d", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        });
        let t = table("Pod", &[pod], "9", "", true);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "web-1");
        assert_eq!(cells[1], "1/2");
        assert_eq!(cells[2], "CrashLoopBackOff");
        assert_eq!(cells[3], "3");
        assert_eq!(cells[6], "n1");
        assert_eq!(t["rows"][0]["object"]["metadata"]["namespace"], "d");
        assert_eq!(t["metadata"]["resourceVersion"], "9");
    }

    #[test]
    fn selectors_print_in_kubectl_syntax() {
        let sel = json!({"matchLabels": {"app": "web"},
                         "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]});
        assert_eq!(selector_text(Some(&sel)), "app=web,tier in (a,b)");
    }
}
