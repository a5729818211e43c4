//! The control plane benchmarks run against: the API actor (and, when asked, the scheduler) on
//! its own thread and actix system, as it would be its own process, after making sure the
//! state stream exists.

use std::time::Duration;

use anyhow::{Context, Result};
use bus_schemas::roles::Role;
use shoal_bus::auth::{AuthDir, ClientAuth};
use shoal_bus::natsd::{Natsd, NatsdConfig, NatsdError};
use shoal_bus::store::{ensure_stream, StreamSettings};

/// The generator's tokio runtime (`workers` threads) and a nats-server with its store in
/// `dir`, started on it.
pub fn nats_on_runtime(
    dir: &std::path::Path,
    workers: usize,
) -> Result<(tokio::runtime::Runtime, shoal_bus::natsd::Natsd)> {
    nats_on_runtime_at(dir, workers, "127.0.0.1")
}

/// [`nats_on_runtime`], the server serving clients on `host` (identities on either way).
pub fn nats_on_runtime_at(
    dir: &std::path::Path,
    workers: usize,
    host: &str,
) -> Result<(tokio::runtime::Runtime, shoal_bus::natsd::Natsd)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    let natsd = runtime
        .block_on(async {
            let mut config = NatsdConfig::new(shoal_bus::natsd::free_port()?, dir);
            config.host = host.to_string();
            config.auth = Some(AuthDir::provision(dir.join("auth")).map_err(NatsdError::Auth)?);
            Natsd::start(config).await
        })
        .context("starting nats-server")?;
    Ok((runtime, natsd))
}

/// The credential of `role` on `natsd`, for a process the benchmark runs outside its runtime.
pub fn creds(runtime: &tokio::runtime::Runtime, natsd: &Natsd, role: &Role) -> Result<ClientAuth> {
    runtime
        .block_on(natsd.creds(role))
        .with_context(|| format!("the credential of {role}"))
}

/// Starts the API actor (and, with `scheduler` set, the scheduler), each with its own
/// identity: `api` for the API, `scheduler` for the scheduler.
pub fn start(url: &str, api: ClientAuth, scheduler: Option<ClientAuth>) -> Result<()> {
    let url = url.to_string();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix::System::new().block_on(async move {
            let nats = shoal_bus::connect(&url, "bench-api", &api)
                .await
                .expect("connect");
            let js = async_nats::jetstream::new(nats.clone());
            ensure_stream(&js, &StreamSettings::default())
                .await
                .expect("state stream");
            let (tx, rx) = tokio::sync::oneshot::channel();
            let api = shoal_api::run_with_ready(
                Default::default(),
                nats.clone(),
                std::future::pending(),
                tx,
            );
            actix::spawn(async move {
                if let Err(e) = api.await {
                    eprintln!("API actor failed: {e}");
                }
            });
            let _ = rx.await;
            if let Some(scheduler) = scheduler {
                let nats = shoal_bus::connect(&url, "bench-scheduler", &scheduler)
                    .await
                    .expect("the scheduler connects");
                actix::spawn(async move {
                    if let Err(e) =
                        shoal_scheduler::run(Default::default(), nats, std::future::pending()).await
                    {
                        eprintln!("scheduler failed: {e}");
                    }
                });
            }
            let _ = ready_tx.send(());
            std::future::pending::<()>().await;
        });
    });
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .context("the control plane did not start")
}
