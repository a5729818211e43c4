//! The naming actor: cluster DNS, answered from informer caches of Services, Endpoints and
//! Pods. It never writes to the store and needs no leader, so one replica can run per node
//! ("node-local DNS"), each bound inside that node's network namespace.
//!
//! # What it answers (cluster domain `cluster.local` by default, TTL 5 s)
//! - `SVC.NS.svc.<domain>` A: the ClusterIP; for a headless Service, every ready endpoint
//!   address. `_PORT._PROTO.SVC.NS.svc.<domain>` SRV for named ports. Endpoints of headless
//!   Services are `<hostname or a-b-c-d>.SVC.NS.svc.<domain>`. ExternalName Services are
//!   CNAMEs. `a-b-c-d.NS.pod.<domain>` A when a pod in NS has that address.
//! - NXDOMAIN (with the SOA) for other names in the domain; NOERROR without records (NODATA)
//!   for a type an existing name lacks, and for names that only have names below them.
//! - REFUSED outside the cluster domain: there is no upstream forwarding. Short names work
//!   through the search domains the node agent writes into each pod's resolv.conf.
//! - FORMERR for packets hickory-proto cannot parse (when there is a header to answer to),
//!   NOTIMP for opcodes other than QUERY, SERVFAIL until the caches have loaded.
//!
//! # Layout
//! - [`names`]: the naming scheme. [`records`]: the records each object contributes (pure).
//! - [`encode`]: records to pre-encoded wire sections (hickory-proto).
//! - [`index`]: the name → answers table and the builder that updates it incrementally.
//! - [`answer`]: one query to one response. [`telemetry`]: answers by rcode, sampled spans.
//! - [`feed`]: informers → builder. [`mod@bind`]: sockets, in a network namespace if asked
//!   (through `shoal-netns`, not the container runtime).
//! - [`udp`], [`tcp`], [`bus`]: the three ways in (UDP threads, TCP tasks, NATS
//!   request/reply on `shoal.v1.dns.query`).

pub mod answer;
pub mod bind;
pub mod bus;
pub mod encode;
pub mod feed;
pub mod index;
pub mod names;
pub mod records;
pub mod tcp;
pub mod telemetry;
pub mod udp;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use shoal_bus::{InformerFactory, Store, StoreError};

pub use bind::{bind, BindError, Bound};
pub use index::{Index, DEFAULT_TTL};
pub use names::{Domain, DomainError};

pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

#[derive(Clone)]
pub struct NamingConfig {
    /// Addresses to serve DNS on, UDP and TCP each. Port 0 picks a free port (see
    /// [`run_with_ready`] for learning which).
    pub listen: Vec<SocketAddr>,
    /// Bind inside this network namespace (`/var/run/netns/NAME`, `/proc/PID/ns/net`).
    pub netns: Option<PathBuf>,
    pub cluster_domain: String,
    /// TTL of answers and of negative answers.
    pub ttl: u32,
    /// Threads receiving on each UDP socket.
    pub udp_threads: usize,
    /// Also answer `shoal.v1.dns.query` over NATS.
    pub serve_nats: bool,
    /// Shares another actor's caches (the one-machine cluster hosts every actor).
    pub informers: Option<InformerFactory>,
}

impl Default for NamingConfig {
    fn default() -> Self {
        NamingConfig {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 53))],
            netns: None,
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.into(),
            ttl: DEFAULT_TTL,
            udp_threads: std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .min(4),
            serve_nats: true,
            informers: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NamingError {
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error(transparent)]
    Index(#[from] index::IndexError),
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error("starting the DNS listeners on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("subscribing to {subject}: {detail}")]
    Subscribe { subject: String, detail: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Serves DNS until `shutdown` resolves. Works in any tokio runtime (an actix system too).
pub async fn run(
    config: NamingConfig,
    nats: async_nats::Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), NamingError> {
    let (ready, _) = tokio::sync::oneshot::channel();
    run_with_ready(config, nats, shutdown, ready).await
}

/// As [`run`], sending the bound addresses on `ready` once the index is built from the
/// caches (before that, queries inside the domain get SERVFAIL).
pub async fn run_with_ready(
    config: NamingConfig,
    nats: async_nats::Client,
    shutdown: impl Future<Output = ()>,
    ready: tokio::sync::oneshot::Sender<Vec<SocketAddr>>,
) -> Result<(), NamingError> {
    let domain = Domain::new(&config.cluster_domain)?;
    let index = Arc::new(Index::new(domain, config.ttl)?);
    let mut bound = Vec::new();
    for addr in &config.listen {
        let (addr, netns) = (*addr, config.netns.clone());
        let b = tokio::task::spawn_blocking(move || bind(addr, netns.as_deref()))
            .await
            .map_err(|_| BindError::ThreadDied)??;
        bound.push(b);
    }
    let informers = match config.informers.clone() {
        Some(f) => f,
        None => InformerFactory::new(Store::open(nats.clone()).await?),
    };
    let mut servers = Servers::new();
    let result = async {
        let mut addrs = Vec::new();
        for (requested, b) in config.listen.iter().zip(bound) {
            addrs.push(servers.listen(*requested, b, &index, config.udp_threads)?);
        }
        if config.serve_nats {
            let sub = bus::subscribe(&nats)
                .await
                .map_err(|e| NamingError::Subscribe {
                    subject: bus_schemas::subjects::DNS_QUERY.into(),
                    detail: e.to_string(),
                })?;
            // Registered server-side before anyone is told we are ready.
            let _ = nats.flush().await;
            let task = bus::serve(nats.clone(), sub, index.clone(), servers.shutdown.clone());
            servers.tasks.spawn(task);
        }
        let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
        let builder = index::Builder::new(index.clone());
        let feed = feed::run(informers, builder, servers.shutdown.clone(), move || {
            let _ = synced_tx.send(());
        });
        tokio::pin!(feed);
        tokio::pin!(shutdown);
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            result = &mut feed => return result.map_err(NamingError::from),
            _ = synced_rx => {}
        }
        tracing::info!(
            listen = ?addrs,
            netns = ?config.netns,
            domain = index.domain().as_str(),
            udp_threads = config.udp_threads,
            nats = config.serve_nats,
            "naming actor serving DNS"
        );
        let _ = ready.send(addrs);
        tokio::select! {
            _ = &mut shutdown => Ok(()),
            result = &mut feed => result.map_err(NamingError::from),
        }
    }
    .await;
    servers.stop().await;
    result
}

/// Everything serving: UDP threads, TCP and NATS tasks, and how to stop them.
struct Servers {
    trigger: shoal_bus::shutdown::Trigger,
    shutdown: shoal_bus::shutdown::Shutdown,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    tasks: tokio::task::JoinSet<()>,
}

impl Servers {
    fn new() -> Servers {
        let (trigger, shutdown) = shoal_bus::shutdown::channel();
        Servers {
            trigger,
            shutdown,
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            tasks: tokio::task::JoinSet::new(),
        }
    }

    fn listen(
        &mut self,
        requested: SocketAddr,
        bound: Bound,
        index: &Arc<Index>,
        udp_threads: usize,
    ) -> Result<SocketAddr, NamingError> {
        let addr = bound.local_addr().map_err(|source| NamingError::Listen {
            addr: requested,
            source,
        })?;
        let threads = udp::spawn(bound.udp, index.clone(), udp_threads, self.stop.clone())
            .map_err(|source| NamingError::Listen { addr, source })?;
        self.threads.extend(threads);
        let tcp = tcp::serve(bound.tcp, index.clone(), self.shutdown.clone());
        self.tasks.spawn(tcp);
        Ok(addr)
    }

    async fn stop(mut self) {
        self.trigger.fire();
        self.stop.store(true, Ordering::Relaxed);
        while self.tasks.join_next().await.is_some() {}
        let threads = std::mem::take(&mut self.threads);
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
    }
}
