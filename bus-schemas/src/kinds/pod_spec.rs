//! PodSpec: shared by Pod and every workload's pod template.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::affinity::{Affinity, Toleration};
use super::common::{
    check_unique, forbidden, in_range, invalid_value, is_false, non_negative, not_supported,
    validate_label_map, LocalObjectReference,
};
use super::config_sources::{
    ConfigMapVolumeSource, DownwardApiVolumeSource, ProjectedVolumeSource, SecretVolumeSource,
};
use super::container::Container;
use crate::quantity::Quantity;
use crate::status::Cause;
use crate::validation::{dns1123_label, dns1123_subdomain};

/// What a pod runs and how: its containers, volumes, restart policy and placement.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// Volumes the pod's containers can mount, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Containers run one after the other to completion before the main containers start (with
    /// `restartPolicy: Always`, sidecars that keep running).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    /// The pod's main containers; at least one. Their names are unique within the pod.
    #[serde(default)]
    pub containers: Vec<Container>,
    /// `Always`, `OnFailure` or `Never`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub restart_policy: String,
    /// Seconds between SIGTERM and SIGKILL when the pod is deleted; 30 by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// Seconds the pod may run, counted from its start, before it is stopped and marked Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// `ClusterFirst`, `ClusterFirstWithHostNet` or `Default`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dns_policy: String,
    /// Labels a node must carry for the pod to be scheduled there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_account_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automount_service_account_token: Option<bool>,
    /// Set by the scheduler's binding; a pod with a nodeName skips scheduling.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    /// Run in the node's network namespace instead of a pod network namespace of its own.
    #[serde(default, skip_serializing_if = "is_false")]
    pub host_network: bool,
    /// Share the node's process namespace.
    #[serde(default, rename = "hostPID", skip_serializing_if = "is_false")]
    pub host_pid: bool,
    /// Share the node's IPC namespace.
    #[serde(default, rename = "hostIPC", skip_serializing_if = "is_false")]
    pub host_ipc: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_process_namespace: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// The pod's hostname; the pod's name by default.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    /// With a headless Service of this name, the pod resolves as
    /// `<hostname>.<subdomain>.<namespace>.svc`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subdomain: String,
    /// Scheduling constraints: node affinity and pod (anti-)affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheduler_name: String,
    /// Taints of nodes this pod accepts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// The PriorityClass giving the pod its priority (and preemption policy).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub priority_class_name: String,
    /// Resolved from priorityClassName by admission; users leave it unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// `PreemptLowerPriority` or `Never`; resolved from the PriorityClass when unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preemption_policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_service_links: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodSecurityContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_non_root: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_group: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supplemental_groups: Vec<i64>,
    /// The default for every container that sets none of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp_profile: Option<super::container::SeccompProfile>,
    /// Namespaced kernel parameters set in the pod's sandbox.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sysctls: Vec<Sysctl>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Sysctl {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

/// A volume: exactly one source may be set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<HostPathVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretVolumeSource>,
    #[serde(
        default,
        rename = "downwardAPI",
        skip_serializing_if = "Option::is_none"
    )]
    pub downward_api: Option<DownwardApiVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projected: Option<ProjectedVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PersistentVolumeClaimVolumeSource>,
}

/// A claim in the pod's namespace: the pod starts once the claim is bound, on the volume's
/// node, with the volume's directory mounted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimVolumeSource {
    #[serde(default)]
    pub claim_name: String,
    #[serde(default, skip_serializing_if = "super::common::is_false")]
    pub read_only: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EmptyDirVolumeSource {
    /// Empty for the node's disk, `Memory` for tmpfs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub medium: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_limit: Option<Quantity>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HostPathVolumeSource {
    #[serde(default)]
    pub path: String,
    /// Empty (no check), `DirectoryOrCreate`, `Directory`, `FileOrCreate`, `File`, `Socket`,
    /// `CharDevice` or `BlockDevice`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
}

pub const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const DNS_POLICIES: &[&str] = &["ClusterFirst", "ClusterFirstWithHostNet", "Default"];
const PREEMPTION_POLICIES: &[&str] = &["PreemptLowerPriority", "Never"];
const HOST_PATH_TYPES: &[&str] = &[
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
];
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;

impl Volume {
    fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        if self.name.is_empty() {
            causes.push(Cause::required(format!("{path}.name")));
        } else if let Err(e) = dns1123_label(&self.name) {
            causes.push(invalid_value(&format!("{path}.name"), &self.name, &e));
        }
        let mut sources = 0;
        if let Some(dir) = &self.empty_dir {
            sources += 1;
            let at = format!("{path}.emptyDir");
            causes.extend(not_supported(
                &format!("{at}.medium"),
                &dir.medium,
                &["", "Memory"],
            ));
            if let Some(limit) = dir.size_limit.as_ref().filter(|q| q.milli_value() < 0) {
                let detail = "must be greater than or equal to 0";
                causes.push(invalid_value(
                    &format!("{at}.sizeLimit"),
                    limit.to_string(),
                    detail,
                ));
            }
        }
        if let Some(host) = &self.host_path {
            sources += 1;
            let at = format!("{path}.hostPath");
            if sources > 1 {
                causes.push(forbidden(&at, "may not specify more than 1 volume type"));
            }
            if host.path.is_empty() {
                causes.push(Cause::required(format!("{at}.path")));
            } else if host.path.split('/').any(|part| part == "..") {
                causes.push(invalid_value(
                    &format!("{at}.path"),
                    &host.path,
                    "must not contain '..'",
                ));
            }
            causes.extend(not_supported(
                &format!("{at}.type"),
                &host.type_,
                HOST_PATH_TYPES,
            ));
        }
        if let Some(claim) = &self.persistent_volume_claim {
            sources += 1;
            let at = format!("{path}.persistentVolumeClaim");
            if sources > 1 {
                causes.push(forbidden(&at, "may not specify more than 1 volume type"));
            }
            if claim.claim_name.is_empty() {
                causes.push(Cause::required(format!("{at}.claimName")));
            } else if let Err(e) = crate::validation::dns1123_subdomain(&claim.claim_name) {
                causes.push(invalid_value(
                    &format!("{at}.claimName"),
                    &claim.claim_name,
                    &e,
                ));
            }
        }
        let (more, config_causes) = self.validate_config_sources(path, sources);
        sources += more;
        causes.extend(config_causes);
        if sources == 0 {
            causes.push(super::common::required_msg(
                path,
                "must specify a volume type",
            ));
        }
        causes
    }
}

impl Volume {
    /// The configuration sources' share of [`Volume::validate`]: how many are set, and
    /// what is wrong with them.
    fn validate_config_sources(&self, path: &str, already: usize) -> (usize, Vec<Cause>) {
        let mut causes = Vec::new();
        let mut sources = 0;
        let mut one_more = |field: &str, causes: &mut Vec<Cause>| {
            sources += 1;
            let at = format!("{path}.{field}");
            if already + sources > 1 {
                causes.push(forbidden(&at, "may not specify more than 1 volume type"));
            }
            at
        };
        if let Some(cm) = &self.config_map {
            let at = one_more("configMap", &mut causes);
            causes.extend(cm.validate(&at));
        }
        if let Some(secret) = &self.secret {
            let at = one_more("secret", &mut causes);
            causes.extend(secret.validate(&at));
        }
        if let Some(downward) = &self.downward_api {
            let at = one_more("downwardAPI", &mut causes);
            causes.extend(downward.validate(&at));
        }
        if let Some(projected) = &self.projected {
            let at = one_more("projected", &mut causes);
            causes.extend(projected.validate(&at));
        }
        (sources, causes)
    }

    /// Whether any source is set (a volume without one is defaulted to an emptyDir).
    fn has_source(&self) -> bool {
        self.empty_dir.is_some()
            || self.host_path.is_some()
            || self.config_map.is_some()
            || self.secret.is_some()
            || self.downward_api.is_some()
            || self.projected.is_some()
            || self.persistent_volume_claim.is_some()
    }

    /// Kubernetes' file mode default for the configuration volumes.
    fn default_modes(&mut self) {
        use super::config_sources::DEFAULT_MODE;
        let modes = [
            self.config_map.as_mut().map(|v| &mut v.default_mode),
            self.secret.as_mut().map(|v| &mut v.default_mode),
            self.downward_api.as_mut().map(|v| &mut v.default_mode),
            self.projected.as_mut().map(|v| &mut v.default_mode),
        ];
        for mode in modes.into_iter().flatten() {
            mode.get_or_insert(DEFAULT_MODE);
        }
    }
}

impl PodSecurityContext {
    fn validate(&self, path: &str) -> Vec<Cause> {
        let ids = [
            ("runAsUser", self.run_as_user),
            ("runAsGroup", self.run_as_group),
            ("fsGroup", self.fs_group),
        ];
        let mut causes: Vec<Cause> = ids
            .into_iter()
            .filter_map(|(field, id)| {
                id.and_then(|id| in_range(id, 0, i64::from(i32::MAX), &format!("{path}.{field}")))
            })
            .collect();
        for (i, gid) in self.supplemental_groups.iter().enumerate() {
            let at = format!("{path}.supplementalGroups[{i}]");
            causes.extend(in_range(*gid, 0, i64::from(i32::MAX), &at));
        }
        causes
    }
}

impl PodSpec {
    /// The PersistentVolumeClaims the pod's volumes name, in volume order.
    pub fn claim_names(&self) -> impl Iterator<Item = &str> {
        self.volumes
            .iter()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.as_str())
    }

    /// Kubernetes' SetDefaults_PodSpec and the container, probe and volume defaults under it.
    pub fn apply_defaults(&mut self) {
        if self.restart_policy.is_empty() {
            self.restart_policy = "Always".into();
        }
        if self.dns_policy.is_empty() {
            self.dns_policy = "ClusterFirst".into();
        }
        if self.scheduler_name.is_empty() {
            self.scheduler_name = DEFAULT_SCHEDULER_NAME.into();
        }
        if self.termination_grace_period_seconds.is_none() {
            self.termination_grace_period_seconds = Some(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
        }
        let host_network = self.host_network;
        for container in self
            .init_containers
            .iter_mut()
            .chain(self.containers.iter_mut())
        {
            container.apply_defaults(host_network);
        }
        for volume in &mut self.volumes {
            // A volume without a source is scratch space, as Kubernetes' defaulting decides.
            if !volume.has_source() {
                volume.empty_dir = Some(EmptyDirVolumeSource::default());
            }
            volume.default_modes();
        }
    }

    /// Validates the spec at `path` (`spec` for a Pod, `spec.template.spec` in a workload).
    pub fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        let mut volume_names = BTreeSet::new();
        for (i, volume) in self.volumes.iter().enumerate() {
            let at = format!("{path}.volumes[{i}]");
            causes.extend(volume.validate(&at));
            if !volume.name.is_empty() {
                causes.extend(check_unique(
                    &mut volume_names,
                    &volume.name,
                    &format!("{at}.name"),
                ));
            }
        }

        if self.containers.is_empty() {
            causes.push(Cause::required(format!("{path}.containers")));
        }
        // Names are unique across init and app containers: logs and statuses are keyed by them.
        let mut container_names = BTreeSet::new();
        let all = [
            ("initContainers", &self.init_containers, true),
            ("containers", &self.containers, false),
        ];
        for (field, containers, is_init) in all {
            for (i, container) in containers.iter().enumerate() {
                let at = format!("{path}.{field}[{i}]");
                causes.extend(container.validate(&at, &volume_names, is_init));
                if !container.name.is_empty() {
                    let name_at = format!("{at}.name");
                    causes.extend(check_unique(
                        &mut container_names,
                        &container.name,
                        &name_at,
                    ));
                }
            }
        }
        causes.extend(self.validate_host_ports(path));
        causes.extend(super::lifecycle::validate_pod(self, path));

        let at = format!("{path}.restartPolicy");
        if self.restart_policy.is_empty() {
            causes.push(Cause::required(at));
        } else {
            causes.extend(not_supported(&at, &self.restart_policy, RESTART_POLICIES));
        }
        if !self.dns_policy.is_empty() {
            causes.extend(not_supported(
                &format!("{path}.dnsPolicy"),
                &self.dns_policy,
                DNS_POLICIES,
            ));
        }
        if !self.preemption_policy.is_empty() {
            let at = format!("{path}.preemptionPolicy");
            causes.extend(not_supported(
                &at,
                &self.preemption_policy,
                PREEMPTION_POLICIES,
            ));
        }
        if let Some(grace) = self.termination_grace_period_seconds {
            causes.extend(non_negative(
                grace,
                &format!("{path}.terminationGracePeriodSeconds"),
            ));
        }
        if let Some(deadline) = self.active_deadline_seconds {
            let at = format!("{path}.activeDeadlineSeconds");
            causes.extend(in_range(deadline, 1, i64::from(i32::MAX), &at));
        }
        causes.extend(validate_label_map(
            &self.node_selector,
            &format!("{path}.nodeSelector"),
        ));
        causes.extend(self.validate_names(path));
        if let Some(affinity) = &self.affinity {
            causes.extend(affinity.validate(&format!("{path}.affinity")));
        }
        for (i, toleration) in self.tolerations.iter().enumerate() {
            causes.extend(toleration.validate(&format!("{path}.tolerations[{i}]")));
        }
        if let Some(sc) = &self.security_context {
            causes.extend(sc.validate(&format!("{path}.securityContext")));
        }
        causes
    }

    fn validate_names(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        type Check = fn(&str) -> Result<(), String>;
        let names: [(&str, &str, Check); 6] = [
            ("hostname", &self.hostname, dns1123_label),
            ("subdomain", &self.subdomain, dns1123_label),
            ("nodeName", &self.node_name, dns1123_subdomain),
            (
                "serviceAccountName",
                &self.service_account_name,
                dns1123_subdomain,
            ),
            ("schedulerName", &self.scheduler_name, dns1123_subdomain),
            (
                "priorityClassName",
                &self.priority_class_name,
                dns1123_subdomain,
            ),
        ];
        for (field, value, check) in names {
            if !value.is_empty() {
                if let Err(e) = check(value) {
                    causes.push(invalid_value(&format!("{path}.{field}"), value, &e));
                }
            }
        }
        causes
    }

    /// Two containers of one pod cannot bind the same host port and protocol.
    fn validate_host_ports(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        let mut seen = BTreeSet::new();
        for (c, container) in self.containers.iter().enumerate() {
            for (p, port) in container.ports.iter().enumerate() {
                if port.host_port == 0 {
                    continue;
                }
                let key = (
                    port.host_port,
                    port.protocol.as_str(),
                    port.host_ip.as_str(),
                );
                if !seen.insert(key) {
                    let at = format!("{path}.containers[{c}].ports[{p}].hostPort");
                    let value = format!("{}/{}", port.host_port, port.protocol);
                    causes.push(Cause::duplicate(at, &value));
                }
            }
        }
        causes
    }

    /// What may change on a running pod: container images, activeDeadlineSeconds (set or
    /// shortened), tolerations (additions only), and nodeName once (the binding).
    pub fn validate_update(&self, old: &PodSpec, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        let mut masked = self.clone();

        let same_shape = masked.containers.len() == old.containers.len()
            && masked.init_containers.len() == old.init_containers.len();
        if same_shape {
            let pairs = masked.containers.iter_mut().zip(&old.containers);
            let init_pairs = masked.init_containers.iter_mut().zip(&old.init_containers);
            for (new, old) in pairs.chain(init_pairs) {
                new.image.clone_from(&old.image);
            }
        }

        let deadline_at = format!("{path}.activeDeadlineSeconds");
        match (old.active_deadline_seconds, self.active_deadline_seconds) {
            (Some(_), None) => causes.push(invalid_value(
                &deadline_at,
                "nil",
                "must not update from a positive integer to nil value",
            )),
            (Some(before), Some(after)) if after > before => causes.push(invalid_value(
                &deadline_at,
                after,
                "must be less than or equal to previous value",
            )),
            _ => {}
        }
        masked.active_deadline_seconds = old.active_deadline_seconds;

        let kept = old.tolerations.iter().all(|t| self.tolerations.contains(t));
        if kept {
            masked.tolerations.clone_from(&old.tolerations);
        } else {
            let detail = "existing toleration can not be modified or removed";
            causes.push(forbidden(&format!("{path}.tolerations"), detail));
            masked.tolerations.clone_from(&old.tolerations);
        }

        if old.node_name.is_empty() {
            masked.node_name.clone_from(&old.node_name);
        } else if self.node_name != old.node_name {
            causes.push(super::common::immutable(
                &format!("{path}.nodeName"),
                &self.node_name,
            ));
            masked.node_name.clone_from(&old.node_name);
        }

        if masked != *old {
            causes.push(forbidden(
                path,
                "pod updates may not change fields other than `spec.containers[*].image`, \
                 `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, \
                 `spec.tolerations` (only additions to existing tolerations) and \
                 `spec.nodeName` (only when unset)",
            ));
        }
        causes
    }
}
