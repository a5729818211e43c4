//! The agent: registers the node, heartbeats, and runs one worker per pod bound here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder, Retryable};
use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::node::NodeStatus;
use bus_schemas::kinds::pod::PodStatus;
use bus_schemas::kinds::{Node, Pod};
use bus_schemas::meta::Condition;
use bus_schemas::subjects::{self, NodeReport};
use bus_schemas::{codec, Resource};
use shoal_bus::backoff::Backoff;
use shoal_bus::informer::INDEX_NODE;
use shoal_bus::{InformerFactory, ObjectKey, Store};
use shoal_node::Runtime;
use tokio::sync::{broadcast::error::RecvError, watch, Notify};

use crate::backend::Backend;
use crate::hostnet::{HostNet, LinkState};
use crate::machine::{MachineFacts, Pressure};
use crate::proxy::ProxyConfig;
use crate::registry::Registry;
use crate::spec::PodDefaults;
use crate::worker::{Adopted, Worker};

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Store(#[from] shoal_bus::StoreError),
    #[error(transparent)]
    Registry(#[from] crate::registry::RegistryError),
    #[error("runtime: {0}")]
    Runtime(String),
    #[error("configuration: {0}")]
    Config(String),
}

/// How long a node waits for the API to answer one of its reports.
const REPORT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct AgentConfig {
    pub node_name: String,
    pub pod_cidr: String,
    /// The node's address, reported as InternalIP and each pod's hostIP.
    pub host_ip: String,
    pub labels: BTreeMap<String, String>,
    pub max_pods: u32,
    /// How often a worker looks at its pod even when nothing changed.
    pub sync_period: Duration,
    /// Restart back-off: base doubling up to max (Kubernetes: 10 s up to 5 min).
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    pub heartbeat_interval: Duration,
    /// Node status is re-sent this often even when unchanged.
    pub status_interval: Duration,
    pub pod_defaults: PodDefaults,
    /// Share caches with other actors in this process.
    pub informers: Option<InformerFactory>,
    /// The network namespace holding the node's network (bridge, host veths, routes, Service
    /// rules; probes connect from there), e.g. `/run/netns/host-1`. None: the agent's own.
    /// Must match the Linux runtime's `NetworkConfig::host_netns` when both are set; either
    /// one alone is used for both.
    pub host_netns: Option<PathBuf>,
    /// An interface in the node's network checked on every heartbeat: without carrier (or
    /// down, or missing) the node reports Ready=False (reason NetworkUnavailable) although
    /// the agent still reaches the control plane from where it runs.
    pub uplink: Option<String>,
    pub proxy: ProxyConfig,
    /// How often pod usage is sampled and published (at least 1 s): the autoscaler's
    /// reaction time is bounded by it.
    pub metrics_period: Duration,
}

/// The shortest usage sample period: cgroup CPU counters over less are mostly noise.
pub const MIN_METRICS_PERIOD: Duration = Duration::from_secs(1);

impl AgentConfig {
    pub fn new(node_name: impl Into<String>, pod_cidr: impl Into<String>) -> Self {
        AgentConfig {
            node_name: node_name.into(),
            pod_cidr: pod_cidr.into(),
            host_ip: String::new(),
            labels: BTreeMap::new(),
            max_pods: 110,
            sync_period: Duration::from_secs(1),
            backoff_base: Duration::from_secs(10),
            backoff_max: Duration::from_secs(300),
            heartbeat_interval: Duration::from_secs(2),
            status_interval: Duration::from_secs(60),
            pod_defaults: PodDefaults::default(),
            informers: None,
            host_netns: None,
            uplink: None,
            proxy: ProxyConfig::default(),
            metrics_period: Duration::from_secs(5),
        }
    }

    /// The container and image-pull back-off after `exp` earlier failures: `backoff_base`
    /// doubling up to `backoff_max`, as Kubernetes does. The worker keeps `exp` itself
    /// because the state it reports (ErrImagePull on the first failure, BackOff after)
    /// depends on it.
    pub fn backoff(&self, exp: u32) -> Duration {
        self.backoff_policy()
            .build()
            .nth(exp.min(64) as usize)
            .unwrap_or(self.backoff_max)
    }

    fn backoff_policy(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.backoff_base)
            .with_max_delay(self.backoff_max)
            .without_max_times()
    }
}

/// What every worker shares.
pub struct AgentCtx {
    pub backend: Backend,
    pub nats_client: async_nats::Client,
    pub registry: Registry,
    pub config: AgentConfig,
    /// Where the node's network lives (probes connect from there).
    pub hostnet: HostNet,
    /// ConfigMaps and Secrets for pods' env and volumes.
    pub config_sources: crate::config::ConfigSources,
    /// Where pods' PersistentVolumeClaims are mounted from.
    pub claims: crate::storage::Claims,
    nats: async_nats::Client,
    runtime: Arc<dyn Runtime>,
    poke: Notify,
}

impl AgentCtx {
    /// Runs a runtime call: on a blocking thread for the real runtime (it forks and waits),
    /// inline for the hollow one (no kernel work, and thousands of pods).
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Runtime) -> shoal_node::Result<T> + Send + 'static,
    ) -> shoal_node::Result<T> {
        let rt = self.runtime.clone();
        if self.backend.is_hollow() {
            return f(rt.as_ref());
        }
        match tokio::task::spawn_blocking(move || f(rt.as_ref())).await {
            Ok(result) => result,
            Err(e) => Err(shoal_node::Error::Io {
                path: "<runtime>".into(),
                op: "runtime call",
                source: std::io::Error::other(e.to_string()),
            }),
        }
    }

    pub fn poke(&self) {
        self.poke.notify_waiters();
    }

    /// Sends one report and waits at most [`REPORT_TIMEOUT`] for the answer; the API drops
    /// a report it could only start on later, as nobody waits for it any more.
    pub(crate) async fn report(
        &self,
        what: NodeReport,
        body: Vec<u8>,
    ) -> Result<bytes::Bytes, String> {
        self.report_within(what, body, REPORT_TIMEOUT).await
    }

    /// [`Self::report`], waiting at most `timeout`.
    pub(crate) async fn report_within(
        &self,
        what: NodeReport,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<bytes::Bytes, String> {
        let subject = subjects::node_report(&self.config.node_name, what);
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(
            shoal_bus::client::HEADER_TIMEOUT_MS,
            timeout.as_millis().to_string().as_str(),
        );
        shoal_telemetry::propagation::inject_current(&mut headers);
        let reply = tokio::time::timeout(
            timeout,
            self.nats
                .request_with_headers(subject, headers, body.into()),
        )
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| e.to_string())?;
        if let Some(code) = reply
            .headers
            .as_ref()
            .and_then(|h| h.get(subjects::HEADER_CODE))
        {
            let status: Result<bus_schemas::Status, _> = codec::from_msgpack(&reply.payload);
            return Err(format!(
                "{}: {}",
                code,
                status.map(|s| s.message).unwrap_or_default()
            ));
        }
        Ok(reply.payload)
    }

    /// Writes a pod's status through the node's own subject. Returns whether there is
    /// nothing left to retry: it landed, or the pod is gone (its removal is on its way to
    /// this node's cache, and retrying would only add load to an API that may be why the
    /// cache is behind).
    pub async fn report_pod_status(&self, pod: &Pod, status: PodStatus) -> bool {
        let mut report = Pod::default();
        report.metadata.name = pod.metadata.name.clone();
        report.metadata.namespace = pod.metadata.namespace.clone();
        report.status = status;
        let Ok(body) = codec::to_msgpack(&report) else {
            return false;
        };
        match self.report(NodeReport::PodStatus, body).await {
            Ok(_) => true,
            Err(e) if e.starts_with("404") => {
                tracing::debug!(pod = %ObjectKey::of(pod), "pod gone before its status was written");
                true
            }
            Err(e) => {
                tracing::warn!(pod = %ObjectKey::of(pod), error = %e, "pod status not written; will retry");
                false
            }
        }
    }

    /// Tells the API the pod's containers are gone, so it can be removed. Returns whether
    /// there is nothing left to retry: it landed, the pod is gone, or its name now holds
    /// another pod (the uid precondition failed). A failure to reach the API (a server
    /// restarting, a partition) is retried by the caller: nothing else would ever remove
    /// the pod, which would stay terminating for good.
    pub async fn confirm_deleted(&self, pod: &Pod) -> bool {
        let options = DeleteOptions {
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            preconditions: Some(bus_schemas::api::Preconditions {
                uid: Some(pod.metadata.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        let Ok(body) = codec::to_msgpack(&options) else {
            return true;
        };
        let answer = self.report(NodeReport::PodDelete, body).await;
        let settled = deletion_settled(&answer);
        if let (false, Err(e)) = (settled, &answer) {
            tracing::warn!(pod = %ObjectKey::of(pod), error = %e, "pod deletion not confirmed; will retry");
        }
        settled
    }
}

/// Whether the API's answer to a deletion confirmation ends the worker's part: done, already
/// gone (404), or a conflict because the name now holds another pod (preconditions). Any
/// other conflict is a lost race that must be retried.
///
/// NOTE: every 409 used to count as done. The API answers 409 also when its compare-and-swap
/// lost to other writers sixteen times running (a replica whose reads trail, after a
/// partition), and a pod whose confirmation was dropped that way stayed terminating for good:
/// nothing else wakes its worker.
fn deletion_settled(answer: &Result<bytes::Bytes, String>) -> bool {
    match answer {
        Ok(_) => true,
        Err(e) if e.starts_with("404") => true,
        Err(e) if e.starts_with("409") => e.contains(bus_schemas::api::DELETE_PRECONDITIONS_FAILED),
        Err(_) => false,
    }
}

/// What a node reports besides its fixed facts; a change is reported at once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Health {
    pressure: Pressure,
    /// None: no uplink is watched.
    uplink: Option<LinkState>,
}

fn node_object(config: &AgentConfig, facts: &MachineFacts, hollow: bool, health: &Health) -> Node {
    let mut node = Node::default();
    node.set_type_meta();
    node.metadata.name = config.node_name.clone();
    node.metadata.labels = config.labels.clone();
    let labels = &mut node.metadata.labels;
    labels.insert("kubernetes.io/hostname".into(), config.node_name.clone());
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert(
        "kubernetes.io/arch".into(),
        facts.system_info(hollow).architecture,
    );
    if hollow {
        labels.insert("node.shoal.io/hollow".into(), "true".into());
    }
    node.spec.pod_cidr = config.pod_cidr.clone();
    node.spec.pod_cidrs = vec![config.pod_cidr.clone()];
    node.status = node_status(config, facts, hollow, health);
    node
}

fn node_status(
    config: &AgentConfig,
    facts: &MachineFacts,
    hollow: bool,
    health: &Health,
) -> NodeStatus {
    let pressure = health.pressure;
    let now = chrono::Utc::now();
    let condition = |type_: &str, ok: bool, reason: &str, message: &str| Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: message.into(),
        last_heartbeat_time: Some(now),
        ..Default::default()
    };
    NodeStatus {
        capacity: facts.capacity(config.max_pods),
        allocatable: facts.allocatable(config.max_pods),
        conditions: vec![
            match &health.uplink {
                Some(LinkState::Down(why)) => condition(
                    "Ready",
                    false,
                    "NetworkUnavailable",
                    &format!("node network is unavailable: {why}"),
                ),
                _ => condition(
                    "Ready",
                    true,
                    "AgentReady",
                    "shoal agent is posting ready status",
                ),
            },
            if pressure.memory {
                condition(
                    "MemoryPressure",
                    true,
                    "AgentHasInsufficientMemory",
                    "less than 5% of memory is available",
                )
            } else {
                condition(
                    "MemoryPressure",
                    false,
                    "AgentHasSufficientMemory",
                    "agent has sufficient memory available",
                )
            },
            if pressure.disk {
                condition(
                    "DiskPressure",
                    true,
                    "AgentHasDiskPressure",
                    "less than 10% of the state disk is free",
                )
            } else {
                condition(
                    "DiskPressure",
                    false,
                    "AgentHasNoDiskPressure",
                    "agent has no disk pressure",
                )
            },
            if pressure.pids {
                condition(
                    "PIDPressure",
                    true,
                    "AgentHasInsufficientPID",
                    "over 90% of pid_max is in use",
                )
            } else {
                condition(
                    "PIDPressure",
                    false,
                    "AgentHasSufficientPID",
                    "agent has sufficient PID available",
                )
            },
        ]
        .into_iter()
        .chain(health.uplink.as_ref().map(|link| match link {
            LinkState::Down(why) => condition("NetworkUnavailable", true, "UplinkDown", why),
            LinkState::Up => condition(
                "NetworkUnavailable",
                false,
                "UplinkUp",
                "the node's uplink is up",
            ),
        }))
        .collect(),
        addresses: facts.addresses(&config.host_ip, &config.node_name),
        node_info: facts.system_info(hollow),
        ..Default::default()
    }
}

/// Runs the agent until `shutdown` resolves. Containers keep running when it stops: a new
/// agent on the same state re-adopts them.
pub async fn run(
    config: AgentConfig,
    backend: Backend,
    nats: async_nats::Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), AgentError> {
    let store = Store::open(nats.clone()).await?;
    let informers = config
        .informers
        .clone()
        .unwrap_or_else(|| InformerFactory::new(store.clone()));
    let js = async_nats::jetstream::new(nats.clone());
    let registry = Registry::open(&js).await?;
    let runtime = backend.runtime();
    let hollow = backend.is_hollow();
    let mut config = config;
    config.host_netns = host_netns(&config, &backend)?;
    let hostnet = HostNet::new(config.host_netns.clone());
    if config.host_ip.is_empty() && !hollow {
        config.host_ip = host_ip(&config, &hostnet).await;
    }
    if !hollow {
        prepare_network(&config, &hostnet).await;
    }
    let facts = if hollow {
        MachineFacts::hollow()
    } else {
        MachineFacts::probe()
    };
    let ctx = Arc::new(AgentCtx {
        backend,
        nats_client: nats.clone(),
        registry,
        config: config.clone(),
        hostnet: hostnet.clone(),
        config_sources: crate::config::ConfigSources::new(&informers, &facts),
        claims: crate::storage::Claims::new(&informers),
        nats: nats.clone(),
        runtime,
        poke: Notify::new(),
    });

    register(&ctx, &facts, hollow).await;
    let heartbeat = tokio::spawn(heartbeat_loop(ctx.clone(), facts, hollow));
    let mut extras = Vec::new();
    if !hollow && config.proxy.enabled {
        match config.pod_cidr.parse() {
            Ok(pod_cidr) => extras.push(tokio::spawn(crate::proxy::run(
                config.proxy.clone(),
                crate::proxy::NodeNet { pod_cidr },
                hostnet.clone(),
                informers.get(),
                informers.get(),
            ))),
            Err(e) => {
                tracing::error!(error = %e, "pod CIDR unusable: no service proxy on this node")
            }
        }
    }
    // Hollow nodes have no disk to make volumes on: their claims stay Pending.
    if let (false, Some(state_dir)) = (hollow, ctx.backend.state_dir()) {
        let provisioner = crate::storage::provisioner::Provisioner::new(
            nats.clone(),
            &informers,
            &config.node_name,
            &state_dir,
        );
        extras.push(tokio::spawn(provisioner.run()));
    }
    extras.push(tokio::spawn(crate::inspect::serve_containers(
        ctx.clone(),
        nats.clone(),
    )));
    if !hollow {
        let pod_informer = informers.get::<Pod>();
        extras.push(tokio::spawn(crate::telemetry::serve_exec(
            ctx.clone(),
            nats.clone(),
            pod_informer,
        )));
    }
    // Hollow nodes publish too, but only for pods whose annotations give them usage (see
    // `hollow_usage`): a fleet of idle hollow nodes sends nothing.
    extras.push(tokio::spawn(crate::telemetry::publish_metrics(
        ctx.clone(),
        nats.clone(),
        informers.get::<Pod>(),
        ctx.config.metrics_period.max(MIN_METRICS_PERIOD),
    )));
    let pods = tokio::spawn(manage_pods(ctx.clone(), informers));
    shutdown.await;
    heartbeat.abort();
    pods.abort();
    for task in extras {
        task.abort();
    }
    Ok(())
}

/// The node's network namespace: the agent's setting or the runtime's, which must agree.
fn host_netns(config: &AgentConfig, backend: &Backend) -> Result<Option<PathBuf>, AgentError> {
    let runtime = match backend {
        Backend::Linux(rt) => rt.config().network.host_netns.clone(),
        Backend::Hollow(_) => None,
    };
    match (&config.host_netns, runtime) {
        (Some(agent), Some(rt)) if *agent != rt => Err(AgentError::Config(format!(
            "host_netns {} differs from the runtime's network namespace {}",
            agent.display(),
            rt.display()
        ))),
        (agent, rt) => Ok(agent.clone().or(rt)),
    }
}

/// The address reported as InternalIP when none is configured: the uplink's, else (in the
/// agent's own namespace) the default route's.
async fn host_ip(config: &AgentConfig, hostnet: &HostNet) -> String {
    if let Some(uplink) = config.uplink.clone() {
        let net = hostnet.clone();
        let found = tokio::task::spawn_blocking(move || net.ipv4_of(&uplink)).await;
        if let Ok(Ok(Some(ip))) = found {
            return ip.to_string();
        }
    }
    if config.host_netns.is_none() {
        return crate::machine::primary_ipv4().unwrap_or_default();
    }
    String::new()
}

async fn prepare_network(config: &AgentConfig, hostnet: &HostNet) {
    let cidr = match config.proxy.service_cidr.parse() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "service CIDR unusable: node network not prepared");
            return;
        }
    };
    let net = hostnet.clone();
    match tokio::task::spawn_blocking(move || crate::netsetup::prepare(&net, cidr)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::error!(error = %e, "pods on other nodes may not reach this node's pods")
        }
        Err(e) => tracing::error!(error = %e, "preparing the node network"),
    }
}

/// The uplink's state, when one is watched. Not being able to look counts as down.
async fn uplink(ctx: &AgentCtx) -> Option<LinkState> {
    let name = ctx.config.uplink.clone()?;
    if ctx.backend.is_hollow() {
        return Some(LinkState::Up);
    }
    let net = ctx.hostnet.clone();
    Some(
        match tokio::task::spawn_blocking(move || net.link_state(&name)).await {
            Ok(Ok(state)) => state,
            Ok(Err(e)) => LinkState::Down(e.to_string()),
            Err(e) => LinkState::Down(format!("checking the uplink: {e}")),
        },
    )
}

async fn health(ctx: &AgentCtx) -> Health {
    Health {
        pressure: pressure(ctx),
        uplink: uplink(ctx).await,
    }
}

fn pressure(ctx: &AgentCtx) -> Pressure {
    if ctx.backend.is_hollow() {
        return Pressure::default();
    }
    Pressure::probe(ctx.backend.state_dir().as_deref())
}

async fn register(ctx: &Arc<AgentCtx>, facts: &MachineFacts, hollow: bool) {
    let node = node_object(&ctx.config, facts, hollow, &health(ctx).await);
    let body = codec::to_msgpack(&node).unwrap_or_default();
    let until_the_bus_answers = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .without_max_times();
    let registered = (|| ctx.report(NodeReport::NodeStatus, body.clone()))
        .retry(until_the_bus_answers)
        .notify(|e, _| {
            tracing::warn!(node = %ctx.config.node_name, error = %e, "registering node; retrying");
        })
        .await;
    // Unreachable with unlimited retries; logged rather than unwrapped all the same.
    if let Err(e) = registered {
        tracing::error!(node = %ctx.config.node_name, error = %e, "registering node gave up");
    }
}

/// Beats every `heartbeat_interval`, whatever became of the last beat.
///
/// NOTE: a beat waits for its answer about one interval (at least 1 s). A beat is stale once
/// the next one is due, and waiting longer is what kept nodes NotReady after a network
/// partition healed: a beat sent into the cut hung for the full report timeout (10 s), then
/// the loop slept another interval, so the first beat after the link returned came up to
/// 14 s later.
async fn heartbeat_loop(ctx: Arc<AgentCtx>, facts: MachineFacts, hollow: bool) {
    let interval = ctx.config.heartbeat_interval;
    // Tests beat twice a second; an answer that slow still counts.
    let patience = interval.max(Duration::from_secs(1));
    let mut beats = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    // A beat that took its whole interval is followed at once by the next one, not by a
    // burst of the ones it missed.
    beats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut status_sent = tokio::time::Instant::now();
    let mut reported = health(&ctx).await;
    let mut failed_beats = 0u32;
    loop {
        beats.tick().await;
        match ctx
            .report_within(NodeReport::Heartbeat, Vec::new(), patience)
            .await
        {
            Ok(_) => failed_beats = 0,
            Err(e) => {
                tracing::warn!(node = %ctx.config.node_name, error = %e, "heartbeat failed");
                beats.reset_after(beat_retry_delay(failed_beats, interval));
                failed_beats = failed_beats.saturating_add(1);
            }
        }
        // Pressure and uplink changes are reported at once; otherwise status is refreshed
        // periodically.
        let now = health(&ctx).await;
        if status_sent.elapsed() >= ctx.config.status_interval || now != reported {
            let node = node_object(&ctx.config, &facts, hollow, &now);
            let Ok(body) = codec::to_msgpack(&node) else {
                continue;
            };
            // A change that did not land is tried again at the next heartbeat.
            match ctx
                .report_within(NodeReport::NodeStatus, body, patience)
                .await
            {
                Ok(_) => {
                    status_sent = tokio::time::Instant::now();
                    reported = now;
                }
                Err(e) => {
                    tracing::warn!(node = %ctx.config.node_name, error = %e, "node status not written")
                }
            }
        }
    }
}

/// How soon a failed heartbeat is tried again: 250 ms, doubling, at most 1 s (and never
/// later than the next regular beat), each spread by up to a fifth either way.
///
/// NOTE: a node is marked Ready again by its first beat that lands. Waiting a whole interval
/// (5 s) after a failed one kept nodes NotReady up to 5 s after the state stream had a
/// leader again following a network cut. The jitter keeps a fleet of agents, which all
/// failed together, from retrying in lockstep against an API that has just come back.
fn beat_retry_delay(failures: u32, interval: Duration) -> Duration {
    const BEAT_RETRY: Backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(1));
    let jittered = BEAT_RETRY
        .delay(failures)
        .mul_f64(rand::random_range(0.8..1.2));
    jittered.min(interval)
}

/// How often a node looks for pods it holds that no worker handles.
const WORKERLESS_RESYNC: Duration = Duration::from_secs(10);

/// Keeps one worker per pod bound to this node, fed by the shared pod cache.
async fn manage_pods(ctx: Arc<AgentCtx>, informers: InformerFactory) {
    let informer = informers.get::<Pod>();
    let node = ctx.config.node_name.clone();
    // Only this node's pods: a process hosting thousands of (hollow) agents must not wake
    // every one of them for every pod change in the cluster.
    let mut changes = informer.subscribe_index(INDEX_NODE, &node);
    if let Err(e) = informer.wait_synced().await {
        tracing::error!(error = %e, "pod cache cannot sync; not running pods");
        return;
    }
    let mine = informer.by_index(INDEX_NODE, &node);

    // Re-adopt what the runtime already runs; sweep what no pod wants.
    let sandboxes = ctx.call(|rt| rt.list_sandboxes()).await.unwrap_or_default();
    let containers = ctx
        .call(|rt| rt.list_containers())
        .await
        .unwrap_or_default();
    let keep: HashSet<String> = mine.iter().map(|p| p.metadata.uid.clone()).collect();
    let keep_for_sweep = keep.clone();
    match ctx
        .call(move |rt| rt.cleanup_orphans(&keep_for_sweep))
        .await
    {
        Ok(report) if !report.sandboxes.is_empty() => {
            tracing::info!(removed = ?report.sandboxes, "removed sandboxes no pod wants");
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "orphan sweep failed"),
    }
    let mut adopted: HashMap<String, Adopted> = HashMap::new();
    for s in sandboxes.into_iter().filter(|s| keep.contains(&s.id)) {
        let id = s.id.clone();
        adopted.entry(id).or_default().sandbox = Some(s);
    }
    for c in containers
        .into_iter()
        .filter(|c| keep.contains(&c.sandbox_id))
    {
        adopted
            .entry(c.sandbox_id.clone())
            .or_default()
            .containers
            .push(c);
    }

    let mut workers: HashMap<String, watch::Sender<Option<Arc<Pod>>>> = HashMap::new();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let route = |pod: Option<Arc<Pod>>,
                 uid: &str,
                 adopted: &mut HashMap<String, Adopted>,
                 workers: &mut HashMap<String, watch::Sender<Option<Arc<Pod>>>>| {
        if let Some(tx) = workers.get(uid) {
            let _ = tx.send(pod);
            return;
        }
        let Some(pod) = pod else { return };
        if matches!(pod.status.phase.as_str(), "Succeeded" | "Failed")
            && pod.metadata.deletion_timestamp.is_none()
        {
            return;
        }
        let (tx, rx) = watch::channel(Some(pod.clone()));
        let worker = Worker::new(ctx.clone(), &pod, adopted.remove(uid).unwrap_or_default())
            .trace_from(informer.clone());
        let done = done_tx.clone();
        let uid = uid.to_string();
        workers.insert(uid.clone(), tx);
        tokio::spawn(async move {
            worker.run(rx).await;
            let _ = done.send(uid);
        });
    };
    for pod in mine {
        let uid = pod.metadata.uid.clone();
        route(Some(pod), &uid, &mut adopted, &mut workers);
    }
    // A changed ConfigMap or Secret wakes the workers of the pods that read it, so their
    // volumes follow within a pass (level-triggered: a pod waiting for one starts too).
    let mut config_map_changes = ctx.config_sources.config_maps.subscribe();
    let mut secret_changes = ctx.config_sources.secrets.subscribe();
    let wake = |key: Option<&ObjectKey>,
                secret: bool,
                workers: &HashMap<String, watch::Sender<Option<Arc<Pod>>>>| {
        for pod in informer.by_index(INDEX_NODE, &node) {
            let uses = key.is_none_or(|key| {
                crate::config::sources::pod_uses(&pod, &key.namespace, &key.name, secret)
            });
            if let Some(tx) = workers.get(&pod.metadata.uid).filter(|_| uses) {
                tx.send_modify(|_| {});
            }
        }
    };
    // Level-triggered, as the kubelet's periodic sync is: a pod this node holds without a
    // worker gets one again. A worker ends when its pod's deletion was confirmed, and a pod
    // still here after that (an answer that was wrong, or an event that reached the worker
    // as it ended) would otherwise wait for a change that may never come, terminating for
    // good.
    let mut resync = tokio::time::interval(WORKERLESS_RESYNC);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    resync.reset();
    loop {
        tokio::select! {
            _ = resync.tick() => {
                for pod in informer.by_index(INDEX_NODE, &node) {
                    let uid = pod.metadata.uid.clone();
                    if !workers.contains_key(&uid) {
                        route(Some(pod), &uid, &mut adopted, &mut workers);
                    }
                }
            }
            change = config_map_changes.recv() => match change {
                Ok(change) => wake(Some(&change.key), false, &workers),
                Err(RecvError::Lagged(_)) => wake(None, false, &workers),
                Err(RecvError::Closed) => return,
            },
            change = secret_changes.recv() => match change {
                Ok(change) => wake(Some(&change.key), true, &workers),
                Err(RecvError::Lagged(_)) => wake(None, true, &workers),
                Err(RecvError::Closed) => return,
            },
            change = changes.recv() => match change {
                Ok(change) => {
                    let uid = change.new.metadata.uid.clone();
                    let bound_here = change.new.spec.node_name == node;
                    let was_here = change.old.as_ref().is_some_and(|o| o.spec.node_name == node);
                    if change.event == shoal_bus::EventType::Deleted {
                        if bound_here || was_here {
                            route(None, &uid, &mut adopted, &mut workers);
                        }
                    } else if bound_here {
                        route(Some(change.new.clone()), &uid, &mut adopted, &mut workers);
                    } else if was_here {
                        route(None, &uid, &mut adopted, &mut workers);
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    let current: HashMap<String, Arc<Pod>> = informer
                        .by_index(INDEX_NODE, &node)
                        .into_iter()
                        .map(|p| (p.metadata.uid.clone(), p))
                        .collect();
                    let running: Vec<String> = workers.keys().cloned().collect();
                    for uid in running {
                        if !current.contains_key(&uid) {
                            route(None, &uid, &mut adopted, &mut workers);
                        }
                    }
                    for (uid, pod) in current {
                        route(Some(pod), &uid, &mut adopted, &mut workers);
                    }
                }
                Err(RecvError::Closed) => return,
            },
            Some(uid) = done_rx.recv() => {
                workers.remove(&uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_deletion_that_landed_or_cannot_land_ends_the_worker() {
        let refused = |e: &str| Err::<bytes::Bytes, String>(e.to_string());
        assert!(deletion_settled(&Ok(bytes::Bytes::new())));
        assert!(deletion_settled(&refused(
            "404: Pod \"default/a\" not found"
        )));
        let other_pod = format!(
            "409: Operation cannot be fulfilled on Pod \"default/a\": {}",
            bus_schemas::api::DELETE_PRECONDITIONS_FAILED
        );
        assert!(deletion_settled(&refused(&other_pod)));
        assert!(!deletion_settled(&refused(
            "409: Operation cannot be fulfilled on Pod \"default/a\": too many concurrent writers"
        )));
        assert!(!deletion_settled(&refused("503: state log unavailable")));
        assert!(!deletion_settled(&refused("timed out")));
    }

    #[test]
    fn a_failed_beat_is_retried_within_a_second_and_never_after_the_next_beat() {
        let ms = |d: Duration| d.as_millis();
        for _ in 0..100 {
            let first = beat_retry_delay(0, Duration::from_secs(5));
            assert!((200..=300).contains(&ms(first)), "{first:?}");
            let later = beat_retry_delay(10, Duration::from_secs(5));
            assert!((800..=1200).contains(&ms(later)), "{later:?}");
            // Tests beat twice a second: a retry never waits past the next regular beat.
            assert!(beat_retry_delay(10, Duration::from_millis(500)) <= Duration::from_millis(500));
        }
    }

    #[test]
    fn container_backoff_doubles_from_the_base_up_to_the_cap() {
        let config = AgentConfig::new("n1", "10.0.0.0/24");
        let secs: Vec<u64> = (0..8).map(|exp| config.backoff(exp).as_secs()).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(config.backoff(u32::MAX / 2), Duration::from_secs(300));
    }
}
