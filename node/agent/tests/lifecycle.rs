//! Container lifecycle on real containers and a real cluster: preStop before SIGTERM inside
//! the grace period, a failing postStart, termination messages, native sidecars, and the
//! API refusing bad lifecycle fields. Containers write what happened to them, in order, into
//! a host directory, which outlives them.

mod common;

use std::path::Path;
use std::time::Duration;

use bus_schemas::api::ListOptions;
use bus_schemas::kinds::{Event, Pod};
use common::{
    allow_privileged_pods, container, delete_pod, one_node, pod, push_busybox, wait_pod, Node,
};
use shoal_api::local::LocalCluster;
use shoal_bus::ApiClient;

const IMAGE: &str = "shoal/busybox:1.35";

fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

async fn wait_gone(api: &ApiClient, name: &str, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while api.get::<Pod>("default", name).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} was not removed within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_event(api: &ApiClient, pod: &str, reason: &str) -> Event {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let options = ListOptions {
            namespace: "default".into(),
            ..Default::default()
        };
        let events = api.list::<Event>(&options).await.unwrap();
        if let Some(event) = events
            .items
            .into_iter()
            .find(|e| e.involved_object.name == pod && e.reason == reason)
        {
            return event;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {reason} event about {pod}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn host_dir(dir: &Path, name: &str) -> std::path::PathBuf {
    let out = dir.join(name);
    std::fs::create_dir_all(&out).unwrap();
    out
}

/// A cluster with the busybox image and one node whose pods may mount the returned
/// directory (privileged pods allowed), where containers write what happened to them.
async fn node_with_host_dir() -> (LocalCluster, tempfile::TempDir, Node) {
    let cluster = LocalCluster::start().await.unwrap();
    push_busybox(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let mut node = Node::new(dir.path());
    node.allow_host_path = vec![dir.path().to_path_buf()];
    node.start(&cluster).await;
    allow_privileged_pods(&cluster.api()).await;
    (cluster, dir, node)
}

#[actix::test]
async fn pre_stop_runs_before_sigterm_and_inside_the_grace_period() {
    let (cluster, dir, mut node) = node_with_host_dir().await;
    let api = cluster.api();
    let out = host_dir(dir.path(), "out");
    let order = out.join("order");

    // The container marks its start and its SIGTERM; the hook marks itself on both ends.
    let worker = |pre_stop: serde_json::Value, grace: i64| {
        serde_json::json!({
            "terminationGracePeriodSeconds": grace,
            "volumes": [{"name": "out", "hostPath": {"path": out.to_str().unwrap()}}],
            "containers": [{"name": "worker", "image": IMAGE,
                "command": ["sh", "-c", "trap 'echo TERM >> /out/order; exit 0' TERM; echo started >> /out/order; while true; do sleep 0.1; done"],
                "volumeMounts": [{"name": "out", "mountPath": "/out"}],
                "lifecycle": {"preStop": pre_stop}}]
        })
    };
    let hook = serde_json::json!({"exec": {"command": ["sh", "-c", "echo preStop >> /out/order; sleep 1; echo preStop-done >> /out/order"]}});
    api.create(&pod(&node.name, "graceful", worker(hook, 20)))
        .await
        .unwrap();
    wait_pod(&api, "graceful", "Running", |p| {
        p.status.phase == "Running" && lines(&order) == ["started"]
    })
    .await;
    delete_pod(&api, "graceful", None).await;
    wait_gone(&api, "graceful", Duration::from_secs(30)).await;
    // The TERM marker proves the trap ran: no SIGKILL came first.
    assert_eq!(
        lines(&order),
        ["started", "preStop", "preStop-done", "TERM"]
    );

    // A hook longer than the grace period is cut off there; SIGTERM still follows (with
    // Kubernetes' two seconds' floor), the pod goes well before the hook's 60 s, and the
    // failure is an Event.
    std::fs::remove_file(&order).unwrap();
    let endless = serde_json::json!({"exec": {"command": ["sh", "-c", "echo preStop >> /out/order; sleep 60"]}});
    api.create(&pod(&node.name, "impatient", worker(endless, 2)))
        .await
        .unwrap();
    wait_pod(&api, "impatient", "Running", |p| {
        p.status.phase == "Running" && lines(&order) == ["started"]
    })
    .await;
    delete_pod(&api, "impatient", None).await;
    wait_gone(&api, "impatient", Duration::from_secs(30)).await;
    assert_eq!(lines(&order), ["started", "preStop", "TERM"]);
    let event = wait_event(&api, "impatient", "FailedPreStopHook").await;
    assert_eq!(event.type_, "Warning");
    assert!(event.message.contains("\"worker\""), "{}", event.message);

    node.stop().await;
}

async fn wait_removed(dir: &Path, what: &str, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while dir.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: its sandbox {} was still there after {limit:?}",
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A second delete with a shorter grace period, or a forced one that removes the pod, cuts a
/// termination in progress short, as kubectl users expect of `--grace-period=0 --force`:
/// the containers are killed, not left running for the rest of the grace they started with.
#[actix::test]
async fn a_shorter_second_delete_cuts_a_termination_in_progress_short() {
    let (cluster, dir, mut node) = node_with_host_dir().await;
    let api = cluster.api();
    let out = host_dir(dir.path(), "out");

    // Both take 120 s to stop: one ignores SIGTERM, the other's preStop hook never ends.
    let stubborn = |name: &str, pre_stop: serde_json::Value| {
        let log = format!("/out/{name}");
        pod(
            &node.name,
            name,
            serde_json::json!({
                "terminationGracePeriodSeconds": 120,
                "volumes": [{"name": "out", "hostPath": {"path": out.to_str().unwrap()}}],
                "containers": [{"name": "app", "image": IMAGE,
                    "command": ["sh", "-c", format!("trap 'echo TERM >> {log}' TERM; echo started >> {log}; while true; do sleep 0.1; done")],
                    "volumeMounts": [{"name": "out", "mountPath": "/out"}],
                    "lifecycle": pre_stop}]
            }),
        )
    };
    let hanging_hook = serde_json::json!({"preStop": {"exec": {"command":
        ["sh", "-c", "echo preStop >> /out/hooked; sleep 600"]}}});
    api.create(&stubborn("deaf", serde_json::Value::Null))
        .await
        .unwrap();
    api.create(&stubborn("hooked", hanging_hook)).await.unwrap();
    let mut sandboxes = Vec::new();
    for name in ["deaf", "hooked"] {
        let running = wait_pod(&api, name, "Running", |p| {
            p.status.phase == "Running" && lines(&out.join(name)) == ["started"]
        })
        .await;
        let sandbox = node.state.join("sandboxes").join(&running.metadata.uid);
        assert!(sandbox.is_dir(), "no sandbox at {}", sandbox.display());
        sandboxes.push(sandbox);
        delete_pod(&api, name, None).await;
    }
    wait_pod(&api, "deaf", "sent SIGTERM", |_| {
        lines(&out.join("deaf")) == ["started", "TERM"]
    })
    .await;
    wait_pod(&api, "hooked", "in its preStop hook", |_| {
        lines(&out.join("hooked")) == ["started", "preStop"]
    })
    .await;

    // Two seconds instead of 120: the node kills the container then, confirms, and the pod
    // goes.
    delete_pod(&api, "deaf", Some(2)).await;
    // Forced: the pod goes at once, and its node kills the container without waiting for
    // the hook.
    delete_pod(&api, "hooked", Some(0)).await;
    wait_removed(&sandboxes[1], "the forced pod", Duration::from_secs(20)).await;
    wait_removed(
        &sandboxes[0],
        "the pod shortened to 2 s",
        Duration::from_secs(20),
    )
    .await;
    wait_gone(&api, "deaf", Duration::from_secs(20)).await;
    assert!(api.get::<Pod>("default", "hooked").await.is_err());

    node.stop().await;
}

#[actix::test]
async fn a_failing_post_start_kills_and_restarts_the_container() {
    let (cluster, _dir, mut node) = one_node().await;
    let api = cluster.api();

    let with_hook = |command: &str| {
        serde_json::json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": IMAGE, "command": ["sleep", "1000"],
                "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", command]}}}}]
        })
    };
    api.create(&pod(&node.name, "hooked", with_hook("test -x /bin/sh")))
        .await
        .unwrap();
    api.create(&pod(
        &node.name,
        "broken",
        with_hook("echo no config; exit 7"),
    ))
    .await
    .unwrap();

    let broken = wait_pod(&api, "broken", "restarted after its hook failed", |p| {
        p.status
            .container_statuses
            .first()
            .is_some_and(|c| c.restart_count >= 1 && c.last_state.terminated.is_some())
    })
    .await;
    let app = container(&broken, "app");
    assert!(!app.ready);
    let event = wait_event(&api, "broken", "FailedPostStartHook").await;
    assert!(
        event.message.contains("exited with 7") && event.message.contains("no config"),
        "{}",
        event.message
    );

    let hooked = wait_pod(&api, "hooked", "Running", |p| p.is_ready()).await;
    let app = container(&hooked, "app");
    assert_eq!(app.restart_count, 0);
    assert!(app.state.running.is_some());

    node.stop().await;
}

#[actix::test]
async fn termination_messages_come_from_the_file_or_the_log() {
    let (cluster, _dir, mut node) = one_node().await;
    let api = cluster.api();

    api.create(&pod(&node.name, "reporter", serde_json::json!({
        "restartPolicy": "Never",
        "containers": [
            {"name": "file", "image": IMAGE,
                "command": ["sh", "-c", "echo 'processed 42 items' > /dev/termination-log"]},
            {"name": "custom", "image": IMAGE, "terminationMessagePath": "/tmp/outcome",
                "command": ["sh", "-c", "echo 'custom path' > /tmp/outcome; exit 2"]},
            {"name": "logs", "image": IMAGE, "terminationMessagePolicy": "FallbackToLogsOnError",
                "command": ["sh", "-c", "echo starting; echo 'fatal: disk full' >&2; exit 3"]},
            {"name": "quiet", "image": IMAGE, "terminationMessagePolicy": "FallbackToLogsOnError",
                "command": ["sh", "-c", "echo all good"]}
        ]
    })))
    .await
    .unwrap();
    let done = wait_pod(&api, "reporter", "finished", |p| p.is_terminal()).await;
    assert_eq!(done.status.phase, "Failed");
    let message = |name: &str| {
        container(&done, name)
            .state
            .terminated
            .as_ref()
            .map(|t| t.message.clone())
            .unwrap_or_default()
    };
    assert_eq!(message("file"), "processed 42 items\n");
    assert_eq!(message("custom"), "custom path\n");
    assert_eq!(message("logs"), "starting\nfatal: disk full\n");
    // The log is the fallback only for a failure.
    assert_eq!(message("quiet"), "");

    node.stop().await;
}

#[actix::test]
async fn a_sidecar_runs_beside_the_main_container_and_stops_after_it() {
    let (cluster, dir, mut node) = node_with_host_dir().await;
    let api = cluster.api();
    let out = host_dir(dir.path(), "out");
    let order = out.join("order");
    let mount = serde_json::json!([{"name": "out", "mountPath": "/out"}]);

    // A Job-like pod: the sidecar crashes once (and is restarted although the pod's policy
    // is Never), the init container after it checks that it runs, the main container waits
    // for the test's go.
    api.create(&pod(&node.name, "batch", serde_json::json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "volumes": [{"name": "out", "hostPath": {"path": out.to_str().unwrap()}}],
        "initContainers": [
            {"name": "setup", "image": IMAGE, "volumeMounts": mount,
                "command": ["sh", "-c", "echo setup >> /out/order"]},
            {"name": "proxy", "image": IMAGE, "volumeMounts": mount, "restartPolicy": "Always",
                "command": ["sh", "-c", "if [ ! -f /out/crashed ]; then touch /out/crashed; exit 1; fi; trap 'echo proxy-term >> /out/order; exit 0' TERM; echo proxy-start >> /out/order; while true; do sleep 0.1; done"],
                "startupProbe": {"exec": {"command": ["grep", "-q", "proxy-start", "/out/order"]}, "periodSeconds": 1},
                "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}},
            {"name": "after", "image": IMAGE, "volumeMounts": mount,
                "command": ["sh", "-c", "grep -q proxy-start /out/order && echo after >> /out/order"]}
        ],
        "containers": [{"name": "main", "image": IMAGE, "volumeMounts": mount,
            "command": ["sh", "-c", "echo main >> /out/order; while [ ! -f /out/go ]; do sleep 0.1; done; echo main-done >> /out/order"]}]
    })))
    .await
    .unwrap();

    let running = wait_pod(&api, "batch", "Ready with its sidecar", |p| p.is_ready()).await;
    let proxy = running
        .status
        .init_container_statuses
        .iter()
        .find(|c| c.name == "proxy")
        .expect("sidecar status");
    assert!(proxy.state.running.is_some(), "{proxy:#?}");
    assert_eq!((proxy.started, proxy.ready), (Some(true), true));
    assert_eq!(
        proxy.restart_count, 1,
        "restarted despite restartPolicy Never"
    );
    assert_eq!(running.status.phase, "Running");
    assert_eq!(lines(&order), ["setup", "proxy-start", "after", "main"]);

    std::fs::write(out.join("go"), b"").unwrap();
    let done = wait_pod(&api, "batch", "finished", |p| p.is_terminal()).await;
    assert_eq!(done.status.phase, "Succeeded", "{:#?}", done.status);
    assert_eq!(
        lines(&order),
        [
            "setup",
            "proxy-start",
            "after",
            "main",
            "main-done",
            "proxy-term"
        ]
    );
    let proxy = done
        .status
        .init_container_statuses
        .iter()
        .find(|c| c.name == "proxy")
        .unwrap();
    assert!(proxy.state.terminated.is_some(), "{proxy:#?}");

    node.stop().await;
}

#[actix::test]
async fn bad_lifecycle_fields_are_refused_with_their_paths() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let refused = |spec: serde_json::Value| {
        let api = api.clone();
        async move {
            match api.create(&pod("n1", "bad", spec)).await {
                Err(shoal_bus::ApiError::Status(s)) => s
                    .causes()
                    .iter()
                    .map(|c| c.field.clone())
                    .collect::<Vec<_>>(),
                other => panic!("expected a refusal, got {other:?}"),
            }
        }
    };
    let fields = refused(serde_json::json!({
        "terminationGracePeriodSeconds": 10,
        "initContainers": [
            {"name": "once", "image": IMAGE, "restartPolicy": "OnFailure"},
            {"name": "hooked", "image": IMAGE, "lifecycle": {"preStop": {"sleep": {"seconds": 1}}}}
        ],
        "containers": [{"name": "app", "image": IMAGE, "restartPolicy": "Always",
            "lifecycle": {
                "postStart": {"exec": {"command": ["true"]}, "sleep": {"seconds": 1}},
                "preStop": {"sleep": {"seconds": 11}}
            }}]
    }))
    .await;
    assert_eq!(
        fields,
        [
            "spec.initContainers[0].restartPolicy",
            "spec.initContainers[1].lifecycle",
            "spec.containers[0].restartPolicy",
            "spec.containers[0].lifecycle.postStart.sleep",
            "spec.containers[0].lifecycle.preStop.sleep.seconds",
        ]
    );
    let fields = refused(serde_json::json!({
        "containers": [{"name": "app", "image": IMAGE,
            "lifecycle": {"preStop": {"httpGet": {"port": 0}}, "postStart": {}}}]
    }))
    .await;
    assert_eq!(
        fields,
        [
            "spec.containers[0].lifecycle.postStart",
            "spec.containers[0].lifecycle.preStop.httpGet.port",
        ]
    );
    // Nothing was written.
    assert!(api.get::<Pod>("default", "bad").await.is_err());
}
