//! `shoal up`: a one-machine cluster in the foreground — nats-server as a child process with
//! durable JetStream storage, and every actor in this process. With `--join URL` it starts
//! only actors against an existing NATS, and `--actors` picks which: a cluster can run its
//! API, controllers and schedulers as separate processes (replicas).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bus_schemas::roles::Role;
use shoal_bus::auth::{default_name, AuthDir};
use shoal_bus::natsd::NatsdConfig;
use shoal_bus::store::{ensure_stream, StreamSettings};
use shoal_bus::{ApiClient, InformerFactory, Store, StoreError};

use crate::actor_creds::ActorCreds;
use crate::cli::{UpActor, UpArgs};

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

/// Whether `dir` (canonical) is the data dir the CLI finds credentials in by itself.
fn is_default_data_dir(dir: &std::path::Path) -> bool {
    default_data_dir().canonicalize().ok().as_deref() == Some(dir)
}

/// The actors to start, in start order: `--actors` without `node` under `--no-node`.
fn actors_to_run(args: &UpArgs) -> Result<Vec<UpActor>> {
    let all = [
        UpActor::Api,
        UpActor::Controllers,
        UpActor::Scheduler,
        UpActor::Naming,
        UpActor::Autoscaler,
        UpActor::Node,
        UpActor::Gateway,
    ];
    let wanted: Vec<UpActor> = all
        .into_iter()
        .filter(|a| args.actors.contains(a) && !(*a == UpActor::Node && args.no_node))
        .collect();
    // DNS is served node-locally: without a node here, only where --dns-listen says.
    let wanted: Vec<UpActor> = wanted
        .iter()
        .copied()
        .filter(|a| {
            *a != UpActor::Naming || wanted.contains(&UpActor::Node) || args.dns_listen.is_some()
        })
        .collect();
    if wanted.is_empty() {
        bail!("no actor to run: --no-node removed the only one --actors named");
    }
    if !wanted.contains(&UpActor::Api) && args.join.is_none() {
        bail!("--actors without api needs --join URL: the cluster's API runs in another process there");
    }
    Ok(wanted)
}

/// Who this process is in leader elections and scheduler ledgers: host, pid and a few
/// random bits (pids repeat across containers and restarts).
fn instance_identity() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{}-{}-{:04x}",
        crate::node::hostname(),
        std::process::id(),
        nanos & 0xffff
    )
}

/// Leader election of the controllers for a `lease`-long Lease: renewed (and, by standbys,
/// looked at) four times per lease, at most every 2 s as with the default 15 s lease.
fn controllers_election(
    identity: &str,
    lease: Duration,
) -> shoal_bus::leader::LeaderElectionConfig {
    let mut config = shoal_controllers::ControllersConfig::default()
        .with_leader_election(identity)
        .leader_election
        .expect("leader election was just configured");
    let period = (lease / 4).clamp(Duration::from_millis(250), Duration::from_secs(2));
    config.lease_duration = lease;
    config.renew_period = period;
    config.retry_period = period;
    config
}

/// The role an actor runs as.
fn role_of(actor: UpActor, node: &str) -> Role {
    match actor {
        UpActor::Api => Role::Api,
        UpActor::Controllers => Role::Controllers,
        UpActor::Scheduler => Role::Scheduler,
        UpActor::Naming => Role::Naming,
        UpActor::Autoscaler => Role::Autoscaler,
        UpActor::Node => Role::Node(node.to_string()),
        UpActor::Gateway => Role::Gateway,
    }
}

/// The credentials of `shoal node` and of a joined `shoal up`: `--creds`, else SHOAL_CREDS.
pub fn joined_creds(
    creds: Option<&std::path::Path>,
    ca: Option<&std::path::Path>,
) -> Result<ActorCreds> {
    ActorCreds::joined(creds, ca)
}

pub async fn run(args: UpArgs) -> Result<()> {
    args.node_security.validate()?;
    let wanted = actors_to_run(&args)?;
    let node_name = args.node_name.clone().unwrap_or_else(crate::node::hostname);
    // The process's own connection (state stream, shared caches) is its first actor's.
    let main_role = role_of(wanted[0], &node_name);
    let runs = |a: UpActor| wanted.contains(&a);
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating data dir {}", data_dir.display()))?;
    // Absolute, so the server's command line names its config the same way whatever the
    // directory a later `shoal up` runs from (that is how an orphan is recognised).
    let data_dir = data_dir
        .canonicalize()
        .with_context(|| format!("resolving data dir {}", data_dir.display()))?;

    let mut natsd = None;
    let creds;
    // What the CLI needs set to reach this cluster, when it would not find it by itself.
    let mut client_env: Vec<(&str, PathBuf)> = Vec::new();
    let url = match &args.join {
        Some(url) => {
            creds = ActorCreds::joined(args.creds.as_deref(), args.ca.as_deref())?;
            warn_about_server(url, args.monitor.as_deref()).await;
            url.clone()
        }
        None => {
            let mut config = crate::cluster::server_config(&args, &data_dir)?;
            // Identities first: the server admits exactly those of this directory.
            let auth_path = data_dir.join("auth");
            let first_identities = !auth_path.join("identities.json").is_file();
            let auth = AuthDir::provision(&auth_path)
                .with_context(|| format!("provisioning identities in {}", auth_path.display()))?;
            if runs(UpActor::Node) {
                let role = Role::Node(node_name.clone());
                auth.ensure(&role, &default_name(&role))
                    .context("issuing this machine's node credential")?;
            }
            let found_by_default = is_default_data_dir(&data_dir);
            if !found_by_default {
                client_env.push(("SHOAL_CREDS", auth.creds_path("admin")));
            }
            if first_identities {
                let how = if found_by_default {
                    "the CLI uses it by default"
                } else {
                    "not the default data dir: give the CLI SHOAL_CREDS or --creds"
                };
                eprintln!(
                    "identities provisioned in {}: the admin credential is {} ({how}; `shoal creds create` issues more)",
                    auth_path.display(),
                    auth.creds_path("admin").display()
                );
            }
            config.auth = Some(auth.clone());
            if args.tls {
                // The peers' names too: the servers of one cluster share these files, and
                // each end of a route verifies the other's certificate.
                let mut hosts = vec![args.nats_host.clone()];
                if let Some(routes) = &args.routes {
                    hosts.extend(shoal_bus::server_urls(routes).iter().filter_map(|u| {
                        let hostport = u.split("://").last()?;
                        Some(
                            hostport
                                .rsplit_once(':')
                                .map_or(hostport, |(h, _)| h)
                                .to_string(),
                        )
                    }));
                }
                config.tls = Some(shoal_bus::tls::load_or_create(
                    &auth_path.join("tls"),
                    &hosts,
                )?);
            }
            if let Some(tls) = config.tls.as_ref().filter(|_| !found_by_default) {
                client_env.push(("SHOAL_CA", tls.ca.clone()));
            }
            creds = ActorCreds::Local {
                dir: auth,
                ca: config.tls.as_ref().map(|t| t.ca.clone()),
            };
            stop_orphaned_server(&config, &data_dir).await?;
            if std::net::TcpListener::bind(("127.0.0.1", args.port)).is_err() {
                bail!(
                    "port {} is already in use (another cluster, or a nats-server still shutting down?): stop it, or choose another --port",
                    args.port
                );
            }
            eprintln!(
                "starting nats-server on port {} (store {}) …",
                args.port,
                config.data_dir.display()
            );
            let server = crate::cluster::start_server(config).await?;
            let url = server.url();
            natsd = Some(crate::server_watch::ServerWatch::start(server));
            url
        }
    };
    let nats = creds
        .connect(&url, "shoal-up", &main_role)
        .await
        .with_context(|| format!("connecting to {url}"))?;
    if runs(UpActor::Node) && args.join.is_some() {
        crate::actor_creds::check_node(&nats, &node_name).await?;
    }
    // A process that is only a node agent publishes its spans as that node.
    let as_node = (wanted == [UpActor::Node]).then(|| node_name.clone());
    let metrics = crate::observe::start(
        &url,
        &args.metrics_addr,
        nats.clone(),
        creds.for_role(&main_role)?,
        as_node.as_deref(),
    )
    .await;

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
                    replicas: crate::cluster::state_replicas(&args),
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
    let identity = instance_identity();
    // (name, task) in start order; stopped in the same order.
    let mut tasks: Vec<(&str, tokio::task::JoinHandle<()>)> = Vec::new();
    if runs(UpActor::Api) {
        let config = shoal_api::ApiConfig {
            informers: Some(informers.clone()),
            secret_key_file: Some(
                args.secret_key_file
                    .clone()
                    .unwrap_or_else(|| data_dir.join("secrets.key")),
            ),
            compaction: shoal_api::compactor::CompactionConfig {
                deleted_retention: args.deleted_retention,
                event_ttl: args.event_ttl,
            },
        };
        let task = {
            let (nats, shutdown) = (nats.clone(), shutdown.clone());
            actix::spawn(async move {
                if let Err(e) = shoal_api::run(config, nats, shutdown.wait()).await {
                    eprintln!("error: API actor: {e}");
                }
            })
        };
        tasks.push(("api", task));
        // The API actors serve requests but may not send them: the namespaces are created
        // through the API as the controllers would.
        let client = creds
            .connect(&url, "shoal-up-bootstrap", &Role::Controllers)
            .await?;
        let api = ApiClient::new(client).with_deadline(Duration::from_secs(30));
        match shoal_api::bootstrap(&api).await {
            Ok(()) => {}
            // A joined API replica with an API credential alone: the first process did this.
            Err(e) if args.join.is_some() && e.is(bus_schemas::Reason::Forbidden) => {}
            Err(e) => return Err(e).context("creating the cluster's namespaces"),
        }
    }
    // Each actor connects as its own identity, confined to what its role may do.
    let connect_as = |actor: UpActor| {
        let (creds, url, role) = (creds.clone(), url.clone(), role_of(actor, &node_name));
        async move {
            let name = format!("shoal-up-{}", role.kind());
            creds.connect(&url, &name, &role).await
        }
    };
    if runs(UpActor::Controllers) {
        let (nats, shutdown) = (connect_as(UpActor::Controllers).await?, shutdown.clone());
        let mut config = shoal_controllers::ControllersConfig {
            informers: Some(informers.clone()),
            ..Default::default()
        };
        // Tests that drive CronJobs through minutes set the controllers' clock over the bus.
        if std::env::var("SHOAL_TEST_CLOCK").as_deref() == Ok("bus") {
            config.tunables.clock =
                shoal_controllers::clock::Clock::from_bus(nats.clone(), chrono::Utc::now())
                    .await
                    .map_err(anyhow::Error::msg)
                    .context("SHOAL_TEST_CLOCK=bus: subscribing to the test clock")?;
        }
        // A joined cluster may run several controller processes: only the lease holder
        // acts, the others stand by (two active sets would fight over every pod).
        if args.join.is_some() {
            config.leader_election = Some(controllers_election(
                &identity,
                Duration::from_secs(args.lease_seconds),
            ));
        }
        tasks.push((
            "controllers",
            actix::spawn(async move {
                if let Err(e) = shoal_controllers::run(config, nats, shutdown.wait()).await {
                    eprintln!("error: controllers: {e}");
                }
            }),
        ));
    }
    if runs(UpActor::Scheduler) {
        let (url, shutdown) = (url.clone(), shutdown.clone());
        let creds = creds.clone();
        // Schedulers need no election: any number share the cluster through the per-node
        // allocation records (docs/architecture.md).
        let config = shoal_scheduler::SchedulerConfig {
            informers: Some(informers.clone()),
            identity: format!("scheduler-{identity}"),
            ..Default::default()
        };
        // Deciding is CPU work: on a thread of its own it uses a second core instead of
        // queueing behind the API's request handling. Its own connection too, made on that
        // thread, so its binds' requests and replies are read and written there rather than
        // on the API's thread.
        tasks.push((
            "scheduler",
            on_own_thread("scheduler", move || async move {
                let role = Role::Scheduler;
                let nats = match creds.connect(&url, "shoal-up-scheduler", &role).await {
                    Ok(nats) => nats,
                    Err(e) => {
                        eprintln!("error: scheduler: connecting to {url}: {e:#}");
                        return;
                    }
                };
                if let Err(e) = shoal_scheduler::run(config, nats, shutdown.wait()).await {
                    eprintln!("error: scheduler: {e}");
                }
            })?,
        ));
    }
    // Node-local DNS: the naming replica listens on the pod gateway (bound before the node
    // creates the bridge that carries it), and the node writes that address into every
    // pod's resolv.conf, so a pod's lookups never leave its machine.
    let gateway = pod_gateway(&args.pod_cidr)?;
    if runs(UpActor::Naming) {
        let listen = args
            .dns_listen
            .unwrap_or_else(|| std::net::SocketAddr::from((gateway, 53)));
        let config = shoal_naming::NamingConfig {
            listen: vec![listen],
            informers: Some(informers.clone()),
            ..Default::default()
        };
        let (nats, shutdown) = (connect_as(UpActor::Naming).await?, shutdown.clone());
        tasks.push((
            "naming",
            actix::spawn(async move {
                if let Err(e) = shoal_naming::run(config, nats, shutdown.wait()).await {
                    eprintln!("error: naming actor (DNS on {listen}): {e}");
                }
            }),
        ));
    }
    if runs(UpActor::Autoscaler) {
        let (nats, shutdown) = (connect_as(UpActor::Autoscaler).await?, shutdown.clone());
        let mut config = shoal_autoscaler::AutoscalerConfig {
            informers: Some(informers.clone()),
            // A usage sample averages over the node's period (CPU readiness depends on it).
            sample_window: Duration::from_secs(args.metrics_period),
            ..Default::default()
        };
        // Two active autoscalers would each apply their own rate limits: one acts.
        if args.join.is_some() {
            let mut election =
                controllers_election(&identity, Duration::from_secs(args.lease_seconds));
            election.name = "shoal-autoscaler".into();
            config.leader_election = Some(election);
        }
        tasks.push((
            "autoscaler",
            actix::spawn(async move {
                if let Err(e) = shoal_autoscaler::run(config, nats, shutdown.wait()).await {
                    eprintln!("error: autoscaler: {e}");
                }
            }),
        ));
    }
    if runs(UpActor::Node) {
        let name = node_name.clone();
        let backend = crate::node::linux_backend(
            data_dir.join("node"),
            &args.bridge,
            &args.pod_cidr,
            &name,
            &args.node_security,
        )?;
        let mut config = shoal_agent::AgentConfig::new(name, args.pod_cidr.clone());
        config.informers = Some(informers.clone());
        config.metrics_period = Duration::from_secs(args.metrics_period);
        config.pod_defaults.cluster_dns = args
            .dns_listen
            .map_or(gateway, |a| match a.ip() {
                std::net::IpAddr::V4(ip) if !ip.is_unspecified() => ip,
                _ => gateway,
            })
            .to_string();
        let (nats, shutdown) = (connect_as(UpActor::Node).await?, shutdown.clone());
        tasks.push((
            "node",
            actix::spawn(async move {
                if let Err(e) = shoal_agent::run(config, backend, nats, shutdown.wait()).await {
                    eprintln!("error: node agent: {e}");
                }
            }),
        ));
    }
    let kubeconfig = if runs(UpActor::Gateway) {
        start_gateway(&args, &data_dir, &url, &creds, &shutdown, &mut tasks).await?
    } else {
        None
    };
    let actors: Vec<&str> = tasks.iter().map(|(name, _)| *name).collect();
    // Ends with the process: a read-only view of its caches for operators and the chaos check.
    tokio::spawn(shoal_bus::inspect::serve_caches(
        nats.clone(),
        informers.clone(),
        format!("shoal up {} ({identity})", actors.join(",")),
    ));

    let mut stop = StopSignals::listen()?;
    println!("Shoal cluster is up.");
    println!("  NATS URL:  {url}");
    println!("  data dir:  {}", data_dir.display());
    println!("  actors:    {}", actors.join(", "));
    if args.join.is_some() {
        println!("  identity:  {identity}");
    }
    if let Some((path, listen)) = &kubeconfig {
        println!("  gateway:   https://{listen} (Kubernetes API)");
        println!(
            "  kubectl:   export KUBECONFIG={}   (context shoal)",
            path.display()
        );
    }
    if let Some(addr) = &metrics.addr {
        println!("  metrics:   http://{addr}/metrics");
    }
    for (variable, path) in &client_env {
        println!(
            "  CLI:       export {variable}={}   (the CLI looks only in the default data dir)",
            path.display()
        );
    }
    println!("Try: shoal get ns   (export SHOAL_NATS={url} if not the default). Ctrl-C stops the cluster.");

    stop.recv().await;
    eprintln!("stopping …");
    trigger.fire();
    stop_within_budget(tasks, natsd).await;
    eprintln!("stopped; state kept in {}", data_dir.display());
    Ok(())
}

/// Ctrl-C must return promptly (within 5 s all told, span export included): actors get
/// 2.5 s together to finish what they are doing, the server 1 s to close its store;
/// whatever is still running then is
/// abandoned (actors) or killed (the server). Acknowledged state is already durable, so a cut
/// short shutdown loses nothing but in-flight work, which the next start redoes.
async fn stop_within_budget(
    tasks: Vec<(&'static str, tokio::task::JoinHandle<()>)>,
    natsd: Option<crate::server_watch::ServerWatch>,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(2500);
    for (name, task) in tasks {
        if tokio::time::timeout_at(deadline, task).await.is_err() {
            eprintln!("warning: the {name} actor did not stop in time; leaving it");
        }
    }
    if let Some(server) = natsd {
        server.stop_within(Duration::from_secs(1)).await;
    }
}

/// A nats-server left running by a `shoal up` that was killed would hold the port and the
/// store: stop it, and say so.
async fn stop_orphaned_server(config: &NatsdConfig, data_dir: &std::path::Path) -> Result<()> {
    if let Some(pid) = shoal_bus::orphan::stop_orphan(config).await? {
        eprintln!(
            "stopped an orphaned nats-server (pid {pid}) left by a previous shoal up for {}",
            data_dir.display()
        );
    }
    Ok(())
}

/// Starts the Kubernetes API gateway on a thread of its own (HTTP and TLS work stays off the
/// API's thread) and writes a kubeconfig for it once it listens. A gateway that cannot
/// listen (the port is taken) is reported and the cluster runs without it.
async fn start_gateway(
    args: &UpArgs,
    data_dir: &std::path::Path,
    url: &str,
    actor_creds: &ActorCreds,
    shutdown: &shoal_bus::shutdown::Shutdown,
    tasks: &mut Vec<(&'static str, tokio::task::JoinHandle<()>)>,
) -> Result<Option<(PathBuf, std::net::SocketAddr)>> {
    let listen = args.gateway_listen;
    let creds =
        shoal_gateway::tls::load_or_create(&data_dir.join("gateway"), &[listen.ip().to_string()])
            .context("preparing the gateway's TLS certificates")?;
    let identities = data_dir.join("auth");
    let config = shoal_gateway::GatewayConfig {
        listen,
        tls: Some(creds.clone()),
        identities: identities.clone(),
    };
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let local = matches!(actor_creds, ActorCreds::Local { .. });
    let (url, shutdown, actor_creds) = (url.to_string(), shutdown.clone(), actor_creds.clone());
    tasks.push((
        "gateway",
        on_own_thread("gateway", move || async move {
            let nats = match actor_creds
                .connect(&url, "shoal-up-gateway", &Role::Gateway)
                .await
            {
                Ok(nats) => nats,
                Err(e) => {
                    eprintln!("error: gateway: connecting to {url}: {e:#}");
                    return;
                }
            };
            if let Err(e) =
                shoal_gateway::run_with_ready(config, nats, shutdown.wait(), ready_tx).await
            {
                eprintln!("error: Kubernetes API gateway: {e}");
            }
        })?,
    ));
    let Ok(bound) = ready_rx.await else {
        return Ok(None);
    };
    let host = match bound.ip() {
        ip if ip.is_unspecified() => "127.0.0.1".to_string(),
        ip => ip.to_string(),
    };
    let server = format!("https://{host}:{}", bound.port());
    let path = data_dir.join("kubeconfig");
    if !local {
        // A joined machine holds no registry to issue a token from (and its gateway admits
        // only the identities of `<data dir>/auth`, if an operator put a registry there).
        eprintln!(
            "note: the gateway at {server} admits the identities of {}; `shoal creds kubeconfig NAME` on the cluster's machine writes a kubeconfig",
            identities.display()
        );
        return Ok(None);
    }
    let token = admin_token(&AuthDir::open(&identities), &path)?;
    shoal_bus::auth::write_private(
        &path,
        &shoal_gateway::kubeconfig::render(&server, Some(&creds.ca_pem), "admin", &token),
    )
    .with_context(|| format!("writing {}", path.display()))?;
    Ok(Some((path, bound)))
}

/// The admin's gateway token: the one the kubeconfig already holds while it is current (so
/// copies of it stay valid across restarts), else a new one.
fn admin_token(auth: &AuthDir, kubeconfig: &std::path::Path) -> Result<String> {
    let kept = std::fs::read_to_string(kubeconfig)
        .ok()
        .and_then(|text| shoal_gateway::kubeconfig::token_of(&text));
    if let Some(token) = kept {
        if auth.token_is_current("admin", &token)? {
            return Ok(token);
        }
    }
    auth.issue_token("admin")
        .context("issuing the admin's token for the gateway")
}

fn pod_gateway(pod_cidr: &str) -> Result<std::net::Ipv4Addr> {
    let cidr: shoal_node::net::Ipv4Cidr = pod_cidr
        .parse()
        .map_err(|e| anyhow::anyhow!("--pod-cidr {pod_cidr:?}: {e}"))?;
    Ok(cidr.gateway())
}

/// Runs an actor on a thread with its own actix system; the handle ends when the actor does.
fn on_own_thread<F, Fut>(name: &str, actor: F) -> Result<tokio::task::JoinHandle<()>>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            actix::System::new().block_on(actor());
            let _ = done_tx.send(());
        })
        .with_context(|| format!("starting the {name} thread"))?;
    Ok(actix::spawn(async move {
        let _ = done_rx.await;
    }))
}

/// Ctrl-C and SIGTERM, listened for from before the banner: one sent as soon as the banner
/// shows must stop the cluster cleanly, not kill the process with the default action.
struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn listen() -> Result<StopSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(StopSignals {
            interrupt: signal(SignalKind::interrupt()).context("listening for Ctrl-C")?,
            terminate: signal(SignalKind::terminate()).context("listening for SIGTERM")?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
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
    Ok(shoal_bus::natsd::fetch_monitor(hostport, "/varz").await?)
}
