//! One real node for the benchmarks that need containers (`pods`, `configmap`,
//! `bench_autoscaler`): the cluster's bootstrap objects, the busybox test image in the cluster
//! registry, and a node agent on the Linux runtime with a bridge and cgroup parent of its own.
//! Dropping it stops the agent and removes its containers, sandboxes and bridge, also when a
//! benchmark fails half-way.

use std::path::{Path, PathBuf};
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
    /// How often the agent samples pod usage; None keeps its default.
    pub metrics_period: Option<Duration>,
    /// Host directories pods may mount (`--allow-host-path`); empty: none.
    pub allow_host_path: Vec<PathBuf>,
    /// Serve NATS on every interface, so pods reach it through their bridge's gateway.
    pub nats_for_pods: bool,
    /// Identities issued before the body runs (the built-in ones always exist).
    pub extra_roles: Vec<Role>,
}

impl Default for NodeOptions<'_> {
    fn default() -> Self {
        NodeOptions {
            bridge_prefix: "shb",
            pod_cidr: "10.213.0.0/22",
            cgroup_parent: "shoal-bench",
            sync_period: None,
            metrics_period: None,
            allow_host_path: Vec::new(),
            nats_for_pods: false,
            extra_roles: Vec::new(),
        }
    }
}

/// The bus a benchmark's cluster runs on, for parts it starts itself.
// Only `bench_autoscaler` (which includes this file) starts parts of its own.
#[allow(dead_code)]
#[derive(Clone)]
pub struct Bus {
    pub url: String,
    /// The identity directory: `creds/<identity>.nk` for every built-in and issued identity.
    pub auth_dir: PathBuf,
}

#[allow(dead_code)]
impl Bus {
    /// Where the credential of `role` is (it must be built in or in `extra_roles`).
    pub fn creds_path(&self, role: &Role) -> PathBuf {
        self.auth_dir
            .join("creds")
            .join(format!("{}.nk", shoal_bus::auth::default_name(role)))
    }

    pub fn creds(&self, role: &Role) -> Result<ClientAuth> {
        let path = self.creds_path(role);
        ClientAuth::from_creds_file(&path)
            .map_err(|e| anyhow::anyhow!("the credential of {role} ({}): {e}", path.display()))
    }
}

/// Runs `body` against a fresh cluster of its own (a nats-server with a temporary store, the
/// API actor and the scheduler) with one real node, and stops it all afterwards.
pub fn with_real_node<F, Fut>(options: NodeOptions<'_>, body: F) -> Result<()>
where
    F: FnOnce(RealNode) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    with_real_node_on_bus(options, |node, _| body(node))
}

/// [`with_real_node`], also telling the body where the bus and its identities are.
pub fn with_real_node_on_bus<F, Fut>(options: NodeOptions<'_>, body: F) -> Result<()>
where
    F: FnOnce(RealNode, Bus) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let dir = tempfile::tempdir()?;
    let host = if options.nats_for_pods {
        "0.0.0.0"
    } else {
        "127.0.0.1"
    };
    let (runtime, natsd) = crate::control_plane::nats_on_runtime_at(dir.path(), 2, host)?;
    let url = natsd.url();
    let creds = |role: &Role| crate::control_plane::creds(&runtime, &natsd, role);
    crate::control_plane::start(&url, creds(&Role::Api)?, Some(creds(&Role::Scheduler)?))?;
    let identities = Identities {
        client: creds(&Role::Admin)?,
        node: creds(&Role::Node(NODE_NAME.into()))?,
    };
    for role in &options.extra_roles {
        creds(role)?;
    }
    let bus = Bus {
        url: url.clone(),
        auth_dir: natsd
            .config()
            .auth
            .as_ref()
            .map(|a| a.dir().to_path_buf())
            .unwrap_or_default(),
    };
    let outcome = runtime.block_on(async {
        let node = RealNode::start(dir.path(), &url, &identities, options).await?;
        body(node, bus).await
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
        runtime_config.allow_host_path = options.allow_host_path.clone();
        let runtime = Arc::new(LinuxRuntime::new(runtime_config)?);
        let backend = shoal_agent::Backend::Linux(runtime.clone());
        let mut config = shoal_agent::AgentConfig::new(NODE_NAME, options.pod_cidr);
        if let Some(period) = options.sync_period {
            config.sync_period = period;
        }
        if let Some(period) = options.metrics_period {
            config.metrics_period = period;
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
