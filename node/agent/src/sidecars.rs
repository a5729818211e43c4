//! Native sidecars (init containers with `restartPolicy: Always`), as pure rules over what the
//! worker observed: they start in order with the init containers and open the way to the next
//! one once started (startup probe passed), keep running and are restarted whatever the pod's
//! restartPolicy, count towards readiness, and are stopped after the main containers, in
//! reverse order, once those have finished for good (a Job's pod).

use bus_schemas::kinds::container::Container;
use bus_schemas::kinds::Pod;

use crate::status::{Observed, ObservedState};

/// The restart policy that governs one container.
pub fn restart_policy<'a>(pod: &'a Pod, container: &Container, init: bool) -> &'a str {
    if container.is_sidecar() {
        "Always"
    } else if init && pod.spec.restart_policy == "Always" {
        "OnFailure"
    } else {
        &pod.spec.restart_policy
    }
}

/// Initialized: every run-to-completion init container succeeded and every sidecar started.
pub fn initialized(init: &[Observed]) -> bool {
    init.iter().all(|o| {
        if o.sidecar {
            o.started
        } else {
            matches!(&o.state, ObservedState::Terminated(t) if t.exit_code == 0)
        }
    })
}

/// Sidecars are containers of the pod: Kubernetes counts their readiness in the pod's.
pub fn sidecars_ready(init: &[Observed]) -> bool {
    init.iter().filter(|o| o.sidecar).all(|o| o.ready)
}

/// The main containers have finished and will not run again, so the sidecars have nothing
/// left to serve: every one exited under `Never`, or exited successfully under `OnFailure`.
pub fn main_containers_done(restart_policy: &str, app: &[Observed]) -> bool {
    let exit_code = |o: &Observed| match &o.state {
        ObservedState::Terminated(t) => Some(t.exit_code),
        _ => None,
    };
    !app.is_empty()
        && match restart_policy {
            "Never" => app.iter().all(|o| exit_code(o).is_some()),
            "OnFailure" => app.iter().all(|o| exit_code(o) == Some(0)),
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Terminated;

    fn exited(code: i32, sidecar: bool) -> Observed {
        Observed {
            sidecar,
            state: ObservedState::Terminated(Terminated {
                exit_code: code,
                signal: 0,
                reason: String::new(),
                message: String::new(),
                started_at: None,
                finished_at: None,
                container_id: String::new(),
            }),
            ..Default::default()
        }
    }

    fn running_sidecar(started: bool, ready: bool) -> Observed {
        Observed {
            sidecar: true,
            started,
            ready,
            state: ObservedState::Running {
                started_at: chrono::Utc::now(),
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_started_sidecar_initializes_and_its_readiness_counts() {
        let init = [exited(0, false), running_sidecar(true, false)];
        assert!(initialized(&init));
        assert!(!sidecars_ready(&init));
        assert!(!initialized(&[running_sidecar(false, false)]));
        assert!(!initialized(&[exited(1, false)]));
        // A sidecar stopped at the end (SIGTERM, 143) does not un-initialize the pod.
        let mut stopped = exited(143, true);
        stopped.started = true;
        assert!(initialized(&[stopped]));
    }

    #[test]
    fn only_finished_main_containers_release_the_sidecars() {
        let done_ok = [exited(0, false), exited(0, false)];
        let one_failed = [exited(0, false), exited(2, false)];
        assert!(main_containers_done("Never", &one_failed));
        assert!(main_containers_done("OnFailure", &done_ok));
        assert!(!main_containers_done("OnFailure", &one_failed));
        assert!(!main_containers_done("Always", &done_ok));
        assert!(!main_containers_done("Never", &[]));
    }

    #[test]
    fn sidecars_always_restart() {
        let mut pod = Pod::default();
        pod.spec.restart_policy = "Never".into();
        let sidecar = Container {
            restart_policy: "Always".into(),
            ..Default::default()
        };
        assert_eq!(restart_policy(&pod, &sidecar, true), "Always");
        assert_eq!(restart_policy(&pod, &Container::default(), true), "Never");
        pod.spec.restart_policy = "Always".into();
        assert_eq!(
            restart_policy(&pod, &Container::default(), true),
            "OnFailure"
        );
        assert_eq!(restart_policy(&pod, &Container::default(), false), "Always");
    }
}
