//! The shared bus client every Shoal actor stands on.
//!
//! # Layout
//! - [`auth`]: identities: nkey credentials with a role each, the server's authorization
//!   block rendered from them, and how a client presents its credential.
//! - [`backoff`]: the one exponential back-off (on `backon`) every retry and per-key delay
//!   uses.
//! - [`natsd`]: runs a nats-server child process (the one-machine cluster and every test);
//!   throwaway servers on free ports (`Natsd::start_in`, `free_port`) only with the
//!   `test-support` feature. [`cluster`]: the `cluster {}` block of a clustered server and
//!   the cluster's health as a client sees it (stream leaders, replicas current or lagging).
//!   [`tied`]: children that die with the process that started
//!   them (`PR_SET_PDEATHSIG` from a spawner thread of their own); [`orphan`]: stops a
//!   nats-server a crashed `shoal up` left on its data dir.
//! - [`violations`]: the server's refusals of what a connection's role does not allow, so
//!   a refused request fails at once with a permission error instead of timing out.
//! - [`netns`]: async work inside another network namespace (a test fabric's host).
//! - [`store`]: the JetStream state log: raw get, list and CAS write of object versions.
//! - [`watch`]: resumable watches from a revision, across reconnects and server restarts.
//! - [`client`]: the typed API client: create, update, delete, get, list, patch over
//!   request/reply to the API actors.
//! - [`informer`]: read caches fed by a list and a watch, with an "initial sync done" point
//!   and indexes by namespace, label and owner.
//! - [`inspect`]: read-only inspection of running processes: their caches' summaries, a
//!   node's real containers.
//! - [`workqueue`]: per-key work queue with one running + one pending per key, bounded
//!   concurrency, and per-key backoff that resets on success.
//! - [`exec`]: the client side of streaming exec sessions (stdin, TTY, resizes) with a node
//!   agent: ordered, acknowledged, heartbeated.
//! - [`workloads`]: the pod selector of a workload named by kind and name (a
//!   VerticalPodAutoscaler's target), from the caches.
//! - [`controller`]: the reconcile runner that ties an informer to a work queue;
//!   [`reconcile_span`]: the span and metrics of each reconcile.

// NOTE: the error type is a Status (message, reason and field-path causes): it travels only
// on failure paths, where one allocation more or less does not matter, and boxing it would
// make every caller's match noisier.
#![allow(clippy::result_large_err)]

pub mod auth;
pub mod backoff;
pub mod client;
pub mod cluster;
pub mod controller;
pub mod exec;
pub mod informer;
pub mod inspect;
pub mod leader;
pub mod natsd;
pub mod netns;
pub mod orphan;
pub mod reconcile_span;
pub mod shutdown;
pub mod store;
pub mod tied;
pub mod tls;
pub mod violations;
pub mod watch;
pub mod workloads;
pub mod workqueue;

pub use client::{ApiClient, ApiError};
pub use informer::{Informer, InformerFactory, ObjectKey};
pub use store::{EventType, RawEvent, Store, StoreError, WriteMeta, Written};

/// Connects to NATS with the options every Shoal process uses: fail fast when nothing answers
/// at first (a clear error for people), then reconnect forever, so a restarted nats-server is
/// picked up again without the process noticing more than a pause. `url` may list several
/// servers of a NATS cluster, comma-separated: any one answering is enough.
///
/// Pings every [`PING_INTERVAL`]: a server cut off by the network (no reset, no FIN) is given
/// up after two unanswered pings and the client moves to another server of the cluster,
/// instead of waiting out the two minutes of async-nats' default.
pub async fn connect(
    url: &str,
    name: &str,
    auth: &auth::ClientAuth,
) -> Result<async_nats::Client, async_nats::ConnectError> {
    let inbox = match auth.public_key() {
        Some(key) => bus_schemas::roles::inbox_prefix(&key),
        None => "_INBOX".to_string(),
    };
    let identity = auth.describe();
    let servers = server_urls(url);
    let mut refusals = 0;
    loop {
        let (reported_inbox, reported_identity) = (inbox.clone(), identity.clone());
        let connected = auth
            .apply(async_nats::ConnectOptions::new())
            .event_callback(move |event| {
                violations::report(&reported_inbox, &reported_identity, &event);
                async {}
            })
            .name(name)
            .max_reconnects(None)
            .connection_timeout(CONNECT_TIMEOUT)
            .reconnect_delay_callback(reconnect_delay)
            .request_timeout(Some(std::time::Duration::from_secs(10)))
            .ping_interval(PING_INTERVAL)
            .connect(servers.as_slice());
        // The client library logs every refusal as an ERROR. One this loop retries says
        // nothing wrong yet, so only the last attempt's is logged (a revoked credential,
        // refused every time, still is); a refusal retried is a debug line of ours.
        let connected = if refusals < AUTHORIZATION_RETRIES {
            use tracing::instrument::WithSubscriber;
            connected
                .with_subscriber(tracing::subscriber::NoSubscriber::default())
                .await
        } else {
            connected.await
        };
        match connected {
            // A server reloading its identities (`shoal creds create` on the cluster's
            // machine) re-checks every connection it holds, and one whose CONNECT it has not
            // read yet fails that check: a credential the server admits can be refused once.
            // A revoked one is refused every time, and is reported after these retries.
            Err(e)
                if e.kind() == async_nats::ConnectErrorKind::AuthorizationViolation
                    && refusals < AUTHORIZATION_RETRIES =>
            {
                refusals += 1;
                tracing::debug!(%identity, attempt = refusals, "credential refused; the server may be reloading its identities, trying again");
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            }
            other => return other,
        }
    }
}

/// Attempts after a first refusal of the credential before it counts as refused.
const AUTHORIZATION_RETRIES: u32 = 3;

/// How often a connection proves its server alive.
pub const PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3);

/// How long one attempt to reach one server may take. A server behind a cut link drops the
/// packets, so every attempt at it lasts this long: short, so that once the link is back the
/// client is not still waiting out an attempt begun during the cut.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The pause before reconnect attempt `attempts`: at once, then doubling from 100 ms up to
/// one second (async-nats' default grows to 4 s, which a healed partition would wait out).
fn reconnect_delay(attempts: usize) -> std::time::Duration {
    if attempts <= 1 {
        return std::time::Duration::ZERO;
    }
    let doublings = (attempts - 2).min(4) as u32;
    std::time::Duration::from_millis(100 * 2u64.pow(doublings))
        .min(std::time::Duration::from_secs(1))
}

/// The servers of a comma-separated URL list (`nats://h1:4222,nats://h2:4222`).
pub fn server_urls(url: &str) -> Vec<&str> {
    url.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reconnects_back_off_from_at_once_to_a_second() {
        let ms: Vec<u128> = (1..=8)
            .map(|a| super::reconnect_delay(a).as_millis())
            .collect();
        assert_eq!(ms, [0, 100, 200, 400, 800, 1000, 1000, 1000]);
    }
}
