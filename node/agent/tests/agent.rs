//! The node agent against real containers and a real cluster (nats-server + API actors).
//! Pods are pinned with spec.nodeName: no scheduler is involved here.

mod common;

use std::time::Duration;

use bus_schemas::kinds::Pod;
use common::{container, delete_pod, one_node, pod, push_busybox, wait_pod, Node};
use shoal_node::LinuxRuntime;

#[actix::test]
async fn pods_run_report_status_restart_and_terminate() {
    let (cluster, _dir, mut node) = one_node().await;
    let api = cluster.api();
    let n = node.name.clone();

    // Init containers run to completion, in order, before the app container starts.
    api.create(&pod(&n, "ordered", serde_json::json!({
        "restartPolicy": "Never",
        "volumes": [{"name": "shared", "emptyDir": {}}],
        "initContainers": [
            {"name": "first", "image": "shoal/busybox:1.35", "command": ["sh", "-c", "echo one > /work/log"], "volumeMounts": [{"name": "shared", "mountPath": "/work"}]},
            {"name": "second", "image": "shoal/busybox:1.35", "command": ["sh", "-c", "grep -q one /work/log && echo two >> /work/log"], "volumeMounts": [{"name": "shared", "mountPath": "/work"}]}
        ],
        "containers": [{"name": "main", "image": "shoal/busybox:1.35", "command": ["sh", "-c", "test \"$(cat /work/log | tr '\\n' ' ')\" = 'one two '"], "volumeMounts": [{"name": "shared", "mountPath": "/work"}]}]
    }))).await.unwrap();
    let done = wait_pod(&api, "ordered", "Succeeded", |p| {
        p.status.phase == "Succeeded" || p.status.phase == "Failed"
    })
    .await;
    assert_eq!(done.status.phase, "Succeeded", "{:#?}", done.status);
    assert!(done.status.init_container_statuses.iter().all(|c| c
        .state
        .terminated
        .as_ref()
        .is_some_and(|t| t.exit_code == 0)));

    // A long-running pod: Running, Ready, with its IP, host and start time.
    api.create(&pod(
        &n,
        "web",
        serde_json::json!({
            "containers": [{"name": "httpd", "image": "shoal/busybox:1.35",
                "command": ["httpd", "-f", "-p", "8080", "-h", "/var/www"],
                "ports": [{"name": "http", "containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1}}]
        }),
    ))
    .await
    .unwrap();
    let web = wait_pod(&api, "web", "Ready", |p| p.is_ready()).await;
    assert_eq!(web.status.phase, "Running");
    assert!(
        web.status
            .pod_ip
            .starts_with(node.cidr.rsplit_once('.').unwrap().0),
        "{}",
        web.status.pod_ip
    );
    assert!(web.status.start_time.is_some());
    assert!(container(&web, "httpd").ready);

    // A crashing container restarts with back-off, visible as CrashLoopBackOff.
    api.create(&pod(&n, "crasher", serde_json::json!({
        "containers": [{"name": "c", "image": "shoal/busybox:1.35", "command": ["sh", "-c", "exit 3"]}]
    }))).await.unwrap();
    let crashed = wait_pod(&api, "crasher", "restarted twice", |p| {
        p.status
            .container_statuses
            .first()
            .is_some_and(|c| c.restart_count >= 2)
    })
    .await;
    let c = container(&crashed, "c");
    assert_eq!(
        c.last_state.terminated.as_ref().map(|t| t.exit_code),
        Some(3)
    );
    wait_pod(&api, "crasher", "in CrashLoopBackOff", |p| {
        p.status
            .container_statuses
            .first()
            .and_then(|c| c.state.waiting.as_ref())
            .is_some_and(|w| w.reason == "CrashLoopBackOff")
    })
    .await;

    // A failing liveness probe kills and restarts the container.
    api.create(&pod(&n, "unhealthy", serde_json::json!({
        "containers": [{"name": "c", "image": "shoal/busybox:1.35", "command": ["sleep", "1000"],
            "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1}}]
    }))).await.unwrap();
    wait_pod(&api, "unhealthy", "restarted by its liveness probe", |p| {
        p.status
            .container_statuses
            .first()
            .is_some_and(|c| c.restart_count >= 1)
    })
    .await;

    // A missing image is a clear status, and the agent keeps working.
    api.create(&pod(
        &n,
        "noimage",
        serde_json::json!({
            "containers": [{"name": "c", "image": "shoal/does-not-exist:1"}]
        }),
    ))
    .await
    .unwrap();
    let missing = wait_pod(&api, "noimage", "ErrImagePull", |p| {
        p.status
            .container_statuses
            .first()
            .and_then(|c| c.state.waiting.as_ref())
            .is_some_and(|w| w.reason.contains("ImagePull"))
    })
    .await;
    let waiting = container(&missing, "c").state.waiting.clone().unwrap();
    assert!(
        waiting.message.contains("not in the cluster registry"),
        "{}",
        waiting.message
    );

    // Graceful deletion: the pod goes away once its containers are stopped.
    delete_pod(&api, "web", Some(1)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while api.get::<Pod>("default", "web").await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "web was never removed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    node.stop().await;
}

#[actix::test]
async fn a_restarted_agent_re_adopts_running_containers() {
    let (cluster, _dir, mut node) = one_node().await;
    let api = cluster.api();
    api.create(&pod(&node.name, "steady", serde_json::json!({
        "containers": [{"name": "c", "image": "shoal/busybox:1.35", "command": ["sleep", "1000"]}]
    }))).await.unwrap();
    let before = wait_pod(&api, "steady", "Running", |p| p.status.phase == "Running").await;
    let id_before = container(&before, "c").container_id.clone();
    let started_before = container(&before, "c").state.running.clone();

    let view_config = node.runtime_config();
    let runtime_view = move || {
        use shoal_node::Runtime;
        let mut rc = view_config.clone();
        rc.reap_monitors = false;
        let rt = LinuxRuntime::new(rc).unwrap();
        rt.list_containers()
            .unwrap()
            .into_iter()
            .map(|c| (c.id.clone(), c.pid))
            .collect::<Vec<_>>()
    };
    let containers_before = runtime_view();
    assert_eq!(containers_before.len(), 1);

    node.stop().await;
    let restarted_at = chrono::Utc::now();
    node.start(&cluster).await;
    // The new agent is alive once it has renewed its Lease after the restart.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let lease = api
            .get::<bus_schemas::kinds::Lease>(shoal_api::NODE_LEASE_NAMESPACE, &node.name)
            .await;
        if lease.is_ok_and(|l| l.spec.renew_time.is_some_and(|t| t > restarted_at)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the restarted agent never heartbeated"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Over ten of its sync periods the same container keeps running: it was adopted, not
    // restarted (a non-adopting agent would have started a second instance by now).
    for _ in 0..10 {
        assert_eq!(
            runtime_view(),
            containers_before,
            "the container was replaced"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after: Pod = api.get("default", "steady").await.unwrap();
    let c = container(&after, "c");
    assert_eq!(c.container_id, id_before, "same container instance");
    assert_eq!(c.restart_count, 0);
    assert_eq!(c.state.running, started_before);

    delete_pod(&api, "steady", Some(0)).await;
    node.stop().await;
}

/// The runtime's own listing, as an operator (or the chaos check) asks for it: a running pod's
/// sandbox and container show, and once the pod is deleted nothing of it is left.
#[actix::test]
async fn the_agent_lists_what_its_runtime_really_holds() {
    let (cluster, _dir, mut node) = one_node().await;
    let api = cluster.api();
    let n = node.name.clone();
    api.create(&pod(
        &n,
        "listed",
        serde_json::json!({"containers": [{"name": "sleeper", "image": "shoal/busybox:1.35", "command": ["sleep", "3600"]}]}),
    ))
    .await
    .unwrap();
    let running = wait_pod(&api, "listed", "Running", |p| p.status.phase == "Running").await;
    let held = shoal_bus::inspect::node_containers(&cluster.nats, &n, Duration::from_secs(10))
        .await
        .expect("the agent answers");
    assert_eq!(held.node, n);
    assert!(held.error.is_empty(), "{}", held.error);
    let sandbox = held
        .sandboxes
        .iter()
        .find(|s| s.pod_uid == running.metadata.uid)
        .unwrap_or_else(|| panic!("no sandbox for the pod: {held:?}"));
    assert_eq!(sandbox.namespace, "default");
    assert_eq!(sandbox.hostname, "listed");
    assert!(
        sandbox
            .containers
            .iter()
            .any(|c| c.name == "sleeper" && c.state == "running"),
        "{sandbox:?}"
    );

    delete_pod(&api, "listed", Some(0)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let held = shoal_bus::inspect::node_containers(&cluster.nats, &n, Duration::from_secs(10))
            .await
            .expect("the agent answers");
        if held
            .sandboxes
            .iter()
            .all(|s| s.pod_uid != running.metadata.uid)
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the deleted pod's sandbox is still held: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    node.stop().await;
}

/// The node's Lease renewal time, once the node has one.
async fn renewed_at(
    api: &shoal_bus::ApiClient,
    node: &str,
) -> Option<chrono::DateTime<chrono::Utc>> {
    api.get::<bus_schemas::kinds::Lease>(shoal_api::NODE_LEASE_NAMESPACE, node)
        .await
        .ok()
        .and_then(|l| l.spec.renew_time)
}

/// Issue 14: after an outage a node is Ready again with its first beat that lands, so a
/// failed beat is retried within about a second rather than at the next regular beat. With
/// beats every 6 s and the API back half a second after a failed one, the next regular beat
/// would come over 5 s later.
#[actix::test]
async fn a_failed_heartbeat_is_retried_within_a_second_of_the_api_returning() {
    const INTERVAL: Duration = Duration::from_secs(6);
    let mut cluster = shoal_api::local::LocalCluster::start().await.unwrap();
    push_busybox(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let mut node = Node::new(dir.path());
    node.heartbeat_interval = INTERVAL;
    node.start(&cluster).await;
    let api = cluster.api();

    // A beat (the first comes one interval after registration) marks the phase of the next.
    let deadline = tokio::time::Instant::now() + INTERVAL * 3;
    let first = loop {
        if let Some(t) = renewed_at(&api, &node.name).await {
            break t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the node never heartbeated"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let beat_seen = tokio::time::Instant::now();
    loop {
        let t = renewed_at(&api, &node.name).await;
        if t.is_some_and(|t| t > first) {
            break;
        }
        assert!(
            beat_seen.elapsed() < INTERVAL * 2,
            "the node's second beat never came"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let phase = tokio::time::Instant::now();

    // The outage: no API replica answers until half a second after the next beat failed.
    cluster.stop_api_replica(0);
    tokio::time::sleep_until(phase + INTERVAL + Duration::from_millis(500)).await;
    cluster.add_api_replica().await.unwrap();
    let back = tokio::time::Instant::now();
    let returned_at = chrono::Utc::now();

    loop {
        if renewed_at(&api, &node.name)
            .await
            .is_some_and(|t| t >= returned_at)
        {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(3),
            "no beat landed within 3 s of the API's return (beats every {INTERVAL:?})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node.stop().await;
}
