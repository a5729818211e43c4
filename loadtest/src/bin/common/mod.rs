//! Pieces shared by the scale benchmarks (`bench_scheduling`, `bench_hollow`,
//! `bench_autoscaler`):
//!
//! - [`Identities`]: who connects as what. Every part of a benchmark presents the credential
//!   of what it is, as in `shoal up`: the API, scheduler and controllers their own, each
//!   hollow node its node's, the load generator the operator's (admin).
//! - [`start_control_plane`]: the API actor and controllers on one thread with their own
//!   actix system, the scheduler on a second, all sharing one `InformerFactory`, as
//!   `shoal up` hosts them.
//! - [`HollowFleet`]: hollow node agents in a child process (the same binary re-executed
//!   with the hidden `--hollow-only` flag), so the control plane's memory is measured alone
//!   in the parent and the fleet's alone in the child. [`hollow_main`] is the child's side.
//! - [`raw_publishes`]: the JetStream write capacity baseline (as `shoal-loadtest api`).
//! - `/proc` readers for RSS.
//!
//! Not every binary uses every helper.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bus_schemas::kinds::Pod;
use bus_schemas::roles::Role;
use bytes::Bytes;
use shoal_agent::{AgentConfig, Backend};
use shoal_bus::auth::{AuthDir, ClientAuth};
use shoal_bus::natsd::{free_port, Natsd, NatsdConfig, NatsdError};
use shoal_bus::shutdown::Trigger;
use shoal_bus::store::{ensure_stream, StreamSettings};
use shoal_bus::{ApiClient, InformerFactory, Store};
use shoal_controllers::{ControllersConfig, Tunables};
use shoal_node::{HollowConfig, HollowRuntime};
use shoal_scheduler::{SchedulerConfig, SchedulerMetrics};

/// A runtime and a nats-server (JetStream `sync_interval: always`, identities on) with its
/// store in `dir`.
pub fn start_nats(dir: &Path) -> Result<(tokio::runtime::Runtime, Natsd)> {
    start_nats_with(dir, true, false)
}

/// [`start_nats`], with identities on or off: off, the server has no authorization block
/// and every connection is anonymous (the baseline `bench_scheduling --compare-auth`
/// measures identities against).
/// With `tls` (and identities), clients speak TLS to the server and verify it against the CA
/// made in the identity directory (`<dir>/auth/tls/`).
pub fn start_nats_with(
    dir: &Path,
    identities: bool,
    tls: bool,
) -> Result<(tokio::runtime::Runtime, Natsd)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let natsd = runtime
        .block_on(async {
            let mut config = NatsdConfig::new(free_port()?, dir);
            // Its counters tell what a workload cost the bus (`BusTraffic`).
            config.monitor_port = Some(free_port()?);
            if identities {
                let auth = AuthDir::provision(dir.join("auth")).map_err(NatsdError::Auth)?;
                if tls {
                    config.tls = Some(
                        shoal_bus::tls::load_or_create(&auth.dir().join("tls"), &[])
                            .map_err(|e| NatsdError::Spawn(std::io::Error::other(e.to_string())))?,
                    );
                }
                config.auth = Some(auth);
            }
            Natsd::start(config).await
        })
        .context("starting nats-server")?;
    println!(
        "nats-server {}, JetStream sync_interval: always, identities {}, TLS {} (store {})",
        natsd.url(),
        if identities { "on" } else { "off" },
        if natsd.config().tls.is_some() {
            "on"
        } else {
            "off"
        },
        dir.display()
    );
    Ok((runtime, natsd))
}

/// What nats-server has carried so far (its monitoring endpoint's `/varz` counters), to
/// count the bus traffic a workload costs; `None` when the server has no monitoring port.
#[derive(Debug, Clone, Copy, Default)]
pub struct BusTraffic {
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
}

impl BusTraffic {
    pub async fn read(natsd: &Natsd) -> Option<BusTraffic> {
        let port = natsd.config().monitor_port?;
        let varz = shoal_bus::natsd::fetch_monitor(&format!("127.0.0.1:{port}"), "/varz")
            .await
            .ok()?;
        let field = |name: &str| varz.get(name).and_then(|v| v.as_u64()).unwrap_or(0);
        Some(BusTraffic {
            in_msgs: field("in_msgs"),
            out_msgs: field("out_msgs"),
            in_bytes: field("in_bytes"),
            out_bytes: field("out_bytes"),
        })
    }

    /// `self - before`, per `per` (a pod), as one line.
    pub fn per(&self, before: &BusTraffic, per: usize) -> String {
        let per = per.max(1) as f64;
        format!(
            "{:.1} msgs in, {:.1} out, {:.0} bytes in, {:.0} out",
            self.in_msgs.saturating_sub(before.in_msgs) as f64 / per,
            self.out_msgs.saturating_sub(before.out_msgs) as f64 / per,
            self.in_bytes.saturating_sub(before.in_bytes) as f64 / per,
            self.out_bytes.saturating_sub(before.out_bytes) as f64 / per,
        )
    }
}

/// The credentials a benchmark's parts connect with (all anonymous when identities are off).
#[derive(Clone)]
pub struct Identities {
    pub api: ClientAuth,
    pub scheduler: ClientAuth,
    pub controllers: ClientAuth,
    pub naming: ClientAuth,
    pub gateway: ClientAuth,
    /// The load generator and the benchmark's checks: they act as an operator would.
    pub admin: ClientAuth,
    /// Where a hollow fleet's child process reads its nodes' credentials; None when
    /// identities are off.
    pub auth_dir: Option<PathBuf>,
}

impl Identities {
    /// The built-in identities of `natsd`.
    pub fn of(runtime: &tokio::runtime::Runtime, natsd: &Natsd) -> Result<Identities> {
        runtime.block_on(async {
            let creds = |role: Role| async move {
                natsd
                    .creds(&role)
                    .await
                    .with_context(|| format!("the credential of {role}"))
            };
            Ok(Identities {
                api: creds(Role::Api).await?,
                scheduler: creds(Role::Scheduler).await?,
                controllers: creds(Role::Controllers).await?,
                naming: creds(Role::Naming).await?,
                gateway: creds(Role::Gateway).await?,
                admin: creds(Role::Admin).await?,
                auth_dir: natsd.config().auth.as_ref().map(|a| a.dir().to_path_buf()),
            })
        })
    }

    /// Issues the credentials of hollow nodes `0..nodes` (at least the first: the fleet's
    /// shared cache reads through it) with one configuration reload, before the fleet's child
    /// process reads them.
    pub fn issue_fleet(
        &self,
        runtime: &tokio::runtime::Runtime,
        natsd: &Natsd,
        nodes: usize,
    ) -> Result<()> {
        let roles: Vec<Role> = (0..nodes.max(1))
            .map(|i| Role::Node(node_name(i)))
            .collect();
        let start = Instant::now();
        runtime
            .block_on(natsd.creds_many(&roles))
            .context("issuing the hollow nodes' credentials")?;
        if self.auth_dir.is_some() {
            eprintln!(
                "[identities] {} node credentials issued in {:.1} s",
                roles.len(),
                start.elapsed().as_secs_f64()
            );
        }
        Ok(())
    }
}

/// A hollow node's credential as the fleet's child process finds it: issued by the parent
/// ([`Identities::issue_fleet`]) into the identity directory; anonymous without one.
fn node_creds(auth: Option<&AuthDir>, node: &str) -> Result<ClientAuth> {
    let Some(auth) = auth else {
        return Ok(ClientAuth::anonymous());
    };
    let role = Role::Node(node.to_string());
    let path = auth.creds_path(&shoal_bus::auth::default_name(&role));
    // A bus with TLS on keeps its CA beside the credentials.
    let ca = Some(auth.dir().join("tls").join("ca.pem")).filter(|ca| ca.is_file());
    Ok(ClientAuth::from_creds_file(&path)?.with_ca(ca))
}

#[path = "../../tracing_mode.rs"]
pub mod tracing_mode;

/// Untraced unless `SHOAL_BENCH_TRACING=on` (see `tracing_mode`).
pub fn init_tracing() -> tracing_mode::Tracing {
    tracing_mode::init("bench")
}

// ---------------------------------------------------------------------------------------
// Percentiles

pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// "n=…, p50 …, p99 …, max …" in seconds (these latencies are seconds-scale).
pub fn describe(samples: &mut [Duration]) -> String {
    samples.sort_unstable();
    let s = |d: Duration| format!("{:.3} s", d.as_secs_f64());
    format!(
        "n={}, p50 {}, p90 {}, p99 {}, max {}",
        samples.len(),
        s(percentile(samples, 0.50)),
        s(percentile(samples, 0.90)),
        s(percentile(samples, 0.99)),
        s(samples.last().copied().unwrap_or_default())
    )
}

/// `b - a` as a Duration (zero when b precedes a: clocks are the same wall clock here).
pub fn between(a: bus_schemas::Time, b: bus_schemas::Time) -> Duration {
    (b - a).to_std().unwrap_or(Duration::ZERO)
}

// ---------------------------------------------------------------------------------------
// /proc

/// (VmRSS, VmHWM) of a process in KiB.
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:").unwrap_or(0)))
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The nats-server child of this process (Natsd does not expose its pid).
pub fn natsd_pid() -> Option<u32> {
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid …": comm may hold spaces, so split after the last ')'.
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let comm = &stat[stat.find('(').map_or(0, |i| i + 1)..close];
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if comm == "nats-server" && ppid == Some(me) {
            return Some(pid);
        }
    }
    None
}

/// One line with the RSS of each process of the benchmark.
pub fn memory_line(hollow_pid: Option<u32>) -> String {
    let one = |label: &str, pid: Option<u32>| match pid.and_then(rss_kib) {
        Some((rss, hwm)) => format!("{label} {:.0} MiB (peak {:.0})", mib(rss), mib(hwm)),
        None => format!("{label} ?"),
    };
    format!(
        "{}; {}; {}",
        one("control plane+generator", Some(std::process::id())),
        one("hollow fleet", hollow_pid),
        one("nats-server", natsd_pid())
    )
}

// ---------------------------------------------------------------------------------------
// Raw JetStream baseline

pub fn bench_pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "raw"}},
        "spec": {"containers": [{"name": "main", "image": "shoal/busybox:1.35",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
    }))
    .expect("benchmark pod")
}

#[path = "../../raw.rs"]
mod raw;

/// The JetStream write capacity baseline with pod-sized messages (as `shoal-loadtest api`).
/// It publishes straight into the state stream, which only the API's identity may: `nats`
/// must be connected as [`Identities::api`].
pub async fn raw_publishes(
    nats: &async_nats::Client,
    count: usize,
    concurrency: usize,
) -> Result<f64> {
    let payload = Bytes::from(bus_schemas::codec::to_msgpack(&bench_pod("raw"))?);
    raw::raw_publishes(nats, count, concurrency, payload).await
}

// ---------------------------------------------------------------------------------------
// Control plane

pub struct ControlPlane {
    /// The caches the API, scheduler and controllers share; the load generator reads them too
    /// (so pods are cached once in this process, as they would be in a control-plane process).
    pub informers: InformerFactory,
    pub scheduler: Arc<SchedulerMetrics>,
    pub tunables: Tunables,
}

/// Starts the state stream, the API actor and (with `workload_actors`) the scheduler and the
/// controllers on a thread of their own with its own actix system, sharing one InformerFactory
/// as `shoal up` does; each actor connects with its own identity. Returns once the API serves
/// and the cluster namespaces exist.
pub fn start_control_plane(
    url: String,
    identities: &Identities,
    workload_actors: bool,
) -> Result<ControlPlane> {
    let identities = identities.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<ControlPlane, String>>();
    std::thread::Builder::new()
        .name("control-plane".into())
        .spawn(move || {
            let system = actix::System::new();
            system.block_on(async move {
                let started = async {
                    let nats = shoal_bus::connect(&url, "bench-api", &identities.api)
                        .await
                        .map_err(|e| e.to_string())?;
                    let js = async_nats::jetstream::new(nats.clone());
                    ensure_stream(&js, &StreamSettings::default())
                        .await
                        .map_err(|e| e.to_string())?;
                    let store = Store::open(nats.clone()).await.map_err(|e| e.to_string())?;
                    let informers = InformerFactory::new(store);
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    let config = shoal_api::ApiConfig {
                        informers: Some(informers.clone()),
                        ..Default::default()
                    };
                    let api_nats = nats.clone();
                    actix::spawn(async move {
                        if let Err(e) =
                            shoal_api::run_with_ready(config, api_nats, std::future::pending(), tx)
                                .await
                        {
                            eprintln!("API actor failed: {e}");
                        }
                    });
                    let _ = rx.await;
                    // The cluster's namespaces are made by the operator, as `LocalCluster` does.
                    let admin = shoal_bus::connect(&url, "bench-bootstrap", &identities.admin)
                        .await
                        .map_err(|e| e.to_string())?;
                    let api = ApiClient::new(admin).with_deadline(Duration::from_secs(30));
                    shoal_api::bootstrap(&api)
                        .await
                        .map_err(|e| e.to_string())?;
                    // Start the pod and node caches here, so their tasks run on this thread.
                    let _ = informers.get::<Pod>();
                    let _ = informers.get::<bus_schemas::kinds::Node>();
                    let scheduler = Arc::new(SchedulerMetrics::default());
                    let tunables = Tunables::default();
                    if workload_actors {
                        let config = SchedulerConfig {
                            informers: Some(informers.clone()),
                            metrics: scheduler.clone(),
                            ..Default::default()
                        };
                        // Its own thread, as `shoal up` runs it: deciding is CPU work that
                        // must not queue behind the API's request handling.
                        // Its own connection, made on its thread (as `shoal up` does).
                        let scheduler_url = url.clone();
                        let scheduler_auth = identities.scheduler.clone();
                        std::thread::Builder::new()
                            .name("scheduler".into())
                            .spawn(move || {
                                actix::System::new().block_on(async move {
                                    let n = match shoal_bus::connect(
                                        &scheduler_url,
                                        "bench-scheduler",
                                        &scheduler_auth,
                                    )
                                    .await
                                    {
                                        Ok(n) => n,
                                        Err(e) => {
                                            eprintln!("scheduler cannot connect: {e}");
                                            return;
                                        }
                                    };
                                    if let Err(e) =
                                        shoal_scheduler::run(config, n, std::future::pending())
                                            .await
                                    {
                                        eprintln!("scheduler failed: {e}");
                                    }
                                })
                            })
                            .map_err(|e| e.to_string())?;
                        let config = ControllersConfig {
                            informers: Some(informers.clone()),
                            tunables: tunables.clone(),
                            ..Default::default()
                        };
                        let n =
                            shoal_bus::connect(&url, "bench-controllers", &identities.controllers)
                                .await
                                .map_err(|e| e.to_string())?;
                        actix::spawn(async move {
                            if let Err(e) =
                                shoal_controllers::run(config, n, std::future::pending()).await
                            {
                                eprintln!("controllers failed: {e}");
                            }
                        });
                    }
                    Ok::<_, String>(ControlPlane {
                        informers,
                        scheduler,
                        tunables,
                    })
                };
                let _ = ready_tx.send(started.await);
                std::future::pending::<()>().await;
            });
        })?;
    match ready_rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(cp)) => Ok(cp),
        Ok(Err(e)) => bail!("control plane did not start: {e}"),
        Err(_) => bail!("control plane did not start within 60 s"),
    }
}

// ---------------------------------------------------------------------------------------
// Hollow fleet (child process)

pub fn node_name(i: usize) -> String {
    format!("hollow-{i:05}")
}

/// The parent's handle on the hollow-node child process. Dropping it kills the child.
pub struct HollowFleet {
    child: Child,
    stdin: ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl HollowFleet {
    /// Re-executes this binary with `--hollow-only` and waits until it has started its agents.
    /// The nodes' credentials must have been issued first ([`Identities::issue_fleet`]).
    pub fn spawn(
        url: &str,
        identities: &Identities,
        nodes: usize,
        heartbeat: Duration,
    ) -> Result<HollowFleet> {
        let exe = std::env::current_exe().context("locating this binary")?;
        let mut command = Command::new(exe);
        if let Some(dir) = &identities.auth_dir {
            command.arg("--auth-dir").arg(dir);
        }
        let mut child = command
            .args(["--hollow-only", "--url", url, "--nodes", &nodes.to_string()])
            .args(["--heartbeat-ms", &heartbeat.as_millis().to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the hollow-node child")?;
        let stdin = child.stdin.take().context("child stdin")?;
        let stdout = child.stdout.take().context("child stdout")?;
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut fleet = HollowFleet {
            child,
            stdin,
            lines,
        };
        fleet.expect("ready", Duration::from_secs(600))?;
        Ok(fleet)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn expect(&mut self, prefix: &str, limit: Duration) -> Result<String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return Ok(line),
                Ok(_) => {}
                Err(_) => bail!("hollow child did not say {prefix:?} within {limit:?}"),
            }
        }
    }

    /// Stops these nodes' agents (their heartbeats and status reports stop, as if the
    /// machines died); returns once the child confirmed.
    pub fn stop_nodes(&mut self, names: &[String]) -> Result<()> {
        for name in names {
            writeln!(self.stdin, "stop {name}")?;
        }
        writeln!(self.stdin, "sync")?;
        self.stdin.flush()?;
        self.expect("synced", Duration::from_secs(30))?;
        Ok(())
    }
}

impl Drop for HollowFleet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child: `nodes` hollow agents sharing one InformerFactory (as `shoal node --hollow
/// --count N`), each on a connection of its own with its node's identity (read from
/// `auth_dir`), controlled by lines on stdin ("stop NAME", "sync"); stdin closing (the parent
/// died) ends it.
pub fn hollow_main(
    url: &str,
    auth_dir: Option<&Path>,
    nodes: usize,
    heartbeat: Duration,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let auth = auth_dir.map(AuthDir::provision).transpose()?;
        // Any node may read the whole state log: the shared cache reads as the first node.
        // Its spans go out as that node too (one process, one exporter).
        let first = node_name(0);
        tracing_mode::export_to(url, &node_creds(auth.as_ref(), &first)?);
        let nats = shoal_bus::connect(url, &first, &node_creds(auth.as_ref(), &first)?).await?;
        let store = Store::open(nats.clone()).await?;
        let informers = InformerFactory::new(store);
        // The pod cache exists with zero agents too, so a 0-node baseline holds it as well.
        let pods = informers.get::<Pod>();
        pods.wait_synced().await?;
        let mut triggers: HashMap<String, Trigger> = HashMap::new();
        let start = Instant::now();
        for i in 0..nodes {
            let name = node_name(i);
            let cidr = format!("10.{}.{}.0/24", i / 256, i % 256);
            let mut config = AgentConfig::new(name.clone(), cidr.clone());
            config.host_ip = format!("172.20.{}.{}", i / 250, i % 250 + 1);
            config.informers = Some(informers.clone());
            config.heartbeat_interval = heartbeat;
            let hollow = HollowConfig {
                seed: i as u64 + 1,
                pod_cidr: cidr
                    .parse()
                    .map_err(|e| anyhow::anyhow!("pod cidr {cidr}: {e}"))?,
                ..Default::default()
            };
            let backend = Backend::Hollow(Arc::new(HollowRuntime::new(hollow)));
            let (trigger, shutdown) = shoal_bus::shutdown::channel();
            triggers.insert(name.clone(), trigger);
            let nats = if i == 0 {
                nats.clone()
            } else {
                shoal_bus::connect(url, &name, &node_creds(auth.as_ref(), &name)?).await?
            };
            tokio::spawn(async move {
                if let Err(e) = shoal_agent::run(config, backend, nats, shutdown.wait()).await {
                    eprintln!("hollow agent {name}: {e}");
                }
            });
            // Registration is a few writes per node: pace the burst so 5,000 agents do not
            // all time out against one API actor at once.
            if i % 250 == 249 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        eprintln!(
            "[hollow] {nodes} agents started in {:.1} s (pid {})",
            start.elapsed().as_secs_f64(),
            std::process::id()
        );
        println!("ready");
        std::io::stdout().flush()?;

        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        while let Some(line) = rx.recv().await {
            if let Some(name) = line.strip_prefix("stop ") {
                if let Some(t) = triggers.remove(name.trim()) {
                    t.fire();
                }
            } else if line == "sync" {
                println!("synced");
                std::io::stdout().flush()?;
            }
        }
        anyhow::Ok(())
    })?;
    // Do not wait for agents' tasks: the runtime is dropped with them.
    std::process::exit(0)
}
