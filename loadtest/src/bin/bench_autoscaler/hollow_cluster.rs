//! The cluster `stability` and `scale` run on: nats-server (identities on), the API,
//! scheduler and controllers in this process (as the other hollow benchmarks run them),
//! hollow nodes in a child process, the autoscaler in a process of its own, and one
//! connection per hollow node for its synthetic usage samples.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bus_schemas::kinds::{HorizontalPodAutoscaler, Node, Pod};
use bus_schemas::meta::find_condition;
use bus_schemas::roles::Role;
use bus_schemas::selector::Selector;
use shoal_bus::natsd::Natsd;
use shoal_bus::{ApiClient, Informer};

use crate::autoscaler_process::ActorProcess;
use crate::common::{self, HollowFleet, Identities};
use crate::objects::wait_until;

pub struct HollowCluster {
    pub url: String,
    pub identities: Identities,
    /// Kept running (its actors and caches) for as long as the cluster is.
    _control_plane: common::ControlPlane,
    /// The generator, as an operator.
    pub api: ApiClient,
    pub admin: async_nats::Client,
    /// Node name → a connection with that node's identity.
    pub node_conns: HashMap<String, async_nats::Client>,
    pub pods: Informer<Pod>,
    pub hpas: Informer<HorizontalPodAutoscaler>,
    _fleet: HollowFleet,
    _natsd: Natsd,
    _dir: tempfile::TempDir,
    /// Last: everything above is dropped while it still runs.
    pub runtime: tokio::runtime::Runtime,
}

/// Starts nats-server and the control plane, then the fleet of `nodes` hollow nodes;
/// returns once they are all Ready.
pub fn start(nodes: usize) -> Result<HollowCluster> {
    let dir = tempfile::tempdir()?;
    let (runtime, natsd) = common::start_nats(dir.path())?;
    let url = natsd.url();
    let identities = Identities::of(&runtime, &natsd)?;
    identities.issue_fleet(&runtime, &natsd, nodes)?;
    let control_plane = common::start_control_plane(url.clone(), &identities, true)?;
    let fleet = HollowFleet::spawn(&url, &identities, nodes, Duration::from_secs(10))?;
    let started = runtime.block_on(async {
        let admin = shoal_bus::connect(&url, "bench-generator", &identities.admin).await?;
        let api = ApiClient::new(admin.clone()).with_deadline(Duration::from_secs(60));
        let mut node_conns = HashMap::new();
        for i in 0..nodes {
            let name = common::node_name(i);
            let auth = natsd
                .creds(&Role::Node(name.clone()))
                .await
                .with_context(|| format!("the credential of node {name}"))?;
            let conn = shoal_bus::connect(&url, &format!("bench-usage-{name}"), &auth).await?;
            node_conns.insert(name, conn);
        }
        let node_cache: Informer<Node> = control_plane.informers.get();
        let start = Instant::now();
        wait_until(
            &format!("{nodes} hollow nodes Ready"),
            Duration::from_secs(300),
            || async {
                node_cache
                    .list(None, &Selector::everything())
                    .iter()
                    .filter(|n| {
                        find_condition(&n.status.conditions, "Ready")
                            .is_some_and(|c| c.status == "True")
                    })
                    .count()
                    >= nodes
            },
        )
        .await?;
        println!(
            "{nodes} hollow node(s) Ready after {:.1} s",
            start.elapsed().as_secs_f64()
        );
        let pods = control_plane.informers.get::<Pod>();
        let hpas = control_plane.informers.get::<HorizontalPodAutoscaler>();
        anyhow::Ok((admin, api, node_conns, pods, hpas))
    });
    let (admin, api, node_conns, pods, hpas) = started?;
    Ok(HollowCluster {
        url,
        identities,
        api,
        admin,
        node_conns,
        pods,
        hpas,
        _fleet: fleet,
        _control_plane: control_plane,
        _natsd: natsd,
        _dir: dir,
        runtime,
    })
}

impl HollowCluster {
    /// The autoscaler as its own process, its actors' usage window 1 s (as `shoal up
    /// --metrics-period 1`).
    pub fn autoscaler(&self) -> Result<ActorProcess> {
        let auth_dir = self
            .identities
            .auth_dir
            .as_ref()
            .context("identities are on: the bus has an identity directory")?;
        ActorProcess::start(&self.url, auth_dir, "autoscaler", Duration::from_secs(1))
    }

    /// How many of `namespace`'s pods are Running.
    pub fn running(&self, namespace: &str) -> usize {
        self.pods
            .list(Some(namespace), &Selector::everything())
            .iter()
            .filter(|p| p.status.phase == "Running")
            .count()
    }

    /// How many of `namespace`'s HPAs read their metrics (ScalingActive True).
    pub fn active_hpas(&self, namespace: &str) -> usize {
        self.hpas
            .list(Some(namespace), &Selector::everything())
            .iter()
            .filter(|h| {
                find_condition(&h.status.conditions, "ScalingActive")
                    .is_some_and(|c| c.status == "True")
                    && !h.status.current_metrics.is_empty()
            })
            .count()
    }
}
