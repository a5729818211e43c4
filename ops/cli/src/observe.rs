//! What `shoal up` adds for operators: spans to the cluster's SHOAL_TRACES, every actor's
//! metrics on one `/metrics` port, and the NATS health gauges.

use std::net::SocketAddr;

pub struct Observing {
    /// Where `/metrics` is served, when it is.
    pub addr: Option<SocketAddr>,
}

/// `as_node`: the node this process is nothing but the agent of (its spans go to that
/// node's own traces subject).
pub async fn start(
    url: &str,
    metrics_addr: &str,
    nats: async_nats::Client,
    auth: shoal_bus::auth::ClientAuth,
    as_node: Option<&str>,
) -> Observing {
    match as_node {
        Some(node) => shoal_telemetry::jetstream::export_as_node(url, node, move |o| auth.apply(o)),
        None => shoal_telemetry::jetstream::export_as(url, move |o| auth.apply(o)),
    }
    actix::spawn(shoal_telemetry::serve::watch_nats(nats));
    if metrics_addr.is_empty() {
        return Observing { addr: None };
    }
    let addr = match metrics_addr.parse::<SocketAddr>() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("warning: --metrics-addr {metrics_addr:?}: {e}; metrics not served");
            return Observing { addr: None };
        }
    };
    // Several `shoal up --join` processes on one machine would fight over one port: the
    // first serves, the others say so and go on (give each its own --metrics-addr).
    match shoal_telemetry::serve::serve_metrics(addr).await {
        Ok((bound, _task)) => Observing { addr: Some(bound) },
        Err(e) => {
            eprintln!(
                "warning: cannot serve metrics on {addr}: {e} (choose another --metrics-addr)"
            );
            Observing { addr: None }
        }
    }
}
