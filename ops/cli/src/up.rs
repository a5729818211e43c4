//! `shoal up`: a one-machine cluster in the foreground — nats-server as a child process with
//! durable JetStream storage, and every actor in this process.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use shoal_bus::natsd::{Natsd, NatsdConfig};
use shoal_bus::store::{ensure_stream, StreamSettings};
use shoal_bus::{ApiClient, InformerFactory, Store, StoreError};

use crate::cli::UpArgs;

/// Oldest nats-server whose JetStream replies async-nats 0.51 decodes, with the durability
/// behaviour Shoal relies on.
const MIN_SERVER: (u64, u64) = (2, 12);
const MARKER: &str = "cluster.initialised";

pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(dir).join("shoal");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib"));
    home.join(".local/share/shoal")
}

pub async fn run(args: UpArgs) -> Result<()> {
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating data dir {}", data_dir.display()))?;

    let mut natsd = None;
    let url = match &args.join {
        Some(url) => {
            warn_about_server(url, args.monitor.as_deref()).await;
            url.clone()
        }
        None => {
            if std::net::TcpListener::bind(("127.0.0.1", args.port)).is_err() {
                bail!(
                    "port {} is already in use (another cluster, or a nats-server still shutting down?): stop it, or choose another --port",
                    args.port
                );
            }
            let config = NatsdConfig::new(args.port, data_dir.join("nats"));
            eprintln!(
                "starting nats-server on port {} (store {}) …",
                args.port,
                config.data_dir.display()
            );
            let server = Natsd::start(config).await.context("starting nats-server")?;
            let url = server.url();
            natsd = Some(server);
            url
        }
    };
    let nats = shoal_bus::connect(&url, "shoal-up")
        .await
        .with_context(|| format!("connecting to {url}"))?;

    let marker = data_dir.join(MARKER);
    let store = match Store::open(nats.clone()).await {
        Ok(store) => store,
        Err(StoreError::StreamMissing) => {
            let first_start = if args.join.is_some() {
                args.init
            } else {
                !marker.exists()
            };
            if !first_start {
                bail!(
                    "the cluster's state stream is missing{}: refusing to start with an empty view of a cluster that existed. Restore the JetStream store, or start a new cluster ({})",
                    if args.join.is_some() { " on the joined NATS" } else { " although this data dir held a cluster" },
                    if args.join.is_some() { "add --init" } else { "use another --data-dir" }
                );
            }
            let js = async_nats::jetstream::new(nats.clone());
            ensure_stream(
                &js,
                &StreamSettings {
                    replicas: args.replicas,
                },
            )
            .await?;
            std::fs::write(&marker, chrono::Utc::now().to_rfc3339())
                .context("writing cluster marker")?;
            Store::open(nats.clone()).await?
        }
        Err(e) => return Err(e.into()),
    };
    if args.join.is_none() && !marker.exists() {
        std::fs::write(&marker, chrono::Utc::now().to_rfc3339())
            .context("writing cluster marker")?;
    }

    let informers = InformerFactory::new(store.clone());
    let (trigger, shutdown) = shoal_bus::shutdown::channel();
    let api_task = {
        let (nats, shutdown) = (nats.clone(), shutdown.clone());
        let config = shoal_api::ApiConfig {
            informers: Some(informers.clone()),
        };
        actix::spawn(async move {
            if let Err(e) = shoal_api::run(config, nats, shutdown.wait()).await {
                eprintln!("error: API actor: {e}");
            }
        })
    };
    let api = ApiClient::new(nats.clone()).with_deadline(Duration::from_secs(30));
    shoal_api::bootstrap(&api)
        .await
        .context("creating the cluster's namespaces")?;

    let mut actors = vec!["api"];
    let controllers_task = {
        let (nats, shutdown) = (nats.clone(), shutdown.clone());
        let config = shoal_controllers::ControllersConfig {
            informers: Some(informers.clone()),
            ..Default::default()
        };
        actix::spawn(async move {
            if let Err(e) = shoal_controllers::run(config, nats, shutdown.wait()).await {
                eprintln!("error: controllers: {e}");
            }
        })
    };
    actors.push("controllers");
    let scheduler_task = {
        let (nats, shutdown) = (nats.clone(), shutdown.clone());
        let config = shoal_scheduler::SchedulerConfig {
            informers: Some(informers.clone()),
            ..Default::default()
        };
        actix::spawn(async move {
            if let Err(e) = shoal_scheduler::run(config, nats, shutdown.wait()).await {
                eprintln!("error: scheduler: {e}");
            }
        })
    };
    actors.push("scheduler");
    let node_task = if args.no_node {
        None
    } else {
        let name = crate::node::hostname();
        let backend =
            crate::node::linux_backend(data_dir.join("node"), &args.bridge, &args.pod_cidr, &name)?;
        let mut config = shoal_agent::AgentConfig::new(name, args.pod_cidr.clone());
        config.informers = Some(informers.clone());
        let (nats, shutdown) = (nats.clone(), shutdown.clone());
        actors.push("node");
        Some(actix::spawn(async move {
            if let Err(e) = shoal_agent::run(config, backend, nats, shutdown.wait()).await {
                eprintln!("error: node agent: {e}");
            }
        }))
    };

    println!("Shoal cluster is up.");
    println!("  NATS URL:  {url}");
    println!("  data dir:  {}", data_dir.display());
    println!("  actors:    {}", actors.join(", "));
    println!("Try: shoal get ns   (export SHOAL_NATS={url} if not the default). Ctrl-C stops the cluster.");

    wait_for_signal().await;
    eprintln!("stopping …");
    trigger.fire();
    let _ = tokio::time::timeout(Duration::from_secs(10), api_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), controllers_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), scheduler_task).await;
    if let Some(task) = node_task {
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    }
    if let Some(mut server) = natsd {
        server.stop().await;
    }
    eprintln!("stopped; state kept in {}", data_dir.display());
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Reads a joined server's monitoring endpoint and warns when acknowledged writes might not
/// survive a power loss, or the server is older than Shoal supports.
async fn warn_about_server(url: &str, monitor: Option<&str>) {
    let host = url
        .trim_start_matches("nats://")
        .split(':')
        .next()
        .unwrap_or("127.0.0.1")
        .to_string();
    let monitor = monitor
        .map(String::from)
        .unwrap_or_else(|| format!("{host}:8222"));
    match fetch_varz(&monitor).await {
        Ok(varz) => {
            let version = varz.get("version").and_then(|v| v.as_str()).unwrap_or("");
            let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
            let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
            if (major, minor) < MIN_SERVER {
                eprintln!("warning: nats-server {version} is older than {}.{}: upgrade it", MIN_SERVER.0, MIN_SERVER.1);
            }
            let config = varz.pointer("/jetstream/config");
            let sync_always = config.and_then(|c| c.get("sync_always")).and_then(|v| v.as_bool()).unwrap_or(false);
            if !sync_always {
                eprintln!("warning: the joined nats-server does not run JetStream with `sync_interval: always`: acknowledged writes may be lost on power loss");
            }
        }
        Err(e) => eprintln!("warning: cannot read the monitoring endpoint http://{monitor}/varz ({e}): durability settings unchecked"),
    }
}

async fn fetch_varz(hostport: &str) -> Result<serde_json::Value> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect(hostport),
    )
    .await??;
    stream
        .write_all(format!("GET /varz HTTP/1.0\r\nHost: {hostport}\r\n\r\n").as_bytes())
        .await?;
    let mut body = Vec::new();
    tokio::time::timeout(Duration::from_secs(3), stream.read_to_end(&mut body)).await??;
    let text = String::from_utf8_lossy(&body);
    let json = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    Ok(serde_json::from_str(json)?)
}
