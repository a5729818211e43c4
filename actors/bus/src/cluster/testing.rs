//! A NATS cluster of three (or more) real nats-servers for tests and benchmarks, one per host
//! of a multi-host fabric (network namespaces): each server listens for clients on its
//! host's address, port 4222, and for routes on port 6222, and routes to every other host.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use bus_schemas::roles::Role;

use crate::auth::{AuthDir, ClientAuth};
use crate::natsd::{Natsd, NatsdConfig, NatsdError};

use super::config::{ClusterConfig, CLUSTER_NAME};

pub const CLIENT_PORT: u16 = 4222;
pub const ROUTE_PORT: u16 = 6222;

/// Where one server runs: a host namespace and its address on the fabric.
#[derive(Debug, Clone)]
pub struct ServerHost {
    pub netns: String,
    pub address: Ipv4Addr,
}

/// The servers, killed when dropped (each [`Natsd`] is).
pub struct NatsCluster {
    pub servers: Vec<Natsd>,
}

/// The name of server `i` in JetStream's Raft groups.
pub fn server_name(i: usize) -> String {
    format!("s{}", i + 1)
}

fn config(hosts: &[ServerHost], i: usize, dir: &Path, auth: &AuthDir) -> NatsdConfig {
    let host = &hosts[i];
    let mut config = NatsdConfig::new(CLIENT_PORT, dir.join(server_name(i)));
    config.auth = Some(auth.clone());
    config.host = host.address.to_string();
    config.server_name = server_name(i);
    config.netns = Some(host.netns.clone());
    config.cluster = Some(ClusterConfig {
        name: CLUSTER_NAME.to_string(),
        listen: format!("{}:{ROUTE_PORT}", host.address),
        routes: hosts
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, h)| format!("nats://{}:{ROUTE_PORT}", h.address))
            .collect(),
    });
    config
}

impl NatsCluster {
    /// Launches every server, then waits until each answers (a meta leader needs a quorum,
    /// so none would answer while started one by one). Stores go under `dir/s1`, `dir/s2` …
    pub async fn start(hosts: &[ServerHost], dir: &Path) -> Result<NatsCluster, NatsdError> {
        // One identity directory for all: every server admits the same credentials.
        let auth = AuthDir::provision(dir.join("auth")).map_err(NatsdError::Auth)?;
        let mut servers = Vec::new();
        for i in 0..hosts.len() {
            servers.push(Natsd::launch(config(hosts, i, dir, &auth))?);
        }
        for server in &mut servers {
            server.ready().await?;
        }
        Ok(NatsCluster { servers })
    }

    /// Every server's client URL, comma-separated, as `shoal_bus::connect` takes it.
    pub fn url(&self) -> String {
        self.servers
            .iter()
            .map(|s| s.url())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A built-in identity's credential (`api`, `admin`, …), valid on every server.
    pub async fn creds(&self, role: &Role) -> Result<ClientAuth, NatsdError> {
        self.servers[0].creds(role).await
    }

    pub fn server_url(&self, i: usize) -> String {
        self.servers[i].url()
    }

    pub fn store_dir(&self, i: usize) -> PathBuf {
        self.servers[i].config().data_dir.clone()
    }

    /// SIGKILLs server `i`, as a crash would.
    pub async fn kill(&mut self, i: usize) {
        self.servers[i].kill().await;
    }

    /// Starts server `i` again on its store, and waits until it answers.
    pub async fn restart(&mut self, i: usize) -> Result<(), NatsdError> {
        self.servers[i].restart().await
    }
}
