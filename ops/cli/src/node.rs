//! `shoal node`: a node agent for this machine, or many hollow ones in one process.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use bus_schemas::roles::Role;
use shoal_agent::{AgentConfig, Backend};
use shoal_bus::{InformerFactory, Store};
use shoal_node::net::NetworkConfig;
use shoal_node::runtime::RuntimeConfig;
use shoal_node::{HollowConfig, HollowRuntime, LinuxRuntime};

use crate::actor_creds::ActorCreds;
use crate::cli::NodeArgs;

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .unwrap_or_else(|_| "node".into())
}

/// The node's network flags of `shoal node` (flattened into `NodeArgs`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct NodeNetArgs {
    /// Network namespace holding the node's network (e.g. /run/netns/host-1): the pod
    /// bridge, the pods' veths, the routes and the Service rules live there, and probes
    /// connect from there. The agent's NATS connection stays in this process's namespace.
    #[arg(long)]
    pub host_netns: Option<PathBuf>,
    /// An interface in the node's network whose carrier the node's readiness follows:
    /// when it is down the node reports NotReady (reason NetworkUnavailable).
    #[arg(long)]
    pub uplink: Option<String>,
    /// The nameserver written into the pods' resolv.conf (default 10.96.0.10).
    #[arg(long)]
    pub cluster_dns: Option<String>,
}

/// The node's security flags of `shoal node` and `shoal up` (flattened into both).
#[derive(clap::Args, Debug, Clone)]
pub struct NodeSecurityArgs {
    /// Let pods mount hostPath volumes under this directory (repeatable). Without it the
    /// node refuses every hostPath, whatever admission let through.
    #[arg(long = "allow-host-path", value_name = "PREFIX")]
    pub allow_host_path: Vec<PathBuf>,
    /// Where the node finds `Localhost` seccomp profiles (`localhostProfile` is a path
    /// relative to it).
    #[arg(long, default_value = shoal_node::runtime::DEFAULT_SECCOMP_PROFILE_ROOT)]
    pub seccomp_profile_root: PathBuf,
}

impl NodeSecurityArgs {
    /// Refuses bad flags before anything starts.
    pub fn validate(&self) -> Result<()> {
        for p in &self.allow_host_path {
            if !p.is_absolute() {
                anyhow::bail!(
                    "--allow-host-path {}: must be an absolute path",
                    p.display()
                );
            }
        }
        Ok(())
    }

    fn apply(&self, config: &mut RuntimeConfig) -> Result<()> {
        self.validate()?;
        config.allow_host_path = self.allow_host_path.clone();
        config.seccomp_profile_root = self.seccomp_profile_root.clone();
        Ok(())
    }
}

/// The real runtime for this machine, with its state under `state_dir`.
pub fn linux_backend(
    state_dir: PathBuf,
    bridge: &str,
    pod_cidr: &str,
    node: &str,
    security: &NodeSecurityArgs,
) -> Result<Backend> {
    linux_backend_in(state_dir, bridge, pod_cidr, node, None, security)
}

/// [`linux_backend`] with the node's network in `host_netns` (None: this process's own).
pub fn linux_backend_in(
    state_dir: PathBuf,
    bridge: &str,
    pod_cidr: &str,
    node: &str,
    host_netns: Option<PathBuf>,
    security: &NodeSecurityArgs,
) -> Result<Backend> {
    let cidr = pod_cidr
        .parse()
        .map_err(|e| anyhow::anyhow!("--pod-cidr {pod_cidr:?}: {e}"))?;
    if let Some(ns) = &host_netns {
        if !ns.exists() {
            anyhow::bail!("--host-netns {}: no such network namespace", ns.display());
        }
    }
    let mut network = NetworkConfig::new(bridge, cidr);
    network.host_netns = host_netns;
    let mut config = RuntimeConfig::new(state_dir.clone(), network);
    config.cgroup_parent = RuntimeConfig::cgroup_parent_for(node, &state_dir);
    security.apply(&mut config)?;
    let runtime = LinuxRuntime::new(config)
        .with_context(|| format!("starting the container runtime in {}", state_dir.display()))?;
    Ok(Backend::Linux(Arc::new(runtime)))
}

pub async fn run(url: &str, creds: &ActorCreds, args: NodeArgs) -> Result<()> {
    let net = args.net.clone();
    run_with(url, creds, args, net).await
}

pub async fn run_with(
    url: &str,
    creds: &ActorCreds,
    args: NodeArgs,
    net: NodeNetArgs,
) -> Result<()> {
    args.security.validate()?;
    let base = args.name.clone().unwrap_or_else(hostname);
    let count = if args.hollow { args.count.max(1) } else { 1 };
    let names: Vec<String> = (0..count)
        .map(|i| {
            if args.hollow && count > 1 {
                format!("{base}-{i}")
            } else {
                base.clone()
            }
        })
        .collect();
    // One connection per node: each node's credential confines it to its own subjects.
    let mut connections = Vec::new();
    for name in &names {
        let nats = creds
            .connect(url, "shoal-node", &Role::Node(name.clone()))
            .await
            .with_context(|| format!("connecting to {url}"))?;
        crate::actor_creds::check_node(&nats, name).await?;
        connections.push(nats);
    }
    let store = Store::open(connections[0].clone()).await?;
    let informers = InformerFactory::new(store);
    tokio::spawn(shoal_bus::inspect::serve_caches(
        connections[0].clone(),
        informers.clone(),
        format!(
            "shoal node {} ({}, pid {})",
            base,
            hostname(),
            std::process::id()
        ),
    ));
    // Hollow nodes sharing this process share one subject for its spans: the base name.
    let traces_auth = creds.for_role(&Role::Node(names[0].clone()))?;
    shoal_telemetry::jetstream::export_as_node(url, &base, move |o| traces_auth.apply(o));
    let (trigger, shutdown) = shoal_bus::shutdown::channel();
    let mut tasks = Vec::new();
    for (i, (name, nats)) in names.into_iter().zip(connections).enumerate() {
        let mut config = AgentConfig::new(name.clone(), args.pod_cidr.clone());
        config.host_ip = args.host_ip.clone();
        config.backoff_base = std::time::Duration::from_secs(args.backoff_seconds.max(1));
        config.informers = Some(informers.clone());
        if let Some(dns) = &net.cluster_dns {
            dns.parse::<std::net::Ipv4Addr>()
                .map_err(|e| anyhow::anyhow!("--cluster-dns {dns:?}: {e}"))?;
            config.pod_defaults.cluster_dns = dns.clone();
        }
        let backend = if args.hollow {
            // Hollow nodes heartbeat less often (thousands share one state log), but well
            // inside the node lifecycle's 10 s grace, so a late beat never flaps a node.
            config.heartbeat_interval = std::time::Duration::from_secs(5);
            let hollow = HollowConfig {
                start_delay: std::time::Duration::from_millis(args.start_delay_ms),
                failure_rate: args.failure_rate,
                seed: i as u64 + 1,
                pod_cidr: args
                    .pod_cidr
                    .parse()
                    .map_err(|e| anyhow::anyhow!("--pod-cidr: {e}"))?,
            };
            Backend::Hollow(Arc::new(HollowRuntime::new(hollow)))
        } else {
            let state_dir = args
                .state_dir
                .clone()
                .unwrap_or_else(|| crate::up::default_data_dir().join(format!("node-{name}")));
            config.host_netns = net.host_netns.clone();
            config.uplink = net.uplink.clone();
            config.metrics_period = std::time::Duration::from_secs(args.metrics_period);
            linux_backend_in(
                state_dir,
                &args.bridge,
                &args.pod_cidr,
                &name,
                net.host_netns.clone(),
                &args.security,
            )?
        };
        let shutdown = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = shoal_agent::run(config, backend, nats, shutdown.wait()).await {
                eprintln!("error: node agent {name}: {e}");
            }
        }));
    }
    eprintln!(
        "{} node agent(s) running{}; Ctrl-C stops them (containers keep running)",
        count,
        if args.hollow { " (hollow)" } else { "" }
    );
    let _ = tokio::signal::ctrl_c().await;
    trigger.fire();
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}
