//! The service proxy's cost: HTTP requests to a ClusterIP (nftables DNAT in the node's
//! network namespace) against the same requests straight to the pods. Prints figures; never
//! asserts timings.
//!
//! Setup: nats-server child, the control plane in this process (API, scheduler,
//! controllers), one host network namespace wired as in the multi-node tests
//! (`shoal_node::testnet`), one real node agent (its network in that namespace), three busybox
//! httpd pods behind a ClusterIP Service, and an idle client pod.
//!
//! The client is Rust, on `--concurrency` threads that joined the *client pod's* network
//! namespace: its connections leave through the pod's veth and meet the proxy's rules in the
//! host's prerouting hook, as any pod's would. busybox httpd closes every connection, so every
//! request is a new TCP connection — each one a new conntrack entry and a new DNAT decision,
//! the proxy's worst case. Modes, alternated for `--rounds` rounds of `--seconds` each:
//! - `service`: every connection to ClusterIP:80 (spread over the 3 pods by the kernel);
//! - `direct-1`: every connection straight to one pod's IP:8080 (what the brief compares);
//! - `direct-3`: straight to the 3 pods' IPs in turn (the same backends as the Service).
//!
//! Run: `cargo build --release -p shoal-node --bin shoal-shim -p shoal-loadtest --bin bench_service
//!       && /work/target/release/bench_service` (as root: namespaces, cgroups).

#[path = "common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bus_schemas::kinds::{Endpoints, Pod, Service};
use clap::Parser;
use shoal_agent::{AgentConfig, Backend};
use shoal_bus::shutdown::Trigger;
use shoal_bus::ApiClient;
use shoal_node::net::NetworkConfig;
use shoal_node::testnet::{Fabric, FabricHost};
use shoal_node::{LinuxRuntime, Runtime, RuntimeConfig};

use common::percentile;

#[derive(Parser)]
#[command(about = "HTTP through a ClusterIP (nftables DNAT) vs straight to the pods")]
struct Args {
    /// Seconds per measurement.
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// Client threads, each with one connection at a time.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Rounds; each round measures every mode once, in turn.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

const NODE: &str = "bench-service-node";
const PODS: [&str; 3] = ["web-0", "web-1", "web-2"];

/// The node agent and its runtime; dropping it stops the agent and removes its pods.
struct NodeGuard {
    runtime: Arc<LinuxRuntime>,
    cgroup_parent: String,
    trigger: Option<Trigger>,
    _state: tempfile::TempDir,
}

impl Drop for NodeGuard {
    fn drop(&mut self) {
        if let Some(t) = self.trigger.take() {
            t.fire();
        }
        for _ in 0..10 {
            if let Err(e) = self.runtime.cleanup_orphans(&Default::default()) {
                eprintln!("cleanup: {e}");
            }
            let left = self.runtime.list_sandboxes().map(|s| s.len()).unwrap_or(0);
            let parent = self
                .runtime
                .cgroup_driver()
                .delete(&self.cgroup_parent, Duration::from_secs(10));
            if left == 0 && parent.is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        eprintln!("cleanup: the node's pods or cgroups were not all removed");
    }
}

/// `auth`: the node's own identity.
fn start_node(
    rt: &tokio::runtime::Runtime,
    url: &str,
    auth: shoal_bus::auth::ClientAuth,
    host: &FabricHost,
) -> Result<NodeGuard> {
    let state = tempfile::Builder::new()
        .prefix("shoal-bench-service-")
        .tempdir()?;
    let mut network = NetworkConfig::new("shoal0", host.pod_cidr);
    network.host_netns = Some(host.netns_path());
    let mut rc = RuntimeConfig::new(state.path().join("node"), network);
    let cgroup_parent = format!("shoal-bench-{:08x}", rand_u32());
    rc.cgroup_parent = cgroup_parent.clone();
    let runtime = Arc::new(LinuxRuntime::new(rc).context(
        "starting the runtime (is shoal-shim built next to this binary, or SHOAL_SHIM set?)",
    )?);
    let mut config = AgentConfig::new(NODE, host.pod_cidr.to_string());
    config.host_ip = host.address.to_string();
    config.host_netns = Some(host.netns_path());
    config.uplink = Some(host.uplink.clone());
    config.sync_period = Duration::from_millis(200);
    config.heartbeat_interval = Duration::from_millis(500);
    let (trigger, stop) = shoal_bus::shutdown::channel();
    let backend = Backend::Linux(runtime.clone());
    let url = url.to_string();
    rt.spawn(async move {
        let nats = match shoal_bus::connect(&url, NODE, &auth).await {
            Ok(n) => n,
            Err(e) => return eprintln!("agent: connecting: {e}"),
        };
        if let Err(e) = shoal_agent::run(config, backend, nats, stop.wait()).await {
            eprintln!("agent: {e}");
        }
    });
    Ok(NodeGuard {
        runtime,
        cgroup_parent,
        trigger: Some(trigger),
        _state: state,
    })
}

fn rand_u32() -> u32 {
    let mut b = [0u8; 4];
    let _ = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    u32::from_ne_bytes(b) ^ std::process::id()
}

fn from_json<K: bus_schemas::Resource>(v: serde_json::Value) -> Result<K> {
    Ok(serde_json::from_value(v)?)
}

async fn push_busybox(nats: &async_nats::Client) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let layout = dir.path().join("layout");
    shoal_node::testimage::build_busybox_layout(&layout, "shoal/busybox", "1.35")?;
    let scratch = shoal_node::image::ImageStore::open(dir.path().join("store"))?;
    let registry =
        shoal_agent::registry::Registry::open(&async_nats::jetstream::new(nats.clone())).await?;
    registry.import_path(&scratch, &layout, |_, _| {}).await?;
    Ok(())
}

struct Workload {
    cluster_ip: String,
    pod_ips: Vec<String>,
    client_uid: String,
}

async fn until<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `admin`: the workload is the operator's (it imports the image and creates the pods).
async fn setup(url: &str, admin: &shoal_bus::auth::ClientAuth) -> Result<Workload> {
    let nats = shoal_bus::connect(url, "bench-service", admin).await?;
    push_busybox(&nats).await?;
    let api = ApiClient::new(nats).with_deadline(Duration::from_secs(30));
    for name in PODS {
        api.create(&from_json::<Pod>(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "httpd", "image": "shoal/busybox:1.35",
                    "command": ["sh", "-c", "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"],
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 1}}]}
        }))?)
        .await?;
    }
    api.create(&from_json::<Pod>(serde_json::json!({
        "metadata": {"name": "client", "namespace": "default"},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "client", "image": "shoal/busybox:1.35", "command": ["sleep", "100000"]}]}
    }))?)
    .await?;
    let svc = api
        .create(&from_json::<Service>(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}
        }))?)
        .await?;
    let mut pod_ips = Vec::new();
    for name in PODS.iter().chain(&["client"]) {
        let pod = until(&format!("pod {name} ready"), || async {
            api.get::<Pod>("default", name)
                .await
                .ok()
                .filter(|p| p.is_ready() && !p.status.pod_ip.is_empty())
        })
        .await?;
        if *name == "client" {
            let mut sorted = pod_ips.clone();
            sorted.sort();
            until("the Service's endpoints", || {
                let (api, sorted) = (api.clone(), sorted.clone());
                async move {
                    let ep = api.get::<Endpoints>("default", "web").await.ok()?;
                    let mut ready: Vec<String> =
                        ep.ready_addresses().map(|a| a.ip.clone()).collect();
                    ready.sort();
                    (ready == sorted).then_some(())
                }
            })
            .await?;
            return Ok(Workload {
                cluster_ip: svc.spec.cluster_ip,
                pod_ips,
                client_uid: pod.metadata.uid,
            });
        }
        pod_ips.push(pod.status.pod_ip);
    }
    unreachable!("the client is the last pod")
}

/// One GET on a new connection; Ok when the server answered 200.
fn get(target: SocketAddr) -> std::io::Result<()> {
    let mut s = TcpStream::connect_timeout(&target, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(b"GET / HTTP/1.0\r\nHost: web\r\n\r\n")?;
    let mut reply = Vec::with_capacity(512);
    s.read_to_end(&mut reply)?;
    if reply.starts_with(b"HTTP/1.0 200") || reply.starts_with(b"HTTP/1.1 200") {
        Ok(())
    } else {
        Err(std::io::Error::other("not a 200 reply"))
    }
}

#[derive(Default)]
struct Round {
    latencies: Vec<Duration>,
    errors: usize,
    elapsed: Duration,
}

/// `concurrency` threads in the client pod's namespace, each cycling through `targets`.
fn measure(
    netns: &Path,
    targets: &[SocketAddr],
    concurrency: usize,
    length: Duration,
) -> Result<Round> {
    let targets: Arc<Vec<SocketAddr>> = Arc::new(targets.to_vec());
    let start = Instant::now();
    let deadline = start + length;
    let workers: Vec<_> = (0..concurrency)
        .map(|i| {
            let (netns, targets) = (netns.to_path_buf(), targets.clone());
            std::thread::spawn(move || {
                shoal_node::probe::in_netns(&netns, move || {
                    let mut round = Round::default();
                    let mut k = i;
                    while Instant::now() < deadline {
                        let target = targets[k % targets.len()];
                        k += 1;
                        let t = Instant::now();
                        match get(target) {
                            Ok(()) => round.latencies.push(t.elapsed()),
                            Err(_) => round.errors += 1,
                        }
                    }
                    round
                })
            })
        })
        .collect();
    let mut total = Round::default();
    for w in workers {
        let r = w
            .join()
            .map_err(|_| anyhow::anyhow!("client thread panicked"))?
            .context("entering the client pod's network namespace")?;
        total.latencies.extend(r.latencies);
        total.errors += r.errors;
    }
    total.elapsed = start.elapsed();
    Ok(total)
}

struct Mode {
    name: &'static str,
    targets: Vec<SocketAddr>,
    rates: Vec<f64>,
    latencies: Vec<Duration>,
    errors: usize,
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() -> Result<()> {
    common::init_tracing();
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let (rt, natsd) = common::start_nats(dir.path())?;
    let url = natsd.url();
    let identities = common::Identities::of(&rt, &natsd)?;
    common::start_control_plane(url.clone(), &identities, true)?;
    let fabric = Fabric::new(1).context("making the host network namespace")?;
    let host = fabric.hosts[0].clone();
    let node_auth = rt
        .block_on(natsd.creds(&bus_schemas::roles::Role::Node(NODE.into())))
        .context("the node's credential")?;
    let node = start_node(&rt, &url, node_auth, &host)?;
    let workload = rt.block_on(setup(&url, &identities.admin))?;
    let client_netns: PathBuf = node
        .runtime
        .sandbox(&workload.client_uid)
        .context("the client pod's sandbox")?
        .netns_path;
    let addr = |ip: &str, port: u16| -> Result<SocketAddr> { Ok(format!("{ip}:{port}").parse()?) };
    let mut modes = [
        Mode {
            name: "service",
            targets: vec![addr(&workload.cluster_ip, 80)?],
            rates: vec![],
            latencies: vec![],
            errors: 0,
        },
        Mode {
            name: "direct-1",
            targets: vec![addr(&workload.pod_ips[0], 8080)?],
            rates: vec![],
            latencies: vec![],
            errors: 0,
        },
        Mode {
            name: "direct-3",
            targets: workload
                .pod_ips
                .iter()
                .map(|ip| addr(ip, 8080))
                .collect::<Result<_>>()?,
            rates: vec![],
            latencies: vec![],
            errors: 0,
        },
    ];
    println!(
        "node network in {} (pod CIDR {}); Service {}:80 -> pods {:?}:8080; client: {} threads in the client pod's netns, {} s per round, a new connection per request",
        host.netns, host.pod_cidr, workload.cluster_ip, workload.pod_ips, args.concurrency, args.seconds
    );
    // Warm-up: ARP, page cache, the pods' first forks.
    let _ = measure(
        &client_netns,
        &modes[0].targets,
        args.concurrency,
        Duration::from_millis(500),
    )?;
    let length = Duration::from_secs_f64(args.seconds);
    for round in 1..=args.rounds {
        for mode in modes.iter_mut() {
            let r = measure(&client_netns, &mode.targets, args.concurrency, length)?;
            let rate = r.latencies.len() as f64 / r.elapsed.as_secs_f64();
            println!(
                "round {round} {:<9} {:>8.0} req/s  errors {}",
                mode.name, rate, r.errors
            );
            mode.rates.push(rate);
            mode.latencies.extend(r.latencies);
            mode.errors += r.errors;
        }
    }
    println!();
    println!("mode       req/s (mean)   p50        p99        errors");
    let mut means = Vec::new();
    for mode in modes.iter_mut() {
        mode.latencies.sort_unstable();
        let mean = mode.rates.iter().sum::<f64>() / mode.rates.len().max(1) as f64;
        means.push(mean);
        println!(
            "{:<10} {:>10.0}   {:<10} {:<10} {}",
            mode.name,
            mean,
            ms(percentile(&mode.latencies, 0.50)),
            ms(percentile(&mode.latencies, 0.99)),
            mode.errors
        );
    }
    println!();
    println!(
        "service/direct-1 = {:.2} (goal >= 0.9); service/direct-3 = {:.2}",
        means[0] / means[1].max(1e-9),
        means[0] / means[2].max(1e-9)
    );
    drop(node);
    drop(fabric);
    Ok(())
}
