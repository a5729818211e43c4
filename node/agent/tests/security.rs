//! Pod and container securityContext on real containers through a real cluster and node
//! agent: run-as user, no_new_privs, read-only root, seccomp, runAsNonRoot refused, and
//! hostPath volumes only on a node started with `--allow-host-path`.

mod common;

use std::time::Duration;

use bus_schemas::api::ListOptions;
use bus_schemas::kinds::{Event, Pod};
use common::{allow_privileged_pods, pod, push_busybox, Node};
use shoal_api::local::{eventually, LocalCluster};
use shoal_bus::ApiClient;

const IMAGE: &str = "shoal/busybox:1.35";
const WAIT: Duration = Duration::from_secs(60);

async fn get(api: &ApiClient, name: &str) -> Option<Pod> {
    api.get::<Pod>("default", name).await.ok()
}

async fn failed_event(api: &ApiClient, pod: &str, text: &str) -> bool {
    let options = ListOptions {
        namespace: "default".into(),
        field_selector: format!("involvedObject.name={pod}"),
        ..Default::default()
    };
    api.list::<Event>(&options)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .iter()
        .any(|e| e.reason == "Failed" && e.type_ == "Warning" && e.message.contains(text))
}

/// The waiting (reason, message) of the pod's first container, once it has one.
async fn waiting(api: &ApiClient, name: &str) -> Option<(String, String)> {
    let p = get(api, name).await?;
    let w = p.status.container_statuses.first()?.state.waiting.clone()?;
    Some((w.reason, w.message))
}

/// Each container's (exit code, termination message), once all have terminated.
async fn terminated(api: &ApiClient, name: &str) -> Option<Vec<(String, i32, String)>> {
    let p = get(api, name).await?;
    if p.status.container_statuses.len() != p.spec.containers.len() {
        return None;
    }
    p.status
        .container_statuses
        .iter()
        .map(|c| {
            let t = c.state.terminated.as_ref()?;
            Some((c.name.clone(), t.exit_code, t.message.clone()))
        })
        .collect()
}

#[actix::test]
async fn security_context_reaches_the_containers_and_run_as_non_root_refuses_root() {
    let cluster = LocalCluster::start().await.unwrap();
    push_busybox(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let mut node = Node::new(dir.path());
    node.start(&cluster).await;
    let api = cluster.api();
    // An Unconfined container is past the baseline pod security level.
    allow_privileged_pods(&api).await;

    // Each container reports what it is held to in its termination message.
    let report = "echo \"uid=$(id -u) gid=$(id -g) $(grep NoNewPrivs /proc/self/status) $(grep ^Seccomp: /proc/self/status)\" > /dev/termination-log; \
                  touch /x 2>> /dev/termination-log; touch /scratch/ok && echo scratch-ok >> /dev/termination-log";
    api.create(&pod(&node.name, "held", serde_json::json!({
        "restartPolicy": "Never",
        "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "runAsNonRoot": true},
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "containers": [
            {"name": "restricted", "image": IMAGE, "command": ["sh", "-c", report],
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                    "seccompProfile": {"type": "RuntimeDefault"}}},
            {"name": "confined", "image": IMAGE, "securityContext": {"runAsUser": 0, "runAsNonRoot": false},
                "command": ["busybox", "unshare", "-U", "true"]},
            {"name": "unconfined", "image": IMAGE, "securityContext": {"runAsUser": 0, "runAsNonRoot": false,
                    "seccompProfile": {"type": "Unconfined"}},
                "command": ["busybox", "unshare", "-U", "true"]}
        ]
    })))
    .await
    .unwrap();

    eventually("every container of the held pod ends", WAIT, || async {
        terminated(&api, "held").await.is_some()
    })
    .await;
    // Terminated containers stay so: read them once more.
    let done = terminated(&api, "held").await.unwrap();
    let of = |name: &str| done.iter().find(|(n, ..)| n == name).unwrap().clone();
    let (_, code, message) = of("restricted");
    assert_eq!(code, 0, "{message}");
    for expected in [
        "uid=1000 gid=3000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
        "Read-only file system",
        "scratch-ok",
    ] {
        assert!(message.contains(expected), "{expected:?} in {message:?}");
    }
    assert_eq!(of("confined").1, 1, "RuntimeDefault refuses unshare");
    assert_eq!(of("unconfined").1, 0, "Unconfined allows it");

    // The busybox image runs as root: runAsNonRoot without a user is refused.
    api.create(&pod(
        &node.name,
        "rooted",
        serde_json::json!({
            "securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "app", "image": IMAGE, "command": ["sleep", "1000"]}]
        }),
    ))
    .await
    .unwrap();
    eventually(
        "the root pod waits in CreateContainerConfigError",
        WAIT,
        || async {
            waiting(&api, "rooted")
                .await
                .is_some_and(|(r, _)| r == "CreateContainerConfigError")
        },
    )
    .await;
    // Retried on every pass, the refusal stays what it was.
    let (_, message) = waiting(&api, "rooted").await.unwrap();
    assert_eq!(
        message,
        "container has runAsNonRoot and image will run as root"
    );
    eventually("a Failed event says why", WAIT, || {
        failed_event(&api, "rooted", "runAsNonRoot and image will run as root")
    })
    .await;
    node.stop().await;
}

#[actix::test]
async fn a_host_path_pod_runs_only_on_a_node_allowed_its_directory() {
    let cluster = LocalCluster::start().await.unwrap();
    push_busybox(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("greeting"), "from the host\n").unwrap();
    let mut closed = Node::new(&dir.path().join("closed"));
    closed.start(&cluster).await;
    let mut open = Node::new(&dir.path().join("open"));
    open.allow_host_path = vec![dir.path().to_path_buf()];
    open.start(&cluster).await;
    let api = cluster.api();
    // Admission would refuse hostPath at the baseline level: this is the node's own gate.
    allow_privileged_pods(&api).await;
    let spec = serde_json::json!({
        "restartPolicy": "Never",
        "volumes": [{"name": "host-data", "hostPath": {"path": data.to_str().unwrap()}}],
        "containers": [{"name": "reader", "image": IMAGE,
            "command": ["sh", "-c", "cat /data/greeting > /dev/termination-log"],
            "volumeMounts": [{"name": "host-data", "mountPath": "/data"}]}]
    });

    api.create(&pod(&closed.name, "refused", spec.clone()))
        .await
        .unwrap();
    eventually(
        "the pod on the closed node waits in CreateContainerConfigError",
        WAIT,
        || async {
            waiting(&api, "refused")
                .await
                .is_some_and(|(r, _)| r == "CreateContainerConfigError")
        },
    )
    .await;
    // Retried on every pass, the refusal stays what it was.
    let (_, message) = waiting(&api, "refused").await.unwrap();
    assert!(message.contains("volume \"host-data\""), "{message}");
    assert!(message.contains("--allow-host-path"), "{message}");
    eventually("a Failed event names the flag", WAIT, || {
        failed_event(&api, "refused", "--allow-host-path")
    })
    .await;
    assert!(get(&api, "refused")
        .await
        .unwrap()
        .status
        .container_statuses[0]
        .state
        .running
        .is_none());

    api.create(&pod(&open.name, "allowed", spec)).await.unwrap();
    eventually("the pod on the open node runs to its end", WAIT, || async {
        terminated(&api, "allowed").await.is_some()
    })
    .await;
    // Terminated containers stay so: read them once more.
    let (_, code, message) = terminated(&api, "allowed").await.unwrap().remove(0);
    assert_eq!((code, message.as_str()), (0, "from the host\n"));
    closed.stop().await;
    open.stop().await;
}
