//! Creating pods for one owner: concurrently in slow-start batches (1, 2, 4, …), so a
//! template the API refuses fails after one request rather than a thousand, and one event
//! per batch instead of one durable write more per pod.

use bus_schemas::kinds::Pod;
use bus_schemas::Resource;
use futures::future::join_all;
use shoal_bus::ApiError;

use crate::context::Ctx;
use crate::events::{self, NORMAL, WARNING};

/// Creates `pods`, stopping after the first batch with a failure, which is returned once
/// recorded as a FailedCreate event. Every created pod is expected by the owner's
/// expectations and named in a SuccessfulCreate event.
pub async fn create_pods<K: Resource>(
    ctx: &Ctx,
    owner: &K,
    pods: impl IntoIterator<Item = Pod>,
) -> Result<(), ApiError> {
    let uid = &owner.meta().uid;
    let mut pods = pods.into_iter().peekable();
    let mut batch = 1;
    while pods.peek().is_some() {
        let chunk: Vec<Pod> = pods.by_ref().take(batch).collect();
        let results = join_all(chunk.iter().map(|pod| ctx.api.create(pod))).await;
        let mut created = Vec::new();
        let mut failure = None;
        for result in results {
            match result {
                Ok(pod) => {
                    ctx.expectations.expect(uid, pod.metadata.revision());
                    created.push(pod.metadata.name);
                }
                Err(e) => failure = Some(e),
            }
        }
        if !created.is_empty() {
            ctx.events.record(
                owner,
                NORMAL,
                "SuccessfulCreate",
                events::created_pods_message(&created),
            );
        }
        if let Some(e) = failure {
            ctx.events.record(
                owner,
                WARNING,
                "FailedCreate",
                format!("Error creating: {e}"),
            );
            return Err(e);
        }
        batch *= 2;
    }
    Ok(())
}
