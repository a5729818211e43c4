//! Watches through the gateway: `kubectl get -w`, resuming from a resourceVersion on another
//! gateway replica, a client whose watch outlives a gateway restart, bookmarks, and 410
//! Expired for revisions the state log no longer holds.

mod common;

use std::time::Duration;

use bus_schemas::kinds::Pod;
use common::{pod, Env, Streaming};
use serde_json::Value;

fn bus_pod(name: &str) -> Pod {
    let mut p: Pod = serde_norway::from_str(&pod(name, "bus")).unwrap();
    p.metadata.namespace = "default".into();
    p
}

/// The watch events in a raw watch body, as (type, name, resourceVersion).
fn events(body: &str) -> Vec<(String, String, String)> {
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            let text = |p: &str| {
                v.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (
                text("/type"),
                text("/object/metadata/name"),
                text("/object/metadata/resourceVersion"),
            )
        })
        .collect()
}

#[actix::test]
async fn get_watch_prints_new_and_changed_rows() {
    let env = Env::start().await;
    let mut watch = Streaming::spawn(&env, &["get", "pods", "-w"]);
    // With nothing to list kubectl prints nothing until the first event.
    let created = env
        .with_stdin(&["create", "-f", "-"], &pod("w1", "web"))
        .await;
    assert!(created.ok, "{}", created.stderr);
    watch
        .until("the new pod's row", Duration::from_secs(20), |l| {
            l.starts_with("w1 ")
        })
        .await;
    env.ok(&["label", "pod", "w1", "tier=front"]).await;
    let rows_before = watch.seen.iter().filter(|l| l.starts_with("w1 ")).count();
    watch
        .until("the relabelled pod's row", Duration::from_secs(20), |l| {
            l.starts_with("w1 ")
        })
        .await;
    assert!(watch.seen.iter().filter(|l| l.starts_with("w1 ")).count() > rows_before);
    assert!(
        watch.seen[0]
            .split_whitespace()
            .eq(["NAME", "READY", "STATUS", "RESTARTS", "AGE"]),
        "the first event carries the columns: {:?}",
        watch.seen
    );
}

#[actix::test]
async fn a_watch_resumes_from_its_revision_on_another_gateway_replica() {
    let mut env = Env::start().await;
    let out = env
        .with_stdin(&["create", "-f", "-"], &pod("before", "web"))
        .await;
    assert!(out.ok, "{}", out.stderr);
    let list: Value = serde_json::from_str(
        &env.ok(&["get", "--raw", "/api/v1/namespaces/default/pods"])
            .await,
    )
    .unwrap();
    let revision = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!revision.is_empty());

    // The gateway goes away; the cluster moves on without it.
    env.stop_gateway();
    env.cluster.api().create(&bus_pod("during")).await.unwrap();
    env.start_gateway().await;

    let uri = format!(
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion={revision}&allowWatchBookmarks=true&timeoutSeconds=1"
    );
    let body = env.ok(&["get", "--raw", &uri]).await;
    let seen = events(&body);
    assert!(
        seen.iter().any(|(t, n, _)| t == "ADDED" && n == "during"),
        "the change made while no gateway ran: {seen:?}"
    );
    assert!(
        !seen.iter().any(|(_, n, _)| n == "before"),
        "nothing at or before {revision}: {seen:?}"
    );
    let (last_type, _, last_rv) = seen.last().unwrap();
    assert_eq!(last_type, "BOOKMARK", "{seen:?}");
    assert!(last_rv.parse::<u64>().unwrap() > revision.parse::<u64>().unwrap());
}

#[actix::test]
async fn kubectl_wait_outlives_a_gateway_restart() {
    let mut env = Env::start().await;
    let out = env
        .with_stdin(&["create", "-f", "-"], &pod("slow", "web"))
        .await;
    assert!(out.ok, "{}", out.stderr);
    let consumers = || async {
        let mut stream = env
            .cluster
            .store
            .jetstream()
            .get_stream(bus_schemas::subjects::OBJECTS_STREAM)
            .await
            .unwrap();
        stream
            .info()
            .await
            .map(|i| i.state.consumer_count)
            .unwrap_or(0)
    };
    let before = consumers().await;
    let mut wait = Streaming::spawn(
        &env,
        &[
            "wait",
            "--for=jsonpath={.metadata.labels.done}=yes",
            "pod/slow",
            "--timeout=60s",
        ],
    );
    // kubectl's watch is open once the gateway reads the log for it (one more consumer of
    // the state stream); then the gateway stops, the label is set while it is down, and a
    // new gateway starts on the same address.
    common::eventually("kubectl wait watching", Duration::from_secs(10), || async {
        consumers().await > before
    })
    .await;
    let addr = env.gateway.as_ref().unwrap().1;
    env.stop_gateway();
    let mut current: Pod = env.cluster.api().get("default", "slow").await.unwrap();
    current.metadata.labels.insert("done".into(), "yes".into());
    env.cluster.api().update(&current).await.unwrap();
    env.start_gateway_on(addr).await;
    wait.until("kubectl wait's success", Duration::from_secs(40), |l| {
        l.contains("condition met")
    })
    .await;
}

#[actix::test]
async fn a_revision_the_log_no_longer_holds_is_410_expired() {
    let env = Env::start().await;
    for i in 0..3 {
        env.cluster
            .api()
            .create(&bus_pod(&format!("p{i}")))
            .await
            .unwrap();
    }
    // Compacting the state log is the API's to do: no other identity may purge it.
    let api = env
        .cluster
        .connect_as(&bus_schemas::roles::Role::Api, "compaction")
        .await
        .unwrap();
    let stream = async_nats::jetstream::new(api)
        .get_stream(bus_schemas::subjects::OBJECTS_STREAM)
        .await
        .unwrap();
    let last = env.cluster.store.last_revision().await.unwrap();
    // Compaction took everything before the last write.
    stream.purge().sequence(last).await.unwrap();
    let body = env
        .ok(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion=1&timeoutSeconds=5",
        ])
        .await;
    let event: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    assert_eq!(event["type"], "ERROR", "{body}");
    assert_eq!(event["object"]["code"], 410);
    assert_eq!(event["object"]["reason"], "Expired");
    // A watch from a revision still held is served.
    let uri = format!(
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion={}&timeoutSeconds=1",
        last - 1
    );
    let body = env.ok(&["get", "--raw", &uri]).await;
    assert!(
        events(&body)
            .iter()
            .any(|(t, n, _)| t == "ADDED" && n == "p2"),
        "{body}"
    );
}

#[actix::test]
async fn a_selecting_watch_sees_objects_leave_and_join_it() {
    let env = Env::start().await;
    let out = env
        .with_stdin(&["create", "-f", "-"], &pod("member", "web"))
        .await;
    assert!(out.ok, "{}", out.stderr);
    let mut watch = Streaming::spawn(
        &env,
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "-w",
            "--output-watch-events",
        ],
    );
    watch
        .until("the member listed", Duration::from_secs(20), |l| {
            l.split_whitespace().take(2).eq(["ADDED", "member"])
        })
        .await;
    env.ok(&["label", "pod", "member", "app=quarantined", "--overwrite"])
        .await;
    watch
        .until("the relabelled pod leaving", Duration::from_secs(20), |l| {
            l.split_whitespace().take(2).eq(["DELETED", "member"])
        })
        .await;
    env.ok(&["label", "pod", "member", "app=web", "--overwrite"])
        .await;
    watch
        .until("the pod joining again", Duration::from_secs(20), |l| {
            l.split_whitespace().take(2).eq(["ADDED", "member"])
        })
        .await;
}

/// Names of the ADDED pods in a watch body, checking the revisions only ever grow.
fn added_in_order(body: &str) -> Vec<String> {
    let mut last = 0u64;
    let mut added = Vec::new();
    for (kind, name, rv) in events(body) {
        let rv: u64 = rv.parse().unwrap_or_else(|e| panic!("{e}: {rv:?}"));
        if kind == "BOOKMARK" {
            continue;
        }
        assert!(rv > last, "revision {rv} after {last}: {body}");
        last = rv;
        if kind == "ADDED" {
            added.push(name);
        }
    }
    added
}

/// Every watch of one filter on a replica shares one log consumer; a watch from an older
/// revision than the shared consumer's is caught up from the log first, then joins it,
/// without a gap or a repeat at the seam.
#[actix::test]
async fn watches_of_one_filter_each_see_every_event_from_their_own_revision() {
    let env = Env::start().await;
    let api = env.cluster.api();
    api.create(&bus_pod("a0")).await.unwrap();
    let list: Value = serde_json::from_str(
        &env.ok(&["get", "--raw", "/api/v1/namespaces/default/pods"])
            .await,
    )
    .unwrap();
    let old = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    for name in ["a1", "a2"] {
        api.create(&bus_pod(name)).await.unwrap();
    }
    let list: Value = serde_json::from_str(
        &env.ok(&["get", "--raw", "/api/v1/namespaces/default/pods"])
            .await,
    )
    .unwrap();
    let newer = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let watch_uri = |rv: &str, seconds: u32| {
        format!("/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}&timeoutSeconds={seconds}")
    };

    // The first watch opens the shared consumer, and stays open while the second joins.
    let first = env
        .command(&["get", "--raw", &watch_uri(&newer, 6)])
        .spawn()
        .unwrap();
    for i in 0..5 {
        api.create(&bus_pod(&format!("b{i}"))).await.unwrap();
    }
    let second = env
        .command(&["get", "--raw", &watch_uri(&old, 3)])
        .spawn()
        .unwrap();
    for i in 0..3 {
        api.create(&bus_pod(&format!("c{i}"))).await.unwrap();
    }

    let later: Vec<String> = (0..5)
        .map(|i| format!("b{i}"))
        .chain((0..3).map(|i| format!("c{i}")))
        .collect();
    let second = second.wait_with_output().await.unwrap();
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let mut expected = vec!["a1".to_string(), "a2".to_string()];
    expected.extend(later.iter().cloned());
    assert_eq!(
        added_in_order(&String::from_utf8_lossy(&second.stdout)),
        expected,
        "the watch from the older revision"
    );
    let first = first.wait_with_output().await.unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(
        added_in_order(&String::from_utf8_lossy(&first.stdout)),
        later,
        "the watch from the newer revision"
    );
}
