//! Pod: the unit of scheduling, one or more containers sharing a network and volumes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{is_default, is_zero_i64};
pub use super::pod_spec::PodSpec;
use crate::meta::{find_condition, Condition, ObjectMeta, Time};
use crate::quantity::Quantity;
use crate::resource::KindInfo;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodSpec,
    #[serde(default)]
    pub status: PodStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    /// `PodScheduled`, `Initialized`, `ContainersReady`, `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// A CamelCase word, e.g. `Evicted`, `DeadlineExceeded`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Where preemption made room; the pod is not bound there yet.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub nominated_node_name: String,
    #[serde(default, rename = "hostIP", skip_serializing_if = "String::is_empty")]
    pub host_ip: String,
    #[serde(default, rename = "podIP", skip_serializing_if = "String::is_empty")]
    pub pod_ip: String,
    #[serde(default, rename = "podIPs", skip_serializing_if = "Vec::is_empty")]
    pub pod_ips: Vec<PodIp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_container_statuses: Vec<ContainerStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_statuses: Vec<ContainerStatus>,
    /// `Guaranteed`, `Burstable` or `BestEffort`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub qos_class: String,
    /// The metadata.generation the node agent last acted on.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodIp {
    #[serde(default)]
    pub ip: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "is_default")]
    pub state: ContainerState,
    #[serde(default, skip_serializing_if = "is_default")]
    pub last_state: ContainerState,
    #[serde(default)]
    pub ready: bool,
    #[serde(default)]
    pub restart_count: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    #[serde(default, rename = "imageID", skip_serializing_if = "String::is_empty")]
    pub image_id: String,
    #[serde(
        default,
        rename = "containerID",
        skip_serializing_if = "String::is_empty"
    )]
    pub container_id: String,
    /// Whether the startup probe passed (or there is none and the container runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<bool>,
}

/// At most one of the three is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<ContainerStateWaiting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<ContainerStateRunning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated: Option<ContainerStateTerminated>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateWaiting {
    /// E.g. `ContainerCreating`, `CrashLoopBackOff`, `ErrImagePull`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateRunning {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateTerminated {
    #[serde(default)]
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "super::common::is_zero_i32")]
    pub signal: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    #[serde(
        default,
        rename = "containerID",
        skip_serializing_if = "String::is_empty"
    )]
    pub container_id: String,
}

crate::spec_status_resource!(
    Pod,
    KindInfo {
        kind: "Pod",
        api_version: "v1",
        plural: "pods",
        short_names: &["po"],
        namespaced: true,
        has_status: true,
    }
);

pub const PHASE_PENDING: &str = "Pending";
pub const PHASE_RUNNING: &str = "Running";
pub const PHASE_SUCCEEDED: &str = "Succeeded";
pub const PHASE_FAILED: &str = "Failed";

/// Resources the QoS class is computed from.
const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

fn add_quantity(total: &mut BTreeMap<String, Quantity>, name: &str, q: &Quantity) {
    total
        .entry(name.to_string())
        .and_modify(|sum| *sum += *q)
        .or_insert(*q);
}

impl Pod {
    pub fn phase(&self) -> &str {
        &self.status.phase
    }

    /// The Ready condition is True: the pod receives Service traffic.
    pub fn is_ready(&self) -> bool {
        find_condition(&self.status.conditions, "Ready").is_some_and(Condition::is_true)
    }

    /// Succeeded or Failed: the pod will never run again.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status.phase.as_str(), PHASE_SUCCEEDED | PHASE_FAILED)
    }

    /// The uid of the controller (ReplicaSet, Job, DaemonSet) that owns this pod.
    pub fn controller_uid(&self) -> Option<&str> {
        self.metadata.controller_ref().map(|r| r.uid.as_str())
    }

    /// The pod's effective request as the scheduler counts it: app containers run together so
    /// their requests add up; init containers run one at a time before them, so each only
    /// raises the total to its own request; sidecars (restartable init containers) keep
    /// running, so theirs add to everything started after them, as Kubernetes counts them.
    pub fn requests_total(&self) -> BTreeMap<String, Quantity> {
        let mut total = BTreeMap::new();
        let mut sidecars = BTreeMap::new();
        let mut init_peak: BTreeMap<String, Quantity> = BTreeMap::new();
        let raise = |peak: &mut BTreeMap<String, Quantity>, name: &str, q: Quantity| {
            if peak.get(name).is_none_or(|have| q > *have) {
                peak.insert(name.to_string(), q);
            }
        };
        for init in &self.spec.init_containers {
            if init.is_sidecar() {
                for (name, q) in &init.resources.requests {
                    add_quantity(&mut sidecars, name, q);
                }
                for (name, q) in &sidecars {
                    raise(&mut init_peak, name, *q);
                }
            } else {
                for (name, q) in &init.resources.requests {
                    let with_sidecars = sidecars.get(name).map_or(*q, |s| *s + *q);
                    raise(&mut init_peak, name, with_sidecars);
                }
            }
        }
        for container in &self.spec.containers {
            for (name, q) in &container.resources.requests {
                add_quantity(&mut total, name, q);
            }
        }
        for (name, q) in &sidecars {
            add_quantity(&mut total, name, q);
        }
        for (name, q) in init_peak {
            raise(&mut total, &name, q);
        }
        total
    }

    /// Kubernetes' QoS class from cpu and memory requests and limits.
    pub fn compute_qos_class(&self) -> &'static str {
        let mut requests = BTreeMap::new();
        let mut limits = BTreeMap::new();
        let mut guaranteed = true;
        for container in self
            .spec
            .init_containers
            .iter()
            .chain(&self.spec.containers)
        {
            let res = &container.resources;
            for name in QOS_RESOURCES {
                if let Some(q) = res.requests.get(name).filter(|q| q.milli_value() != 0) {
                    add_quantity(&mut requests, name, q);
                }
                match res.limits.get(name).filter(|q| q.milli_value() != 0) {
                    Some(q) => add_quantity(&mut limits, name, q),
                    None => guaranteed = false,
                }
            }
        }
        if requests.is_empty() && limits.is_empty() {
            return "BestEffort";
        }
        if guaranteed && requests.len() == limits.len() && requests == limits {
            "Guaranteed"
        } else {
            "Burstable"
        }
    }

    fn validate_fields(&self) -> Vec<Cause> {
        self.spec.validate("spec")
    }

    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        self.spec.validate_update(&old.spec, "spec")
    }

    fn default_fields(&mut self) {
        self.spec.apply_defaults();
        // A limit without a request means "exactly this much" (Kubernetes' SetDefaults_Pod);
        // only Pods get this, templates stay as written.
        for container in self
            .spec
            .init_containers
            .iter_mut()
            .chain(self.spec.containers.iter_mut())
        {
            let res = &mut container.resources;
            for (name, limit) in &res.limits {
                res.requests.entry(name.clone()).or_insert(*limit);
            }
        }
        // A new pod is Pending until bound and started (Kubernetes' PrepareForCreate).
        if self.status.phase.is_empty() {
            self.status.phase = PHASE_PENDING.into();
        }
        if self.status.qos_class.is_empty() {
            self.status.qos_class = self.compute_qos_class().into();
        }
    }

    fn kind_field_value(&self, field: &str) -> Option<String> {
        let value = match field {
            "spec.nodeName" => &self.spec.node_name,
            "spec.schedulerName" => &self.spec.scheduler_name,
            "spec.restartPolicy" => &self.spec.restart_policy,
            "spec.serviceAccountName" => &self.spec.service_account_name,
            "status.phase" => &self.status.phase,
            "status.podIP" => &self.status.pod_ip,
            "status.nominatedNodeName" => &self.status.nominated_node_name,
            _ => return None,
        };
        Some(value.clone())
    }
}
