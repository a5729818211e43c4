//! Rows of the workload kinds: Pods and what runs them (ReplicaSets, Deployments, DaemonSets,
//! Jobs).

use bus_schemas::kinds::{DaemonSet, Deployment, Job, Pod, PodTemplateSpec, ReplicaSet};
use bus_schemas::selector::LabelSelector;
use bus_schemas::{Condition, Time};

use super::cells::{age, map_text, or_none, selector_grammar};
use super::{Cell, Column, Row};

impl Row for Pod {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Ready"),
        Column::normal("Status"),
        Column::normal("Restarts"),
        Column::normal("Age"),
        Column::wide("IP"),
        Column::wide("Node"),
        Column::wide("Nominated Node"),
        // Shoal has no readiness gates.
        Column::wide("Readiness Gates"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        vec![
            self.metadata.name.as_str().into(),
            pod_ready(self).into(),
            pod_status(self).into(),
            pod_restarts(self).into(),
            age(self.metadata.creation_timestamp, now).into(),
            or_none(&self.status.pod_ip).into(),
            or_none(&self.spec.node_name).into(),
            or_none(&self.status.nominated_node_name).into(),
            "<none>".into(),
        ]
    }
}

/// The STATUS column: kubectl's one-word summary, most telling first (deletion, init
/// containers, a container's trouble, the pod's reason, its phase).
pub fn pod_status(pod: &Pod) -> String {
    if pod.metadata.deletion_timestamp.is_some() {
        return "Terminating".into();
    }
    let inits = &pod.status.init_container_statuses;
    let init_total = pod.spec.init_containers.len();
    // Until the agent reports init containers, the pod is summarised by its phase.
    if !inits.is_empty() {
        let done = inits
            .iter()
            .filter(|c| {
                c.state
                    .terminated
                    .as_ref()
                    .is_some_and(|t| t.exit_code == 0)
            })
            .count();
        if done < init_total {
            let stuck = inits
                .iter()
                .filter_map(|c| c.state.waiting.as_ref())
                .find(|w| !w.reason.is_empty() && w.reason != "PodInitializing");
            return match stuck {
                Some(waiting) => format!("Init:{}", waiting.reason),
                None => format!("Init:{done}/{init_total}"),
            };
        }
    }
    let statuses = &pod.status.container_statuses;
    for c in statuses {
        let waiting = c.state.waiting.as_ref().map_or("", |w| w.reason.as_str());
        if !waiting.is_empty() && waiting != "ContainerCreating" {
            return waiting.to_string();
        }
        let terminated = c
            .state
            .terminated
            .as_ref()
            .map_or("", |t| t.reason.as_str());
        if !terminated.is_empty() && pod.status.phase == "Running" {
            return terminated.to_string();
        }
    }
    let creating = statuses.iter().any(|c| {
        c.state
            .waiting
            .as_ref()
            .is_some_and(|w| w.reason == "ContainerCreating")
    });
    if creating {
        return "ContainerCreating".into();
    }
    if !pod.status.reason.is_empty() {
        return pod.status.reason.clone();
    }
    if pod.status.phase.is_empty() {
        "Pending".into()
    } else {
        pod.status.phase.clone()
    }
}

fn pod_ready(pod: &Pod) -> String {
    let ready = pod
        .status
        .container_statuses
        .iter()
        .filter(|c| c.ready)
        .count();
    format!("{ready}/{}", pod.spec.containers.len())
}

fn pod_restarts(pod: &Pod) -> String {
    let total: i64 = pod
        .status
        .container_statuses
        .iter()
        .map(|c| i64::from(c.restart_count))
        .sum();
    total.to_string()
}

/// The `-o wide` columns of the workload kinds, as a Kubernetes server prints them (the
/// selector in the selector grammar, as `kubectl get -l` takes it).
pub(crate) const WORKLOAD_WIDE: [Column; 3] = [
    Column::wide("Containers"),
    Column::wide("Images"),
    Column::wide("Selector"),
];

/// The cells of [`WORKLOAD_WIDE`].
pub(crate) fn workload_wide_cells(
    template: &PodTemplateSpec,
    selector: Option<&LabelSelector>,
) -> [Cell; 3] {
    let containers = &template.spec.containers;
    let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
    let images: Vec<&str> = containers.iter().map(|c| c.image.as_str()).collect();
    [
        names.join(",").into(),
        images.join(",").into(),
        selector_grammar(selector).into(),
    ]
}

impl Row for ReplicaSet {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Desired").integer(),
        Column::normal("Current").integer(),
        Column::normal("Ready").integer(),
        Column::normal("Age"),
        WORKLOAD_WIDE[0],
        WORKLOAD_WIDE[1],
        WORKLOAD_WIDE[2],
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        let mut cells = vec![
            self.metadata.name.as_str().into(),
            self.spec.replicas.unwrap_or(0).into(),
            self.status.replicas.into(),
            self.status.ready_replicas.into(),
            age(self.metadata.creation_timestamp, now).into(),
        ];
        cells.extend(workload_wide_cells(
            &self.spec.template,
            self.spec.selector.as_ref(),
        ));
        cells
    }
}

impl Row for Deployment {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Ready"),
        Column::normal("Up-to-date").integer(),
        Column::normal("Available").integer(),
        Column::normal("Age"),
        WORKLOAD_WIDE[0],
        WORKLOAD_WIDE[1],
        WORKLOAD_WIDE[2],
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        let mut cells = vec![
            self.metadata.name.as_str().into(),
            format!(
                "{}/{}",
                self.status.ready_replicas,
                self.spec.replicas.unwrap_or(0)
            )
            .into(),
            self.status.updated_replicas.into(),
            self.status.available_replicas.into(),
            age(self.metadata.creation_timestamp, now).into(),
        ];
        cells.extend(workload_wide_cells(
            &self.spec.template,
            self.spec.selector.as_ref(),
        ));
        cells
    }
}

impl Row for DaemonSet {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Desired").integer(),
        Column::normal("Current").integer(),
        Column::normal("Ready").integer(),
        Column::normal("Up-to-date").integer(),
        Column::normal("Available").integer(),
        Column::normal("Node Selector"),
        Column::normal("Age"),
        WORKLOAD_WIDE[0],
        WORKLOAD_WIDE[1],
        WORKLOAD_WIDE[2],
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        let status = &self.status;
        let mut cells = vec![
            self.metadata.name.as_str().into(),
            status.desired_number_scheduled.into(),
            status.current_number_scheduled.into(),
            status.number_ready.into(),
            status.updated_number_scheduled.into(),
            status.number_available.into(),
            map_text(&self.spec.template.spec.node_selector).into(),
            age(self.metadata.creation_timestamp, now).into(),
        ];
        cells.extend(workload_wide_cells(
            &self.spec.template,
            self.spec.selector.as_ref(),
        ));
        cells
    }
}

impl Row for Job {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Status"),
        Column::normal("Completions"),
        Column::normal("Duration"),
        Column::normal("Age"),
        WORKLOAD_WIDE[0],
        WORKLOAD_WIDE[1],
        WORKLOAD_WIDE[2],
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        let conditions = &self.status.conditions;
        let status = if is_true(conditions, "Complete") {
            "Complete"
        } else if is_true(conditions, "Failed") {
            "Failed"
        } else if is_true(conditions, "Suspended") {
            "Suspended"
        } else {
            "Running"
        };
        let completions = self
            .spec
            .completions
            .map_or_else(|| "1".into(), |c| c.to_string());
        let duration = match (self.status.start_time, self.status.completion_time) {
            (Some(start), Some(end)) => age(Some(start), end),
            (Some(start), None) => age(Some(start), now),
            _ => String::new(),
        };
        let mut cells = vec![
            self.metadata.name.as_str().into(),
            status.into(),
            format!("{}/{completions}", self.status.succeeded).into(),
            duration.into(),
            age(self.metadata.creation_timestamp, now).into(),
        ];
        cells.extend(workload_wide_cells(
            &self.spec.template,
            self.spec.selector.as_ref(),
        ));
        cells
    }
}

/// Whether the first condition of this type is True (kubectl reads the first one).
fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_crashing_container_outranks_a_running_one() {
        let pod = pod(json!({
            "metadata": {"name": "web-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        }));
        let now = pod.metadata.creation_timestamp.unwrap();
        assert_eq!(
            pod.cells(now)[..4],
            [
                Cell::from("web-1"),
                "1/2".into(),
                "CrashLoopBackOff".into(),
                "3".into()
            ]
        );
    }

    #[test]
    fn init_containers_count_only_once_reported() {
        let mut p = pod(json!({
            "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending"}
        }));
        assert_eq!(pod_status(&p), "Pending");
        p.status.init_container_statuses =
            serde_json::from_value(json!([{"name": "i", "state": {"running": {}}}])).unwrap();
        assert_eq!(pod_status(&p), "Init:0/1");
    }
}
