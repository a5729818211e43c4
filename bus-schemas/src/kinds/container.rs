//! Containers: what runs in a pod, with its ports, environment, resources and probes.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::common::{
    check_unique, env_var_name, forbidden, iana_svc_name, invalid_value, is_false, is_zero_i32,
    not_found, not_supported, validate_port_number,
};
use super::config_sources::{
    ConfigMapKeySelector, EnvFromSource, ResourceFieldSelector, SecretKeySelector,
};
use super::lifecycle::Lifecycle;
use super::probe::{Probe, ProbeKind};
use crate::quantity::Quantity;
use crate::status::Cause;
use crate::validation::{dns1123_label, label_key};

/// One process tree of a pod, started from an image.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Container {
    /// The container's name, a DNS label unique within the pod.
    #[serde(default)]
    pub name: String,
    /// The image to run: a reference such as `busybox:1.36` or `registry.example/app@sha256:…`,
    /// resolved from the node's image store.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// Replaces the image's entrypoint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Replaces the image's cmd.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The directory the command starts in; the image's by default.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub working_dir: String,
    /// Ports the container listens on: informational, and names that Services' targetPort can
    /// refer to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort>,
    /// Environment variables set in the container, in order; later ones may refer to earlier
    /// ones as `$(NAME)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Whole ConfigMaps or Secrets as environment variables, each key a variable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromSource>,
    /// CPU and memory the container requests (for scheduling) and may not exceed (limits).
    #[serde(default, skip_serializing_if = "ResourceRequirements::is_empty")]
    pub resources: ResourceRequirements,
    /// Volumes of the pod mounted into the container's filesystem.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// A check whose failures restart the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<Probe>,
    /// A check whose failures take the pod out of its Services' endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Probe>,
    /// A check that holds the other probes back until it first succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<Probe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// Only `Always`, only on init containers: makes them sidecars (see [`super::lifecycle`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub restart_policy: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub termination_message_path: String,
    /// `File` or `FallbackToLogsOnError`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub termination_message_policy: String,
    /// `Always`, `IfNotPresent` or `Never`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_pull_policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub stdin: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub stdin_once: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub tty: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// 0 means no host port, as in Kubernetes.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub host_port: i32,
    #[serde(default)]
    pub container_port: i32,
    /// `TCP`, `UDP` or `SCTP`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    #[serde(default, rename = "hostIP", skip_serializing_if = "String::is_empty")]
    pub host_ip: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<EnvVarSource>,
}

/// Exactly one source: the pod's own fields or resources, or a ConfigMap or Secret key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EnvVarSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<ObjectFieldSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_field_ref: Option<ResourceFieldSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<ConfigMapKeySelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<SecretKeySelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ObjectFieldSelector {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default)]
    pub field_path: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
}

impl ResourceRequirements {
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty() && self.requests.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SecurityContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_non_root: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privileged: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_root_filesystem: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_privilege_escalation: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    /// Overrides the pod's `seccompProfile` for this container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp_profile: Option<SeccompProfile>,
    /// `Default` (masked /proc paths) or `Unmasked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proc_mount: Option<String>,
}

/// The seccomp filter a container runs under.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SeccompProfile {
    /// `RuntimeDefault`, `Unconfined` or `Localhost`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// With `Localhost`: the profile's path, relative to the node's seccomp profile root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localhost_profile: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub mount_path: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub read_only: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub_path: String,
}

pub const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
const TERMINATION_MESSAGE_POLICIES: &[&str] = &["File", "FallbackToLogsOnError"];
const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// The downward-API fields an environment variable may read.
const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// The tag of an image reference: `None` for a bare name (which means `latest`) or for a
/// reference pinned by digest only. The registry's `:port` is not a tag.
fn image_tag(image: &str) -> Option<&str> {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => Some(tag),
        None if digest.is_some() => None,
        None => Some("latest"),
    }
}

/// Kubernetes' pull policy default: a moving `latest` tag must be pulled every time.
fn default_pull_policy(image: &str) -> &'static str {
    if image_tag(image) == Some("latest") {
        "Always"
    } else {
        "IfNotPresent"
    }
}

impl Container {
    pub fn apply_defaults(&mut self, host_network: bool) {
        if self.image_pull_policy.is_empty() {
            self.image_pull_policy = default_pull_policy(&self.image).into();
        }
        if self.termination_message_path.is_empty() {
            self.termination_message_path = DEFAULT_TERMINATION_MESSAGE_PATH.into();
        }
        if self.termination_message_policy.is_empty() {
            self.termination_message_policy = "File".into();
        }
        for port in &mut self.ports {
            if port.protocol.is_empty() {
                port.protocol = "TCP".into();
            }
            // On the host network the container port is the host port.
            if host_network && port.host_port == 0 {
                port.host_port = port.container_port;
            }
        }
        for env in &mut self.env {
            if let Some(field) = env.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
                if field.api_version.is_empty() {
                    field.api_version = "v1".into();
                }
            }
        }
        for probe in [
            &mut self.liveness_probe,
            &mut self.readiness_probe,
            &mut self.startup_probe,
        ]
        .into_iter()
        .flatten()
        {
            probe.apply_defaults();
        }
        if let Some(lifecycle) = &mut self.lifecycle {
            lifecycle.apply_defaults();
        }
    }

    /// Validates one container at `path` (`spec.containers[0]`); `volumes` are the pod's
    /// volume names, which mounts must reference.
    pub fn validate(&self, path: &str, volumes: &BTreeSet<&str>, is_init: bool) -> Vec<Cause> {
        let mut causes = Vec::new();
        if self.name.is_empty() {
            causes.push(Cause::required(format!("{path}.name")));
        } else if let Err(e) = dns1123_label(&self.name) {
            causes.push(invalid_value(&format!("{path}.name"), &self.name, &e));
        }
        if self.image.is_empty() {
            causes.push(Cause::required(format!("{path}.image")));
        } else if self.image.trim() != self.image {
            let detail = "must not have leading or trailing whitespace";
            causes.push(invalid_value(&format!("{path}.image"), &self.image, detail));
        }
        if !self.image_pull_policy.is_empty() {
            let at = format!("{path}.imagePullPolicy");
            causes.extend(not_supported(&at, &self.image_pull_policy, PULL_POLICIES));
        }
        if !self.termination_message_policy.is_empty() {
            let at = format!("{path}.terminationMessagePolicy");
            causes.extend(not_supported(
                &at,
                &self.termination_message_policy,
                TERMINATION_MESSAGE_POLICIES,
            ));
        }
        causes.extend(self.validate_ports(path));
        causes.extend(self.validate_env(path));
        causes.extend(validate_resources(
            &self.resources,
            &format!("{path}.resources"),
        ));
        causes.extend(self.validate_probes(path, is_init));
        if let Some(sc) = &self.security_context {
            causes.extend(sc.validate(&format!("{path}.securityContext")));
        }
        causes.extend(self.validate_mounts(path, volumes));
        causes
    }

    fn validate_ports(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        let mut names = BTreeSet::new();
        for (i, port) in self.ports.iter().enumerate() {
            let at = format!("{path}.ports[{i}]");
            if !port.name.is_empty() {
                match iana_svc_name(&port.name) {
                    Err(e) => causes.push(invalid_value(&format!("{at}.name"), &port.name, &e)),
                    Ok(()) => {
                        causes.extend(check_unique(&mut names, &port.name, &format!("{at}.name")))
                    }
                }
            }
            causes.extend(validate_port_number(
                port.container_port,
                &format!("{at}.containerPort"),
            ));
            if port.host_port != 0 {
                causes.extend(validate_port_number(
                    port.host_port,
                    &format!("{at}.hostPort"),
                ));
            }
            if port.protocol.is_empty() {
                causes.push(Cause::required(format!("{at}.protocol")));
            } else {
                causes.extend(not_supported(
                    &format!("{at}.protocol"),
                    &port.protocol,
                    PROTOCOLS,
                ));
            }
            if !port.host_ip.is_empty() && port.host_ip.parse::<std::net::IpAddr>().is_err() {
                let at = format!("{at}.hostIP");
                causes.push(invalid_value(
                    &at,
                    &port.host_ip,
                    "must be a valid IP address",
                ));
            }
        }
        causes
    }

    fn validate_env(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        for (i, env) in self.env.iter().enumerate() {
            let at = format!("{path}.env[{i}]");
            if env.name.is_empty() {
                causes.push(Cause::required(format!("{at}.name")));
            } else if let Err(e) = env_var_name(&env.name) {
                causes.push(invalid_value(&format!("{at}.name"), &env.name, &e));
            }
            let Some(from) = &env.value_from else {
                continue;
            };
            let from_at = format!("{at}.valueFrom");
            if !env.value.is_empty() {
                causes.push(invalid_value(
                    &from_at,
                    "",
                    "may not be specified when `value` is not empty",
                ));
            }
            causes.extend(validate_env_source(from, &from_at));
        }
        for (i, from) in self.env_from.iter().enumerate() {
            causes.extend(from.validate(&format!("{path}.envFrom[{i}]")));
        }
        causes
    }

    fn validate_probes(&self, path: &str, is_init: bool) -> Vec<Cause> {
        let mut causes = Vec::new();
        let probes = [
            ("livenessProbe", &self.liveness_probe, ProbeKind::Liveness),
            (
                "readinessProbe",
                &self.readiness_probe,
                ProbeKind::Readiness,
            ),
            ("startupProbe", &self.startup_probe, ProbeKind::Startup),
        ];
        for (field, probe, kind) in probes {
            let Some(probe) = probe else { continue };
            let at = format!("{path}.{field}");
            if is_init && !self.is_sidecar() {
                // Init containers run to completion; nothing would act on a probe's verdict.
                causes.push(forbidden(
                    &at,
                    "may not be set for init containers without restartPolicy=Always",
                ));
            } else {
                causes.extend(probe.validate(&at, kind));
            }
        }
        causes
    }

    fn validate_mounts(&self, path: &str, volumes: &BTreeSet<&str>) -> Vec<Cause> {
        let mut causes = Vec::new();
        let mut mount_paths = BTreeSet::new();
        for (i, mount) in self.volume_mounts.iter().enumerate() {
            let at = format!("{path}.volumeMounts[{i}]");
            if mount.name.is_empty() {
                causes.push(Cause::required(format!("{at}.name")));
            } else if !volumes.contains(mount.name.as_str()) {
                causes.push(not_found(&format!("{at}.name"), &mount.name));
            }
            if mount.mount_path.is_empty() {
                causes.push(Cause::required(format!("{at}.mountPath")));
            } else if !mount_paths.insert(mount.mount_path.as_str()) {
                let at = format!("{at}.mountPath");
                causes.push(invalid_value(&at, &mount.mount_path, "must be unique"));
            }
            let escapes = mount.sub_path.starts_with('/')
                || mount.sub_path.split('/').any(|part| part == "..");
            if escapes {
                let detail = "must be a relative path without '..'";
                causes.push(invalid_value(
                    &format!("{at}.subPath"),
                    &mount.sub_path,
                    detail,
                ));
            }
        }
        causes
    }
}

fn validate_env_source(from: &EnvVarSource, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut set = 0;
    if let Some(field) = &from.field_ref {
        set += 1;
        causes.extend(validate_field_ref(field, &format!("{path}.fieldRef")));
    }
    if let Some(resource) = &from.resource_field_ref {
        set += 1;
        causes.extend(resource.validate(&format!("{path}.resourceFieldRef"), false));
    }
    if let Some(key) = &from.config_map_key_ref {
        set += 1;
        causes.extend(key.validate(&format!("{path}.configMapKeyRef")));
    }
    if let Some(key) = &from.secret_key_ref {
        set += 1;
        causes.extend(key.validate(&format!("{path}.secretKeyRef")));
    }
    match set {
        0 => causes.push(invalid_value(
            path,
            "",
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        )),
        1 => {}
        _ => causes.push(invalid_value(
            path,
            "",
            "may not have more than one field specified at a time",
        )),
    }
    causes
}

fn validate_field_ref(field: &ObjectFieldSelector, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if !field.api_version.is_empty() && field.api_version != "v1" {
        causes.push(Cause::not_supported(
            format!("{path}.apiVersion"),
            &field.api_version,
            &["v1"],
        ));
    }
    let at = format!("{path}.fieldPath");
    if field.field_path.is_empty() {
        causes.push(Cause::required(at));
        return causes;
    }
    // `metadata.labels['key']` reads a single label; the whole map is not an env value.
    let subscripted = ["metadata.labels", "metadata.annotations"]
        .iter()
        .find_map(|prefix| {
            let rest = field.field_path.strip_prefix(prefix)?;
            rest.strip_prefix("['")?.strip_suffix("']")
        });
    match subscripted {
        Some(key) => {
            if let Err(e) = label_key(key) {
                causes.push(invalid_value(&at, &field.field_path, &e));
            }
        }
        None => {
            let mut supported = ENV_FIELD_PATHS.to_vec();
            supported.extend(["metadata.labels['<KEY>']", "metadata.annotations['<KEY>']"]);
            causes.extend(not_supported(&at, &field.field_path, &supported));
        }
    }
    causes
}

/// Resource names: the standard ones, `hugepages-<size>`, or an extended `domain/name`.
fn validate_resource_name(name: &str, path: &str) -> Option<Cause> {
    if name.contains('/') {
        return label_key(name).err().map(|e| invalid_value(path, name, &e));
    }
    let standard = matches!(name, "cpu" | "memory" | "ephemeral-storage")
        || name
            .strip_prefix("hugepages-")
            .is_some_and(|size| !size.is_empty());
    (!standard).then(|| invalid_value(path, name, "must be a standard resource for containers"))
}

pub(crate) fn validate_resources(resources: &ResourceRequirements, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (field, map) in [
        ("limits", &resources.limits),
        ("requests", &resources.requests),
    ] {
        for (name, quantity) in map {
            let at = format!("{path}.{field}[{name}]");
            causes.extend(validate_resource_name(name, &at));
            if quantity.milli_value() < 0 {
                let detail = "must be greater than or equal to 0";
                causes.push(invalid_value(&at, quantity.to_string(), detail));
            }
        }
    }
    for (name, request) in &resources.requests {
        if let Some(limit) = resources.limits.get(name) {
            if request > limit {
                let at = format!("{path}.requests[{name}]");
                let detail = format!("must be less than or equal to {name} limit of {limit}");
                causes.push(invalid_value(&at, request.to_string(), &detail));
            }
        }
    }
    causes
}

impl SecurityContext {
    pub(crate) fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        for (field, id) in [
            ("runAsUser", self.run_as_user),
            ("runAsGroup", self.run_as_group),
        ] {
            if let Some(id) = id {
                causes.extend(super::common::in_range(
                    id,
                    0,
                    i64::from(i32::MAX),
                    &format!("{path}.{field}"),
                ));
            }
        }
        if self.privileged == Some(true) && self.allow_privilege_escalation == Some(false) {
            causes.push(invalid_value(
                &format!("{path}.allowPrivilegeEscalation"),
                false,
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        causes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(default_pull_policy("nginx"), "Always");
        assert_eq!(default_pull_policy("nginx:latest"), "Always");
        assert_eq!(default_pull_policy("nginx:1.25"), "IfNotPresent");
        assert_eq!(default_pull_policy("registry:5000/nginx"), "Always");
        assert_eq!(
            default_pull_policy("registry:5000/nginx:1.25"),
            "IfNotPresent"
        );
        assert_eq!(default_pull_policy("nginx@sha256:abcd"), "IfNotPresent");
        assert_eq!(default_pull_policy("nginx:latest@sha256:abcd"), "Always");
    }

    #[test]
    fn env_field_refs() {
        let ok = ObjectFieldSelector {
            api_version: "v1".into(),
            field_path: "status.podIP".into(),
        };
        assert!(validate_field_ref(&ok, "f").is_empty());
        let label = ObjectFieldSelector {
            field_path: "metadata.labels['app']".into(),
            ..ok.clone()
        };
        assert!(validate_field_ref(&label, "f").is_empty());
        let bad = ObjectFieldSelector {
            field_path: "spec.containers".into(),
            ..ok
        };
        assert_eq!(validate_field_ref(&bad, "f")[0].field, "f.fieldPath");
    }

    #[test]
    fn resource_names() {
        assert!(validate_resource_name("cpu", "r").is_none());
        assert!(validate_resource_name("hugepages-2Mi", "r").is_none());
        assert!(validate_resource_name("nvidia.com/gpu", "r").is_none());
        assert!(validate_resource_name("gpu", "r").is_some());
    }
}
