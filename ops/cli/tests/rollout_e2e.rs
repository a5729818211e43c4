//! Issue 4 end to end: Deployments of busybox httpd roll from one image version to another on
//! 30 hollow nodes and one real node, while the controllers and the schedulers run as
//! separate `shoal up --join URL --actors …` processes that the test SIGKILLs mid-rollout.
//!
//! - Phase 1, standbys: two controllers processes (leader election: one acts, one stands by)
//!   and two scheduler processes (both act: schedulers share nodes through the per-node
//!   allocation records and need no election). Mid-rollout v1 → v2 the process holding the
//!   controllers' lease and a scheduler that has been placing pods of this rollout are
//!   killed; the standby takes the lease once it lapses, the other scheduler places the rest.
//! - Phase 2, restart: the only controllers process and the only scheduler left are killed
//!   mid-rollout v2 → v1 (back to the first ReplicaSet); new processes are started and
//!   finish it.
//!
//! Two Deployments roll at the same time: `web` (12 replicas, maxSurge 3, maxUnavailable 2),
//! placed by the scheduler across the nodes, and `edge` (3 replicas, maxSurge 1,
//! maxUnavailable 1), pinned to the real node, so real containers (pulled, started, probed
//! over HTTP, stopped) are part of every rollout. A watcher (a list of pods, then a watch from
//! the list's resourceVersion) counts each Deployment's Ready pods after every event. After
//! each phase: the minimum never fell below replicas − maxUnavailable; exactly `replicas`
//! pods exist, all of the new ReplicaSet, Running and Ready, names and uids unique; no pod
//! was created during the phase beyond the `replicas` of the new ReplicaSet (none
//! duplicated, none lost and replaced); the old ReplicaSet is at 0; the Deployment's status
//! is complete for its generation; the real node's containers serve the new version; and
//! the surviving (or restarted) scheduler placed pods after the kill. A third Deployment,
//! `bulk` (150 pods on hollow nodes), is left alone throughout: not one of its pods may be
//! created or go unready across the takeovers.
//!
//! In this process: nats-server and the API (LocalCluster), the 31 node agents and the
//! watcher. Needs root, busybox-static and `shoal-shim` built beside the `shoal` binary
//! (`cargo build -p shoal-node --bin shoal-shim`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bus_schemas::api::ListOptions;
use bus_schemas::kinds::{Deployment, Lease, Node, Pod, ReplicaSet};
use bus_schemas::roles::Role;
use bus_schemas::{codec, subjects, Resource};
use shoal_agent::{AgentConfig, Backend};
use shoal_api::local::LocalCluster;
use shoal_bus::shutdown::{self, Trigger};
use shoal_bus::tied::TiedToThisThread;
use shoal_bus::watch::RawWatch;
use shoal_bus::{ApiClient, InformerFactory, Store};
use shoal_node::net::NetworkConfig;
use shoal_node::runtime::RuntimeConfig;
use shoal_node::testimage::{self, Layer, LayerBuilder};
use shoal_node::{HollowConfig, HollowRuntime, LinuxRuntime};
use shoal_scheduler::ledger::{Ledger, ALLOCATION_NAMESPACE, ANNOTATION_LEDGER};

const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");
/// Bound on every wait: generous, CI is a loaded 2-core machine.
const T: Duration = Duration::from_secs(90);
/// The controllers' lease: short, so a standby takes over within seconds of a SIGKILL.
const LEASE_SECONDS: u64 = 4;
const HOLLOW_NODES: usize = 30;
const HASH: &str = "pod-template-hash";
const CONTROLLERS_LEASE: (&str, &str) = ("shoal-system", "shoal-controllers");

/// Where a Deployment's pods may go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Wherever the scheduler finds best.
    Any,
    /// Pinned (nodeSelector) to the real node.
    Real,
    /// Hollow nodes only.
    Hollow,
}

/// A Deployment under test and its rollout budget.
#[derive(Clone, Copy)]
struct Spec {
    name: &'static str,
    replicas: usize,
    max_surge: usize,
    max_unavailable: usize,
    placement: Placement,
}

const WEB: Spec = Spec {
    name: "web",
    replicas: 12,
    max_surge: 3,
    max_unavailable: 2,
    placement: Placement::Any,
};
const EDGE: Spec = Spec {
    name: "edge",
    replicas: 3,
    max_surge: 1,
    max_unavailable: 1,
    placement: Placement::Real,
};
/// The two Deployments that roll.
const SPECS: [Spec; 2] = [WEB, EDGE];
/// A bigger Deployment that never changes: a controllers process taking over must adopt its
/// pods as they are, not create any (its pod cache is the largest one to load).
const BULK: Spec = Spec {
    name: "bulk",
    replicas: 150,
    max_surge: 1,
    max_unavailable: 0,
    placement: Placement::Hollow,
};
/// Every Deployment the watcher follows.
const ALL: [Spec; 3] = [WEB, EDGE, BULK];

fn image(tag: &str) -> String {
    format!("shoal/busybox:{tag}")
}

// ---------------------------------------------------------------------------------------
// Child processes: `shoal up --join URL --actors …`.

/// One `shoal up` child. Killed (SIGKILL) on drop, so a failing test leaves none behind.
struct Actor {
    label: String,
    /// What the process printed as its identity (the controllers' lease holder; the
    /// scheduler's is `scheduler-<identity>`).
    identity: String,
    child: Child,
    log: PathBuf,
}

impl Actor {
    /// Starts `shoal up --join URL --actors ACTORS` and waits for its banner.
    /// `creds`: the cluster's credentials directory, each actor its own identity there.
    async fn start(label: &str, actors: &str, url: &str, creds: &Path, dir: &Path) -> Actor {
        let log = dir.join(format!("{label}.log"));
        // `--monitor` names a port nothing listens on: the joined server's durability check
        // fails at once (a warning) instead of waiting for a connect timeout.
        let child = Command::new(SHOAL)
            .args([
                "up",
                "--join",
                url,
                "--monitor",
                "127.0.0.1:1",
                "--actors",
                actors,
            ])
            .arg("--creds")
            .arg(creds)
            .args(["--lease-seconds", &LEASE_SECONDS.to_string(), "--data-dir"])
            .arg(dir.join(label))
            .env("SHOAL_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .tied_to_this_thread()
            .spawn()
            .unwrap();
        let mut actor = Actor {
            label: label.to_string(),
            identity: String::new(),
            child,
            log,
        };
        // A thread drains stdout to its end, so the child never blocks on (or dies of
        // SIGPIPE from) its stdout; the banner's identity line says it is up.
        let stdout = actor.child.stdout.take().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let identity = tokio::time::timeout(T, async {
            while let Some(line) = rx.recv().await {
                if let Some(id) = line.trim().strip_prefix("identity:") {
                    return Some(id.trim().to_string());
                }
            }
            None
        })
        .await;
        match identity {
            Ok(Some(id)) => actor.identity = id,
            _ => panic!(
                "{label} (shoal up --actors {actors}) did not start:\n{}",
                actor.log_tail(30)
            ),
        }
        actor
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Actor {
    fn drop(&mut self) {
        self.kill();
    }
}

// ---------------------------------------------------------------------------------------
// Nodes: 30 hollow agents and one real one, in this process.

struct RealNode {
    name: String,
    bridge: String,
    cidr: String,
    state: PathBuf,
}

impl RealNode {
    fn new(dir: &Path) -> RealNode {
        // Unique on this machine among tests running side by side: bridge, address range and
        // (through the name) the cgroup parent.
        let n = (std::process::id() % 200 + 20) as u8;
        RealNode {
            name: format!("rollout-real-{n}"),
            bridge: format!("shr{n}"),
            cidr: format!("10.232.{n}.0/24"),
            state: dir.join("real-node"),
        }
    }

    fn runtime_config(&self) -> RuntimeConfig {
        let mut rc = RuntimeConfig::new(
            self.state.clone(),
            NetworkConfig::new(&self.bridge, self.cidr.parse().unwrap()),
        );
        // Its own cgroup parent: the orphan sweep of one node never touches another's pods.
        rc.cgroup_parent = format!("shoal-test-{}", self.name);
        rc
    }

    /// Removes every sandbox, container, cgroup (its parent too) and address of this node,
    /// and its bridge.
    fn sweep(&self) {
        match LinuxRuntime::new(self.runtime_config()) {
            Ok(rt) => {
                for failure in rt.remove_all() {
                    eprintln!("test cleanup: {failure}");
                }
            }
            Err(e) => eprintln!("test cleanup: opening the real node's runtime: {e}"),
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .stderr(Stdio::null())
            .status();
    }
}

struct Nodes {
    real: RealNode,
    stop: Option<Trigger>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Nodes {
    async fn start(cluster: &LocalCluster, dir: &Path) -> Nodes {
        let shim = std::env::current_exe()
            .unwrap()
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("shoal-shim");
        assert!(
            shim.exists(),
            "{} is missing: cargo build -p shoal-node --bin shoal-shim",
            shim.display()
        );
        let real = RealNode::new(dir);
        // An earlier run killed before its Drop ran may have left this name's bridge or
        // cgroups behind.
        real.sweep();
        let informers = InformerFactory::new(cluster.store.clone());
        let (stop, shutdown) = shutdown::channel();
        let mut tasks = Vec::new();
        // Each node connects as its own identity, confined to its own subjects.
        let mut agents = Vec::new();
        let mut spawn = |config: AgentConfig, backend: Backend| agents.push((config, backend));
        for i in 0..HOLLOW_NODES {
            let cidr = format!("10.200.{i}.0/24");
            // Default heartbeats (2 s) against the controllers' 10 s grace: nodes must not go
            // NotReady (and get their pods evicted) because the machine is busy.
            let mut config = AgentConfig::new(format!("hollow-{i}"), cidr.clone());
            config.informers = Some(informers.clone());
            let hollow = HollowConfig {
                // Containers take a moment to start, so a rollout has steps to watch.
                start_delay: Duration::from_millis(300),
                failure_rate: 0.0,
                seed: i as u64 + 1,
                pod_cidr: cidr.parse().unwrap(),
            };
            spawn(
                config,
                Backend::Hollow(Arc::new(HollowRuntime::new(hollow))),
            );
        }
        let runtime = LinuxRuntime::new(real.runtime_config()).expect("the real node's runtime");
        let mut config = AgentConfig::new(real.name.clone(), real.cidr.clone());
        config.informers = Some(informers.clone());
        config.backoff_base = Duration::from_millis(500);
        // This node's network is the machine's own namespace, shared with other tests: no
        // Service rules there (the network tests cover the proxy in namespaces of their own).
        config.proxy.enabled = false;
        spawn(config, Backend::Linux(Arc::new(runtime)));
        for (config, backend) in agents {
            let name = config.node_name.clone();
            let nats = cluster
                .connect_as(&Role::Node(name.clone()), "rollout-node")
                .await
                .expect("a node connects with its credential");
            let shutdown = shutdown.clone();
            tasks.push(tokio::spawn(async move {
                if let Err(e) = shoal_agent::run(config, backend, nats, shutdown.wait()).await {
                    eprintln!("node agent {name} failed: {e}");
                }
            }));
        }
        Nodes {
            real,
            stop: Some(stop),
            tasks,
        }
    }

    /// Stops every agent and waits for them (containers keep running until the sweep).
    async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.fire();
        }
        for task in self.tasks.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
        }
    }
}

impl Drop for Nodes {
    // Also on panic: no container, cgroup, veth or bridge of this test may outlive it.
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.fire();
        }
        for task in &self.tasks {
            task.abort();
        }
        self.real.sweep();
    }
}

// ---------------------------------------------------------------------------------------
// The watcher.

/// What the watcher saw. `Ready` means Running, Ready condition True and not being deleted:
/// a terminating pod is no longer counted on.
#[derive(Default)]
struct Observed {
    /// Every pod in `default`, by name, as of the last event.
    pods: HashMap<String, Arc<Pod>>,
    /// Pod events applied.
    events: u64,
    /// From `arm` on: the fewest Ready pods per Deployment after any event…
    min_ready: BTreeMap<&'static str, usize>,
    /// …the most non-terminating pods at once (printed, not asserted: the surge bound holds
    /// for ReplicaSet specs; pods lag them)…
    max_live: BTreeMap<&'static str, usize>,
    /// …and the uids of the pods created, by (Deployment, pod-template-hash).
    created: BTreeMap<(String, String), BTreeSet<String>>,
    armed: bool,
    /// `namespace/pod` → the scheduler that wrote the pod's allocation-record entry.
    placed_by: HashMap<String, String>,
}

fn app_of(p: &Pod) -> &str {
    p.metadata
        .labels
        .get("app")
        .map(String::as_str)
        .unwrap_or("")
}

fn hash_of(p: &Pod) -> &str {
    p.metadata
        .labels
        .get(HASH)
        .map(String::as_str)
        .unwrap_or("")
}

fn image_of(p: &Pod) -> &str {
    p.spec
        .containers
        .first()
        .map(|c| c.image.as_str())
        .unwrap_or("")
}

fn serving(p: &Pod) -> bool {
    p.status.phase == "Running" && p.is_ready() && !p.metadata.is_deleting()
}

impl Observed {
    fn of<'a>(&'a self, app: &'a str) -> impl Iterator<Item = &'a Arc<Pod>> + 'a {
        self.pods.values().filter(move |p| app_of(p) == app)
    }

    fn ready(&self, app: &str) -> usize {
        self.of(app).filter(|p| serving(p)).count()
    }

    fn live(&self, app: &str) -> usize {
        self.of(app).filter(|p| !p.metadata.is_deleting()).count()
    }

    /// Starts a phase: minimums from now, creations from now.
    fn arm(&mut self) {
        self.armed = true;
        self.created.clear();
        for s in ALL {
            self.min_ready.insert(s.name, self.ready(s.name));
            self.max_live.insert(s.name, self.live(s.name));
        }
    }

    fn apply_pod(&mut self, event: shoal_bus::store::RawEvent) {
        let Ok(pod) = codec::from_msgpack::<Pod>(&event.payload) else {
            return;
        };
        self.events += 1;
        let name = pod.metadata.name.clone();
        if event.is_tombstone() {
            self.pods.remove(&name);
        } else {
            if self.armed && event.event == shoal_bus::EventType::Added {
                self.created
                    .entry((app_of(&pod).to_string(), hash_of(&pod).to_string()))
                    .or_default()
                    .insert(pod.metadata.uid.clone());
            }
            self.pods.insert(name, Arc::new(pod));
        }
        if self.armed {
            for s in ALL {
                let (ready, live) = (self.ready(s.name), self.live(s.name));
                let min = self.min_ready.entry(s.name).or_insert(ready);
                *min = (*min).min(ready);
                let max = self.max_live.entry(s.name).or_insert(live);
                *max = (*max).max(live);
            }
        }
    }

    fn apply_allocation(&mut self, event: shoal_bus::store::RawEvent) {
        let Ok(lease) = codec::from_msgpack::<Lease>(&event.payload) else {
            return;
        };
        let ledger: Ledger = lease
            .metadata
            .annotations
            .get(ANNOTATION_LEDGER)
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or_default();
        for entry in ledger.pending {
            self.placed_by.insert(entry.pod, entry.writer);
        }
    }

    fn summary(&self) -> String {
        format!(
            "watcher: {} pod events; min ready {:?}; max non-terminating {:?}; created this phase {:?}",
            self.events,
            self.min_ready,
            self.max_live,
            self.created
                .iter()
                .map(|(k, v)| (k, v.len()))
                .collect::<Vec<_>>()
        )
    }
}

struct Watcher {
    state: Arc<Mutex<Observed>>,
    changed: tokio::sync::watch::Receiver<u64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Watcher {
    /// Lists the pods, then watches them from the list's resourceVersion, so no event is
    /// missed; the allocation records are watched from the same point.
    async fn start(api: &ApiClient, store: &Store) -> Watcher {
        let list = api
            .list::<Pod>(&ListOptions {
                namespace: "default".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let from: u64 = list.metadata.resource_version.parse().unwrap();
        let state = Arc::new(Mutex::new(Observed {
            pods: list
                .items
                .into_iter()
                .map(|p| (p.metadata.name.clone(), Arc::new(p)))
                .collect(),
            ..Default::default()
        }));
        let (tx, changed) = tokio::sync::watch::channel(0u64);
        let tx = Arc::new(tx);
        let mut tasks = Vec::new();
        let filters = [
            (
                subjects::objects_of(&Pod::INFO.token(), Some("default")),
                true,
            ),
            (
                subjects::objects_of(&Lease::INFO.token(), Some(ALLOCATION_NAMESPACE)),
                false,
            ),
        ];
        for (filter, pods) in filters {
            let mut watch = RawWatch::start(store.clone(), filter, from + 1);
            let (state, tx) = (state.clone(), tx.clone());
            tasks.push(tokio::spawn(async move {
                // This run's log is never compacted (1 h retention): an expiry is a bug.
                while let Some(event) = watch.next().await {
                    let event = event.expect("watch of an uncompacted log expired");
                    {
                        let mut s = state.lock().unwrap();
                        if pods {
                            s.apply_pod(event);
                        } else {
                            s.apply_allocation(event);
                        }
                    }
                    tx.send_modify(|n| *n += 1);
                }
            }));
        }
        Watcher {
            state,
            changed,
            tasks,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&Observed) -> R) -> R {
        f(&self.state.lock().unwrap())
    }

    fn arm(&self) {
        self.state.lock().unwrap().arm();
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

// ---------------------------------------------------------------------------------------
// The cluster.

struct Env {
    // Fields drop in order: the children first (nothing acts any more), then the nodes
    // (their containers are swept), then the watcher and the cluster.
    actors: Vec<Actor>,
    nodes: Nodes,
    watcher: Option<Watcher>,
    api: ApiClient,
    cluster: LocalCluster,
    dir: tempfile::TempDir,
}

impl Env {
    fn url(&self) -> String {
        self.cluster.url()
    }

    async fn start_actor(&mut self, label: &str, actors: &str) {
        let creds = self
            .cluster
            .natsd
            .config()
            .auth
            .as_ref()
            .expect("test clusters run with identities on")
            .dir()
            .join("creds");
        let actor = Actor::start(label, actors, &self.url(), &creds, self.dir.path()).await;
        self.actors.push(actor);
    }

    fn actor_mut(&mut self, label: &str) -> &mut Actor {
        self.actors
            .iter_mut()
            .find(|a| a.label == label)
            .unwrap_or_else(|| panic!("no actor {label}"))
    }

    fn watcher(&self) -> &Watcher {
        self.watcher.as_ref().expect("watcher started")
    }

    /// Waits until `check` holds, looking again every 100 ms; on timeout fails with the
    /// cluster's state.
    async fn eventually<F, Fut>(&self, what: &str, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let start = Instant::now();
        while !check().await {
            if start.elapsed() > T {
                panic!(
                    "timed out after {T:?} waiting for {what}\n{}",
                    self.report().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the watcher's state satisfies `check` (woken by every event).
    async fn until_observed(&self, what: &str, check: impl Fn(&Observed) -> bool) {
        let watcher = self.watcher();
        let mut changed = watcher.changed.clone();
        let deadline = tokio::time::Instant::now() + T;
        loop {
            if watcher.with(&check) {
                return;
            }
            match tokio::time::timeout_at(deadline, changed.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => panic!("the watcher stopped\n{}", self.report().await),
                Err(_) => panic!(
                    "timed out after {T:?} waiting for {what}\n{}",
                    self.report().await
                ),
            }
        }
    }

    async fn controllers_lease(&self) -> Option<Lease> {
        self.api
            .get::<Lease>(CONTROLLERS_LEASE.0, CONTROLLERS_LEASE.1)
            .await
            .ok()
    }

    /// Everything useful when something failed: objects, pods, lease, watcher, child logs.
    async fn report(&self) -> String {
        let mut out = String::from("---- cluster state ----\n");
        let ns = ListOptions {
            namespace: "default".into(),
            ..Default::default()
        };
        if let Ok(ds) = self.api.list::<Deployment>(&ns).await {
            for d in ds.items {
                let s = &d.status;
                out += &format!(
                    "deploy/{} gen {} observed {} image {} replicas {} updated {} ready {} available {} conditions {:?}\n",
                    d.metadata.name,
                    d.metadata.generation,
                    s.observed_generation,
                    d.spec.template.spec.containers.first().map(|c| c.image.as_str()).unwrap_or(""),
                    s.replicas,
                    s.updated_replicas,
                    s.ready_replicas,
                    s.available_replicas,
                    s.conditions.iter().map(|c| format!("{}={}({})", c.type_, c.status, c.reason)).collect::<Vec<_>>()
                );
            }
        }
        if let Ok(rss) = self.api.list::<ReplicaSet>(&ns).await {
            for rs in rss.items {
                out += &format!(
                    "rs/{} image {} spec {:?} status replicas {} ready {} available {}\n",
                    rs.metadata.name,
                    rs.spec
                        .template
                        .spec
                        .containers
                        .first()
                        .map(|c| c.image.as_str())
                        .unwrap_or(""),
                    rs.spec.replicas,
                    rs.status.replicas,
                    rs.status.ready_replicas,
                    rs.status.available_replicas
                );
            }
        }
        if let Ok(pods) = self.api.list::<Pod>(&ns).await {
            let (bulk, mut pods): (Vec<Pod>, Vec<Pod>) =
                pods.items.into_iter().partition(|p| app_of(p) == BULK.name);
            // The steady Deployment is summed up, unless its pods are the story.
            let mut states: BTreeMap<(String, bool, bool, String), usize> = BTreeMap::new();
            for p in &bulk {
                let key = (
                    p.status.phase.clone(),
                    p.is_ready(),
                    p.metadata.is_deleting(),
                    hash_of(p).to_string(),
                );
                *states.entry(key).or_default() += 1;
            }
            out += &format!(
                "bulk: {} pods by (phase, ready, deleting, hash): {states:?}\n",
                bulk.len()
            );
            pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            for p in pods {
                out += &format!(
                    "pod/{} uid {} hash {} node {:?} phase {:?} ready {} deleting {} image {}\n",
                    p.metadata.name,
                    p.metadata.uid,
                    hash_of(&p),
                    p.spec.node_name,
                    p.status.phase,
                    p.is_ready(),
                    p.metadata.is_deleting(),
                    image_of(&p)
                );
            }
        }
        if let Some(lease) = self.controllers_lease().await {
            out += &format!(
                "controllers lease: holder {:?} renewed {:?} transitions {:?}\n",
                lease.spec.holder_identity, lease.spec.renew_time, lease.spec.lease_transitions
            );
        }
        if let Some(w) = &self.watcher {
            out += &w.with(|o| o.summary());
            out += "\n";
        }
        for a in &self.actors {
            out += &format!(
                "---- {} ({}) log tail ----\n{}\n",
                a.label,
                a.identity,
                a.log_tail(25)
            );
        }
        out
    }
}

// ---------------------------------------------------------------------------------------
// Images and workloads.

/// The busybox test image plus a layer with `/var/www/version` = `tag`: two tags are two
/// really different images, and a container tells which one it runs over HTTP.
fn build_image(dir: &Path, tag: &str) -> PathBuf {
    let (base, config) = testimage::busybox_layer().expect("busybox-static installed");
    let mut b = LayerBuilder::new();
    b.dir("var", 0o755).unwrap();
    b.dir("var/www", 0o755).unwrap();
    b.file("var/www/version", 0o644, format!("{tag}\n").as_bytes())
        .unwrap();
    let version = Layer {
        tar: b.finish().unwrap(),
        gzip: true,
    };
    let layout = dir.join(format!("layout-{tag}"));
    testimage::write_oci_layout(&layout, &image(tag), &config, &[base, version]).unwrap();
    layout
}

async fn import_images(cluster: &LocalCluster, dir: &Path, tags: &[&str]) {
    let registry =
        shoal_agent::registry::Registry::open(&async_nats::jetstream::new(cluster.nats.clone()))
            .await
            .unwrap();
    let scratch = shoal_node::image::ImageStore::open(dir.join("scratch")).unwrap();
    for tag in tags {
        let layout = build_image(dir, tag);
        registry
            .import_path(&scratch, &layout, |_, _| {})
            .await
            .unwrap();
    }
}

fn deployment(s: Spec, tag: &str, real_node: &str) -> Deployment {
    let mut pod_spec = serde_json::json!({
        // Old pods stop quickly: busybox httpd exits on SIGTERM.
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "httpd",
            "image": image(tag),
            "command": ["httpd", "-f", "-p", "8080", "-h", "/var/www"],
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/version", "port": "http"}, "periodSeconds": 1},
            "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}, "limits": {"memory": "64Mi"}}
        }]
    });
    match s.placement {
        Placement::Any => {}
        Placement::Real => {
            pod_spec["nodeSelector"] = serde_json::json!({"kubernetes.io/hostname": real_node});
        }
        Placement::Hollow => {
            pod_spec["nodeSelector"] = serde_json::json!({"node.shoal.io/hollow": "true"});
        }
    }
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": s.name, "namespace": "default"},
        "spec": {
            "replicas": s.replicas,
            "selector": {"matchLabels": {"app": s.name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxSurge": s.max_surge, "maxUnavailable": s.max_unavailable}},
            "template": {"metadata": {"labels": {"app": s.name}}, "spec": pod_spec}
        }
    }))
    .unwrap()
}

/// Changes a Deployment's image (CAS on its resourceVersion, retried on Conflict).
async fn set_image(api: &ApiClient, name: &str, tag: &str) {
    loop {
        let mut d = api.get::<Deployment>("default", name).await.unwrap();
        d.spec.template.spec.containers[0].image = image(tag);
        match api.update(&d).await {
            Ok(_) => return,
            Err(e) if e.is_conflict() => continue,
            Err(e) => panic!("updating deploy/{name}: {e}"),
        }
    }
}

async fn pods_of(api: &ApiClient, app: &str) -> Vec<Pod> {
    api.list::<Pod>(&ListOptions {
        namespace: "default".into(),
        label_selector: format!("app={app}"),
        ..Default::default()
    })
    .await
    .map(|l| l.items)
    .unwrap_or_default()
}

async fn replicasets_of(api: &ApiClient, d: &Deployment) -> Vec<ReplicaSet> {
    api.list::<ReplicaSet>(&ListOptions {
        namespace: "default".into(),
        ..Default::default()
    })
    .await
    .map(|l| l.items)
    .unwrap_or_default()
    .into_iter()
    .filter(|rs| {
        rs.metadata
            .controller_ref()
            .is_some_and(|r| r.uid == d.metadata.uid)
    })
    .collect()
}

/// The rollout to `tag` is over: the status says so for the current generation, and only
/// `replicas` pods of that image remain (old ones have finished terminating).
async fn rolled_out(api: &ApiClient, s: Spec, tag: &str) -> bool {
    let Ok(d) = api.get::<Deployment>("default", s.name).await else {
        return false;
    };
    let st = &d.status;
    let r = s.replicas as i32;
    let pods = pods_of(api, s.name).await;
    st.observed_generation == d.metadata.generation
        && st.replicas == r
        && st.updated_replicas == r
        && st.ready_replicas == r
        && st.available_replicas == r
        && pods.len() == s.replicas
        && pods.iter().all(|p| serving(p) && image_of(p) == image(tag))
}

/// One plain HTTP GET of `/version` from a pod; the body.
fn http_version(ip: &str) -> Result<String, String> {
    let addr: std::net::SocketAddr = format!("{ip}:8080").parse().map_err(|e| format!("{e}"))?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok();
    s.write_all(b"GET /version HTTP/1.0\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).map_err(|e| e.to_string())?;
    Ok(reply
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.trim().to_string())
        .unwrap_or_default())
}

/// Everything a finished phase must show for `s`, at `tag` (`rolled`: it rolled there during
/// the phase; otherwise it was left alone); the failures found.
async fn verify(env: &Env, s: Spec, tag: &str, rolled: bool) -> Vec<String> {
    let mut bad = Vec::new();
    let api = &env.api;
    let r = s.replicas as i32;
    let d = api.get::<Deployment>("default", s.name).await.unwrap();
    let st = &d.status;
    let name = s.name;
    if st.observed_generation != d.metadata.generation {
        bad.push(format!(
            "{name}: observedGeneration {} != generation {}",
            st.observed_generation, d.metadata.generation
        ));
    }
    for (field, v) in [
        ("replicas", st.replicas),
        ("updatedReplicas", st.updated_replicas),
        ("readyReplicas", st.ready_replicas),
        ("availableReplicas", st.available_replicas),
    ] {
        if v != r {
            bad.push(format!("{name}: status.{field} {v} != {r}"));
        }
    }

    // ReplicaSets: the new one (the template's image) holds every replica, the others none.
    let rss = replicasets_of(api, &d).await;
    let (news, old): (Vec<&ReplicaSet>, Vec<&ReplicaSet>) = rss.iter().partition(|rs| {
        rs.spec
            .template
            .spec
            .containers
            .first()
            .is_some_and(|c| c.image == image(tag))
    });
    let [new] = news[..] else {
        bad.push(format!(
            "{name}: expected exactly one ReplicaSet of {}, found {}",
            image(tag),
            news.len()
        ));
        return bad;
    };
    let new_hash = new.metadata.labels.get(HASH).cloned().unwrap_or_default();
    if new.spec.replicas != Some(r)
        || new.status.replicas != r
        || new.status.ready_replicas != r
        || new.status.available_replicas != r
    {
        bad.push(format!(
            "{name}: new ReplicaSet {} spec {:?} status replicas/ready/available {}/{}/{} (want {r})",
            new.metadata.name,
            new.spec.replicas,
            new.status.replicas,
            new.status.ready_replicas,
            new.status.available_replicas
        ));
    }
    if rolled && old.is_empty() {
        bad.push(format!("{name}: the old ReplicaSet is gone"));
    }
    for rs in &old {
        if rs.spec.replicas != Some(0) || rs.status.replicas != 0 {
            bad.push(format!(
                "{name}: old ReplicaSet {} not scaled to 0: spec {:?}, status.replicas {}",
                rs.metadata.name, rs.spec.replicas, rs.status.replicas
            ));
        }
    }

    // Pods: exactly `replicas`, all of the new ReplicaSet, Running and Ready, unique.
    let pods = pods_of(api, name).await;
    if pods.len() != s.replicas {
        bad.push(format!("{name}: {} pods, want {}", pods.len(), s.replicas));
    }
    let names: HashSet<&str> = pods.iter().map(|p| p.metadata.name.as_str()).collect();
    let uids: HashSet<&str> = pods.iter().map(|p| p.metadata.uid.as_str()).collect();
    if names.len() != pods.len() || uids.len() != pods.len() {
        bad.push(format!(
            "{name}: {} pods but {} names and {} uids",
            pods.len(),
            names.len(),
            uids.len()
        ));
    }
    for p in &pods {
        let owned = p
            .metadata
            .controller_ref()
            .is_some_and(|o| o.uid == new.metadata.uid);
        if hash_of(p) != new_hash || !owned || image_of(p) != image(tag) {
            bad.push(format!(
                "{name}: pod {} (hash {}, image {}) is not of the new ReplicaSet {}",
                p.metadata.name,
                hash_of(p),
                image_of(p),
                new.metadata.name
            ));
        }
        if !serving(p) || p.spec.node_name.is_empty() {
            bad.push(format!(
                "{name}: pod {} is not Running and Ready on a node (phase {:?}, ready {}, node {:?}, deleting {})",
                p.metadata.name,
                p.status.phase,
                p.is_ready(),
                p.spec.node_name,
                p.metadata.is_deleting()
            ));
        }
        if s.placement == Placement::Real && p.spec.node_name != env.nodes.real.name {
            bad.push(format!(
                "{name}: pod {} runs on {:?}, not the real node",
                p.metadata.name, p.spec.node_name
            ));
        }
    }

    // What the watcher saw during the phase.
    let floor = s.replicas - s.max_unavailable;
    let (min, created) = env.watcher().with(|o| {
        (
            o.min_ready.get(name).copied(),
            o.created
                .iter()
                .filter(|((app, _), _)| app == name)
                .map(|((_, hash), uids)| (hash.clone(), uids.len()))
                .collect::<BTreeMap<String, usize>>(),
        )
    });
    match min {
        Some(min) if min >= floor => {}
        other => bad.push(format!(
            "{name}: Ready pods fell to {other:?} during the rollout, below replicas − maxUnavailable = {floor}"
        )),
    }
    // The new ReplicaSet starts the phase with no pod and is only ever scaled up, the old
    // ones only down: exactly `replicas` creations, all for the new hash. More means a
    // duplicate (or a replacement for a pod lost on the way). A Deployment left alone gets
    // none.
    let want = if rolled {
        BTreeMap::from([(new_hash.clone(), s.replicas)])
    } else {
        BTreeMap::new()
    };
    if created != want {
        bad.push(format!(
            "{name}: pods created during the rollout by pod-template-hash {created:?}, want {want:?}"
        ));
    }

    // Real containers of the new image: each pod on the real node serves its version.
    for p in pods
        .iter()
        .filter(|p| p.spec.node_name == env.nodes.real.name)
    {
        let ip = p.status.pod_ip.clone();
        let got = tokio::task::spawn_blocking(move || http_version(&ip))
            .await
            .unwrap();
        if got.as_deref() != Ok(tag) {
            bad.push(format!(
                "{name}: pod {} on the real node answers /version with {got:?}, want {tag:?}",
                p.metadata.name
            ));
        }
    }
    bad
}

/// Waits until both Deployments rolled out to `tag`, then verifies the phase.
async fn finish_phase(env: &Env, phase: &str, tag: &str) {
    for s in SPECS {
        env.eventually(
            &format!("{phase}: deploy/{} rolled out to {tag}", s.name),
            || rolled_out(&env.api, s, tag),
        )
        .await;
    }
    env.eventually(&format!("{phase}: deploy/bulk as it was"), || {
        rolled_out(&env.api, BULK, "v1")
    })
    .await;
    let mut bad = Vec::new();
    for s in SPECS {
        bad.extend(verify(env, s, tag, true).await);
    }
    bad.extend(verify(env, BULK, "v1", false).await);
    let summary = env.watcher().with(|o| o.summary());
    eprintln!("{phase}: {summary}");
    assert!(
        bad.is_empty(),
        "{phase}:\n  {}\n{}",
        bad.join("\n  "),
        env.report().await
    );
}

/// Waits until `web` is mid-rollout to `tag`: a pod of the new image is Ready while pods of
/// the old one still run. With the controllers dead nothing moves on, so killing them now
/// stops the rollout half-way for certain.
async fn until_mid_rollout(env: &Env, tag: &str) {
    let new = image(tag);
    env.until_observed(&format!("web half-way to {tag}"), |o| {
        let ready_new = o
            .of(WEB.name)
            .filter(|p| serving(p) && image_of(p) == new)
            .count();
        let old_left = o
            .of(WEB.name)
            .filter(|p| !p.metadata.is_deleting() && image_of(p) != new)
            .count();
        ready_new >= 1 && old_left >= 1
    })
    .await;
}

/// How many of the rolled Deployments' pods the scheduler `label` placed (wrote the
/// allocation-record entry for).
fn placed_by(env: &Env, label: &str) -> usize {
    let identity = env
        .actors
        .iter()
        .find(|a| a.label == label)
        .map(|a| format!("scheduler-{}", a.identity))
        .unwrap();
    env.watcher().with(|o| {
        SPECS
            .iter()
            .flat_map(|s| o.of(s.name))
            .filter(|p| o.placed_by.get(&format!("default/{}", p.metadata.name)) == Some(&identity))
            .count()
    })
}

/// Kills the controllers process holding the lease; returns its label.
async fn kill_lease_holder(env: &mut Env) -> String {
    let holder = env
        .controllers_lease()
        .await
        .and_then(|l| l.spec.holder_identity)
        .unwrap_or_default();
    let Some(label) = env
        .actors
        .iter()
        .find(|a| a.label.starts_with("controllers") && a.identity == holder)
        .map(|a| a.label.clone())
    else {
        panic!(
            "the controllers lease is held by {holder:?}, none of our processes\n{}",
            env.report().await
        );
    };
    env.actor_mut(&label).kill();
    label
}

// ---------------------------------------------------------------------------------------

#[actix::test]
async fn rollouts_survive_killed_controllers_and_schedulers() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start()
        .await
        .expect("nats-server and the API");
    import_images(&cluster, dir.path(), &["v1", "v2"]).await;
    let nodes = Nodes::start(&cluster, dir.path()).await;
    let mut env = Env {
        actors: Vec::new(),
        nodes,
        watcher: None,
        api: cluster.api(),
        cluster,
        dir,
    };
    // Phase 1's processes: two of each; one controllers process will stand by.
    env.start_actor("controllers-a", "controllers").await;
    env.start_actor("controllers-b", "controllers").await;
    env.start_actor("scheduler-a", "scheduler").await;
    env.start_actor("scheduler-b", "scheduler").await;

    let real = env.nodes.real.name.clone();
    env.eventually("31 nodes registered and Ready", || async {
        let nodes = env
            .api
            .list::<Node>(&ListOptions::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        nodes.len() == HOLLOW_NODES + 1
            && nodes.iter().all(|n| {
                bus_schemas::meta::find_condition(&n.status.conditions, "Ready")
                    .is_some_and(|c| c.status == "True")
            })
    })
    .await;
    // The real node really is one: it runs the shoal runtime, not the hollow one.
    let node = env.api.get::<Node>("", &real).await.unwrap();
    assert!(
        node.status
            .node_info
            .container_runtime_version
            .starts_with("shoal://"),
        "{:?}",
        node.status.node_info
    );

    for s in ALL {
        env.api.create(&deployment(s, "v1", &real)).await.unwrap();
    }
    for s in ALL {
        env.eventually(&format!("deploy/{} at v1", s.name), || {
            rolled_out(&env.api, s, "v1")
        })
        .await;
    }
    eprintln!("v1 running after {:?}", started.elapsed());
    env.watcher = Some(Watcher::start(&env.api, &env.cluster.store).await);

    // ---- Phase 1: v1 → v2; the leading controllers and an active scheduler die. ----
    env.watcher().arm();
    for s in SPECS {
        set_image(&env.api, s.name, "v2").await;
    }
    until_mid_rollout(&env, "v2").await;
    let before = env.controllers_lease().await.unwrap();
    let killed_controllers = kill_lease_holder(&mut env).await;
    // A scheduler that placed pods of this rollout: SIGKILLed while it works.
    let placers: BTreeSet<String> = env.watcher().with(|o| {
        o.of(WEB.name)
            .filter(|p| image_of(p) == image("v2"))
            .filter_map(|p| o.placed_by.get(&format!("default/{}", p.metadata.name)))
            .cloned()
            .collect()
    });
    let Some(killed_scheduler) = env
        .actors
        .iter()
        .find(|a| {
            a.label.starts_with("scheduler")
                && placers.contains(&format!("scheduler-{}", a.identity))
        })
        .map(|a| a.label.clone())
    else {
        panic!(
            "no scheduler of ours placed a v2 pod (placers {placers:?})\n{}",
            env.report().await
        );
    };
    env.actor_mut(&killed_scheduler).kill();
    eprintln!(
        "phase 1: killed {killed_controllers} (lease holder) and {killed_scheduler} after {:?}; {}",
        started.elapsed(),
        env.watcher().with(|o| o.summary())
    );
    finish_phase(&env, "phase 1 (standbys)", "v2").await;
    // The standby finished it: it holds the lease now, taken over from the killed leader.
    let standby = env
        .actors
        .iter_mut()
        .find(|a| a.label.starts_with("controllers") && a.label != killed_controllers)
        .unwrap();
    assert!(
        standby.alive(),
        "{} died:\n{}",
        standby.label,
        standby.log_tail(30)
    );
    let standby = (standby.label.clone(), standby.identity.clone());
    let after = env.controllers_lease().await.unwrap();
    assert_eq!(
        after.spec.holder_identity.as_deref(),
        Some(standby.1.as_str()),
        "the standby {} holds the lease",
        standby.0
    );
    assert!(
        after.spec.lease_transitions > before.spec.lease_transitions,
        "the lease changed hands: {:?} → {:?}",
        before.spec.lease_transitions,
        after.spec.lease_transitions
    );
    // Pods created after the kill had only the other scheduler to place them.
    let other_scheduler = if killed_scheduler == "scheduler-a" {
        "scheduler-b"
    } else {
        "scheduler-a"
    };
    assert!(
        placed_by(&env, other_scheduler) > 0,
        "{other_scheduler} placed none of the pods\n{}",
        env.report().await
    );
    eprintln!("phase 1 done after {:?}", started.elapsed());

    // ---- Phase 2: v2 → v1 with no standby; the last controllers and scheduler die and
    // new processes are started. ----
    env.watcher().arm();
    for s in SPECS {
        set_image(&env.api, s.name, "v1").await;
    }
    until_mid_rollout(&env, "v1").await;
    let killed = kill_lease_holder(&mut env).await;
    assert_eq!(killed, standby.0, "the only controllers process left leads");
    let survivor = other_scheduler;
    env.actor_mut(survivor).kill();
    eprintln!(
        "phase 2: killed {killed} and {survivor} after {:?}; {}",
        started.elapsed(),
        env.watcher().with(|o| o.summary())
    );
    env.start_actor("controllers-c", "controllers").await;
    env.start_actor("scheduler-c", "scheduler").await;
    finish_phase(&env, "phase 2 (restarted)", "v1").await;
    let restarted = env
        .actors
        .iter()
        .find(|a| a.label == "controllers-c")
        .map(|a| a.identity.clone())
        .unwrap();
    let lease = env.controllers_lease().await.unwrap();
    assert_eq!(
        lease.spec.holder_identity.as_deref(),
        Some(restarted.as_str()),
        "the restarted controllers process holds the lease"
    );
    assert!(
        placed_by(&env, "scheduler-c") > 0,
        "the restarted scheduler placed none of the pods\n{}",
        env.report().await
    );
    eprintln!("phase 2 done after {:?}", started.elapsed());

    // Orderly end: children first, then the agents; Drop sweeps the real node's containers.
    for a in &mut env.actors {
        a.kill();
    }
    env.nodes.stop().await;
}
