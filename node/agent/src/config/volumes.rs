//! A pod's configuration volumes on disk, and everything a container start needs from this
//! module: its environment, and whether its volumes could be written.

use bus_schemas::kinds::container::Container;
use bus_schemas::kinds::{Event, Pod};
use bus_schemas::subjects::NodeReport;
use bus_schemas::{codec, ObjectMeta};
use shoal_node::{ContainerSpec, SandboxInfo};

use super::downward::NodeFacts;
use super::{atomic_writer, env, payload};
use crate::agent::AgentCtx;
use crate::spec::{self, ConfigError};

fn node_facts(ctx: &AgentCtx, sandbox: &SandboxInfo) -> NodeFacts {
    NodeFacts {
        pod_ip: sandbox.ip.to_string(),
        cpu_milli: ctx.config_sources.allocatable_cpu_milli,
        memory_bytes: ctx.config_sources.allocatable_memory_bytes,
    }
}

/// Makes every configuration volume of the pod hold what its sources hold now; a volume
/// whose files are unchanged is not touched. The first error is returned (the others are
/// written all the same, so one missing ConfigMap does not freeze the rest).
pub async fn refresh(ctx: &AgentCtx, pod: &Pod, sandbox: &SandboxInfo) -> Result<(), ConfigError> {
    let facts = node_facts(ctx, sandbox);
    let mut first_error = None;
    for volume in pod
        .spec
        .volumes
        .iter()
        .filter(|v| payload::is_config_volume(v))
    {
        let Some(dir) = ctx.backend.volume_dir(&sandbox.id, &volume.name) else {
            continue;
        };
        match payload::build(ctx, pod, volume, &facts).await {
            Ok(files) => {
                let written =
                    tokio::task::spawn_blocking(move || atomic_writer::write(&dir, &files)).await;
                match written {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        first_error
                            .get_or_insert(ConfigError(format!("volume {}: {e}", volume.name)));
                    }
                    Err(e) => {
                        first_error
                            .get_or_insert(ConfigError(format!("volume {}: {e}", volume.name)));
                    }
                }
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// The runtime spec of a container about to start, with its environment resolved. Keys
/// `envFrom` skipped are reported as a Warning event on the pod.
pub async fn prepare(
    ctx: &AgentCtx,
    pod: &Pod,
    container: &Container,
    sandbox: &SandboxInfo,
    volumes: Result<(), ConfigError>,
) -> Result<ContainerSpec, ConfigError> {
    volumes?;
    let facts = node_facts(ctx, sandbox);
    let resolved = env::resolve(ctx, pod, container, &facts).await?;
    for message in &resolved.skipped {
        report_event(
            ctx,
            pod,
            "Warning",
            "InvalidEnvironmentVariableNames",
            message,
        )
        .await;
    }
    let mut spec = spec::container_spec(pod, container)?;
    spec.env = resolved.vars;
    Ok(spec)
}

/// Sends an Event about `pod` through the node's own subject (the API accepts it only for a
/// pod bound here). Named after its content, so a repeat is one event, not a flood.
pub async fn report_event(ctx: &AgentCtx, pod: &Pod, type_: &str, reason: &str, message: &str) {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (&pod.metadata.uid, reason, message).hash(&mut hasher);
    let now = chrono::Utc::now();
    let event = Event {
        metadata: ObjectMeta {
            name: format!("{}.{:016x}", pod.metadata.name, hasher.finish()),
            namespace: pod.metadata.namespace.clone(),
            ..Default::default()
        },
        involved_object: bus_schemas::kinds::ObjectReference {
            kind: "Pod".into(),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            api_version: "v1".into(),
            ..Default::default()
        },
        reason: reason.into(),
        message: message.into(),
        type_: type_.into(),
        count: 1,
        first_timestamp: Some(now),
        last_timestamp: Some(now),
        source: bus_schemas::kinds::event::EventSource {
            component: "kubelet".into(),
            host: ctx.config.node_name.clone(),
        },
        reporting_component: "shoal-node".into(),
        reporting_instance: ctx.config.node_name.clone(),
        ..Default::default()
    };
    let Ok(body) = codec::to_msgpack(&event) else {
        return;
    };
    match ctx.report(NodeReport::Event, body).await {
        Ok(_) => {}
        Err(e) if e.starts_with("409") => {}
        Err(e) => {
            tracing::warn!(pod = %pod.metadata.name, reason, error = %e, "event not recorded")
        }
    }
}
