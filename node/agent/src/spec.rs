//! Translating a Pod into what the runtime needs: a sandbox spec and container specs.

use bus_schemas::kinds::container::Container;
use bus_schemas::kinds::Pod;
use shoal_node::container::{MountSource, MountSpec, Resources};
use shoal_node::sandbox::{DnsConfig, PodResources};
use shoal_node::{ContainerSpec, SandboxSpec};

/// Cluster-wide settings a node applies to every pod.
#[derive(Debug, Clone)]
pub struct PodDefaults {
    pub cluster_dns: String,
    pub cluster_domain: String,
}

impl Default for PodDefaults {
    fn default() -> Self {
        PodDefaults {
            cluster_dns: "10.96.0.10".into(),
            cluster_domain: "cluster.local".into(),
        }
    }
}

/// A translation failure: becomes the container's CreateContainerConfigError.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

fn milli(q: Option<&bus_schemas::quantity::Quantity>) -> Option<u64> {
    q.map(|q| q.milli_value().max(0) as u64)
}

fn bytes(q: Option<&bus_schemas::quantity::Quantity>) -> Option<u64> {
    q.map(|q| q.value().max(0) as u64)
}

pub fn container_resources(c: &Container) -> Resources {
    let r = &c.resources;
    Resources {
        cpu_request_milli: milli(r.requests.get("cpu").or(r.limits.get("cpu"))),
        cpu_limit_milli: milli(r.limits.get("cpu")),
        memory_limit_bytes: bytes(r.limits.get("memory")),
        pids_limit: None,
    }
}

pub fn sandbox_spec(pod: &Pod, defaults: &PodDefaults) -> SandboxSpec {
    let ns = &pod.metadata.namespace;
    let dns = match pod.spec.dns_policy.as_str() {
        "Default" => DnsConfig {
            nameservers: vec![],
            searches: vec![],
            options: vec![],
        },
        _ => DnsConfig::cluster_first(ns, &defaults.cluster_dns, &defaults.cluster_domain),
    };
    let resources: Vec<Resources> = pod
        .spec
        .containers
        .iter()
        .map(container_resources)
        .collect();
    let mut spec = SandboxSpec::new(pod.metadata.uid.clone(), hostname(pod), ns.clone());
    spec.dns = dns;
    spec.resources = PodResources::sum(resources.iter());
    spec.share_process_namespace = pod.spec.share_process_namespace.unwrap_or(false);
    spec
}

fn hostname(pod: &Pod) -> String {
    if pod.spec.hostname.is_empty() {
        pod.metadata.name.chars().take(63).collect()
    } else {
        pod.spec.hostname.clone()
    }
}

/// Resolves `valueFrom.fieldRef` against the pod, as the downward API does.
fn field_value(pod: &Pod, path: &str, pod_ip: &str) -> Option<String> {
    Some(match path {
        "metadata.name" => pod.metadata.name.clone(),
        "metadata.namespace" => pod.metadata.namespace.clone(),
        "metadata.uid" => pod.metadata.uid.clone(),
        "spec.nodeName" => pod.spec.node_name.clone(),
        "spec.serviceAccountName" => pod.spec.service_account_name.clone(),
        "status.podIP" => pod_ip.to_string(),
        "status.hostIP" => pod.status.host_ip.clone(),
        p => {
            let key = p.strip_prefix("metadata.labels['")?.strip_suffix("']")?;
            pod.metadata.labels.get(key).cloned().unwrap_or_default()
        }
    })
}

pub fn container_spec(
    pod: &Pod,
    container: &Container,
    pod_ip: &str,
) -> Result<ContainerSpec, ConfigError> {
    let mut spec = ContainerSpec::new(
        container.name.clone(),
        crate::registry::normalise(&container.image),
    );
    if !container.command.is_empty() {
        spec.command = Some(container.command.clone());
    }
    if !container.args.is_empty() {
        spec.args = Some(container.args.clone());
    }
    for env in &container.env {
        let value = match env.value_from.as_ref().and_then(|f| f.field_ref.as_ref()) {
            Some(field) => field_value(pod, &field.field_path, pod_ip).ok_or_else(|| {
                ConfigError(format!(
                    "env {}: unsupported fieldRef {:?}",
                    env.name, field.field_path
                ))
            })?,
            None => env.value.clone(),
        };
        spec.env.push((env.name.clone(), value));
    }
    if !container.working_dir.is_empty() {
        spec.working_dir = Some(container.working_dir.clone());
    }
    let security = container.security_context.as_ref();
    let pod_security = pod.spec.security_context.as_ref();
    let uid = security
        .and_then(|s| s.run_as_user)
        .or(pod_security.and_then(|s| s.run_as_user));
    let gid = security
        .and_then(|s| s.run_as_group)
        .or(pod_security.and_then(|s| s.run_as_group));
    spec.user = match (uid, gid) {
        (Some(u), Some(g)) => Some(format!("{u}:{g}")),
        (Some(u), None) => Some(u.to_string()),
        (None, Some(g)) => Some(format!("0:{g}")),
        (None, None) => None,
    };
    if let Some(caps) = security.and_then(|s| s.capabilities.as_ref()) {
        spec.cap_add = caps.add.clone();
        spec.cap_drop = caps.drop.clone();
    }
    spec.read_only_rootfs = security
        .and_then(|s| s.read_only_root_filesystem)
        .unwrap_or(false);
    spec.resources = container_resources(container);
    for mount in &container.volume_mounts {
        let volume = pod
            .spec
            .volumes
            .iter()
            .find(|v| v.name == mount.name)
            .ok_or_else(|| ConfigError(format!("volumeMount {:?} names no volume", mount.name)))?;
        let source = if volume.empty_dir.is_some() {
            MountSource::EmptyDir(volume.name.clone())
        } else if let Some(host) = &volume.host_path {
            MountSource::HostPath(host.path.clone().into())
        } else {
            return Err(ConfigError(format!(
                "volume {:?} has no supported source",
                volume.name
            )));
        };
        spec.mounts.push(MountSpec {
            source,
            destination: mount.mount_path.clone(),
            read_only: mount.read_only,
        });
    }
    Ok(spec)
}
