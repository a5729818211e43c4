//! The service proxy: makes every ClusterIP port reachable from this node's pods and from
//! the node itself, by DNAT in the kernel (nftables), spread over the Service's ready
//! endpoints. See docs/architecture.md ("Service proxy") for why DNAT and not a userspace
//! proxy.
//!
//! - [`rules`]: Services + Endpoints → per-port backends (pure).
//! - [`render`]: those → one nft script replacing the table `ip shoal` atomically (pure).
//! - [`nft`]: loading the script inside the node's network namespace.
//!
//! [`run`] re-renders on every Service or Endpoints change (changes arriving within
//! `debounce` of each other are applied together) and re-applies periodically anyway, so
//! rules someone flushed or edited come back. A Service the proxy cannot serve is logged and
//! left out; it never stops the others.

pub mod nft;
pub mod render;
pub mod rules;

use std::time::Duration;

use bus_schemas::kinds::{Endpoints, Service};
use bus_schemas::selector::Selector;
use shoal_bus::Informer;
use tokio::sync::broadcast::error::RecvError;

use crate::hostnet::HostNet;
pub use render::NodeNet;

#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Run the proxy (real nodes only; hollow nodes never do).
    pub enabled: bool,
    /// The range ClusterIPs are allocated from: must match the API's
    /// (`shoal_api::service_ips::SERVICE_CIDR`).
    pub service_cidr: String,
    /// Changes arriving within this window are applied together.
    pub debounce: Duration,
    /// The ruleset is re-applied this often even without changes (repairs drift).
    pub resync: Duration,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            enabled: true,
            service_cidr: "10.96.0.0/16".into(),
            debounce: Duration::from_millis(50),
            resync: Duration::from_secs(30),
        }
    }
}

/// The script for the current Services and Endpoints, and what had to be left out.
pub fn ruleset(
    services: &Informer<Service>,
    endpoints: &Informer<Endpoints>,
    node: &NodeNet,
) -> (String, Vec<rules::Skipped>) {
    let everything = Selector::everything();
    let svcs = services.list(None, &everything);
    let eps: Vec<_> = svcs
        .iter()
        .map(|s| endpoints.get(&s.metadata.namespace, &s.metadata.name))
        .collect();
    let (port_rules, skipped) = rules::all_rules(
        svcs.iter()
            .zip(eps.iter())
            .map(|(s, e)| (s.as_ref(), e.as_deref())),
    );
    (render::render(&port_rules, node), skipped)
}

/// What the loop last did, so repeated failures and skips are logged once, not per change.
#[derive(Default)]
struct Reported {
    applied: Option<String>,
    error: Option<String>,
    skipped: Vec<rules::Skipped>,
}

async fn sync(
    net: &HostNet,
    services: &Informer<Service>,
    endpoints: &Informer<Endpoints>,
    node: &NodeNet,
    force: bool,
    reported: &mut Reported,
) -> bool {
    let (script, skipped) = ruleset(services, endpoints, node);
    if skipped != reported.skipped {
        for s in skipped.iter().filter(|s| !reported.skipped.contains(s)) {
            tracing::warn!(service = %s.service, reason = %s.reason, "service proxy: left out");
        }
        reported.skipped = skipped;
    }
    if !force && reported.applied.as_deref() == Some(script.as_str()) {
        return true;
    }
    let started = std::time::Instant::now();
    let (net, text) = (net.clone(), script.clone());
    let result = tokio::task::spawn_blocking(move || nft::apply(&net, &text))
        .await
        .unwrap_or_else(|e| Err(nft::NftError::Run(format!("apply task: {e}"))));
    match result {
        Ok(()) => {
            tracing::debug!(took = ?started.elapsed(), bytes = script.len(), "service proxy: rules applied");
            if reported.error.take().is_some() {
                tracing::info!("service proxy: rules applied again");
            }
            reported.applied = Some(script);
            true
        }
        Err(e) => {
            let message = e.to_string();
            if reported.error.as_deref() != Some(message.as_str()) {
                tracing::error!(error = %message, "service proxy: rules not applied; will retry");
            }
            reported.error = Some(message);
            reported.applied = None;
            false
        }
    }
}

/// Keeps the node's Service rules in step with the cluster until the task is dropped.
pub async fn run(
    config: ProxyConfig,
    node: NodeNet,
    net: HostNet,
    services: Informer<Service>,
    endpoints: Informer<Endpoints>,
) {
    let mut svc_changes = services.subscribe();
    let mut ep_changes = endpoints.subscribe();
    for (kind, synced) in [
        ("Service", services.wait_synced().await),
        ("Endpoints", endpoints.wait_synced().await),
    ] {
        if let Err(e) = synced {
            tracing::error!(error = %e, "service proxy: {kind} cache cannot sync; no Service rules on this node");
            return;
        }
    }
    let mut reported = Reported::default();
    let retry = config.resync.min(Duration::from_secs(2));
    let mut force = true;
    loop {
        let ok = sync(&net, &services, &endpoints, &node, force, &mut reported).await;
        let wait = if ok { config.resync } else { retry };
        // The first change (or the timer) opens a window; everything arriving within it is
        // applied together.
        tokio::select! {
            c = svc_changes.recv() => if closed(c) { return },
            c = ep_changes.recv() => if closed(c) { return },
            _ = tokio::time::sleep(wait) => { force = true; continue; }
        }
        force = !ok;
        let window = tokio::time::sleep(config.debounce);
        tokio::pin!(window);
        loop {
            tokio::select! {
                c = svc_changes.recv() => if closed(c) { return },
                c = ep_changes.recv() => if closed(c) { return },
                _ = &mut window => break,
            }
        }
    }
}

fn closed<T>(received: Result<T, RecvError>) -> bool {
    matches!(received, Err(RecvError::Closed))
}
