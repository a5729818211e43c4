//! Translating a Pod into what the runtime needs: a sandbox spec and container specs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bus_schemas::kinds::container::Container;
use bus_schemas::kinds::Pod;
use shoal_node::container::{MountSource, MountSpec, Resources};
use shoal_node::sandbox::{DnsConfig, PodResources};
use shoal_node::seccomp::SeccompProfile;
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

/// Where `container` sits in the pod spec, for error messages naming a field path.
fn field_path(pod: &Pod, container: &Container) -> String {
    let position = |list: &[Container]| list.iter().position(|c| c.name == container.name);
    match position(&pod.spec.containers) {
        Some(i) => format!("spec.containers[{i}]"),
        None => match position(&pod.spec.init_containers) {
            Some(i) => format!("spec.initContainers[{i}]"),
            None => format!("container {:?}", container.name),
        },
    }
}

/// The container's seccomp profile: its own, else the pod's, else `RuntimeDefault`.
/// Privileged containers run unconfined, as in Kubernetes.
fn seccomp(pod: &Pod, container: &Container) -> Result<SeccompProfile, ConfigError> {
    let security = container.security_context.as_ref();
    if security.and_then(|s| s.privileged) == Some(true) {
        return Ok(SeccompProfile::Unconfined);
    }
    let (profile, field) = match security.and_then(|s| s.seccomp_profile.as_ref()) {
        Some(p) => (
            p,
            format!(
                "{}.securityContext.seccompProfile",
                field_path(pod, container)
            ),
        ),
        None => match pod
            .spec
            .security_context
            .as_ref()
            .and_then(|s| s.seccomp_profile.as_ref())
        {
            Some(p) => (p, "spec.securityContext.seccompProfile".to_string()),
            None => return Ok(SeccompProfile::RuntimeDefault),
        },
    };
    match profile.type_.as_str() {
        "RuntimeDefault" | "" => Ok(SeccompProfile::RuntimeDefault),
        "Unconfined" => Ok(SeccompProfile::Unconfined),
        "Localhost" => match profile.localhost_profile.as_deref() {
            Some(path) if !path.is_empty() => Ok(SeccompProfile::Localhost(path.to_string())),
            _ => Err(ConfigError(format!(
                "{field}.localhostProfile: required when type is Localhost"
            ))),
        },
        other => Err(ConfigError(format!(
            "{field}.type: unsupported value {other:?}: supported values are RuntimeDefault, Unconfined, Localhost"
        ))),
    }
}

/// Refuses a container mounting a hostPath volume outside the prefixes `allowed` (the
/// node's `--allow-host-path`): admission should have stopped it, and the node checks
/// again because it is the node's files the pod would reach.
pub fn check_host_paths(
    pod: &Pod,
    container: &Container,
    allowed: &[PathBuf],
) -> Result<(), ConfigError> {
    for mount in &container.volume_mounts {
        let Some(host) = pod
            .spec
            .volumes
            .iter()
            .find(|v| v.name == mount.name)
            .and_then(|v| v.host_path.as_ref())
        else {
            continue;
        };
        if !shoal_node::runtime::host_path_allowed(allowed, std::path::Path::new(&host.path)) {
            return Err(ConfigError(format!(
                "volume {:?}: hostPath {} is not allowed on node: start the node with --allow-host-path {} (or a directory above it)",
                mount.name, host.path, host.path
            )));
        }
    }
    Ok(())
}

/// The runtime's spec of one container, without its environment.
/// `claim_dirs` holds the host directory of each PersistentVolumeClaim volume, by volume name.
pub fn container_spec(
    pod: &Pod,
    container: &Container,
    claim_dirs: &BTreeMap<String, PathBuf>,
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
    // The environment needs ConfigMaps, Secrets and the pod's IP: `config::volumes::prepare`
    // resolves it and fills `env`.
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
    spec.run_as_non_root = security
        .and_then(|s| s.run_as_non_root)
        .or(pod_security.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    spec.no_new_privs = security.and_then(|s| s.allow_privilege_escalation) == Some(false);
    spec.seccomp = seccomp(pod, container)?;
    spec.resources = container_resources(container);
    for mount in &container.volume_mounts {
        let volume = pod
            .spec
            .volumes
            .iter()
            .find(|v| v.name == mount.name)
            .ok_or_else(|| ConfigError(format!("volumeMount {:?} names no volume", mount.name)))?;
        // Configuration volumes are written into the pod volume of their name.
        let pod_volume =
            volume.empty_dir.is_some() || crate::config::payload::is_config_volume(volume);
        let source = if pod_volume && !mount.sub_path.is_empty() {
            MountSource::VolumeSubPath {
                volume: volume.name.clone(),
                path: mount.sub_path.clone(),
            }
        } else if pod_volume {
            MountSource::EmptyDir(volume.name.clone())
        } else if let Some(host) = &volume.host_path {
            MountSource::HostPath(host.path.clone().into())
        } else if volume.persistent_volume_claim.is_some() {
            let dir = claim_dirs.get(&volume.name).ok_or_else(|| {
                ConfigError(format!("volume {:?}: its claim is not bound", volume.name))
            })?;
            MountSource::PersistentVolume {
                dir: dir.clone(),
                sub_path: mount.sub_path.clone(),
            }
        } else {
            return Err(ConfigError(format!(
                "volume {:?} has no supported source",
                volume.name
            )));
        };
        spec.mounts.push(MountSpec {
            source,
            destination: mount.mount_path.clone(),
            // The agent owns what configuration volumes hold, as in Kubernetes.
            read_only: mount.read_only
                || crate::config::payload::is_config_volume(volume)
                || volume
                    .persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| c.read_only),
        });
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": spec}))
            .unwrap()
    }

    fn spec_of(pod: &Pod) -> Result<ContainerSpec, ConfigError> {
        container_spec(pod, &pod.spec.containers[0], &BTreeMap::new())
    }

    #[test]
    fn security_context_fields_reach_the_runtime_spec_with_the_pod_as_default() {
        let p = pod(serde_json::json!({
            "securityContext": {"runAsUser": 1000, "runAsNonRoot": true,
                "seccompProfile": {"type": "Localhost", "localhostProfile": "a.json"}},
            "containers": [
                {"name": "a", "image": "busybox", "securityContext": {"allowPrivilegeEscalation": false}},
                {"name": "b", "image": "busybox", "securityContext": {"privileged": true, "runAsNonRoot": false}}
            ]
        }));
        let a = spec_of(&p).unwrap();
        assert_eq!(a.user.as_deref(), Some("1000"));
        assert!(a.run_as_non_root && a.no_new_privs);
        assert_eq!(a.seccomp, SeccompProfile::Localhost("a.json".into()));
        let b = container_spec(&p, &p.spec.containers[1], &BTreeMap::new()).unwrap();
        assert!(!b.run_as_non_root && !b.no_new_privs);
        assert_eq!(b.seccomp, SeccompProfile::Unconfined);
        let plain = pod(serde_json::json!({"containers": [{"name": "a", "image": "busybox"}]}));
        assert_eq!(
            spec_of(&plain).unwrap().seccomp,
            SeccompProfile::RuntimeDefault
        );
    }

    #[test]
    fn bad_seccomp_profiles_name_the_field_path() {
        let p = pod(
            serde_json::json!({"containers": [{"name": "a", "image": "busybox",
            "securityContext": {"seccompProfile": {"type": "Localhost"}}}]}),
        );
        let e = spec_of(&p).unwrap_err();
        assert!(
            e.0.starts_with("spec.containers[0].securityContext.seccompProfile.localhostProfile: "),
            "{}",
            e.0
        );
        let p = pod(
            serde_json::json!({"securityContext": {"seccompProfile": {"type": "Bogus"}},
            "containers": [{"name": "a", "image": "busybox"}]}),
        );
        let e = spec_of(&p).unwrap_err();
        assert!(
            e.0.starts_with("spec.securityContext.seccompProfile.type: "),
            "{}",
            e.0
        );
    }

    #[test]
    fn host_paths_outside_the_allowed_prefixes_are_refused_naming_volume_and_flag() {
        let p = pod(serde_json::json!({
            "volumes": [{"name": "logs", "hostPath": {"path": "/var/log"}},
                        {"name": "tmp", "emptyDir": {}}],
            "containers": [{"name": "a", "image": "busybox",
                "volumeMounts": [{"name": "logs", "mountPath": "/l"}, {"name": "tmp", "mountPath": "/t"}]}]
        }));
        let c = &p.spec.containers[0];
        let e = check_host_paths(&p, c, &[]).unwrap_err();
        assert!(
            e.0.contains("volume \"logs\"") && e.0.contains("--allow-host-path /var/log"),
            "{}",
            e.0
        );
        assert!(check_host_paths(&p, c, &[PathBuf::from("/var")]).is_ok());
        assert!(check_host_paths(&p, c, &[PathBuf::from("/var/lo")]).is_err());
    }
}
