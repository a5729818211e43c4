//! Table columns per kind, as kubectl prints them, computed from the JSON form of objects.

use chrono::{DateTime, Utc};
use serde_json::Value;

pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn print(&self, with_headers: bool) {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.len()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::new();
            for (i, cell) in cells.iter().enumerate() {
                if i + 1 == cells.len() {
                    out.push_str(cell);
                } else {
                    out.push_str(&format!("{:<w$}   ", cell, w = widths[i]));
                }
            }
            println!("{}", out.trim_end());
        };
        if with_headers {
            line(&self.headers);
        }
        for row in &self.rows {
            line(row);
        }
    }
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(|x| x.as_str()).unwrap_or("")
}

fn n(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(|x| x.as_i64()).unwrap_or(0)
}

fn or_none(text: &str) -> String {
    if text.is_empty() {
        "<none>".into()
    } else {
        text.to_string()
    }
}

/// kubectl's short ages: 45s, 5m12s, 17m, 3h20m, 5h, 2d3h, 12d.
pub fn age(since: &str, now: DateTime<Utc>) -> String {
    let Ok(t) = DateTime::parse_from_rfc3339(since) else {
        return "<unknown>".into();
    };
    let secs = (now - t.with_timezone(&Utc)).num_seconds().max(0);
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

fn labels(obj: &Value) -> String {
    let Some(map) = obj.pointer("/metadata/labels").and_then(|l| l.as_object()) else {
        return "<none>".into();
    };
    let parts: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    or_none(&parts.join(","))
}

fn selector_text(sel: Option<&Value>) -> String {
    let Some(sel) = sel else {
        return "<none>".into();
    };
    let mut parts = Vec::new();
    if let Some(map) = sel.get("matchLabels").and_then(|m| m.as_object()) {
        parts.extend(
            map.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))),
        );
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(|m| m.as_array()) {
        for e in exprs {
            let values: Vec<&str> = e
                .get("values")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            parts.push(format!(
                "{} {} ({})",
                s(e, "/key"),
                s(e, "/operator"),
                values.join(",")
            ));
        }
    }
    if parts.is_empty() {
        // A selector given as a plain map (Services).
        if let Some(map) = sel.as_object() {
            parts.extend(
                map.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))),
            );
        }
    }
    or_none(&parts.join(","))
}

pub fn pod_status(pod: &Value) -> String {
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    let inits = pod
        .pointer("/status/initContainerStatuses")
        .and_then(|c| c.as_array());
    let init_total = pod
        .pointer("/spec/initContainers")
        .and_then(|c| c.as_array())
        .map_or(0, |a| a.len());
    if let Some(inits) = inits {
        let done = inits
            .iter()
            .filter(|c| {
                n(c, "/state/terminated/exitCode") == 0 && c.pointer("/state/terminated").is_some()
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
    if let Some(statuses) = pod
        .pointer("/status/containerStatuses")
        .and_then(|c| c.as_array())
    {
        for c in statuses {
            let waiting = s(c, "/state/waiting/reason");
            if !waiting.is_empty() && waiting != "ContainerCreating" {
                return waiting.to_string();
            }
            let terminated = s(c, "/state/terminated/reason");
            if !terminated.is_empty() && s(pod, "/status/phase") == "Running" {
                return terminated.to_string();
            }
        }
        if statuses
            .iter()
            .any(|c| s(c, "/state/waiting/reason") == "ContainerCreating")
        {
            return "ContainerCreating".into();
        }
    }
    let reason = s(pod, "/status/reason");
    if !reason.is_empty() {
        return reason.to_string();
    }
    let phase = s(pod, "/status/phase");
    if phase.is_empty() {
        "Pending".into()
    } else {
        phase.to_string()
    }
}

fn pod_ready(pod: &Value) -> String {
    let total = pod
        .pointer("/spec/containers")
        .and_then(|c| c.as_array())
        .map_or(0, |a| a.len());
    let ready = pod
        .pointer("/status/containerStatuses")
        .and_then(|c| c.as_array())
        .map_or(0, |a| {
            a.iter()
                .filter(|c| c.get("ready").and_then(|r| r.as_bool()) == Some(true))
                .count()
        });
    format!("{ready}/{total}")
}

fn pod_restarts(pod: &Value) -> String {
    let total: i64 = pod
        .pointer("/status/containerStatuses")
        .and_then(|c| c.as_array())
        .map_or(0, |a| a.iter().map(|c| n(c, "/restartCount")).sum());
    total.to_string()
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| s(c, "/type") == type_)
}

fn node_status(node: &Value) -> String {
    let ready = match condition(node, "Ready").map(|c| s(c, "/status")) {
        Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    };
    if node
        .pointer("/spec/unschedulable")
        .and_then(|u| u.as_bool())
        == Some(true)
    {
        format!("{ready},SchedulingDisabled")
    } else {
        ready.to_string()
    }
}

fn service_ports(svc: &Value) -> String {
    let Some(ports) = svc.pointer("/spec/ports").and_then(|p| p.as_array()) else {
        return "<none>".into();
    };
    let parts: Vec<String> = ports
        .iter()
        .map(|p| {
            let proto = p.get("protocol").and_then(|x| x.as_str()).unwrap_or("TCP");
            format!("{}/{proto}", n(p, "/port"))
        })
        .collect();
    or_none(&parts.join(","))
}

fn endpoints_text(ep: &Value) -> String {
    let mut parts = Vec::new();
    for subset in ep
        .pointer("/subsets")
        .and_then(|s| s.as_array())
        .into_iter()
        .flatten()
    {
        let ports: Vec<i64> = subset
            .get("ports")
            .and_then(|p| p.as_array())
            .map(|a| a.iter().map(|p| n(p, "/port")).collect())
            .unwrap_or_default();
        for addr in subset
            .get("addresses")
            .and_then(|a| a.as_array())
            .into_iter()
            .flatten()
        {
            let ip = s(addr, "/ip");
            if ports.is_empty() {
                parts.push(ip.to_string());
            }
            for port in &ports {
                parts.push(format!("{ip}:{port}"));
            }
        }
    }
    let shown: Vec<String> = parts.iter().take(3).cloned().collect();
    let more = parts.len().saturating_sub(3);
    let mut text = or_none(&shown.join(","));
    if more > 0 {
        text.push_str(&format!(" + {more} more..."));
    }
    text
}

/// The extra `-o wide` columns of ReplicaSets and Deployments.
const WORKLOAD_WIDE_HEADERS: [&str; 3] = ["CONTAINERS", "IMAGES", "SELECTOR"];

fn workload_wide_columns(o: &Value) -> [String; 3] {
    let (containers, images) = images(o.pointer("/spec/template/spec"));
    [
        containers,
        images,
        selector_text(o.pointer("/spec/selector")),
    ]
}

fn images(template_spec: Option<&Value>) -> (String, String) {
    let containers = template_spec
        .and_then(|s| s.get("containers"))
        .and_then(|c| c.as_array());
    let names: Vec<&str> = containers
        .into_iter()
        .flatten()
        .map(|c| s(c, "/name"))
        .collect();
    let imgs: Vec<&str> = containers
        .into_iter()
        .flatten()
        .map(|c| s(c, "/image"))
        .collect();
    (names.join(","), imgs.join(","))
}

/// Builds the table of one kind.
pub fn build(
    kind: &str,
    objects: &[Value],
    wide: bool,
    namespaced_column: bool,
    show_labels: bool,
) -> Table {
    let now = Utc::now();
    let created = |o: &Value| age(s(o, "/metadata/creationTimestamp"), now);
    let (mut headers, rows): (Vec<&str>, Vec<Vec<String>>) = match kind {
        "Pod" => {
            let mut h = vec!["NAME", "READY", "STATUS", "RESTARTS", "AGE"];
            if wide {
                h.extend(["IP", "NODE", "NOMINATED NODE"]);
            }
            let rows = objects
                .iter()
                .map(|p| {
                    let mut r = vec![
                        s(p, "/metadata/name").to_string(),
                        pod_ready(p),
                        pod_status(p),
                        pod_restarts(p),
                        created(p),
                    ];
                    if wide {
                        r.extend([
                            or_none(s(p, "/status/podIP")),
                            or_none(s(p, "/spec/nodeName")),
                            or_none(s(p, "/status/nominatedNodeName")),
                        ]);
                    }
                    r
                })
                .collect();
            (h, rows)
        }
        "Node" => {
            let mut h = vec!["NAME", "STATUS", "ROLES", "AGE", "VERSION"];
            if wide {
                h.extend(["INTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "POD-CIDR"]);
            }
            let rows = objects
                .iter()
                .map(|o| {
                    let mut r = vec![
                        s(o, "/metadata/name").into(),
                        node_status(o),
                        "<none>".into(),
                        created(o),
                        or_none(s(o, "/status/nodeInfo/kubeletVersion")),
                    ];
                    if wide {
                        let ip = o
                            .pointer("/status/addresses")
                            .and_then(|a| a.as_array())
                            .and_then(|a| a.iter().find(|x| s(x, "/type") == "InternalIP"))
                            .map(|x| s(x, "/address").to_string())
                            .unwrap_or_default();
                        r.extend([
                            or_none(&ip),
                            or_none(s(o, "/status/nodeInfo/osImage")),
                            or_none(s(o, "/status/nodeInfo/kernelVersion")),
                            or_none(s(o, "/spec/podCIDR")),
                        ]);
                    }
                    r
                })
                .collect();
            (h, rows)
        }
        "Namespace" => (
            vec!["NAME", "STATUS", "AGE"],
            objects
                .iter()
                .map(|o| {
                    vec![
                        s(o, "/metadata/name").into(),
                        or_none(s(o, "/status/phase")),
                        created(o),
                    ]
                })
                .collect(),
        ),
        "ReplicaSet" => {
            let mut h = vec!["NAME", "DESIRED", "CURRENT", "READY", "AGE"];
            if wide {
                h.extend(WORKLOAD_WIDE_HEADERS);
            }
            let rows = objects
                .iter()
                .map(|o| {
                    let mut r = vec![
                        s(o, "/metadata/name").into(),
                        n(o, "/spec/replicas").to_string(),
                        n(o, "/status/replicas").to_string(),
                        n(o, "/status/readyReplicas").to_string(),
                        created(o),
                    ];
                    if wide {
                        r.extend(workload_wide_columns(o));
                    }
                    r
                })
                .collect();
            (h, rows)
        }
        "Deployment" => {
            let mut h = vec!["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"];
            if wide {
                h.extend(WORKLOAD_WIDE_HEADERS);
            }
            let rows = objects
                .iter()
                .map(|o| {
                    let mut r = vec![
                        s(o, "/metadata/name").into(),
                        format!(
                            "{}/{}",
                            n(o, "/status/readyReplicas"),
                            n(o, "/spec/replicas")
                        ),
                        n(o, "/status/updatedReplicas").to_string(),
                        n(o, "/status/availableReplicas").to_string(),
                        created(o),
                    ];
                    if wide {
                        r.extend(workload_wide_columns(o));
                    }
                    r
                })
                .collect();
            (h, rows)
        }
        "DaemonSet" => (
            vec![
                "NAME",
                "DESIRED",
                "CURRENT",
                "READY",
                "UP-TO-DATE",
                "AVAILABLE",
                "NODE SELECTOR",
                "AGE",
            ],
            objects
                .iter()
                .map(|o| {
                    let ns = o
                        .pointer("/spec/template/spec/nodeSelector")
                        .map(|v| selector_text(Some(v)))
                        .unwrap_or_else(|| "<none>".into());
                    vec![
                        s(o, "/metadata/name").into(),
                        n(o, "/status/desiredNumberScheduled").to_string(),
                        n(o, "/status/currentNumberScheduled").to_string(),
                        n(o, "/status/numberReady").to_string(),
                        n(o, "/status/updatedNumberScheduled").to_string(),
                        n(o, "/status/numberAvailable").to_string(),
                        ns,
                        created(o),
                    ]
                })
                .collect(),
        ),
        "Job" => (
            vec!["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
            objects
                .iter()
                .map(|o| {
                    let status = if condition(o, "Complete")
                        .is_some_and(|c| s(c, "/status") == "True")
                    {
                        "Complete"
                    } else if condition(o, "Failed").is_some_and(|c| s(c, "/status") == "True") {
                        "Failed"
                    } else {
                        "Running"
                    };
                    let completions = o
                        .pointer("/spec/completions")
                        .and_then(|c| c.as_i64())
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "1".into());
                    let duration = match (
                        o.pointer("/status/startTime").and_then(|v| v.as_str()),
                        o.pointer("/status/completionTime").and_then(|v| v.as_str()),
                    ) {
                        (Some(start), Some(end)) => DateTime::parse_from_rfc3339(end)
                            .map(|e| age(start, e.with_timezone(&Utc)))
                            .unwrap_or_default(),
                        (Some(start), None) => age(start, now),
                        _ => String::new(),
                    };
                    vec![
                        s(o, "/metadata/name").into(),
                        status.into(),
                        format!("{}/{completions}", n(o, "/status/succeeded")),
                        duration,
                        created(o),
                    ]
                })
                .collect(),
        ),
        "Service" => {
            let mut h = vec![
                "NAME",
                "TYPE",
                "CLUSTER-IP",
                "EXTERNAL-IP",
                "PORT(S)",
                "AGE",
            ];
            if wide {
                h.push("SELECTOR");
            }
            let rows = objects
                .iter()
                .map(|o| {
                    let mut r = vec![
                        s(o, "/metadata/name").into(),
                        or_none(s(o, "/spec/type")),
                        or_none(s(o, "/spec/clusterIP")),
                        "<none>".into(),
                        service_ports(o),
                        created(o),
                    ];
                    if wide {
                        r.push(selector_text(o.pointer("/spec/selector")));
                    }
                    r
                })
                .collect();
            (h, rows)
        }
        "Endpoints" => (
            vec!["NAME", "ENDPOINTS", "AGE"],
            objects
                .iter()
                .map(|o| vec![s(o, "/metadata/name").into(), endpoints_text(o), created(o)])
                .collect(),
        ),
        "Event" => (
            vec!["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
            objects
                .iter()
                .map(|o| {
                    let last = [
                        s(o, "/lastTimestamp"),
                        s(o, "/eventTime"),
                        s(o, "/metadata/creationTimestamp"),
                    ]
                    .into_iter()
                    .find(|t| !t.is_empty())
                    .unwrap_or("");
                    vec![
                        age(last, now),
                        s(o, "/type").into(),
                        s(o, "/reason").into(),
                        format!(
                            "{}/{}",
                            s(o, "/involvedObject/kind").to_lowercase(),
                            s(o, "/involvedObject/name")
                        ),
                        s(o, "/message").into(),
                    ]
                })
                .collect(),
        ),
        "HorizontalPodAutoscaler" => (
            crate::hpa::HEADERS.to_vec(),
            objects
                .iter()
                .map(|o| crate::hpa::row(o, created(o)))
                .collect(),
        ),
        "Lease" => (
            vec!["NAME", "HOLDER", "AGE"],
            objects
                .iter()
                .map(|o| {
                    vec![
                        s(o, "/metadata/name").into(),
                        or_none(s(o, "/spec/holderIdentity")),
                        created(o),
                    ]
                })
                .collect(),
        ),
        "PriorityClass" => (
            vec!["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE"],
            objects
                .iter()
                .map(|o| {
                    vec![
                        s(o, "/metadata/name").into(),
                        n(o, "/value").to_string(),
                        o.get("globalDefault")
                            .and_then(|g| g.as_bool())
                            .unwrap_or(false)
                            .to_string(),
                        created(o),
                    ]
                })
                .collect(),
        ),
        _ => (
            vec!["NAME", "AGE"],
            objects
                .iter()
                .map(|o| vec![s(o, "/metadata/name").into(), created(o)])
                .collect(),
        ),
    };
    let mut rows = rows;
    if namespaced_column {
        headers.insert(0, "NAMESPACE");
        for (row, obj) in rows.iter_mut().zip(objects) {
            row.insert(0, s(obj, "/metadata/namespace").to_string());
        }
    }
    if show_labels {
        headers.push("LABELS");
        for (row, obj) in rows.iter_mut().zip(objects) {
            row.push(labels(obj));
        }
    }
    Table {
        headers: headers.into_iter().map(String::from).collect(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ages_read_like_kubectl() {
        let now = DateTime::parse_from_rfc3339("2026-01-02T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(age("2026-01-01T23:59:15Z", now), "45s");
        assert_eq!(age("2026-01-01T23:54:48Z", now), "5m12s");
        assert_eq!(age("2026-01-01T21:00:00Z", now), "3h0m");
        assert_eq!(age("2025-12-20T00:00:00Z", now), "13d");
        assert_eq!(age("garbage", now), "<unknown>");
    }

    #[test]
    fn pod_rows_show_ready_status_restarts() {
        let pod = json!({
            "metadata": {"name": "web-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        });
        let t = build("Pod", &[pod], false, false, false);
        assert_eq!(t.headers, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
        assert_eq!(&t.rows[0][..4], ["web-1", "1/2", "CrashLoopBackOff", "3"]);
    }
}
