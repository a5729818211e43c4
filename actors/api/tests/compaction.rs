//! Issue 14 against a real nats-server: the compactor purges a deleted object's subject once
//! its retention has passed (and the name stays reusable), expires Events a TTL after their
//! last write (watchers hear it as DELETED), and watches from below what it purged expire.

use std::time::Duration;

use bus_schemas::api::{DeleteOptions, ListOptions};
use bus_schemas::kinds::{Event, Pod};
use bus_schemas::{subjects, Resource};
use shoal_api::compactor::CompactionConfig;
use shoal_api::local::{eventually, LocalCluster};
use shoal_bus::watch::RawWatch;

const SHORT: CompactionConfig = CompactionConfig {
    deleted_retention: Duration::from_secs(2),
    event_ttl: Duration::from_secs(3),
};

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.35"}]}
    }))
    .expect("fixture pod")
}

fn event(name: &str) -> Event {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Tested", "message": "it happened"
    }))
    .expect("fixture event")
}

#[actix::test]
async fn a_deleted_objects_subject_is_purged_after_the_retention_and_its_name_reused() {
    let cluster = LocalCluster::start_compacting(SHORT).await.unwrap();
    let api = cluster.api();
    let store = &cluster.store;
    let subject = subjects::object(&Pod::INFO.token(), "default", "gone");
    api.create(&pod("gone")).await.unwrap();
    let _: Pod = api
        .delete(&DeleteOptions {
            namespace: "default".into(),
            name: "gone".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let tombstone = store.get_raw(&subject).await.unwrap().unwrap();
    assert!(tombstone.is_tombstone());
    let watched_before = tombstone.revision;
    eventually(
        "the deleted pod's subject is purged",
        Duration::from_secs(30),
        || async { store.history(&subject).await.unwrap().is_empty() },
    )
    .await;
    assert!(store.compacted_revision().await.unwrap() >= tombstone.revision);
    // A watch from before the purge would have missed the deletion: it expires.
    let mut watch = RawWatch::start(
        store.clone(),
        subjects::objects_of(&Pod::INFO.token(), None),
        watched_before,
    );
    let item = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .unwrap()
        .expect("the watch says why it ends");
    let expired = item.expect_err("a watch from a purged revision expires");
    assert!(expired.compacted >= tombstone.revision);
    // The name is free: create expects an empty subject now, not the purged tombstone.
    let reborn = api.create(&pod("gone")).await.unwrap();
    assert_eq!(reborn.metadata.name, "gone");
    // A live object is never purged, however old.
    tokio::time::sleep(SHORT.deleted_retention * 2).await;
    let still: Pod = api.get("default", "gone").await.unwrap();
    assert_eq!(still.metadata.uid, reborn.metadata.uid);
}

#[actix::test]
async fn an_event_expires_a_ttl_after_its_last_write() {
    let cluster = LocalCluster::start_compacting(SHORT).await.unwrap();
    let api = cluster.api();
    let store = &cluster.store;
    let from = store.last_revision().await.unwrap() + 1;
    let mut watch = RawWatch::start(
        store.clone(),
        subjects::objects_of(&Event::INFO.token(), None),
        from,
    );
    let created = api.create(&event("e1")).await.unwrap();
    let listed = |api: shoal_bus::ApiClient| async move {
        api.list::<Event>(&ListOptions {
            namespace: "default".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .items
        .len()
    };
    assert_eq!(listed(api.clone()).await, 1);
    // Watchers hear of the expiry as a deletion, as Kubernetes' do.
    let deleted = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let event = watch.next().await.unwrap().unwrap();
            if event.is_tombstone() {
                return event;
            }
        }
    })
    .await
    .expect("the Event is deleted after its TTL");
    let stored_at = deleted.stored_at.unwrap();
    let created_at = created.metadata.creation_timestamp.unwrap();
    let lived = stored_at
        .duration_since(std::time::SystemTime::from(created_at))
        .unwrap_or_default();
    assert!(
        lived + Duration::from_secs(1) >= SHORT.event_ttl,
        "not before its TTL: lived {lived:?}"
    );
    assert_eq!(listed(api.clone()).await, 0);
    let subject = subjects::object(&Event::INFO.token(), "default", "e1");
    eventually(
        "the expired Event's subject is purged",
        Duration::from_secs(30),
        || async { store.history(&subject).await.unwrap().is_empty() },
    )
    .await;
}
