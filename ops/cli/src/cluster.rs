//! Several machines: the nats-server `shoal up` starts as one server of a NATS cluster, and
//! the cluster's health as `shoal version` prints it.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use shoal_bus::cluster::config::check_server_name;
use shoal_bus::cluster::{ClusterConfig, ClusterHealth};
use shoal_bus::natsd::{Natsd, NatsdConfig};

use crate::cli::UpArgs;

/// Where a clustered server serves monitoring (`/jsz` names the JetStream meta leader).
pub const MONITOR_PORT: u16 = 8222;

/// How long the first server of a new cluster waits for a quorum of its peers to start.
const QUORUM_WITHIN: Duration = Duration::from_secs(300);

/// The configuration of the nats-server `shoal up` starts: single, or one of a cluster when
/// `--routes` names peers.
pub fn server_config(args: &UpArgs, data_dir: &Path) -> Result<NatsdConfig> {
    let mut config = NatsdConfig::new(args.port, data_dir.join("nats"));
    config.host = args.nats_host.clone();
    check_server_name(&args.server_name)?;
    config.server_name = args.server_name.clone();
    if let Some(routes) = &args.routes {
        config.cluster = Some(ClusterConfig::parse(&args.cluster_listen, routes)?);
        config.monitor_port = Some(MONITOR_PORT);
    }
    Ok(config)
}

/// Starts the server; a clustered one answers only once a quorum of its peers runs, which on
/// several machines started by hand may take a while: say what it waits for.
pub async fn start_server(config: NatsdConfig) -> Result<Natsd> {
    if config.cluster.is_none() {
        return Natsd::start(config).await.context("starting nats-server");
    }
    let routes = config
        .cluster
        .as_ref()
        .map(|c| c.routes.join(", "))
        .unwrap_or_default();
    let mut server = Natsd::launch(config).context("starting nats-server")?;
    let start = Instant::now();
    let mut told = false;
    loop {
        match server.ready().await {
            Ok(()) => return Ok(server),
            // No peer can bring back a server that exited (its port taken, a bad store):
            // the error names its log.
            Err(e @ shoal_bus::natsd::NatsdError::Exited { .. }) => {
                return Err(e).context("starting nats-server")
            }
            Err(e) if start.elapsed() >= QUORUM_WITHIN => {
                return Err(e).context(format!(
                    "no JetStream quorum with the peers {routes}: start `shoal up` on them (same --replicas, their own --server-name)"
                ))
            }
            Err(_) if !told => {
                eprintln!("waiting for a quorum of the NATS cluster (peers {routes}) …");
                told = true;
            }
            Err(_) => {}
        }
    }
}

/// The replica count of the cluster's state when this command creates it.
pub fn state_replicas(args: &UpArgs) -> usize {
    if let Some(n) = args.replicas {
        return n as usize;
    }
    match (&args.join, &args.routes) {
        (None, Some(routes)) => {
            let servers = 1 + shoal_bus::server_urls(routes).len();
            servers.min(3)
        }
        _ => 1,
    }
}

/// Prints the NATS cluster's health: servers, the JetStream meta leader (from the connected
/// server's monitoring endpoint, when it serves one) and each stream's replicas.
pub async fn print_health(nats: &async_nats::Client, url: &str) {
    let health = ClusterHealth::read(nats).await;
    if health.cluster.is_none() {
        println!("NATS cluster: single server");
    } else {
        let meta = meta_cluster(url).await;
        // The meta group counts every JetStream server, even one whose client URL the
        // connected server has not heard of yet (or one that listens on several addresses).
        let servers = match &meta {
            Ok(m) if m.size > 0 => m.size,
            _ => health.servers.len().max(1),
        };
        println!(
            "NATS cluster: {servers} servers (connected to {}; client URLs {})",
            health.connected,
            health.servers.join(", ")
        );
        let leader = match meta {
            Ok(MetaCluster {
                leader: Some(leader),
                ..
            }) => leader,
            Ok(_) => "none (no quorum)".to_string(),
            Err(e) => format!("unknown ({e})"),
        };
        println!("JetStream meta leader: {leader}");
    }
    for stream in &health.streams {
        if stream.error.is_some() && stream.stream != shoal_bus::cluster::health::shoal_streams()[0]
        {
            // Optional streams (no image imported yet) are not news.
            continue;
        }
        let mark = if stream.fully_replicated() {
            "ok"
        } else {
            "DEGRADED"
        };
        println!("  {:<18} {mark:<8} {}", stream.stream, stream.summary());
    }
}

/// One line under `shoal get nodes` on a NATS cluster: the servers and whether the state
/// stream is fully replicated, so a lost server shows next to the lost nodes.
pub async fn print_footer(nats: &async_nats::Client) {
    use shoal_bus::cluster::health::{cluster_name, cluster_urls};
    let info = nats.server_info();
    if cluster_name(&info).is_none() {
        return;
    }
    let servers = cluster_urls(&info).len().max(1);
    let js = async_nats::jetstream::new(nats.clone());
    let state =
        shoal_bus::cluster::health::stream_health(&js, bus_schemas::subjects::OBJECTS_STREAM).await;
    println!(
        "\nNATS cluster: {servers} servers; {}: {}",
        state.stream,
        state.summary()
    );
}

/// The JetStream meta group as one server's monitoring endpoint reports it.
struct MetaCluster {
    leader: Option<String>,
    /// Servers in the meta group (0 when the endpoint does not say).
    size: usize,
}

/// The JetStream meta group as the monitoring endpoint of the server at `url` reports it.
async fn meta_cluster(url: &str) -> Result<MetaCluster> {
    let first = shoal_bus::server_urls(url)
        .first()
        .copied()
        .unwrap_or("nats://127.0.0.1:4222");
    let host = first
        .trim_start_matches("nats://")
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or("127.0.0.1");
    let jsz = shoal_bus::natsd::fetch_monitor(&format!("{host}:{MONITOR_PORT}"), "/jsz").await?;
    Ok(MetaCluster {
        leader: jsz
            .pointer("/meta_cluster/leader")
            .and_then(|l| l.as_str())
            .filter(|l| !l.is_empty())
            .map(String::from),
        size: jsz
            .pointer("/meta_cluster/cluster_size")
            .and_then(|n| n.as_u64())
            .unwrap_or(0) as usize,
    })
}
