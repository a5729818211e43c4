//! The Kubernetes API gateway against the bus path it translates to, in one run. Prints
//! figures; never asserts.
//!
//! Layout: nats-server child (temp dir, `sync_interval: always`), the API actor on a thread of
//! its own (`common::start_control_plane`), and a gateway replica on another thread serving
//! plain HTTP on a free port (TLS is the same bytes encrypted; the figures are about the
//! translation). `--pods` pods are created through the API first.
//!
//! - **get latency**: `--gets` sequential gets of random pods, each through a bus request
//!   (`ApiClient`, msgpack) and through the gateway (one keep-alive HTTP/1.1 connection,
//!   JSON); p50/p99 of both and the difference. Goal: ≤ 2 ms added at p99.
//! - **list throughput**: every pod in all namespaces, as `shoal get pods -A` asks the bus
//!   (all pages) and as `kubectl get pods -A` asks the gateway (pages of 500, as a Table);
//!   pods/s of both and the ratio. Goal: ≥ 0.8× the bus path. With `--kubectl` and `--shoal`
//!   the two commands themselves are timed end to end as well.
//! - **watch fan-out**: `--watchers` watch streams of all pods (what `kubectl get pods -w`
//!   holds open: a Table watch from the list's revision) receive every change of
//!   `--rollout` pod creates; delivery lag p99 (create acknowledged → event read) and any
//!   event a watcher missed. Goal: none missed.
//!
//! Run: `cargo build --release -p shoal-loadtest --bin bench_gateway && target/release/bench_gateway`

#[path = "common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bus_schemas::api::{ListOptions, ObjectRef};
use bus_schemas::codec;
use bus_schemas::subjects::Verb;
use clap::Parser;
use shoal_bus::ApiClient;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

#[derive(Parser)]
#[command(about = "The Kubernetes API gateway against the bus path, in one run")]
struct Args {
    #[arg(long, default_value_t = 10_000)]
    pods: usize,
    #[arg(long, default_value_t = 2_000)]
    gets: usize,
    /// Lists of every pod per path; the best counts.
    #[arg(long, default_value_t = 3)]
    list_rounds: usize,
    /// Watch streams for the fan-out; 0 skips it.
    #[arg(long, default_value_t = 200)]
    watchers: usize,
    #[arg(long, default_value_t = 1_000)]
    rollout: usize,
    /// Times `KUBECTL get pods -A` too (a kubeconfig for the gateway is written).
    #[arg(long)]
    kubectl: Option<String>,
    /// Times `SHOAL get pods -A` too.
    #[arg(long)]
    shoal: Option<String>,
}

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// One keep-alive HTTP/1.1 connection to the gateway.
struct Http {
    reader: BufReader<TcpStream>,
}

impl Http {
    async fn connect(addr: std::net::SocketAddr) -> Result<Http> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Http {
            reader: BufReader::new(stream),
        })
    }

    async fn send(&mut self, path: &str, accept: &str) -> Result<()> {
        let token = ADMIN_TOKEN.get().map_or("", String::as_str);
        let request = format!("GET {path} HTTP/1.1\r\nHost: gateway\r\nAccept: {accept}\r\nAuthorization: Bearer {token}\r\n\r\n");
        self.reader.get_mut().write_all(request.as_bytes()).await?;
        Ok(())
    }

    /// Status line and headers; returns (code, content-length or None for chunked).
    async fn head(&mut self) -> Result<(u16, Option<usize>)> {
        let mut line = String::new();
        self.reader.read_line(&mut line).await?;
        let code: u16 = line.split_whitespace().nth(1).unwrap_or("0").parse()?;
        let mut length = None;
        loop {
            line.clear();
            self.reader.read_line(&mut line).await?;
            let l = line.trim_end();
            if l.is_empty() {
                return Ok((code, length));
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = Some(v.trim().parse()?);
                }
            }
        }
    }

    /// One chunk of a chunked body; None at its end.
    async fn chunk(&mut self) -> Result<Option<Vec<u8>>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let size = usize::from_str_radix(line.trim(), 16).context("chunk size")?;
        let mut data = vec![0; size + 2];
        self.reader.read_exact(&mut data).await?;
        data.truncate(size);
        Ok((size > 0).then_some(data))
    }

    async fn get(&mut self, path: &str, accept: &str) -> Result<Vec<u8>> {
        self.send(path, accept).await?;
        let (code, length) = self.head().await?;
        let body = match length {
            Some(n) => {
                let mut body = vec![0; n];
                self.reader.read_exact(&mut body).await?;
                body
            }
            None => {
                let mut body = Vec::new();
                while let Some(c) = self.chunk().await? {
                    body.extend(c);
                }
                body
            }
        };
        if code != 200 {
            bail!("GET {path}: {code} {}", String::from_utf8_lossy(&body));
        }
        Ok(body)
    }
}

/// The admin's gateway token: every request of the benchmark is authenticated, as kubectl's are.
static ADMIN_TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn start_gateway(
    url: String,
    auth: shoal_bus::auth::ClientAuth,
    identities: std::path::PathBuf,
    tls: Option<shoal_gateway::tls::Credentials>,
) -> Result<std::net::SocketAddr> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("gateway".into())
        .spawn(move || {
            actix::System::new().block_on(async move {
                let nats = shoal_bus::connect(&url, "bench-gateway", &auth)
                    .await
                    .expect("connect");
                let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
                let config = shoal_gateway::GatewayConfig {
                    listen: "127.0.0.1:0".parse().expect("address"),
                    tls,
                    identities,
                };
                actix::spawn(async move {
                    if let Err(e) = shoal_gateway::run_with_ready(
                        config,
                        nats,
                        std::future::pending(),
                        ready_tx,
                    )
                    .await
                    {
                        eprintln!("gateway failed: {e}");
                    }
                });
                if let Ok(addr) = ready_rx.await {
                    let _ = tx.send(addr);
                }
                std::future::pending::<()>().await;
            });
        })?;
    rx.recv_timeout(Duration::from_secs(30))
        .context("gateway did not start")
}

async fn create_pods(
    api: &ApiClient,
    prefix: &str,
    count: usize,
) -> Result<HashMap<String, Instant>> {
    let gate = Arc::new(Semaphore::new(64));
    let acked = Arc::new(Mutex::new(HashMap::new()));
    let mut tasks = Vec::new();
    for i in 0..count {
        let permit = gate.clone().acquire_owned().await?;
        let (api, acked) = (api.clone(), acked.clone());
        let name = format!("{prefix}-{i}");
        tasks.push(tokio::spawn(async move {
            let mut pod = common::bench_pod(&name);
            pod.metadata.namespace = "default".into();
            let r = api.create(&pod).await;
            acked.lock().expect("lock").insert(name, Instant::now());
            drop(permit);
            r.map(|_| ())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let map = std::mem::take(&mut *acked.lock().expect("lock"));
    Ok(map)
}

fn main() -> Result<()> {
    let args = Args::parse();
    common::init_tracing();
    let dir = tempfile::tempdir()?;
    let (runtime, natsd) = common::start_nats(dir.path())?;
    let url = natsd.url();
    let identities = common::Identities::of(&runtime, &natsd)?;
    common::start_control_plane(url.clone(), &identities, false)?;
    let auth_dir = identities
        .auth_dir
        .clone()
        .context("the gateway admits callers by identity: run with identities on")?;
    let token = shoal_bus::auth::AuthDir::open(&auth_dir).issue_token("admin")?;
    let _ = ADMIN_TOKEN.set(token.clone());
    let addr = start_gateway(
        url.clone(),
        identities.gateway.clone(),
        auth_dir.clone(),
        None,
    )?;
    println!("nats-server {url}; gateway http://{addr}");
    // `shoal get` runs as the operator, with the admin credential.
    let admin_creds = natsd
        .config()
        .auth
        .as_ref()
        .map(|a| a.creds_path("admin").display().to_string())
        .unwrap_or_default();

    runtime.block_on(async move {
        // The client reading over the bus beside the gateway acts as the operator too.
        let nats = shoal_bus::connect(&url, "bench-client", &identities.admin).await?;
        let api = ApiClient::new(nats.clone());
        let started = Instant::now();
        create_pods(&api, "p", args.pods).await?;
        println!(
            "created {} pods in {:.1} s",
            args.pods,
            started.elapsed().as_secs_f64()
        );

        // get latency, interleaved so both paths see the same load.
        let mut http = Http::connect(addr).await?;
        let (mut bus_lat, mut gw_lat) = (Vec::new(), Vec::new());
        for i in 0..args.gets {
            let name = format!("p-{}", (i * 7919) % args.pods);
            let t = Instant::now();
            let body = codec::to_msgpack(&ObjectRef {
                namespace: "default".into(),
                name: name.clone(),
            })?;
            let reply = api.request_raw("pod", Verb::Get, body).await?;
            let _: serde_json::Value = rmp_serde::from_slice(&reply.payload)?;
            bus_lat.push(t.elapsed());
            let t = Instant::now();
            http.get(
                &format!("/api/v1/namespaces/default/pods/{name}"),
                "application/json",
            )
            .await?;
            gw_lat.push(t.elapsed());
        }
        let b = describe_ms(&mut bus_lat);
        let g = describe_ms(&mut gw_lat);
        bus_lat.sort_unstable();
        gw_lat.sort_unstable();
        let p = |v: &[Duration], q| common::percentile(v, q);
        println!();
        println!(
            "== get latency ({} gets of one pod, sequential) ==",
            args.gets
        );
        println!("bus request (msgpack):     {b}");
        println!("gateway (HTTP/1.1, JSON):  {g}");
        println!(
            "added by the gateway:      p50 {:.2} ms, p99 {:.2} ms   (goal p99 <= 2 ms)",
            (p(&gw_lat, 0.5).as_secs_f64() - p(&bus_lat, 0.5).as_secs_f64()) * 1e3,
            (p(&gw_lat, 0.99).as_secs_f64() - p(&bus_lat, 0.99).as_secs_f64()) * 1e3
        );

        // list throughput: the best of `--list-rounds` each, the two paths taking turns.
        let mut bus_best = Duration::MAX;
        let mut gw_best = Duration::MAX;
        let mut listed = (0, 0);
        for _ in 0..args.list_rounds.max(1) {
            let t = Instant::now();
            let (items, _) = list_bus(&api).await?;
            bus_best = bus_best.min(t.elapsed());
            listed.0 = items;
            let t = Instant::now();
            listed.1 = list_gateway(&mut http).await?;
            gw_best = gw_best.min(t.elapsed());
        }
        let rate = |n: usize, d: Duration| n as f64 / d.as_secs_f64();
        println!();
        println!(
            "== list of every pod, all namespaces (best of {}) ==",
            args.list_rounds.max(1)
        );
        println!(
            "bus (as shoal get -A):              {} pods in {:.1} ms = {:.0} pods/s",
            listed.0,
            bus_best.as_secs_f64() * 1e3,
            rate(listed.0, bus_best)
        );
        println!(
            "gateway Table, pages of 500 (as kubectl get -A): {} pods in {:.1} ms = {:.0} pods/s",
            listed.1,
            gw_best.as_secs_f64() * 1e3,
            rate(listed.1, gw_best)
        );
        println!(
            "ratio gateway/bus: {:.2}   (goal >= 0.80)",
            rate(listed.1, gw_best) / rate(listed.0, bus_best)
        );
        if let Some(kubectl) = &args.kubectl {
            // kubectl sends no bearer token over plain HTTP: it gets a replica of its own
            // serving HTTPS, as `shoal up` serves it.
            let (creds, _) = shoal_gateway::tls::generate(&[])?;
            let tls_addr = start_gateway(
                url.clone(),
                identities.gateway.clone(),
                auth_dir.clone(),
                Some(creds.clone()),
            )?;
            let config = dir.path().join("kubeconfig");
            std::fs::write(
                &config,
                shoal_gateway::kubeconfig::render(
                    &format!("https://{tls_addr}"),
                    Some(&creds.ca_pem),
                    "admin",
                    &token,
                ),
            )?;
            let cache = dir.path().join("kube-cache");
            let cache = cache.to_str().unwrap_or("");
            let kubeconfig = [("KUBECONFIG", config.to_str().unwrap_or(""))];
            let paged = ["get", "pods", "-A", "--cache-dir", cache];
            let kubectl_time = time_command(kubectl, &paged, &kubeconfig)?;
            println!(
                "kubectl get pods -A (end to end, best of 3): {:.0} ms",
                kubectl_time.as_secs_f64() * 1e3
            );
            // kubectl's own client limits it to 5 requests a second after a burst of 10
            // (client-go's defaults; `-v=6` prints each wait), whatever the server: 10,000 pods
            // in pages of 500 take it two seconds. One request, without pages, shows the rest.
            let whole = ["get", "pods", "-A", "--chunk-size=0", "--cache-dir", cache];
            let unpaged = time_command(kubectl, &whole, &kubeconfig)?;
            println!(
                "kubectl get pods -A --chunk-size=0 (one request, best of 3): {:.0} ms",
                unpaged.as_secs_f64() * 1e3
            );
        }
        if let Some(shoal) = &args.shoal {
            let t = time_command(
                shoal,
                &["get", "pods", "-A"],
                &[
                    ("SHOAL_NATS", url.as_str()),
                    (shoal_bus::auth::CREDS_ENV, admin_creds.as_str()),
                ],
            )?;
            println!(
                "shoal get pods -A (end to end, best of 3):   {:.0} ms",
                t.as_secs_f64() * 1e3
            );
        }

        if args.watchers > 0 {
            watch_fanout(&api, addr, args.watchers, args.rollout).await?;
        }
        Ok::<(), anyhow::Error>(())
    })?;
    drop(natsd);
    Ok(())
}

async fn list_bus(api: &ApiClient) -> Result<(usize, String)> {
    let mut options = ListOptions::default();
    let mut items = 0;
    loop {
        let body = codec::to_msgpack(&options)?;
        let reply = api.request_raw("pod", Verb::List, body).await?;
        let page: bus_schemas::api::ObjectList<serde_json::Value> =
            rmp_serde::from_slice(&reply.payload)?;
        items += page.items.len();
        if page.metadata.continue_token.is_empty() {
            return Ok((items, page.metadata.resource_version));
        }
        options.continue_token = page.metadata.continue_token;
    }
}

async fn list_gateway(http: &mut Http) -> Result<usize> {
    let mut rows = 0;
    let mut token = String::new();
    loop {
        let mut path = "/api/v1/pods?limit=500".to_string();
        if !token.is_empty() {
            path.push_str(&format!("&continue={}", encode(&token)));
        }
        let body = http.get(&path, TABLE).await?;
        let table: serde_json::Value = serde_json::from_slice(&body)?;
        rows += table["rows"].as_array().map_or(0, Vec::len);
        token = table["metadata"]["continue"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if token.is_empty() {
            return Ok(rows);
        }
    }
}

/// "n=…, p50 …, p99 …, max …" in milliseconds.
fn describe_ms(samples: &mut [Duration]) -> String {
    samples.sort_unstable();
    let m = |q: f64| common::percentile(samples, q).as_secs_f64() * 1e3;
    format!(
        "n={}, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        samples.len(),
        m(0.5),
        m(0.99),
        m(1.0)
    )
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn time_command(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let out = std::process::Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .output()?;
        if !out.status.success() {
            bail!(
                "{program} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        best = best.min(t.elapsed());
    }
    Ok(best)
}

async fn watch_fanout(
    api: &ApiClient,
    addr: std::net::SocketAddr,
    watchers: usize,
    rollout: usize,
) -> Result<()> {
    let (_, revision) = list_bus(api).await?;
    let seen: Arc<Mutex<Vec<HashMap<String, Instant>>>> =
        Arc::new(Mutex::new(vec![HashMap::new(); watchers]));
    let mut tasks = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(watchers);
    for w in 0..watchers {
        let seen = seen.clone();
        let ready = ready_tx.clone();
        let revision = revision.clone();
        tasks.push(tokio::spawn(async move {
            let mut http = Http::connect(addr).await?;
            http.send(
                &format!("/api/v1/pods?watch=true&resourceVersion={revision}"),
                TABLE,
            )
            .await?;
            let (code, _) = http.head().await?;
            if code != 200 {
                bail!("watch answered {code}");
            }
            let _ = ready.send(()).await;
            let mut pending = Vec::new();
            while let Some(chunk) = http.chunk().await? {
                pending.extend(chunk);
                while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    let event: serde_json::Value = serde_json::from_slice(&line)?;
                    let name = event["object"]["rows"][0]["cells"][0]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    if event["type"] == "ADDED" && name.starts_with("r-") {
                        let mut seen = seen.lock().expect("lock");
                        seen[w].insert(name, Instant::now());
                        if seen[w].len() == rollout {
                            return Ok::<(), anyhow::Error>(());
                        }
                    }
                }
            }
            bail!("the gateway ended the watch stream")
        }));
    }
    drop(ready_tx);
    for _ in 0..watchers {
        ready_rx.recv().await.context("a watcher failed to start")?;
    }
    let started = Instant::now();
    let acked = create_pods(api, "r", rollout).await?;
    let deadline = Duration::from_secs(120);
    // A watcher that ended early is a failure to report, not a silent shortfall.
    let mut ended: HashMap<String, usize> = HashMap::new();
    for t in tasks {
        let remaining = deadline.saturating_sub(started.elapsed());
        let outcome = match tokio::time::timeout(remaining, t).await {
            Err(_) => Some("still waiting at the deadline".to_string()),
            Ok(Err(e)) => Some(format!("task failed: {e}")),
            Ok(Ok(Err(e))) => Some(format!("{e:#}")),
            Ok(Ok(Ok(()))) => None,
        };
        if let Some(outcome) = outcome {
            *ended.entry(outcome).or_default() += 1;
        }
    }
    let seen = seen.lock().expect("lock");
    let mut lags = Vec::new();
    let mut missed = 0;
    for w in seen.iter() {
        for (name, acked_at) in &acked {
            match w.get(name) {
                Some(at) => lags.push(at.saturating_duration_since(*acked_at)),
                None => missed += 1,
            }
        }
    }
    println!();
    println!("== watch fan-out: {watchers} Table watches of all pods, {rollout} pods created ==");
    println!(
        "events delivered: {} of {}; missed: {missed}   (goal: none missed)",
        lags.len(),
        watchers * rollout
    );
    println!(
        "delivery lag (create acknowledged -> event read): {}",
        describe_ms(&mut lags)
    );
    for (outcome, watchers) in &ended {
        println!("{watchers} watcher(s) short of every event: {outcome}");
    }
    Ok(())
}
