//! kubectl's node and telemetry commands through the gateway: cordon, drain and the eviction
//! subresource, `logs` (with `--tail` and `-f`) from the bus' log stream and `top` from
//! `metrics.k8s.io`. Log lines and usage samples are published on their subjects exactly as
//! node agents publish them.

mod common;

use std::time::Duration;

use bus_schemas::api::{ContainerMetrics, PodMetrics};
use bus_schemas::roles::Role;
use bus_schemas::{codec, subjects};
use common::{pod, Env, Streaming};

/// Log lines come from the node the pod runs on, and only it may publish them.
async fn node_n1(env: &Env) -> async_nats::jetstream::Context {
    let nats = env
        .cluster
        .connect_as(&Role::Node("n1".into()), "n1")
        .await
        .unwrap();
    async_nats::jetstream::new(nats)
}

async fn publish_log(env: &Env, pod: &str, text: &str) {
    let js = node_n1(env).await;
    let line = format!("{} {text}", chrono::Utc::now().to_rfc3339());
    js.publish(subjects::logs("n1", "default", pod, "main"), line.into())
        .await
        .unwrap()
        .await
        .unwrap();
}

async fn publish_instance_log(env: &Env, pod: &str, instance: &str, text: &str) {
    let js = node_n1(env).await;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(subjects::HEADER_CONTAINER_ID, instance);
    let line = format!("{} {text}", chrono::Utc::now().to_rfc3339());
    js.publish_with_headers(
        subjects::logs("n1", "default", pod, "main"),
        headers,
        line.into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

#[actix::test]
async fn cordon_drain_and_eviction() {
    let env = Env::start().await;
    let out = env
        .with_stdin(
            &["create", "-f", "-"],
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n",
        )
        .await;
    assert!(out.ok, "{}", out.stderr);
    // A pod bound to n1 for drain to evict (no agent runs here: grace 0 removes it at once).
    let resident = pod("resident", "x").replace("spec:\n", "spec:\n  nodeName: n1\n");
    let out = env.with_stdin(&["create", "-f", "-"], &resident).await;
    assert!(out.ok, "{}", out.stderr);
    assert!(env.ok(&["cordon", "n1"]).await.contains("node/n1 cordoned"));
    let nodes = env.ok(&["get", "nodes"]).await;
    assert!(nodes.contains("SchedulingDisabled"), "{nodes}");
    let drained = env
        .kubectl(&[
            "drain",
            "n1",
            "--ignore-daemonsets",
            "--grace-period=0",
            // A bare pod: no controller would replace it, so kubectl asks for --force.
            "--force",
            "--timeout=20s",
        ])
        .await;
    assert!(drained.ok, "{}\n{}", drained.stdout, drained.stderr);
    let said = format!("{}{}", drained.stdout, drained.stderr);
    assert!(said.contains("evicting pod default/resident"), "{said}");
    assert!(said.contains("pod/resident evicted"), "{said}");
    assert!(said.contains("node/n1 drained"), "{said}");
    assert!(!env.kubectl(&["get", "pod", "resident"]).await.ok);
    env.ok(&["uncordon", "n1"]).await;
    let unschedulable = env
        .ok(&["get", "node", "n1", "-o", "jsonpath={.spec.unschedulable}"])
        .await;
    assert_ne!(unschedulable, "true");

    // The eviction subresource drain uses, on a pod of its own.
    let out = env
        .with_stdin(&["create", "-f", "-"], &pod("evictee", "x"))
        .await;
    assert!(out.ok, "{}", out.stderr);
    let eviction = env.write_file(
        "eviction.json",
        r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"evictee","namespace":"default"}}"#,
    );
    let status = env
        .ok(&[
            "create",
            "--raw",
            "/api/v1/namespaces/default/pods/evictee/eviction",
            "-f",
            &eviction,
        ])
        .await;
    assert!(status.contains("Success"), "{status}");
    common::eventually("the evicted pod gone", Duration::from_secs(20), || async {
        !env.kubectl(&["get", "pod", "evictee"]).await.ok
    })
    .await;
}

#[actix::test]
async fn logs_with_tail_follow_and_previous() {
    let env = Env::start().await;
    let out = env
        .with_stdin(&["create", "-f", "-"], &pod("talker", "x"))
        .await;
    assert!(out.ok, "{}", out.stderr);
    for i in 1..=3 {
        publish_log(&env, "talker", &format!("line {i}")).await;
    }
    let all = env.ok(&["logs", "talker"]).await;
    assert_eq!(all, "line 1\nline 2\nline 3\n");
    let tail = env.ok(&["logs", "talker", "--tail=1"]).await;
    assert_eq!(tail, "line 3\n");
    // `-l`: kubectl lists the pods the selector matches and reads each one's log.
    let out = env
        .with_stdin(&["create", "-f", "-"], &pod("echoer", "x"))
        .await;
    assert!(out.ok, "{}", out.stderr);
    publish_log(&env, "echoer", "echo 1").await;
    let labelled = env.ok(&["logs", "-l", "app=x", "--prefix"]).await;
    let mut lines: Vec<&str> = labelled.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "[pod/echoer/main] echo 1",
            "[pod/talker/main] line 1",
            "[pod/talker/main] line 2",
            "[pod/talker/main] line 3"
        ],
        "{labelled}"
    );
    let mut follow = Streaming::spawn(&env, &["logs", "-f", "talker"]);
    follow
        .until("the backlog", Duration::from_secs(20), |l| l == "line 3")
        .await;
    publish_log(&env, "talker", "line 4").await;
    follow
        .until(
            "a line written while following",
            Duration::from_secs(20),
            |l| l == "line 4",
        )
        .await;

    // After a restart the agent reports the new instance and the last one's id: `--previous`
    // shows the lines of the instance before.
    publish_instance_log(&env, "talker", "old", "from the old instance").await;
    publish_instance_log(&env, "talker", "new", "from the new instance").await;
    env.ok(&[
        "patch", "pod", "talker", "--subresource=status", "--type", "merge", "-p",
        r#"{"status":{"containerStatuses":[{"name":"main","image":"shoal/busybox:1.35","imageID":"","ready":true,"restartCount":1,
            "containerID":"shoal://new","lastState":{"terminated":{"exitCode":1,"containerID":"shoal://old"}}}]}}"#,
    ])
    .await;
    assert_eq!(env.ok(&["logs", "talker"]).await, "from the new instance\n");
    assert_eq!(
        env.ok(&["logs", "talker", "--previous"]).await,
        "from the old instance\n"
    );
    let missing = env.fails(&["logs", "nobody"]).await;
    assert!(
        missing.contains("NotFound") || missing.contains("not found"),
        "{missing}"
    );
}

#[actix::test]
async fn top_reads_the_node_agents_samples() {
    let env = Env::start().await;
    let out = env
        .with_stdin(&["create", "-f", "-"], &pod("busy", "x"))
        .await;
    assert!(out.ok, "{}", out.stderr);
    // Metrics are node n1's to publish, on its own subjects: publish as that node.
    let n1 = env
        .cluster
        .connect_as(&Role::Node("n1".into()), "n1")
        .await
        .unwrap();
    let js = async_nats::jetstream::new(n1);
    let sample = |pod: &str, cpu: u64, mem: u64| PodMetrics {
        namespace: if pod.is_empty() {
            String::new()
        } else {
            "default".into()
        },
        pod: pod.into(),
        node: "n1".into(),
        timestamp: Default::default(),
        cpu_millicores: cpu,
        memory_working_set_bytes: mem,
        containers: if pod.is_empty() {
            vec![]
        } else {
            vec![ContainerMetrics {
                name: "main".into(),
                cpu_millicores: cpu,
                memory_working_set_bytes: mem,
            }]
        },
        ..Default::default()
    };
    for (pod, cpu, mem) in [("busy", 250, 64 << 20), ("", 900, 2 << 30)] {
        let ns = if pod.is_empty() { "" } else { "default" };
        let body = codec::to_msgpack(&sample(pod, cpu, mem)).unwrap();
        js.publish(subjects::metrics("n1", ns, pod), body.into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let pods = env.ok(&["top", "pods"]).await;
    let row: Vec<&str> = pods
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(row, ["busy", "250m", "64Mi"], "{pods}");
    let nodes = env.ok(&["top", "nodes", "--show-capacity"]).await;
    assert!(
        nodes
            .lines()
            .any(|l| l.starts_with("n1") && l.contains("900m")),
        "{nodes}"
    );
}
