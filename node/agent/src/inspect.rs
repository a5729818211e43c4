//! Answers `shoal.v1.agent.<node>.containers`: the sandboxes and containers this node's
//! runtime has, read from the runtime itself rather than from the agent's pod workers, so a
//! leaked container (one no pod accounts for) or a lost one shows.

use std::sync::Arc;

use bus_schemas::codec;
use bus_schemas::inspect::{ContainerView, NodeContainers, SandboxView};
use bus_schemas::subjects;
use futures::StreamExt;
use shoal_node::container::ContainerState;

use crate::agent::AgentCtx;

pub async fn serve_containers(ctx: Arc<AgentCtx>, nats: async_nats::Client) {
    let subject = subjects::agent_request(&ctx.config.node_name, "containers");
    let Ok(mut requests) = nats.subscribe(subject.clone()).await else {
        tracing::error!(%subject, "cannot subscribe for container listings");
        return;
    };
    while let Some(request) = requests.next().await {
        let Some(reply_to) = request.reply else {
            continue;
        };
        let answer = containers(&ctx).await;
        if let Ok(body) = codec::to_msgpack(&answer) {
            let _ = nats.publish(reply_to, body.into()).await;
        }
    }
}

async fn containers(ctx: &Arc<AgentCtx>) -> NodeContainers {
    let node = ctx.config.node_name.clone();
    let listed = ctx
        .call(|rt| {
            let sandboxes = rt.list_sandboxes()?;
            let containers = rt
                .list_containers()?
                .into_iter()
                .map(|c| {
                    // A container removed between the listing and this read is gone: unknown.
                    let state = rt.container_state(&c.id).ok();
                    (c, state)
                })
                .collect::<Vec<_>>();
            Ok((sandboxes, containers))
        })
        .await;
    let (sandboxes, containers) = match listed {
        Ok(listed) => listed,
        Err(e) => {
            return NodeContainers {
                node,
                error: format!("listing the runtime: {e}"),
                ..Default::default()
            }
        }
    };
    let mut views: Vec<SandboxView> = sandboxes
        .into_iter()
        .map(|s| SandboxView {
            pod_uid: s.id,
            namespace: s.namespace,
            hostname: s.name,
            containers: Vec::new(),
        })
        .collect();
    for (container, state) in containers {
        let view = ContainerView {
            name: container.name,
            id: container.id,
            state: match state {
                Some(ContainerState::Running { .. }) => "running",
                Some(ContainerState::Created) => "created",
                Some(ContainerState::Exited { .. }) => "exited",
                None => "unknown",
            }
            .to_string(),
        };
        match views.iter_mut().find(|s| s.pod_uid == container.sandbox_id) {
            Some(sandbox) => sandbox.containers.push(view),
            // A container whose sandbox is gone is exactly the kind of leak this shows.
            None => views.push(SandboxView {
                pod_uid: container.sandbox_id,
                containers: vec![view],
                ..Default::default()
            }),
        }
    }
    NodeContainers {
        node,
        sandboxes: views,
        error: String::new(),
    }
}
