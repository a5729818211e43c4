//! Test harness: a real LocalCluster (nats-server + API actor) plus the controllers, and a
//! stand-in for the node side. There is NO node agent in these tests: where a test needs
//! pods to be bound, running, ready or finished, it writes that through the API itself
//! (`bind`, `mark_ready`, `finish`, or the `NodeSim` task) — only to drive the controllers.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::{Node, Pod};
use bus_schemas::meta::Condition;
use bus_schemas::roles::Role;
use bus_schemas::selector::Selector;
use bus_schemas::Resource;
use shoal_api::local::LocalCluster;
use shoal_bus::shutdown::{self, Trigger};
use shoal_bus::ApiClient;
use shoal_controllers::{ControllersConfig, Tunables};

pub struct Env {
    pub cluster: LocalCluster,
    pub api: ApiClient,
}

pub fn tunables() -> Tunables {
    Tunables {
        node_monitor_grace: Duration::from_secs(3),
        default_unreachable_toleration: Duration::from_secs(1),
        job_backoff_base: Duration::from_millis(200),
        job_backoff_max: Duration::from_secs(2),
        concurrency: 4,
        resync: Duration::from_secs(30),
        ..Default::default()
    }
}

/// A running controllers instance; `stop` ends it and waits until it has stopped.
pub struct Controllers {
    trigger: Trigger,
    handle: tokio::task::JoinHandle<()>,
}

impl Controllers {
    pub async fn stop(self) {
        self.trigger.fire();
        let _ = self.handle.await;
    }
}

/// Controllers on a connection of their own with the controllers' identity, as `shoal up`
/// runs them: a write their role may not make fails here as it would there.
pub async fn start_controllers(cluster: &LocalCluster, config: ControllersConfig) -> Controllers {
    let (trigger, sd) = shutdown::channel();
    let mut config = config;
    config
        .informers
        .get_or_insert_with(|| cluster.informers.clone());
    let nats = cluster
        .connect_as(&Role::Controllers, "controllers")
        .await
        .expect("controllers connect");
    let handle = actix::spawn(async move {
        if let Err(e) = shoal_controllers::run(config, nats, sd.wait()).await {
            panic!("controllers failed: {e}");
        }
    });
    Controllers { trigger, handle }
}

/// [`start_controllers`] with these tunables and the rest of the configuration default.
pub async fn start_controllers_tuned(cluster: &LocalCluster, tunables: Tunables) -> Controllers {
    start_controllers(
        cluster,
        ControllersConfig {
            tunables,
            ..Default::default()
        },
    )
    .await
}

pub async fn env() -> (Env, Controllers) {
    let cluster = LocalCluster::start().await.expect("cluster starts");
    let api = cluster.api();
    let config = ControllersConfig {
        tunables: tunables(),
        ..Default::default()
    };
    let controllers = start_controllers(&cluster, config).await;
    (Env { cluster, api }, controllers)
}

pub use shoal_api::local::eventually;

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn from_json<K: Resource>(v: serde_json::Value) -> K {
    serde_json::from_value(v).expect("fixture")
}

/// Pods in `ns` with `app=<app>` that are not being deleted, from the shared cache.
pub fn live_pods(env: &Env, ns: &str, app: &str) -> Vec<Arc<Pod>> {
    let sel = Selector::from_labels(&labels(&[("app", app)]));
    env.cluster
        .informers
        .get::<Pod>()
        .list(Some(ns), &sel)
        .into_iter()
        .filter(|p| !p.metadata.is_deleting())
        .collect()
}

pub fn ready_condition() -> Condition {
    Condition {
        type_: "Ready".into(),
        status: "True".into(),
        last_transition_time: Some(chrono::Utc::now()),
        ..Default::default()
    }
}

/// Stands in for the node agent: reports the pod Running and Ready.
pub async fn mark_ready(api: &ApiClient, pod: &Pod) {
    let mut p = pod.clone();
    p.metadata.resource_version.clear();
    p.status.phase = "Running".into();
    p.status.conditions.retain(|c| c.type_ != "Ready");
    p.status.conditions.push(ready_condition());
    match api.update_status(&p).await {
        Ok(_) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => panic!("mark ready: {e}"),
    }
}

/// Stands in for the node agent: the pod finished with `phase` (Succeeded or Failed).
pub async fn finish(api: &ApiClient, pod: &Pod, phase: &str) {
    let mut p = pod.clone();
    p.metadata.resource_version.clear();
    p.status.phase = phase.into();
    p.status.conditions.retain(|c| c.type_ != "Ready");
    api.update_status(&p).await.expect("finish pod");
}

/// Stands in for the scheduler: binds the pod to `node`.
pub async fn bind(api: &ApiClient, pod: &Pod, node: &str) {
    let mut p = pod.clone();
    p.metadata.resource_version.clear();
    p.spec.node_name = node.into();
    match api.update(&p).await {
        Ok(_) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => panic!("bind: {e}"),
    }
}

pub async fn delete_now<K: Resource>(api: &ApiClient, ns: &str, name: &str, policy: Option<&str>) {
    let options = DeleteOptions {
        namespace: ns.into(),
        name: name.into(),
        propagation_policy: policy.map(str::to_string),
        grace_period_seconds: Some(0),
        preconditions: None,
    };
    api.delete::<K>(&options).await.expect("delete");
}

/// A node-side simulator: marks every pod that `wanted` selects Ready as soon as it appears.
pub struct NodeSim {
    handle: tokio::task::JoinHandle<()>,
}

impl Drop for NodeSim {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

pub fn node_sim(env: &Env, wanted: impl Fn(&Pod) -> bool + 'static) -> NodeSim {
    let informer = env.cluster.informers.get::<Pod>();
    let api = env.api.clone();
    let mut rx = informer.subscribe();
    let handle = actix::spawn(async move {
        // Pods that exist already.
        for pod in informer.list(None, &Selector::everything()) {
            if wanted(&pod) && !pod.is_ready() && !pod.metadata.is_deleting() {
                mark_ready(&api, &pod).await;
            }
        }
        loop {
            let change = match rx.recv().await {
                Ok(c) => c,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return,
            };
            let pod = change.new;
            if change.event != shoal_bus::EventType::Deleted
                && wanted(&pod)
                && !pod.is_ready()
                && !pod.metadata.is_deleting()
                && !pod.is_terminal()
            {
                mark_ready(&api, &pod).await;
            }
        }
    });
    NodeSim { handle }
}

pub fn node(name: &str) -> Node {
    from_json(
        serde_json::json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}),
    )
}

/// Registers a node and reports it Ready (as its agent would).
pub async fn add_node(api: &ApiClient, name: &str, extra_labels: &[(&str, &str)]) -> Node {
    let mut n = node(name);
    n.metadata.labels.extend(labels(extra_labels));
    let created = api.create(&n).await.expect("create node");
    let mut s = created.clone();
    s.status.conditions.push(Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "NodeReady".into(),
        last_transition_time: Some(chrono::Utc::now()),
        ..Default::default()
    });
    api.update_status(&s).await.expect("node status")
}

pub fn replicaset(name: &str, app: &str, replicas: i32) -> bus_schemas::kinds::ReplicaSet {
    replicaset_in("default", name, app, replicas)
}

/// A ReplicaSet in `ns` of `replicas` busybox pods labelled `app`.
pub fn replicaset_in(
    ns: &str,
    name: &str,
    app: &str,
    replicas: i32,
) -> bus_schemas::kinds::ReplicaSet {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1"}]}
            }
        }
    }))
}
