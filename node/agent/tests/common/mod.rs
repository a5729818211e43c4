//! What the agent's tests share: a node agent on real containers for a cluster on a
//! throwaway nats-server, the busybox image in its registry, and waiting on pods.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::Pod;
use bus_schemas::roles::Role;
use shoal_agent::{AgentConfig, Backend};
use shoal_api::local::LocalCluster;
use shoal_bus::shutdown::{self, Trigger};
use shoal_bus::ApiClient;
use shoal_node::net::NetworkConfig;
use shoal_node::runtime::RuntimeConfig;
use shoal_node::LinuxRuntime;

pub struct Node {
    pub name: String,
    pub trigger: Option<Trigger>,
    pub task: Option<tokio::task::JoinHandle<()>>,
    pub state: PathBuf,
    pub bridge: String,
    pub cidr: String,
    /// Where pods may mount host paths (tests that read what containers wrote after they
    /// died): the node's `--allow-host-path`.
    pub allow_host_path: Vec<PathBuf>,
    /// Twice a second unless a test needs the agent's own pace.
    pub heartbeat_interval: Duration,
}

fn shim() -> PathBuf {
    // Test binaries live in target/<profile>/deps; the shim is built beside target/<profile>.
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("shoal-shim")
}

impl Node {
    pub fn new(dir: &std::path::Path) -> Node {
        // Tests of several binaries run side by side: one of 200 suffixes let two of them
        // share a bridge (and cgroup parent), and one test's cleanup deleted the other's.
        let id = format!("{:08x}", rand::random::<u32>());
        Node {
            name: format!("node-{id}"),
            trigger: None,
            task: None,
            state: dir.join("node"),
            bridge: format!("sha{id}"),
            cidr: format!(
                "10.{}.{}.0/24",
                100 + rand::random::<u8>() % 100,
                rand::random::<u8>()
            ),
            allow_host_path: vec![],
            heartbeat_interval: Duration::from_millis(500),
        }
    }

    pub fn runtime_config(&self) -> RuntimeConfig {
        let mut rc = RuntimeConfig::new(
            self.state.clone(),
            NetworkConfig::new(&self.bridge, self.cidr.parse().unwrap()),
        );
        rc.shim_path = Some(shim());
        // Tests run side by side: each node's orphan sweep must see only its own cgroups.
        rc.cgroup_parent = format!("shoal-test-{}", self.name);
        rc.allow_host_path = self.allow_host_path.clone();
        rc
    }

    /// Starts the agent on a connection of its own with this node's identity, as `shoal
    /// node` runs it: it may speak only for itself.
    pub async fn start(&mut self, cluster: &LocalCluster) {
        let rc = self.runtime_config();
        let backend = Backend::Linux(Arc::new(LinuxRuntime::new(rc).expect("runtime")));
        let mut config = AgentConfig::new(self.name.clone(), self.cidr.clone());
        config.backoff_base = Duration::from_millis(500);
        config.sync_period = Duration::from_millis(200);
        config.heartbeat_interval = self.heartbeat_interval;
        // These nodes' network is this machine's own namespace: keep the service proxy from
        // loading its nftables table there (tests/hostnet.rs and the multi-node tests cover it).
        config.proxy.enabled = false;
        let (trigger, stop) = shutdown::channel();
        let nats = cluster
            .connect_as(&Role::Node(self.name.clone()), &self.name)
            .await
            .expect("the node connects");
        self.task = Some(tokio::spawn(async move {
            shoal_agent::run(config, backend, nats, stop.wait())
                .await
                .expect("agent runs");
        }));
        self.trigger = Some(trigger);
    }

    pub async fn stop(&mut self) {
        if let Some(t) = self.trigger.take() {
            t.fire();
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// A pod volume's directory on this machine.
    pub fn volume(&self, pod: &Pod, name: &str) -> PathBuf {
        self.state
            .join("sandboxes")
            .join(&pod.metadata.uid)
            .join("volumes")
            .join(name)
    }

    /// Removes every sandbox this node's runtime holds (test cleanup).
    pub fn sweep(&self) {
        sweep_runtime(self.runtime_config());
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
    }
}

/// Removes every sandbox and container of a node's runtime, saying what could not be: a
/// monitor or pause process left behind would outlive the test (they are meant to survive
/// an agent restart, so nothing else stops them).
pub fn sweep_runtime(config: RuntimeConfig) {
    match LinuxRuntime::new(config) {
        Ok(rt) => {
            for failure in rt.remove_all() {
                eprintln!("test cleanup: {failure}");
            }
        }
        Err(e) => eprintln!("test cleanup: opening the node's runtime: {e}"),
    }
}

impl Drop for Node {
    // A failing test must not leave sandboxes, veths or cgroups behind for the next one.
    fn drop(&mut self) {
        if let Some(t) = self.trigger.take() {
            t.fire();
        }
        self.sweep();
    }
}

/// A cluster on a throwaway nats-server with the busybox image pushed, and one node agent on
/// real containers whose state lives in the returned directory (kept until the test ends).
pub async fn one_node() -> (LocalCluster, tempfile::TempDir, Node) {
    let cluster = LocalCluster::start().await.unwrap();
    push_busybox(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let mut node = Node::new(dir.path());
    node.start(&cluster).await;
    (cluster, dir, node)
}

pub async fn push_busybox(cluster: &LocalCluster) {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    shoal_node::testimage::build_busybox_layout(&layout, "shoal/busybox", "1.35").unwrap();
    let scratch = shoal_node::image::ImageStore::open(dir.path().join("store")).unwrap();
    let registry =
        shoal_agent::registry::Registry::open(&async_nats::jetstream::new(cluster.nats.clone()))
            .await
            .unwrap();
    registry
        .import_path(&scratch, &layout, |_, _| {})
        .await
        .unwrap();
}

/// Labels `default` privileged for pod security: for tests whose pods mount host paths on
/// purpose (with [`Node::allow_host_path`]), which baseline refuses.
pub async fn allow_privileged_pods(api: &ApiClient) {
    let patch = bus_schemas::api::PatchRequest {
        name: "default".into(),
        patch: r#"{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}"#
            .into(),
        ..Default::default()
    };
    api.patch::<bus_schemas::kinds::Namespace>(&patch)
        .await
        .expect("label the namespace privileged");
}

/// Deletes a pod of the default namespace, with its own grace period unless one is given.
pub async fn delete_pod(api: &ApiClient, name: &str, grace_period_seconds: Option<i64>) {
    let options = bus_schemas::api::DeleteOptions {
        name: name.into(),
        grace_period_seconds,
        ..Default::default()
    };
    api.delete::<Pod>(&options)
        .await
        .expect("the pod is deleted");
}

pub fn pod(node: &str, name: &str, spec: serde_json::Value) -> Pod {
    let mut value = serde_json::json!({"metadata": {"name": name}, "spec": spec});
    value["spec"]["nodeName"] = serde_json::Value::String(node.into());
    serde_json::from_value(value).unwrap()
}

pub async fn wait_pod(api: &ApiClient, name: &str, what: &str, ok: impl Fn(&Pod) -> bool) -> Pod {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        if let Ok(p) = api.get::<Pod>("default", name).await {
            if ok(&p) {
                return p;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "timed out waiting for {name} to be {what}; status: {:#?}",
                    p.status
                );
            }
        } else if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {name} to be {what}: pod missing");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn container<'a>(p: &'a Pod, name: &str) -> &'a bus_schemas::kinds::pod::ContainerStatus {
    p.status
        .container_statuses
        .iter()
        .find(|c| c.name == name)
        .expect("container status")
}
