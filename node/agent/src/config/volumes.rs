//! A pod's configuration volumes on disk, and everything a container start needs from this
//! module: its environment, and whether its volumes could be written.

use bus_schemas::kinds::container::Container;
use bus_schemas::kinds::Pod;
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
    if let Some(rt) = ctx.backend.linux() {
        spec::check_host_paths(pod, container, &rt.config().allow_host_path)?;
    }
    let claim_dirs = ctx.claims.mounts(pod).await.map_err(ConfigError)?;
    let facts = node_facts(ctx, sandbox);
    let resolved = env::resolve(ctx, pod, container, &facts).await?;
    for message in &resolved.skipped {
        ctx.pod_event(pod, "Warning", "InvalidEnvironmentVariableNames", message)
            .await;
    }
    let mut spec = spec::container_spec(pod, container, &claim_dirs)?;
    spec.env = resolved.vars;
    Ok(spec)
}
