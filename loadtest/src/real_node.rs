//! One real node for the benchmarks that need containers (`pods`, `configmap`): the cluster's
//! bootstrap objects, the busybox test image in the cluster registry, and a node agent on the
//! Linux runtime with a bridge and cgroup parent of its own. Dropping it stops the agent and
//! removes its containers, sandboxes and bridge, also when a benchmark fails half-way.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::Pod;
use bus_schemas::roles::Role;
use shoal_bus::auth::ClientAuth;
use shoal_bus::shutdown::Trigger;
use shoal_bus::ApiClient;
use shoal_node::runtime::RuntimeConfig;
use shoal_node::LinuxRuntime;

pub const NODE_NAME: &str = "bench-node";
pub const IMAGE: &str = "shoal/busybox:1.35";

/// What differs between the benchmarks' nodes.
pub struct NodeOptions<'a> {
    /// Prefix of the bridge's name; the process id makes it unique on the host.
    pub bridge_prefix: &'a str,
    pub pod_cidr: &'a str,
    pub cgroup_parent: &'a str,
    /// None keeps the agent's default, as `shoal up` runs it.
    pub sync_period: Option<Duration>,
}

/// Runs `body` against a fresh cluster of its own (a nats-server with a temporary store, the
/// API actor and the scheduler) with one real node, and stops it all afterwards.
pub fn with_real_node<F, Fut>(options: NodeOptions<'_>, body: F) -> Result<()>
where
    F: FnOnce(RealNode) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let dir = tempfile::tempdir()?;
    let (runtime, natsd) = crate::control_plane::nats_on_runtime(dir.path(), 2)?;
    let url = natsd.url();
    let creds = |role: &Role| crate::control_plane::creds(&runtime, &natsd, role);
    crate::control_plane::start(&url, creds(&Role::Api)?, Some(creds(&Role::Scheduler)?))?;
    let identities = Identities {
        client: creds(&Role::Admin)?,
        node: creds(&Role::Node(NODE_NAME.into()))?,
    };
    let outcome = runtime.block_on(async {
        let node = RealNode::start(dir.path(), &url, &identities, options).await?;
        body(node).await
    });
    drop(natsd);
    outcome
}

/// Who connects: the benchmark's client acts as the operator (it bootstraps the cluster and
/// imports the image), the agent as its node.
pub struct Identities {
    pub client: ClientAuth,
    pub node: ClientAuth,
}

pub struct RealNode {
    pub api: ApiClient,
    pub nats: async_nats::Client,
    pub runtime: Arc<LinuxRuntime>,
    bridge: String,
    stop: Option<Trigger>,
    agent: Option<tokio::task::JoinHandle<Result<(), shoal_agent::AgentError>>>,
}

impl RealNode {
    /// Connects to `url`, bootstraps the cluster, imports the image and starts the agent,
    /// with its state under `dir`.
    pub async fn start(
        dir: &Path,
        url: &str,
        identities: &Identities,
        options: NodeOptions<'_>,
    ) -> Result<RealNode> {
        let nats = shoal_bus::connect(url, "bench-client", &identities.client).await?;
        let api = ApiClient::new(nats.clone());
        shoal_api::bootstrap(&api).await?;

        // The image goes into the cluster registry; the first pod caches it on the node.
        let image_dir = dir.join("image");
        let (repository, tag) = IMAGE.split_once(':').unwrap_or((IMAGE, "latest"));
        shoal_node::testimage::build_busybox_layout(&image_dir.join("layout"), repository, tag)?;
        let scratch = shoal_node::image::ImageStore::open(image_dir.join("store"))?;
        let js = async_nats::jetstream::new(nats.clone());
        let registry = shoal_agent::registry::Registry::open(&js).await?;
        registry
            .import_path(&scratch, &image_dir.join("layout"), |_, _| {})
            .await?;

        let bridge = format!("{}{}", options.bridge_prefix, std::process::id() % 10000);
        let cidr = options
            .pod_cidr
            .parse()
            .map_err(|e| anyhow::anyhow!("--pod-cidr {}: {e}", options.pod_cidr))?;
        let mut runtime_config = RuntimeConfig::new(
            dir.join("node"),
            shoal_node::net::NetworkConfig::new(&bridge, cidr),
        );
        runtime_config.cgroup_parent = options.cgroup_parent.into();
        let runtime = Arc::new(LinuxRuntime::new(runtime_config)?);
        let backend = shoal_agent::Backend::Linux(runtime.clone());
        let mut config = shoal_agent::AgentConfig::new(NODE_NAME, options.pod_cidr);
        if let Some(period) = options.sync_period {
            config.sync_period = period;
        }
        let (stop, stopped) = shoal_bus::shutdown::channel();
        let agent_nats = shoal_bus::connect(url, NODE_NAME, &identities.node).await?;
        let agent = tokio::spawn(async move {
            shoal_agent::run(config, backend, agent_nats, stopped.wait()).await
        });
        Ok(RealNode {
            api,
            nats,
            runtime,
            bridge,
            stop: Some(stop),
            agent: Some(agent),
        })
    }

    /// Deletes the benchmark's pods, waits (up to `limit`) until the node has removed them,
    /// then stops the agent.
    pub async fn delete_pods_and_stop(mut self, names: &[String], limit: Duration) -> Result<()> {
        for name in names {
            let options = DeleteOptions {
                name: name.clone(),
                grace_period_seconds: Some(0),
                ..Default::default()
            };
            let _ = self.api.delete::<Pod>(&options).await;
        }
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline
            && !self
                .api
                .list::<Pod>(&Default::default())
                .await?
                .items
                .is_empty()
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if let Some(stop) = self.stop.take() {
            stop.fire();
        }
        if let Some(agent) = self.agent.take() {
            let _ = agent.await;
        }
        Ok(())
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.fire();
        }
        if let Some(agent) = self.agent.take() {
            agent.abort();
        }
        for failure in self.runtime.remove_all() {
            eprintln!("cleaning up the benchmark node: {failure}");
        }
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
    }
}
