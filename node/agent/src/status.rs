//! Building a pod's status from what the worker observed.

use bus_schemas::kinds::pod::{
    ContainerState as ApiState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, PodIp, PodStatus,
};
use bus_schemas::kinds::Pod;
use bus_schemas::meta::{set_condition, Condition, Time};
use chrono::{DateTime, Utc};
use std::time::SystemTime;

/// What a worker knows about one container of the pod.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub name: String,
    pub image: String,
    /// The image's manifest digest, once pulled (`name@sha256:…`).
    pub image_id: String,
    pub container_id: String,
    pub restart_count: i32,
    pub state: ObservedState,
    pub last_terminated: Option<Terminated>,
    pub ready: bool,
    pub started: bool,
    /// An init container with restartPolicy Always.
    pub sidecar: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminated {
    pub exit_code: i32,
    pub signal: i32,
    pub reason: String,
    pub message: String,
    pub started_at: Option<Time>,
    pub finished_at: Option<Time>,
    pub container_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ObservedState {
    #[default]
    NotCreated,
    Waiting {
        reason: String,
        message: String,
    },
    Running {
        started_at: Time,
    },
    Terminated(Terminated),
}

pub fn time(t: SystemTime) -> Time {
    DateTime::<Utc>::from(t)
}

fn api_state(state: &ObservedState) -> ApiState {
    match state {
        ObservedState::NotCreated => ApiState {
            waiting: Some(ContainerStateWaiting {
                reason: "ContainerCreating".into(),
                message: String::new(),
            }),
            ..Default::default()
        },
        ObservedState::Waiting { reason, message } => ApiState {
            waiting: Some(ContainerStateWaiting {
                reason: reason.clone(),
                message: message.clone(),
            }),
            ..Default::default()
        },
        ObservedState::Running { started_at } => ApiState {
            running: Some(ContainerStateRunning {
                started_at: Some(*started_at),
            }),
            ..Default::default()
        },
        ObservedState::Terminated(t) => ApiState {
            terminated: Some(terminated(t)),
            ..Default::default()
        },
    }
}

fn terminated(t: &Terminated) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: t.exit_code,
        signal: t.signal,
        reason: t.reason.clone(),
        message: t.message.clone(),
        started_at: t.started_at,
        finished_at: t.finished_at,
        container_id: t.container_id.clone(),
    }
}

fn container_status(o: &Observed) -> ContainerStatus {
    ContainerStatus {
        name: o.name.clone(),
        state: api_state(&o.state),
        last_state: o
            .last_terminated
            .as_ref()
            .map(|t| ApiState {
                terminated: Some(terminated(t)),
                ..Default::default()
            })
            .unwrap_or_default(),
        ready: o.ready,
        restart_count: o.restart_count,
        image: o.image.clone(),
        image_id: o.image_id.clone(),
        container_id: o.container_id.clone(),
        started: Some(o.started),
    }
}

/// Everything needed to compute a status.
pub struct Snapshot<'a> {
    pub pod: &'a Pod,
    pub init: &'a [Observed],
    pub app: &'a [Observed],
    pub pod_ip: String,
    pub host_ip: String,
    pub start_time: Option<Time>,
    /// Set when the pod can never run (e.g. a failed init container with restartPolicy Never).
    pub failed: Option<(String, String)>,
    pub now: Time,
}

fn exited_ok(o: &Observed) -> bool {
    matches!(&o.state, ObservedState::Terminated(t) if t.exit_code == 0)
}

fn exited(o: &Observed) -> bool {
    matches!(o.state, ObservedState::Terminated(_))
}

pub fn phase(s: &Snapshot<'_>) -> &'static str {
    if s.failed.is_some() {
        return "Failed";
    }
    let restart = s.pod.spec.restart_policy.as_str();
    if !crate::sidecars::initialized(s.init) {
        return "Pending";
    }
    let running = s
        .app
        .iter()
        .any(|o| matches!(o.state, ObservedState::Running { .. }));
    if running {
        return "Running";
    }
    let all_exited = !s.app.is_empty() && s.app.iter().all(exited);
    if all_exited {
        match restart {
            "Always" => return "Running",
            "OnFailure" if s.app.iter().all(exited_ok) => return "Succeeded",
            "OnFailure" => return "Running",
            _ => {
                return if s.app.iter().all(exited_ok) {
                    "Succeeded"
                } else {
                    "Failed"
                };
            }
        }
    }
    // Some containers are restarting (waiting after an exit): the pod keeps running.
    if s.app
        .iter()
        .any(|o| o.restart_count > 0 || o.last_terminated.is_some())
    {
        return "Running";
    }
    "Pending"
}

pub fn build(s: &Snapshot<'_>) -> PodStatus {
    let previous = &s.pod.status;
    let mut status = PodStatus {
        phase: phase(s).into(),
        conditions: previous.conditions.clone(),
        host_ip: s.host_ip.clone(),
        pod_ip: s.pod_ip.clone(),
        pod_ips: if s.pod_ip.is_empty() {
            vec![]
        } else {
            vec![PodIp {
                ip: s.pod_ip.clone(),
            }]
        },
        start_time: s.start_time.or(previous.start_time),
        init_container_statuses: s.init.iter().map(container_status).collect(),
        container_statuses: s.app.iter().map(container_status).collect(),
        qos_class: previous.qos_class.clone(),
        nominated_node_name: previous.nominated_node_name.clone(),
        observed_generation: s.pod.metadata.generation,
        ..Default::default()
    };
    if let Some((reason, message)) = &s.failed {
        status.reason = reason.clone();
        status.message = message.clone();
    }
    let init_done = crate::sidecars::initialized(s.init);
    let containers_ready = !s.app.is_empty()
        && s.app.iter().all(|o| o.ready)
        && crate::sidecars::sidecars_ready(s.init);
    let terminal = matches!(status.phase.as_str(), "Succeeded" | "Failed");
    let cond = |type_: &str, ok: bool, reason: &str| Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: if ok { String::new() } else { reason.into() },
        ..Default::default()
    };
    let now = s.now;
    set_condition(&mut status.conditions, cond("PodScheduled", true, ""), now);
    set_condition(
        &mut status.conditions,
        cond("Initialized", init_done, "ContainersNotInitialized"),
        now,
    );
    let ready_reason = if terminal {
        "PodCompleted"
    } else {
        "ContainersNotReady"
    };
    set_condition(
        &mut status.conditions,
        cond(
            "ContainersReady",
            containers_ready && !terminal,
            ready_reason,
        ),
        now,
    );
    set_condition(
        &mut status.conditions,
        cond("Ready", containers_ready && !terminal, ready_reason),
        now,
    );
    status
}
