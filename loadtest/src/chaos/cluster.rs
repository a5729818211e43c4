//! The chaos run's cluster: four hosts of the test fabric (three servers, one client), the
//! NATS cluster, the actor processes on each server host, and the faults injected into them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bus_schemas::kinds::{Lease, Node};
use bus_schemas::subjects;
use shoal_bus::cluster::health::{stream_health, StreamHealth};
use shoal_bus::cluster::testing::{NatsCluster, ServerHost};
use shoal_bus::store::{ensure_stream, StreamSettings};
use shoal_bus::ApiClient;
use shoal_node::testnet::Fabric;

use super::ChaosArgs;

pub const SERVERS: usize = 3;
/// How long a fault may take to heal before it counts as "never converged".
const CONVERGE_WITHIN: Duration = Duration::from_secs(60);
/// How far behind its leader a follower may be and still count as replicated: the churn
/// writes continuously, so a follower asked at any instant trails by the entries in flight.
const IN_FLIGHT_ENTRIES: u64 = 16;
/// A cut host stays cut this long.
const CUT_FOR: Duration = Duration::from_secs(10);
/// How long each check of "serving" may take: a write acknowledged later than this does not
/// count (Kubernetes' SLO for a single object's mutating call is a p99 of 1 s). Unbounded, a
/// stream-info request that nobody answered (5 s) or a create that the client retried (up
/// to 8 s) held up the whole round, so a part that had healed was seen seconds late.
const CHECK_WITHIN: Duration = Duration::from_secs(1);

pub fn fabric() -> Result<Fabric> {
    Fabric::new(SERVERS + 1).context("building the test fabric (needs root and iproute2)")
}

/// What the client thread needs of the fabric: names only, so it can own no namespace.
pub struct Plan {
    pub hosts: Vec<ServerHost>,
    pub client_netns: String,
    pub fabric_netns: String,
    pub ports: Vec<String>,
    pub dir: PathBuf,
    pub shoal: PathBuf,
}

impl Plan {
    pub fn new(fabric: &Fabric, dir: &Path, shoal: PathBuf) -> Plan {
        Plan {
            hosts: fabric.hosts[..SERVERS]
                .iter()
                .map(|h| ServerHost {
                    netns: h.netns.clone(),
                    address: h.address,
                })
                .collect(),
            client_netns: fabric.hosts[SERVERS].netns.clone(),
            fabric_netns: fabric.netns.clone(),
            ports: fabric.hosts.iter().map(|h| h.fabric_port.clone()).collect(),
            dir: dir.to_path_buf(),
            shoal,
        }
    }

    fn set_link(&self, host: usize, state: &str) -> Result<()> {
        shoal_node::testnet::ip(&[
            "-n",
            &self.fabric_netns,
            "link",
            "set",
            &self.ports[host],
            state,
        ])
        .context("setting a fabric port")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An API replica and a naming replica (DNS on the host's loopback).
    ApiNaming,
    /// The controllers (leader-elected) and a scheduler.
    ControllersScheduler,
    /// The host's hollow node agents.
    Nodes,
}

/// One actor process on one host; SIGKILLed when dropped, and when the run itself dies
/// (however it dies: it is tied to the run by `PR_SET_PDEATHSIG`).
pub struct ActorProcess {
    pub host: usize,
    pub role: Role,
    args: Vec<String>,
    netns: String,
    shoal: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl ActorProcess {
    fn spawn(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.netns])
            .arg(&self.shoal)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = shoal_bus::tied::spawn(command, nix::sys::signal::Signal::SIGKILL)
            .with_context(|| format!("starting {} {:?}", self.shoal.display(), self.args))?;
        self.child = Some(child);
        Ok(())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            // SIGKILLed, it is gone at once: this wait only reaps it.
            let _ = child.wait();
        }
    }

    pub fn describe(&self) -> String {
        let role = match self.role {
            Role::ApiNaming => "API+naming replica",
            Role::ControllersScheduler => "controllers+scheduler",
            Role::Nodes => "node agents",
        };
        format!("{role} on h{}", self.host + 1)
    }
}

pub struct FaultRecord {
    /// Since the churn started.
    pub at: Duration,
    pub what: String,
    /// From the fault's end (restart, restored link) until the cluster served again, in
    /// parts.
    pub converged: Convergence,
}

struct Serving {
    write: bool,
    replicated: bool,
    nodes_ready: bool,
    /// The state stream's replicas, as `shoal version` shows them.
    replication: String,
}

impl Serving {
    fn all(&self) -> bool {
        self.write && self.replicated && self.nodes_ready
    }
}

/// When, after a fault's end, each part of serving turned true for good (`None`: never
/// within the limit).
#[derive(Default, Clone, Copy)]
pub struct Convergence {
    pub all: Option<Duration>,
    pub write: Option<Duration>,
    pub replicated: Option<Duration>,
    pub nodes_ready: Option<Duration>,
}

impl Convergence {
    /// `9.80 ms (write 0.10 ms, replicated 2.30 ms, nodes Ready 9.80 ms)`.
    pub fn describe(&self) -> String {
        format!(
            "{} (write {}, replicated {}, nodes Ready {})",
            shown(self.all),
            shown(self.write),
            shown(self.replicated),
            shown(self.nodes_ready)
        )
    }
}

/// A convergence time, or `never` when it did not come within the limit.
fn shown(d: Option<Duration>) -> String {
    d.map(crate::stats::ms).unwrap_or_else(|| "never".into())
}

/// Which faults a run injects, in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FaultKind {
    /// SIGKILL of an actor process (or the controllers leader), then its restart.
    Actor,
    /// SIGKILL of a nats-server, then its restart.
    Server,
    /// One host's link cut for 10 s.
    Cut,
}

pub struct World {
    pub plan: Plan,
    pub cluster: NatsCluster,
    pub nats: async_nats::Client,
    /// As the API: the throughput baseline makes and drops streams of its own, which only
    /// the API's identity may.
    pub api_nats: async_nats::Client,
    pub processes: Vec<ActorProcess>,
    nodes_per_host: usize,
}

impl World {
    pub async fn start(plan: Plan, args: &ChaosArgs) -> Result<World> {
        // Every hollow node's credential exists before the servers read their configuration,
        // so none needs a reload; the actor processes read theirs from the directory.
        let auth = shoal_bus::auth::AuthDir::provision(plan.dir.join("auth"))?;
        let nodes: Vec<(bus_schemas::roles::Role, String)> = (0..plan.hosts.len())
            .flat_map(|host| {
                (0..args.nodes_per_host.max(1)).map(move |i| {
                    let name = if args.nodes_per_host > 1 {
                        format!("h{}-{i}", host + 1)
                    } else {
                        format!("h{}", host + 1)
                    };
                    let role = bus_schemas::roles::Role::Node(name);
                    let id = shoal_bus::auth::default_name(&role);
                    (role, id)
                })
            })
            .collect();
        auth.ensure_many(&nodes)?;
        let creds_dir = auth.dir().join("creds").display().to_string();
        let cluster = NatsCluster::start(&plan.hosts, &plan.dir)
            .await
            .context("starting three nats-servers")?;
        // The state log is the API's to create; the checker then acts as the operator.
        let api = cluster.creds(&bus_schemas::roles::Role::Api).await?;
        let admin = cluster.creds(&bus_schemas::roles::Role::Admin).await?;
        let bootstrap = shoal_bus::connect(&cluster.url(), "chaos-bootstrap", &api).await?;
        let nats = shoal_bus::connect(&cluster.url(), "chaos-client", &admin).await?;
        let js = async_nats::jetstream::new(bootstrap.clone());
        ensure_stream(&js, &StreamSettings { replicas: SERVERS })
            .await
            .context("creating the state at R3")?;
        let url = cluster.url();
        let mut processes = Vec::new();
        for (host, server) in plan.hosts.iter().enumerate() {
            let data = |what: &str| plan.dir.join(format!("h{}-{what}", host + 1));
            let common = |what: &str| {
                vec![
                    "--nats".to_string(),
                    url.clone(),
                    "--creds".into(),
                    creds_dir.clone(),
                    "up".into(),
                    "--join".into(),
                    url.clone(),
                    "--metrics-addr".into(),
                    String::new(),
                    "--data-dir".into(),
                    data(what).display().to_string(),
                    "--lease-seconds".into(),
                    "4".into(),
                ]
            };
            let mut api = common("api");
            api.extend(
                ["--actors", "api,naming", "--dns-listen", "127.0.0.1:53"].map(String::from),
            );
            let mut ctl = common("controllers");
            ctl.extend(["--actors", "controllers,scheduler"].map(String::from));
            let nodes = vec![
                "--nats".to_string(),
                url.clone(),
                "--creds".into(),
                creds_dir.clone(),
                "node".into(),
                "--hollow".into(),
                "--count".into(),
                args.nodes_per_host.to_string(),
                "--name".into(),
                format!("h{}", host + 1),
                "--pod-cidr".into(),
                format!("10.{}.0.0/16", 200 + host),
            ];
            for (role, argv) in [
                (Role::ApiNaming, api),
                (Role::ControllersScheduler, ctl),
                (Role::Nodes, nodes),
            ] {
                let mut p = ActorProcess {
                    host,
                    role,
                    args: argv,
                    netns: server.netns.clone(),
                    shoal: plan.shoal.clone(),
                    log: plan.dir.join(format!("h{}-{role:?}.log", host + 1)),
                    child: None,
                };
                p.spawn()?;
                processes.push(p);
            }
        }
        let world = World {
            plan,
            cluster,
            nats,
            api_nats: bootstrap,
            processes,
            nodes_per_host: args.nodes_per_host,
        };
        let api = ApiClient::new(world.nats.clone()).with_deadline(Duration::from_secs(5));
        let start = Instant::now();
        while !world.serving(&api).await.all() {
            if start.elapsed() > Duration::from_secs(180) {
                anyhow::bail!(
                    "the actors did not come up within 180 s: see the logs in {}",
                    world.plan.dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(world)
    }

    /// Whether each part of "serving" holds now. All three are checked every time, so a
    /// fault's report can say which one healed last.
    async fn serving(&self, api: &ApiClient) -> Serving {
        let probe: Lease = serde_json::from_value(serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"generateName": "chaos-probe-", "namespace": "default"},
            "spec": {}
        }))
        .expect("probe lease");
        let js = async_nats::jetstream::new(self.nats.clone());
        // Checked together, so one slow answer does not delay seeing the others.
        let all_nodes = bus_schemas::api::ListOptions::default();
        let (write, health, nodes) = tokio::join!(
            tokio::time::timeout(CHECK_WITHIN, api.create(&probe)),
            tokio::time::timeout(CHECK_WITHIN, stream_health(&js, subjects::OBJECTS_STREAM)),
            tokio::time::timeout(CHECK_WITHIN, api.list::<Node>(&all_nodes))
        );
        let write = matches!(write, Ok(Ok(_)));
        let health = health.unwrap_or_else(|_| {
            StreamHealth::unreadable(
                subjects::OBJECTS_STREAM,
                format!("no answer within {CHECK_WITHIN:?}"),
            )
        });
        let replicated = health.keeping_up(IN_FLIGHT_ENTRIES);
        let nodes_ready = match nodes {
            Ok(Ok(nodes)) => {
                nodes.items.len() == SERVERS * self.nodes_per_host
                    && nodes.items.iter().all(Node::is_ready)
            }
            _ => false,
        };
        let replication = health.summary();
        Serving {
            write,
            replicated,
            nodes_ready,
            replication,
        }
    }

    /// The time until the API acknowledges a write, the state is fully replicated and every
    /// node is Ready, with the time each of the three last turned true.
    async fn wait_serving(&self, api: &ApiClient) -> Convergence {
        let start = Instant::now();
        let mut parts = Convergence::default();
        while start.elapsed() < CONVERGE_WITHIN {
            let now = self.serving(api).await;
            let at = start.elapsed();
            if super::debugging() {
                eprintln!(
                    "  {} {:>5.1}s serving? write {} nodes Ready {} objects {}",
                    chrono::Utc::now().format("%H:%M:%S%.3f"),
                    at.as_secs_f64(),
                    now.write,
                    now.nodes_ready,
                    now.replication
                );
            }
            for (holds, since) in [
                (now.write, &mut parts.write),
                (now.replicated, &mut parts.replicated),
                (now.nodes_ready, &mut parts.nodes_ready),
            ] {
                if !holds {
                    *since = None;
                } else if since.is_none() {
                    *since = Some(at);
                }
            }
            if now.all() {
                parts.all = Some(at);
                return parts;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        parts
    }

    /// The process holding the controllers' Lease, if one does (its identity names its pid).
    async fn controllers_leader(&self, api: &ApiClient) -> Option<usize> {
        let lease: Lease = api.get("shoal-system", "shoal-controllers").await.ok()?;
        let holder = lease.spec.holder_identity?;
        self.processes.iter().position(|p| {
            p.role == Role::ControllersScheduler
                && p.pid()
                    .is_some_and(|pid| holder.contains(&format!("-{pid}-")))
        })
    }

    /// Injects fault number `round` (the kinds in turn; the victim picked at random), ends it
    /// and measures how long the cluster took to serve again.
    pub async fn inject(
        &mut self,
        round: usize,
        kinds: &[FaultKind],
        start: Instant,
        api: &ApiClient,
    ) -> FaultRecord {
        let at = start.elapsed();
        let what = match kinds[round % kinds.len()] {
            FaultKind::Actor => {
                let victim = if rand::random::<bool>() {
                    self.controllers_leader(api).await
                } else {
                    None
                }
                .unwrap_or_else(|| rand::random_range(0..self.processes.len()));
                let leader = self.controllers_leader(api).await == Some(victim);
                let p = &mut self.processes[victim];
                p.kill().await;
                let what = format!(
                    "SIGKILL {}{}",
                    p.describe(),
                    if leader { " (controllers leader)" } else { "" }
                );
                if let Err(e) = p.spawn() {
                    eprintln!("restarting {}: {e}", p.describe());
                }
                what
            }
            FaultKind::Server => {
                let victim = rand::random_range(0..SERVERS);
                self.cluster.kill(victim).await;
                tokio::time::sleep(Duration::from_secs(2)).await;
                if let Err(e) = self.cluster.restart(victim).await {
                    eprintln!("restarting nats-server s{}: {e}", victim + 1);
                }
                format!("SIGKILL nats-server s{}, restart", victim + 1)
            }
            FaultKind::Cut => {
                let victim = rand::random_range(0..SERVERS);
                let cut = self.plan.set_link(victim, "down");
                tokio::time::sleep(CUT_FOR).await;
                let _ = self.plan.set_link(victim, "up");
                match cut {
                    Ok(()) => format!("cut h{} off for {} s", victim + 1, CUT_FOR.as_secs()),
                    Err(e) => format!("cutting h{} failed: {e}", victim + 1),
                }
            }
        };
        if super::debugging() {
            eprintln!(
                "  {} fault over: {what}",
                chrono::Utc::now().format("%H:%M:%S%.3f")
            );
        }
        FaultRecord {
            at,
            what,
            converged: self.wait_serving(api).await,
        }
    }

    pub async fn stop(&mut self) {
        for p in &mut self.processes {
            p.kill().await;
        }
        for i in 0..SERVERS {
            self.cluster.kill(i).await;
        }
    }
}

impl Drop for ActorProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // A run cut short still reconnects every host before the fabric goes.
        for i in 0..SERVERS {
            let _ = self.plan.set_link(i, "up");
        }
    }
}
