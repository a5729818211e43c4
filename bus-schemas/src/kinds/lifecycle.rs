//! Container lifecycle: postStart and preStop hooks, and restartable init containers
//! (native sidecars). Their validation lives here rather than in `container` because the rules
//! depend on the pod (which list a container is in, the pod's grace period).

use serde::{Deserialize, Serialize};

use super::common::{forbidden, invalid_value, required_msg};
use super::container::Container;
use super::pod::{ContainerStatus, Pod};
use super::pod_spec::{PodSpec, DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS};
use super::probe::{ExecAction, HttpGetAction};
use crate::status::Cause;

/// What the node runs right after a container starts and right before it is stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_start: Option<LifecycleHandler>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_stop: Option<LifecycleHandler>,
}

/// Exactly one of the three is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleHandler {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpGetAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep: Option<SleepAction>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SleepAction {
    #[serde(default)]
    pub seconds: i64,
}

/// The only restartPolicy a container may carry: it makes an init container a sidecar.
pub const CONTAINER_RESTART_ALWAYS: &str = "Always";

impl Container {
    /// An init container with `restartPolicy: Always`: started in order with the init
    /// containers, kept running beside the app containers, stopped after them.
    pub fn is_sidecar(&self) -> bool {
        self.restart_policy == CONTAINER_RESTART_ALWAYS
    }
}

impl Pod {
    /// Whether the init container of this status is a sidecar.
    pub fn is_sidecar_status(&self, status: &ContainerStatus) -> bool {
        self.spec
            .init_containers
            .iter()
            .any(|c| c.name == status.name && c.is_sidecar())
    }

    /// An init container no longer holds the pod back: it succeeded, or it is a sidecar that
    /// has started (kubectl's `Init:N/M` counts these).
    pub fn init_container_done(&self, status: &ContainerStatus) -> bool {
        if self.is_sidecar_status(status) {
            return status.started == Some(true);
        }
        status
            .state
            .terminated
            .as_ref()
            .is_some_and(|t| t.exit_code == 0)
    }

    /// kubectl's READY column: (ready, total) over the app containers and the sidecars, a
    /// sidecar counting as ready only once started.
    pub fn ready_containers(&self) -> (usize, usize) {
        let sidecars = self.spec.init_containers.iter().filter(|c| c.is_sidecar());
        let total = self.spec.containers.len() + sidecars.count();
        let app_ready = self.status.container_statuses.iter().filter(|c| c.ready);
        let sidecars_ready = self
            .status
            .init_container_statuses
            .iter()
            .filter(|c| self.is_sidecar_status(c) && c.started == Some(true) && c.ready);
        (app_ready.count() + sidecars_ready.count(), total)
    }
}

impl LifecycleHandler {
    /// One line for people (`describe`): `exec [sh -c …]`, `http-get http://:8080/quit`,
    /// `sleep 5s`.
    pub fn describe(&self) -> String {
        if let Some(exec) = &self.exec {
            return format!("exec {:?}", exec.command);
        }
        if let Some(get) = &self.http_get {
            let scheme = if get.scheme.is_empty() {
                "http".to_string()
            } else {
                get.scheme.to_ascii_lowercase()
            };
            return format!("http-get {scheme}://{}:{}{}", get.host, get.port, get.path);
        }
        if let Some(sleep) = &self.sleep {
            return format!("sleep {}s", sleep.seconds);
        }
        "<none>".into()
    }

    pub fn apply_defaults(&mut self) {
        if let Some(get) = &mut self.http_get {
            if get.path.is_empty() {
                get.path = "/".into();
            }
            if get.scheme.is_empty() {
                get.scheme = "HTTP".into();
            }
        }
    }

    fn validate(&self, path: &str, grace_seconds: i64) -> Vec<Cause> {
        let mut causes = Vec::new();
        let mut handlers = 0;
        let mut another = |field: &str, causes: &mut Vec<Cause>| {
            handlers += 1;
            if handlers > 1 {
                causes.push(forbidden(
                    &format!("{path}.{field}"),
                    "may not specify more than 1 handler type",
                ));
            }
        };
        if let Some(exec) = &self.exec {
            another("exec", &mut causes);
            if exec.command.is_empty() {
                causes.push(Cause::required(format!("{path}.exec.command")));
            }
        }
        if let Some(get) = &self.http_get {
            another("httpGet", &mut causes);
            causes.extend(get.validate(&format!("{path}.httpGet")));
        }
        if let Some(sleep) = &self.sleep {
            another("sleep", &mut causes);
            if sleep.seconds < 0 || sleep.seconds > grace_seconds {
                let detail = format!(
                    "must be non-negative and less than terminationGracePeriodSeconds ({grace_seconds})"
                );
                causes.push(invalid_value(
                    &format!("{path}.sleep.seconds"),
                    sleep.seconds,
                    &detail,
                ));
            }
        }
        if handlers == 0 {
            causes.push(required_msg(path, "must specify a handler type"));
        }
        causes
    }
}

impl Lifecycle {
    pub fn apply_defaults(&mut self) {
        for handler in [&mut self.post_start, &mut self.pre_stop]
            .into_iter()
            .flatten()
        {
            handler.apply_defaults();
        }
    }

    fn validate(&self, path: &str, grace_seconds: i64) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let Some(post_start) = &self.post_start {
            causes.extend(post_start.validate(&format!("{path}.postStart"), grace_seconds));
        }
        if let Some(pre_stop) = &self.pre_stop {
            causes.extend(pre_stop.validate(&format!("{path}.preStop"), grace_seconds));
        }
        causes
    }
}

/// The pod-wide rules of hooks and container restart policies, as kube-apiserver 1.32 words
/// them: `restartPolicy` only `Always` and only on init containers; hooks and probes on an
/// init container only when it is a sidecar (a run-to-completion init container has nothing
/// to probe or hook).
pub fn validate_pod(spec: &PodSpec, path: &str) -> Vec<Cause> {
    let grace = spec
        .termination_grace_period_seconds
        .unwrap_or(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    let mut causes = Vec::new();
    for (i, init) in spec.init_containers.iter().enumerate() {
        let at = format!("{path}.initContainers[{i}]");
        if !init.restart_policy.is_empty() && !init.is_sidecar() {
            causes.push(Cause::not_supported(
                format!("{at}.restartPolicy"),
                &init.restart_policy,
                &[CONTAINER_RESTART_ALWAYS],
            ));
        }
        match &init.lifecycle {
            Some(lifecycle) if init.is_sidecar() => {
                causes.extend(lifecycle.validate(&format!("{at}.lifecycle"), grace));
            }
            Some(_) => causes.push(forbidden(
                &format!("{at}.lifecycle"),
                "may not be set for init containers without restartPolicy=Always",
            )),
            None => {}
        }
    }
    for (i, container) in spec.containers.iter().enumerate() {
        let at = format!("{path}.containers[{i}]");
        if !container.restart_policy.is_empty() {
            causes.push(forbidden(
                &format!("{at}.restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
        if let Some(lifecycle) = &container.lifecycle {
            causes.extend(lifecycle.validate(&format!("{at}.lifecycle"), grace));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::intstr::IntOrString;

    fn container(name: &str) -> Container {
        Container {
            name: name.into(),
            image: "busybox".into(),
            ..Default::default()
        }
    }

    fn fields(causes: &[Cause]) -> Vec<&str> {
        causes.iter().map(|c| c.field.as_str()).collect()
    }

    fn sleep(seconds: i64) -> LifecycleHandler {
        LifecycleHandler {
            sleep: Some(SleepAction { seconds }),
            ..Default::default()
        }
    }

    #[test]
    fn a_handler_needs_exactly_one_action() {
        let none = LifecycleHandler::default().validate("h", 30);
        assert_eq!(fields(&none), ["h"]);
        assert_eq!(none[0].reason, "FieldValueRequired");
        let mut two = sleep(1);
        two.exec = Some(ExecAction {
            command: vec!["true".into()],
        });
        let causes = two.validate("h", 30);
        assert_eq!(fields(&causes), ["h.sleep"]);
        assert!(causes[0].message.contains("more than 1 handler"));
    }

    #[test]
    fn actions_are_checked_with_their_paths() {
        let empty_exec = LifecycleHandler {
            exec: Some(ExecAction::default()),
            ..Default::default()
        };
        assert_eq!(fields(&empty_exec.validate("h", 30)), ["h.exec.command"]);
        let bad_port = LifecycleHandler {
            http_get: Some(HttpGetAction {
                port: IntOrString::Int(70000),
                scheme: "FTP".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            fields(&bad_port.validate("h", 30)),
            ["h.httpGet.port", "h.httpGet.scheme"]
        );
        assert!(sleep(0).validate("h", 30).is_empty());
        assert!(sleep(30).validate("h", 30).is_empty());
        assert_eq!(fields(&sleep(-1).validate("h", 30)), ["h.sleep.seconds"]);
        let too_long = sleep(31).validate("h", 30);
        assert!(too_long[0]
            .message
            .contains("terminationGracePeriodSeconds (30)"));
    }

    #[test]
    fn restart_policy_only_makes_init_containers_sidecars() {
        let mut spec = PodSpec::default();
        let mut sidecar = container("proxy");
        sidecar.restart_policy = "Always".into();
        sidecar.lifecycle = Some(Lifecycle {
            pre_stop: Some(sleep(1)),
            ..Default::default()
        });
        let mut once = container("setup");
        once.restart_policy = "OnFailure".into();
        let mut hooked_init = container("migrate");
        hooked_init.lifecycle = sidecar.lifecycle.clone();
        let mut app = container("web");
        app.restart_policy = "Always".into();
        spec.init_containers = vec![sidecar, once, hooked_init];
        spec.containers = vec![app];
        let causes = validate_pod(&spec, "spec");
        assert_eq!(
            fields(&causes),
            [
                "spec.initContainers[1].restartPolicy",
                "spec.initContainers[2].lifecycle",
                "spec.containers[0].restartPolicy"
            ]
        );
        assert_eq!(causes[0].reason, "FieldValueNotSupported");
        assert_eq!(causes[2].reason, "FieldValueForbidden");
    }

    #[test]
    fn sleep_is_bounded_by_the_pods_grace_period() {
        let mut spec = PodSpec::default();
        let mut app = container("web");
        app.lifecycle = Some(Lifecycle {
            pre_stop: Some(sleep(10)),
            ..Default::default()
        });
        spec.containers = vec![app];
        assert!(validate_pod(&spec, "spec").is_empty());
        spec.termination_grace_period_seconds = Some(5);
        assert_eq!(
            fields(&validate_pod(&spec, "spec")),
            ["spec.containers[0].lifecycle.preStop.sleep.seconds"]
        );
    }

    #[test]
    fn ready_counts_and_init_progress_include_started_sidecars() {
        let mut pod = Pod::default();
        let mut sidecar = container("proxy");
        sidecar.restart_policy = "Always".into();
        pod.spec.init_containers = vec![container("setup"), sidecar];
        pod.spec.containers = vec![container("web")];
        let status = |name: &str, started: bool, ready: bool| ContainerStatus {
            name: name.into(),
            started: Some(started),
            ready,
            ..Default::default()
        };
        pod.status.init_container_statuses =
            vec![status("setup", false, false), status("proxy", true, true)];
        pod.status.container_statuses = vec![status("web", true, false)];
        assert_eq!(pod.ready_containers(), (1, 2));
        let [setup, proxy] = &pod.status.init_container_statuses[..] else {
            unreachable!()
        };
        assert!(!pod.init_container_done(setup));
        assert!(pod.init_container_done(proxy));
        pod.status.container_statuses[0].ready = true;
        assert_eq!(pod.ready_containers(), (2, 2));
    }

    #[test]
    fn http_defaults_fill_path_and_scheme() {
        let mut lifecycle = Lifecycle {
            post_start: Some(LifecycleHandler {
                http_get: Some(HttpGetAction {
                    port: IntOrString::String("http".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        lifecycle.apply_defaults();
        let get = lifecycle.post_start.unwrap().http_get.unwrap();
        assert_eq!((get.path.as_str(), get.scheme.as_str()), ("/", "HTTP"));
    }
}
