//! Keyed informer subscriptions against a real nats-server: a subscriber to one index value
//! (a node's pods) hears every change that touches that value, before or after the change,
//! and nothing else; one that falls behind is told to resync instead of silently missing.

mod common;

use std::time::Duration;

use bus_schemas::kinds::Pod;
use bus_schemas::{codec, subjects};
use common::setup;
use shoal_bus::informer::INDEX_NODE;
use shoal_bus::store::{EventType, WriteMeta};
use shoal_bus::{InformerFactory, Store};
use tokio::sync::broadcast::error::RecvError;

async fn put(store: &Store, name: &str, node: &str, event: EventType) -> u64 {
    let subject = subjects::object("pod", "default", name);
    let last = store
        .get_raw(&subject)
        .await
        .unwrap()
        .map(|r| r.revision)
        .unwrap_or(0);
    let mut pod = Pod::default();
    pod.metadata.namespace = "default".into();
    pod.metadata.name = name.into();
    pod.metadata.uid = format!("uid-{name}");
    pod.spec.node_name = node.into();
    let body = codec::to_msgpack(&pod).unwrap();
    store
        .write(&subject, event, body, last, &WriteMeta::default())
        .await
        .expect("write")
        .revision
}

#[tokio::test]
async fn a_keyed_subscriber_hears_only_its_own_objects_including_departures() {
    let dir = tempfile::tempdir().unwrap();
    let (_natsd, store) = setup(dir.path()).await;
    let pods = InformerFactory::new(store.clone()).get::<Pod>();
    let mut node_a = pods.subscribe_index(INDEX_NODE, "a");
    pods.wait_synced().await.unwrap();

    put(&store, "on-b", "b", EventType::Added).await;
    put(&store, "on-a", "a", EventType::Added).await;
    put(&store, "moves", "a", EventType::Added).await;
    put(&store, "moves", "b", EventType::Modified).await;
    put(&store, "on-b", "b", EventType::Modified).await;
    put(&store, "on-a", "a", EventType::Deleted).await;

    let mut seen = Vec::new();
    for _ in 0..4 {
        let change = tokio::time::timeout(Duration::from_secs(10), node_a.recv())
            .await
            .expect("a change within 10 s")
            .expect("no lag");
        seen.push((
            change.event,
            change.key.name.clone(),
            change.old.map(|o| o.spec.node_name.clone()),
            change.new.spec.node_name.clone(),
        ));
    }
    assert_eq!(
        seen,
        vec![
            (EventType::Added, "on-a".into(), None, "a".into()),
            (EventType::Added, "moves".into(), None, "a".into()),
            (
                EventType::Modified,
                "moves".into(),
                Some("a".into()),
                "b".into()
            ),
            (
                EventType::Deleted,
                "on-a".into(),
                Some("a".into()),
                "a".into()
            ),
        ]
    );
    // Nothing about node b's pods arrives: the next change for "a" is the next thing seen.
    put(&store, "last", "a", EventType::Added).await;
    let next = tokio::time::timeout(Duration::from_secs(10), node_a.recv())
        .await
        .expect("a change within 10 s")
        .expect("no lag");
    assert_eq!(next.key.name, "last");
}

#[tokio::test]
async fn a_keyed_subscriber_that_falls_behind_is_told_to_resync() {
    let dir = tempfile::tempdir().unwrap();
    let (_natsd, store) = setup(dir.path()).await;
    let pods = InformerFactory::new(store.clone()).get::<Pod>();
    let mut slow = pods.subscribe_index(INDEX_NODE, "busy");
    pods.wait_synced().await.unwrap();
    // More changes than a subscriber may hold, none read meanwhile.
    let mut last = 0;
    for i in 0..1100 {
        last = put(&store, &format!("p{i}"), "busy", EventType::Added).await;
    }
    pods.wait_for_revision(last).await;
    match slow.recv().await {
        Err(RecvError::Lagged(_)) => {}
        other => panic!("expected Lagged, got {:?}", other.map(|c| c.key)),
    }
    // After the resync point, new changes flow again.
    put(&store, "after", "busy", EventType::Added).await;
    let next = tokio::time::timeout(Duration::from_secs(10), slow.recv())
        .await
        .expect("a change within 10 s")
        .expect("no second lag");
    assert_eq!(next.key.name, "after");
}
