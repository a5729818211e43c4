//! Container log lines from a real container reach the cluster's log stream on the node's own
//! subject, `shoal.v1.logs.<node>.<ns>.<pod>.<container>`, and readers that do not know the
//! node find them with `shoal.v1.logs.*.<ns>.<pod>.<container>`.

mod common;

use std::time::Duration;

use async_nats::jetstream::consumer::pull::OrderedConfig;
use async_nats::jetstream::consumer::DeliverPolicy;
use bus_schemas::subjects;
use common::{delete_pod, one_node, pod, wait_pod};
use futures::StreamExt;
use shoal_api::local::eventually;

#[actix::test]
async fn log_lines_are_published_under_the_node_that_runs_the_pod() {
    let (cluster, _dir, node) = one_node().await;
    let api = cluster.api();
    api.create(&pod(
        &node.name,
        "talker",
        serde_json::json!({
            "containers": [{"name": "main", "image": "shoal/busybox:1.35",
                "command": ["sh", "-c", "echo hello from talker; sleep 3600"]}]
        }),
    ))
    .await
    .unwrap();
    wait_pod(&api, "talker", "Running", |p| p.status.phase == "Running").await;

    let js = async_nats::jetstream::new(cluster.nats.clone());
    let stream = js.get_stream(subjects::LOGS_STREAM).await.unwrap();
    let subject = subjects::logs(&node.name, "default", "talker", "main");
    assert!(
        subject.starts_with(&format!("shoal.v1.logs.{}.", node.name)),
        "{subject}"
    );
    eventually(
        "the line on the node's subject",
        Duration::from_secs(30),
        || async {
            stream
                .get_last_raw_message_by_subject(&subject)
                .await
                .is_ok_and(|m| String::from_utf8_lossy(&m.payload).ends_with(" hello from talker"))
        },
    )
    .await;
    // Nothing under the old shape, which had no node token.
    assert!(stream
        .get_last_raw_message_by_subject("shoal.v1.logs.default.talker.main")
        .await
        .is_err());

    // What `shoal logs` and the gateway read: every node's lines of the container.
    let consumer = stream
        .create_consumer(OrderedConfig {
            filter_subject: subjects::logs_of("default", "talker", "main"),
            deliver_policy: DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut messages = consumer.messages().await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), messages.next())
        .await
        .expect("a line within 10 s")
        .expect("a message")
        .unwrap();
    assert_eq!(first.subject.as_str(), subject);
    assert!(
        String::from_utf8_lossy(&first.payload).ends_with(" hello from talker"),
        "{:?}",
        first.payload
    );
}

/// What a container says while it stops (its SIGTERM handler, a preStop hook's effect) is
/// the log an operator wants most when a shutdown misbehaves: it is shipped too.
#[actix::test]
async fn lines_written_while_a_container_stops_are_published() {
    let (cluster, _dir, node) = one_node().await;
    let api = cluster.api();
    api.create(&pod(
        &node.name,
        "stopper",
        serde_json::json!({
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "main", "image": "shoal/busybox:1.35",
                "command": ["sh", "-c",
                    "trap 'echo draining; sleep 1; echo drained; exit 0' TERM; echo started; while true; do sleep 1; done"]}]
        }),
    ))
    .await
    .unwrap();
    wait_pod(&api, "stopper", "Running", |p| p.status.phase == "Running").await;
    let js = async_nats::jetstream::new(cluster.nats.clone());
    let stream = js.get_stream(subjects::LOGS_STREAM).await.unwrap();
    let subject = subjects::logs(&node.name, "default", "stopper", "main");
    let last_line = || async {
        stream
            .get_last_raw_message_by_subject(&subject)
            .await
            .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
            .unwrap_or_default()
    };
    eventually(
        "the line it starts with",
        Duration::from_secs(30),
        || async { last_line().await.ends_with(" started") },
    )
    .await;

    delete_pod(&api, "stopper", None).await;
    eventually(
        "the lines it wrote while stopping",
        Duration::from_secs(30),
        || async { last_line().await.ends_with(" drained") },
    )
    .await;
}
