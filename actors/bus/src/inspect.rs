//! Inspection of running processes, read-only: every process with informer caches answers
//! [`subjects::INSPECT_CACHES`] with their summaries ([`serve_caches`]), and [`gather_caches`]
//! collects the answers of all of them. A node agent's list of the containers its runtime
//! really runs is asked with [`node_containers`] (the agent answers it).
//!
//! These are how the chaos suite checks that no actor's cache drifted from the state log and
//! that no node leaked or lost a container; an operator can ask the same questions.

use std::time::Duration;

use bus_schemas::codec;
use bus_schemas::inspect::{NodeContainers, ProcessCaches};
use bus_schemas::subjects;
use futures::StreamExt;

use crate::informer::InformerFactory;

/// Answers cache inspection requests for this process until the connection closes.
/// `process` names the answerer (`shoal-up api,naming on h1, pid 42`).
pub async fn serve_caches(nats: async_nats::Client, factory: InformerFactory, process: String) {
    let mut requests = match nats.subscribe(subjects::INSPECT_CACHES).await {
        Ok(sub) => sub,
        Err(e) => {
            tracing::warn!(error = %e, "cannot answer cache inspection");
            return;
        }
    };
    while let Some(request) = requests.next().await {
        let Some(reply_to) = request.reply else {
            continue;
        };
        let answer = ProcessCaches {
            process: process.clone(),
            caches: factory.summaries(),
        };
        match codec::to_msgpack(&answer) {
            Ok(body) => {
                let _ = nats.publish(reply_to, body.into()).await;
            }
            Err(e) => tracing::warn!(error = %e, "cannot encode a cache summary"),
        }
    }
}

/// Asks every process for its caches and gathers the answers. Until `expected` processes
/// have answered it waits up to `limit` in all: a process busy under load may answer late,
/// and a quiet gap alone would miss it. After that it stops once `quiet` passes with no
/// further answer. Undecodable answers are skipped.
pub async fn gather_caches(
    nats: &async_nats::Client,
    expected: usize,
    quiet: Duration,
    limit: Duration,
) -> Result<Vec<ProcessCaches>, async_nats::Error> {
    let inbox = nats.new_inbox();
    let mut replies = nats.subscribe(inbox.clone()).await?;
    nats.publish_with_reply(subjects::INSPECT_CACHES, inbox, Vec::new().into())
        .await?;
    nats.flush().await?;
    let deadline = tokio::time::Instant::now() + limit;
    let mut answers = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let wait = if answers.len() < expected {
            left
        } else {
            quiet.min(left)
        };
        match tokio::time::timeout(wait, replies.next()).await {
            Ok(Some(msg)) => {
                if let Ok(answer) = codec::from_msgpack::<ProcessCaches>(&msg.payload) {
                    answers.push(answer);
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    Ok(answers)
}

/// The containers `node`'s runtime has, as its agent reports them.
pub async fn node_containers(
    nats: &async_nats::Client,
    node: &str,
    timeout: Duration,
) -> Result<NodeContainers, String> {
    let subject = subjects::agent_request(node, "containers");
    let reply = tokio::time::timeout(timeout, nats.request(subject, Vec::new().into()))
        .await
        .map_err(|_| format!("node {node} did not answer within {timeout:?}"))?
        .map_err(|e| format!("asking node {node} for its containers: {e}"))?;
    codec::from_msgpack(&reply.payload)
        .map_err(|e| format!("node {node} answered something else than its containers: {e}"))
}
