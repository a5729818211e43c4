//! `shoal describe pod`'s container sections, laid out as kubectl's: each container's image,
//! its state and last state (a terminated one with its reason, message and exit code: how a
//! container reports why it stopped), readiness and restarts.

use std::fmt::Write;

use bus_schemas::kinds::pod::{ContainerState, ContainerStatus};
use bus_schemas::kinds::Pod;
use bus_schemas::meta::Time;

/// Label column width of the container lines (kubectl's tabwriter pads to the longest).
const LABEL: usize = 16;

/// The `Init Containers:` (when there are any) and `Containers:` sections of `pod`.
pub fn containers(pod: &Pod) -> String {
    let mut out = String::new();
    let init: Vec<_> = pod
        .spec
        .init_containers
        .iter()
        .map(|c| (c.name.as_str(), c.image.as_str()))
        .collect();
    if !init.is_empty() {
        section(
            &mut out,
            "Init Containers",
            &init,
            &pod.status.init_container_statuses,
        );
    }
    let apps: Vec<_> = pod
        .spec
        .containers
        .iter()
        .map(|c| (c.name.as_str(), c.image.as_str()))
        .collect();
    section(
        &mut out,
        "Containers",
        &apps,
        &pod.status.container_statuses,
    );
    out
}

fn section(
    out: &mut String,
    title: &str,
    containers: &[(&str, &str)],
    statuses: &[ContainerStatus],
) {
    let _ = writeln!(out, "{title}:");
    for (name, image) in containers {
        let _ = writeln!(out, "  {name}:");
        let status = statuses.iter().find(|s| s.name == *name);
        if let Some(id) = status
            .map(|s| s.container_id.as_str())
            .filter(|id| !id.is_empty())
        {
            line(out, 4, "Container ID", id);
        }
        line(out, 4, "Image", image);
        let Some(status) = status else {
            line(out, 4, "State", "Waiting");
            continue;
        };
        state(out, "State", &status.state);
        if status.last_state != ContainerState::default() {
            state(out, "Last State", &status.last_state);
        }
        line(out, 4, "Ready", if status.ready { "True" } else { "False" });
        line(out, 4, "Restart Count", &status.restart_count.to_string());
    }
}

fn state(out: &mut String, label: &str, state: &ContainerState) {
    if let Some(running) = &state.running {
        line(out, 4, label, "Running");
        if let Some(at) = &running.started_at {
            line(out, 6, "Started", &time(at));
        }
    } else if let Some(terminated) = &state.terminated {
        line(out, 4, label, "Terminated");
        if !terminated.reason.is_empty() {
            line(out, 6, "Reason", &terminated.reason);
        }
        if !terminated.message.is_empty() {
            line(out, 6, "Message", &terminated.message);
        }
        line(out, 6, "Exit Code", &terminated.exit_code.to_string());
        if terminated.signal > 0 {
            line(out, 6, "Signal", &terminated.signal.to_string());
        }
        if let Some(at) = &terminated.started_at {
            line(out, 6, "Started", &time(at));
        }
        if let Some(at) = &terminated.finished_at {
            line(out, 6, "Finished", &time(at));
        }
    } else {
        line(out, 4, label, "Waiting");
        if let Some(waiting) = &state.waiting {
            if !waiting.reason.is_empty() {
                line(out, 6, "Reason", &waiting.reason);
            }
            if !waiting.message.is_empty() {
                line(out, 6, "Message", &waiting.message);
            }
        }
    }
}

/// kubectl's time format in describe (RFC 1123 with a numeric zone).
fn time(at: &Time) -> String {
    at.format("%a, %d %b %Y %H:%M:%S %z").to_string()
}

/// One `Label:  value` line; a value of several lines (a termination message) continues
/// under its first line rather than at the margin, so the next label still stands out.
fn line(out: &mut String, indent: usize, label: &str, value: &str) {
    let width = LABEL.saturating_sub(indent - 4);
    let lead = " ".repeat(indent);
    let mut lines = value.lines();
    let first = lines.next().unwrap_or("");
    let _ = writeln!(out, "{lead}{:<width$}{first}", format!("{label}:"));
    for more in lines {
        let _ = writeln!(out, "{lead}{:<width$}{more}", "");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [{"name": "setup", "image": "busybox"}],
                "containers": [
                    {"name": "app", "image": "busybox"},
                    {"name": "new", "image": "busybox"}
                ]
            },
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_restarted_container_shows_its_last_termination_message() {
        let shown = containers(&pod(serde_json::json!({
            "initContainerStatuses": [{"name": "setup", "ready": true,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
            "containerStatuses": [{
                "name": "app", "containerID": "shoal://abc", "ready": true, "restartCount": 1,
                "state": {"running": {"startedAt": "2026-01-02T03:04:05Z"}},
                "lastState": {"terminated": {
                    "exitCode": 3, "reason": "Error", "message": "disk full\nat /data",
                    "startedAt": "2026-01-02T03:00:00Z", "finishedAt": "2026-01-02T03:04:00Z"
                }}
            }]
        })));
        let expected = "\
Init Containers:
  setup:
    Image:          busybox
    State:          Terminated
      Reason:       Completed
      Exit Code:    0
    Ready:          True
    Restart Count:  0
Containers:
  app:
    Container ID:   shoal://abc
    Image:          busybox
    State:          Running
      Started:      Fri, 02 Jan 2026 03:04:05 +0000
    Last State:     Terminated
      Reason:       Error
      Message:      disk full
                    at /data
      Exit Code:    3
      Started:      Fri, 02 Jan 2026 03:00:00 +0000
      Finished:     Fri, 02 Jan 2026 03:04:00 +0000
    Ready:          True
    Restart Count:  1
  new:
    Image:          busybox
    State:          Waiting
";
        assert_eq!(shown, expected, "\n{shown}");
    }

    #[test]
    fn a_waiting_container_says_why() {
        let shown = containers(&pod(serde_json::json!({
            "containerStatuses": [{"name": "app", "state": {"waiting": {
                "reason": "CreateContainerConfigError",
                "message": "configmap \"app-config\" not found"
            }}}]
        })));
        assert!(
            shown.contains(
                "    State:          Waiting\n      Reason:       CreateContainerConfigError\n      Message:      configmap \"app-config\" not found\n"
            ),
            "{shown}"
        );
        assert!(!shown.contains("Last State"), "{shown}");
    }
}
