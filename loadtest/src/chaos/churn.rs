//! The workload: Deployments scaled up and down and rolled out, their pods deleted, a counter
//! incremented by compare-and-swap through the API, and objects created; every write the
//! cluster acknowledged is recorded, and every write whose outcome is unknown (a timeout, a
//! lost reply) is recorded as indeterminate.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use bus_schemas::api::{DeleteOptions, ListOptions, PatchRequest};
use bus_schemas::kinds::{Deployment, Lease, Pod};
use shoal_bus::{ApiClient, ApiError};

pub const NAMESPACE: &str = "default";
pub const COUNTER: &str = "chaos-counter";
const COUNTER_WRITERS: usize = 2;

/// A counter write the cluster acknowledged: it set `value` at `revision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CasAck {
    pub value: i32,
    pub revision: u64,
}

#[derive(Debug, Default, Clone)]
pub struct History {
    /// Names of the objects whose create was acknowledged, with the revision they got.
    pub created: Vec<(String, u64)>,
    pub cas: Vec<CasAck>,
    /// Writes whose outcome the client never learned.
    pub indeterminate: usize,
    pub scales: usize,
    pub rollouts: usize,
    pub pod_deletes: usize,
}

/// What the report prints of the history and its check.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    pub acked_creates: usize,
    pub acked_cas: usize,
    pub indeterminate: usize,
    pub lost: usize,
    pub duplicated: usize,
    pub scales: usize,
    pub rollouts: usize,
    pub pod_deletes: usize,
}

pub fn deployment_name(i: usize) -> String {
    format!("chaos-{i}")
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "shoal/busybox:1.35",
                    "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}}}]}
            }
        }
    }))
    .expect("chaos deployment")
}

fn lease(name: &str) -> Lease {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"leaseTransitions": 0}
    }))
    .expect("chaos lease")
}

/// A failure after which the write may or may not have happened.
fn indeterminate(e: &ApiError) -> bool {
    !(e.is_conflict() || e.is_not_found() || e.is_already_exists())
}

pub struct Workload {
    history: Arc<Mutex<History>>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Creates `obj` unless it exists, retrying through faults.
async fn ensure<K: bus_schemas::Resource>(api: &ApiClient, obj: &K) {
    loop {
        match api.create(obj).await {
            Ok(_) => return,
            Err(e) if e.is_already_exists() => return,
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

impl Workload {
    pub async fn start(api: ApiClient, deployments: usize) -> Result<Workload> {
        for i in 0..deployments {
            ensure(&api, &deployment(&deployment_name(i), 2)).await;
        }
        ensure(&api, &lease(COUNTER)).await;
        let history = Arc::new(Mutex::new(History::default()));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        for w in 0..COUNTER_WRITERS {
            tasks.push(tokio::spawn(counter_writer(
                api.clone(),
                history.clone(),
                stopped.clone(),
                w,
            )));
        }
        tasks.push(tokio::spawn(creator(
            api.clone(),
            history.clone(),
            stopped.clone(),
        )));
        tasks.push(tokio::spawn(deployment_churn(
            api.clone(),
            history.clone(),
            stopped.clone(),
            deployments,
        )));
        tasks.push(tokio::spawn(pod_deleter(api, history.clone(), stopped)));
        Ok(Workload {
            history,
            stop,
            tasks,
        })
    }

    pub async fn stop(self) -> History {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        let history = self.history.lock().expect("history lock").clone();
        history
    }
}

fn record(history: &Mutex<History>, f: impl FnOnce(&mut History)) {
    f(&mut history.lock().expect("history lock"));
}

fn revision(meta: &bus_schemas::meta::ObjectMeta) -> u64 {
    meta.resource_version.parse().unwrap_or(0)
}

/// Read, add one, write back only if nobody wrote in between (the resourceVersion is the
/// CAS precondition): the classic lost-update test of a register.
async fn counter_writer(
    api: ApiClient,
    history: Arc<Mutex<History>>,
    stopped: tokio::sync::watch::Receiver<bool>,
    writer: usize,
) {
    while !*stopped.borrow() {
        let Ok(mut counter) = api.get::<Lease>(NAMESPACE, COUNTER).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let value = counter.spec.lease_transitions.unwrap_or(0) + 1;
        counter.spec.lease_transitions = Some(value);
        counter.spec.holder_identity = Some(format!("writer-{writer}"));
        match api.update(&counter).await {
            Ok(written) => record(&history, |h| {
                h.cas.push(CasAck {
                    value,
                    revision: revision(&written.metadata),
                })
            }),
            Err(e) if indeterminate(&e) => record(&history, |h| h.indeterminate += 1),
            Err(_) => {}
        }
    }
}

async fn creator(
    api: ApiClient,
    history: Arc<Mutex<History>>,
    stopped: tokio::sync::watch::Receiver<bool>,
) {
    let mut i = 0usize;
    while !*stopped.borrow() {
        let name = format!("chaos-w-{i}");
        i += 1;
        match api.create(&lease(&name)).await {
            Ok(written) => {
                let rv = revision(&written.metadata);
                record(&history, |h| h.created.push((name, rv)));
            }
            Err(e) if indeterminate(&e) => record(&history, |h| h.indeterminate += 1),
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn deployment_churn(
    api: ApiClient,
    history: Arc<Mutex<History>>,
    stopped: tokio::sync::watch::Receiver<bool>,
    deployments: usize,
) {
    let mut round = 0u64;
    while !*stopped.borrow() {
        let name = deployment_name(rand::random_range(0..deployments));
        let rollout = round % 3 == 2;
        round += 1;
        let patch = if rollout {
            serde_json::json!({"spec": {"template": {"metadata": {"annotations": {
                "chaos/rollout": round.to_string()}}}}})
        } else {
            serde_json::json!({"spec": {"replicas": rand::random_range(1..=4)}})
        };
        let request = PatchRequest {
            namespace: NAMESPACE.into(),
            name,
            patch: patch.to_string(),
            status: false,
        };
        if api.patch::<Deployment>(&request).await.is_ok() {
            record(&history, |h| {
                if rollout {
                    h.rollouts += 1
                } else {
                    h.scales += 1
                }
            });
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
}

async fn pod_deleter(
    api: ApiClient,
    history: Arc<Mutex<History>>,
    stopped: tokio::sync::watch::Receiver<bool>,
) {
    while !*stopped.borrow() {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let options = ListOptions {
            namespace: NAMESPACE.into(),
            ..Default::default()
        };
        let Ok(pods) = api.list::<Pod>(&options).await else {
            continue;
        };
        let live: Vec<&Pod> = pods
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        if live.is_empty() {
            continue;
        }
        let victim = live[rand::random_range(0..live.len())];
        let options = DeleteOptions {
            namespace: NAMESPACE.into(),
            name: victim.metadata.name.clone(),
            ..Default::default()
        };
        if api.delete::<Pod>(&options).await.is_ok() {
            record(&history, |h| h.pod_deletes += 1);
        }
    }
}
