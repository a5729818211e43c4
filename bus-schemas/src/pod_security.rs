//! Kubernetes' Pod Security Standards: the `privileged`, `baseline` and `restricted` levels, the
//! namespace labels that choose them, and the check of a pod spec against a level.
//!
//! Pure policy: the API's admission reads the namespace and decides what to do with the
//! violations (refuse at the `enforce` level, warn at the `warn` level). The checks follow the
//! definitions of the upstream `latest` version, including which restricted checks replace a
//! baseline one (restricted volume types replace hostPath, restricted capabilities and
//! seccomp replace their baseline forms), so the messages match what `kubectl` users see.

use std::collections::BTreeMap;

use crate::kinds::container::{Container, SecurityContext};
use crate::kinds::pod_spec::PodSpec;
use crate::status::Cause;

/// The label choosing the level whose violations refuse a pod.
pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
/// The label choosing the level whose violations are returned as warnings.
pub const WARN_LABEL: &str = "pod-security.kubernetes.io/warn";
/// What a namespace without an enforce label gets. Kubernetes' built-in default is
/// `privileged`; Shoal enforces `baseline` so that a fresh namespace cannot reach the node.
pub const DEFAULT_LEVEL: Level = Level::Baseline;

/// A Pod Security Standards level, from least to most restrictive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    pub fn parse(value: &str) -> Result<Level, String> {
        match value {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            other => Err(format!(
                "{other:?} is not a pod security level: must be privileged, baseline or restricted"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// The levels a namespace's labels select.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub enforce: Level,
    pub warn: Level,
    /// Labels whose value is not a level, each saying which level was used instead.
    pub label_errors: Vec<String>,
}

impl Policy {
    /// Reads the `enforce` and `warn` labels. A value that is not a level counts as
    /// `restricted`, as in Kubernetes: a typo must not open the namespace up. An unset `warn`
    /// follows a valid `enforce`, so workloads are warned about what their pods would meet.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Policy {
        let mut label_errors = Vec::new();
        let mut read = |label: &str| {
            labels.get(label).map(|value| {
                Level::parse(value).map_err(|e| {
                    label_errors.push(format!("label {label}: {e}; using restricted"));
                })
            })
        };
        let enforce = read(ENFORCE_LABEL);
        let warn = read(WARN_LABEL);
        let enforce_level = match enforce {
            Some(Ok(level)) => level,
            Some(Err(())) => Level::Restricted,
            None => DEFAULT_LEVEL,
        };
        let warn_level = match warn {
            Some(Ok(level)) => level,
            Some(Err(())) => Level::Restricted,
            None => enforce_level,
        };
        Policy {
            enforce: enforce_level,
            warn: warn_level,
            label_errors,
        }
    }
}

/// One way a pod spec breaks a level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where, e.g. `spec.volumes[0].hostPath`.
    pub field: String,
    /// Which check, in Kubernetes' words (`hostPath volumes`, `runAsNonRoot != true`).
    pub check: &'static str,
    /// What is wrong there, e.g. `volume "root"`.
    pub detail: String,
}

impl Violation {
    fn new(field: String, check: &'static str, detail: String) -> Violation {
        Violation {
            field,
            check,
            detail,
        }
    }

    pub fn to_cause(&self) -> Cause {
        Cause::new(
            "FieldValueForbidden",
            self.field.clone(),
            format!("Forbidden: {} ({})", self.check, self.detail),
        )
    }
}

/// The violations' summary as Kubernetes words it after "violates PodSecurity
/// \"baseline:latest\": ": each check once, with its details.
pub fn summary(violations: &[Violation]) -> String {
    let mut checks: Vec<(&str, Vec<&str>)> = Vec::new();
    for v in violations {
        match checks.iter_mut().find(|(check, _)| *check == v.check) {
            Some((_, details)) => details.push(&v.detail),
            None => checks.push((v.check, vec![&v.detail])),
        }
    }
    checks
        .iter()
        .map(|(check, details)| format!("{check} ({})", details.join("; ")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `"baseline:latest"`, as messages name the policy.
pub fn policy_name(level: Level) -> String {
    format!("{:?}", format!("{}:latest", level.as_str()))
}

/// Capabilities a baseline pod may add: the container runtimes' default set.
pub const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Sysctls namespaced to the pod and harmless to its neighbours.
pub const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

/// Every violation of `level` in the pod spec at `path` (`spec` for a Pod,
/// `spec.template.spec` in a workload), in check order.
pub fn check(level: Level, spec: &PodSpec, path: &str) -> Vec<Violation> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let pod = Pod::new(spec, path);
    let mut out = Vec::new();
    host_namespaces(&pod, &mut out);
    privileged(&pod, &mut out);
    if level == Level::Restricted {
        restricted_capabilities(&pod, &mut out);
        restricted_volumes(&pod, &mut out);
    } else {
        baseline_capabilities(&pod, &mut out);
        host_path_volumes(&pod, &mut out);
    }
    host_ports(&pod, &mut out);
    proc_mount(&pod, &mut out);
    if level == Level::Restricted {
        restricted_seccomp(&pod, &mut out);
    } else {
        baseline_seccomp(&pod, &mut out);
    }
    sysctls(&pod, &mut out);
    if level == Level::Restricted {
        privilege_escalation(&pod, &mut out);
        run_as_non_root(&pod, &mut out);
        run_as_user(&pod, &mut out);
    }
    out
}

/// The spec with every container located by its field path.
struct Pod<'a> {
    spec: &'a PodSpec,
    path: &'a str,
    containers: Vec<(String, &'a Container)>,
}

impl<'a> Pod<'a> {
    fn new(spec: &'a PodSpec, path: &'a str) -> Pod<'a> {
        let init = spec.init_containers.iter().enumerate();
        let init = init.map(|(i, c)| (format!("{path}.initContainers[{i}]"), c));
        let main = spec.containers.iter().enumerate();
        let main = main.map(|(i, c)| (format!("{path}.containers[{i}]"), c));
        Pod {
            spec,
            path,
            containers: init.chain(main).collect(),
        }
    }

    /// The containers with their security context's path and the context, if they have one.
    fn contexts(
        &self,
    ) -> impl Iterator<Item = (String, &'a Container, Option<&'a SecurityContext>)> + '_ {
        self.containers.iter().map(|(at, c)| {
            (
                format!("{at}.securityContext"),
                *c,
                c.security_context.as_ref(),
            )
        })
    }
}

fn host_namespaces(pod: &Pod, out: &mut Vec<Violation>) {
    let namespaces = [
        ("hostNetwork", pod.spec.host_network),
        ("hostPID", pod.spec.host_pid),
        ("hostIPC", pod.spec.host_ipc),
    ];
    for (field, set) in namespaces {
        if set {
            let at = format!("{}.{field}", pod.path);
            out.push(Violation::new(
                at,
                "host namespaces",
                format!("{field}=true"),
            ));
        }
    }
}

fn privileged(pod: &Pod, out: &mut Vec<Violation>) {
    for (at, c, sc) in pod.contexts() {
        if sc.and_then(|sc| sc.privileged) == Some(true) {
            let detail = format!(
                "container {:?} must not set securityContext.privileged=true",
                c.name
            );
            out.push(Violation::new(
                format!("{at}.privileged"),
                "privileged",
                detail,
            ));
        }
    }
}

fn added_capabilities_outside(
    pod: &Pod,
    allowed: &[&str],
    check: &'static str,
    out: &mut Vec<Violation>,
) {
    for (at, c, sc) in pod.contexts() {
        let Some(caps) = sc.and_then(|sc| sc.capabilities.as_ref()) else {
            continue;
        };
        for (i, cap) in caps.add.iter().enumerate() {
            if !allowed.contains(&cap.as_str()) {
                let detail = format!(
                    "container {:?} must not include {cap:?} in securityContext.capabilities.add",
                    c.name
                );
                out.push(Violation::new(
                    format!("{at}.capabilities.add[{i}]"),
                    check,
                    detail,
                ));
            }
        }
    }
}

fn baseline_capabilities(pod: &Pod, out: &mut Vec<Violation>) {
    added_capabilities_outside(pod, BASELINE_CAPABILITIES, "non-default capabilities", out);
}

fn restricted_capabilities(pod: &Pod, out: &mut Vec<Violation>) {
    const CHECK: &str = "unrestricted capabilities";
    for (at, c, sc) in pod.contexts() {
        let caps = sc.and_then(|sc| sc.capabilities.as_ref());
        let drops_all = caps.is_some_and(|caps| caps.drop.iter().any(|d| d == "ALL"));
        if !drops_all {
            let detail = format!(
                "container {:?} must set securityContext.capabilities.drop=[\"ALL\"]",
                c.name
            );
            out.push(Violation::new(
                format!("{at}.capabilities.drop"),
                CHECK,
                detail,
            ));
        }
    }
    added_capabilities_outside(pod, &["NET_BIND_SERVICE"], CHECK, out);
}

fn host_path_volumes(pod: &Pod, out: &mut Vec<Violation>) {
    for (i, volume) in pod.spec.volumes.iter().enumerate() {
        if volume.host_path.is_some() {
            out.push(Violation::new(
                format!("{}.volumes[{i}].hostPath", pod.path),
                "hostPath volumes",
                format!("volume {:?}", volume.name),
            ));
        }
    }
}

/// Restricted allows configMap, csi, downwardAPI, emptyDir, ephemeral,
/// persistentVolumeClaim, projected and secret: of the sources Shoal knows, only hostPath
/// falls outside.
fn restricted_volumes(pod: &Pod, out: &mut Vec<Violation>) {
    for (i, volume) in pod.spec.volumes.iter().enumerate() {
        if volume.host_path.is_some() {
            out.push(Violation::new(
                format!("{}.volumes[{i}].hostPath", pod.path),
                "restricted volume types",
                format!(
                    "volume {:?} uses restricted volume type \"hostPath\"",
                    volume.name
                ),
            ));
        }
    }
}

fn host_ports(pod: &Pod, out: &mut Vec<Violation>) {
    for (at, c) in &pod.containers {
        for (i, port) in c.ports.iter().enumerate() {
            if port.host_port != 0 {
                let detail = format!("container {:?} uses hostPort {}", c.name, port.host_port);
                out.push(Violation::new(
                    format!("{at}.ports[{i}].hostPort"),
                    "hostPort",
                    detail,
                ));
            }
        }
    }
}

fn proc_mount(pod: &Pod, out: &mut Vec<Violation>) {
    for (at, c, sc) in pod.contexts() {
        match sc.and_then(|sc| sc.proc_mount.as_deref()) {
            None | Some("Default") => {}
            Some(other) => {
                let detail = format!(
                    "container {:?} must not set securityContext.procMount to {other:?}",
                    c.name
                );
                out.push(Violation::new(
                    format!("{at}.procMount"),
                    "procMount",
                    detail,
                ));
            }
        }
    }
}

/// The pod's seccomp profile type and the path of its security context, when set.
fn pod_seccomp<'a>(pod: &Pod<'a>) -> Option<(String, &'a str)> {
    let profile = pod
        .spec
        .security_context
        .as_ref()?
        .seccomp_profile
        .as_ref()?;
    Some((
        format!("{}.securityContext.seccompProfile.type", pod.path),
        profile.type_.as_str(),
    ))
}

fn container_seccomp(sc: Option<&SecurityContext>) -> Option<&str> {
    Some(sc?.seccomp_profile.as_ref()?.type_.as_str())
}

fn baseline_seccomp(pod: &Pod, out: &mut Vec<Violation>) {
    const DETAIL: &str = "must not set securityContext.seccompProfile.type to \"Unconfined\"";
    if let Some((at, "Unconfined")) = pod_seccomp(pod) {
        out.push(Violation::new(
            at,
            "seccompProfile",
            format!("pod {DETAIL}"),
        ));
    }
    for (at, c, sc) in pod.contexts() {
        if container_seccomp(sc) == Some("Unconfined") {
            out.push(Violation::new(
                format!("{at}.seccompProfile.type"),
                "seccompProfile",
                format!("container {:?} {DETAIL}", c.name),
            ));
        }
    }
}

/// Restricted: every container runs under RuntimeDefault or Localhost, set on the pod or on
/// the container; a container's own setting wins over the pod's.
fn restricted_seccomp(pod: &Pod, out: &mut Vec<Violation>) {
    const CHECK: &str = "seccompProfile";
    let confined = |t: &str| t == "RuntimeDefault" || t == "Localhost";
    let mut pod_confined = false;
    if let Some((at, kind)) = pod_seccomp(pod) {
        if confined(kind) {
            pod_confined = true;
        } else {
            let detail =
                format!("pod must not set securityContext.seccompProfile.type to {kind:?}");
            out.push(Violation::new(at, CHECK, detail));
        }
    }
    for (at, c, sc) in pod.contexts() {
        let at = format!("{at}.seccompProfile.type");
        match container_seccomp(sc) {
            Some(kind) if confined(kind) => {}
            Some(kind) => {
                let detail = format!(
                    "container {:?} must not set securityContext.seccompProfile.type to {kind:?}",
                    c.name
                );
                out.push(Violation::new(at, CHECK, detail));
            }
            None if pod_confined => {}
            None => {
                let detail = format!(
                    "pod or container {:?} must set securityContext.seccompProfile.type to \
                     \"RuntimeDefault\" or \"Localhost\"",
                    c.name
                );
                out.push(Violation::new(at, CHECK, detail));
            }
        }
    }
}

fn sysctls(pod: &Pod, out: &mut Vec<Violation>) {
    let Some(sc) = &pod.spec.security_context else {
        return;
    };
    for (i, sysctl) in sc.sysctls.iter().enumerate() {
        if !SAFE_SYSCTLS.contains(&sysctl.name.as_str()) {
            out.push(Violation::new(
                format!("{}.securityContext.sysctls[{i}].name", pod.path),
                "forbidden sysctls",
                sysctl.name.clone(),
            ));
        }
    }
}

fn privilege_escalation(pod: &Pod, out: &mut Vec<Violation>) {
    for (at, c, sc) in pod.contexts() {
        if sc.and_then(|sc| sc.allow_privilege_escalation) != Some(false) {
            let detail = format!(
                "container {:?} must set securityContext.allowPrivilegeEscalation=false",
                c.name
            );
            out.push(Violation::new(
                format!("{at}.allowPrivilegeEscalation"),
                "allowPrivilegeEscalation != false",
                detail,
            ));
        }
    }
}

/// runAsNonRoot must be true on the pod or on every container, and false nowhere.
fn run_as_non_root(pod: &Pod, out: &mut Vec<Violation>) {
    const CHECK: &str = "runAsNonRoot != true";
    let pod_setting = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.run_as_non_root);
    if pod_setting == Some(false) {
        out.push(Violation::new(
            format!("{}.securityContext.runAsNonRoot", pod.path),
            CHECK,
            "pod must not set securityContext.runAsNonRoot=false".into(),
        ));
    }
    for (at, c, sc) in pod.contexts() {
        let at = format!("{at}.runAsNonRoot");
        match sc.and_then(|sc| sc.run_as_non_root) {
            Some(true) => {}
            Some(false) => {
                let detail = format!(
                    "container {:?} must not set securityContext.runAsNonRoot=false",
                    c.name
                );
                out.push(Violation::new(at, CHECK, detail));
            }
            None if pod_setting == Some(true) => {}
            None => {
                let detail = format!(
                    "pod or container {:?} must set securityContext.runAsNonRoot=true",
                    c.name
                );
                out.push(Violation::new(at, CHECK, detail));
            }
        }
    }
}

fn run_as_user(pod: &Pod, out: &mut Vec<Violation>) {
    const CHECK: &str = "runAsUser=0";
    if let Some(sc) = &pod.spec.security_context {
        if sc.run_as_user == Some(0) {
            out.push(Violation::new(
                format!("{}.securityContext.runAsUser", pod.path),
                CHECK,
                "pod must not set runAsUser=0".into(),
            ));
        }
    }
    for (at, c, sc) in pod.contexts() {
        if sc.and_then(|sc| sc.run_as_user) == Some(0) {
            out.push(Violation::new(
                format!("{at}.runAsUser"),
                CHECK,
                format!("container {:?} must not set runAsUser=0", c.name),
            ));
        }
    }
}
