//! Cache inspection against a real nats-server with identities on: a process's informer
//! answers with a summary equal to that of the objects it holds, the summary changes with a
//! write, and only an operator may ask.

mod common;

use std::time::Duration;

use bus_schemas::inspect::CacheSummary;
use bus_schemas::kinds::Pod;
use bus_schemas::roles::Role;
use common::setup;
use shoal_bus::natsd::Natsd;
use shoal_bus::store::EventType;
use shoal_bus::{InformerFactory, Store};

async fn put(store: &Store, name: &str, event: EventType) -> u64 {
    common::put_pod(store, name, "", event).await
}

async fn as_role(natsd: &Natsd, role: &Role) -> async_nats::Client {
    let creds = natsd.creds(role).await.unwrap();
    shoal_bus::connect(&natsd.url(), "inspect-test", &creds)
        .await
        .unwrap()
}

async fn pod_summary(admin: &async_nats::Client) -> Option<CacheSummary> {
    let answers = shoal_bus::inspect::gather_caches(
        admin,
        0,
        Duration::from_millis(300),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert!(answers.len() <= 1, "one process answers: {answers:?}");
    answers.into_iter().next().and_then(|p| {
        assert_eq!(p.process, "test-process");
        p.caches.into_iter().find(|c| c.kind == "Pod")
    })
}

#[tokio::test]
async fn a_process_summarises_its_caches_as_a_list_of_the_same_objects_would() {
    let dir = tempfile::tempdir().unwrap();
    let (natsd, store) = setup(dir.path()).await;
    let factory = InformerFactory::new(store.clone());
    let pods = factory.get::<Pod>();
    let a = put(&store, "a", EventType::Added).await;
    let b = put(&store, "b", EventType::Added).await;
    pods.wait_synced().await.unwrap();
    pods.wait_for_revision(b).await;
    let controllers = as_role(&natsd, &Role::Controllers).await;
    tokio::spawn(shoal_bus::inspect::serve_caches(
        controllers,
        factory.clone(),
        "test-process".into(),
    ));
    let admin = as_role(&natsd, &Role::Admin).await;

    let expected = CacheSummary::of(
        "Pod",
        [
            ("default", "a", &*a.to_string()),
            ("default", "b", &*b.to_string()),
        ],
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let summary = loop {
        // The responder subscribes asynchronously: ask until it answers.
        if let Some(s) = pod_summary(&admin).await {
            break s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no process answered"
        );
    };
    assert!(summary.synced);
    assert!(summary.revision >= b);
    assert!(
        summary.same_objects(&expected),
        "{summary:?} vs {expected:?}"
    );

    // A newer version of one object changes the digest, and the list's summary follows.
    let b2 = put(&store, "b", EventType::Modified).await;
    pods.wait_for_revision(b2).await;
    let after = pod_summary(&admin).await.expect("an answer");
    assert!(!after.same_objects(&expected));
    let relisted = CacheSummary::of(
        "Pod",
        [
            ("default", "a", &*a.to_string()),
            ("default", "b", &*b2.to_string()),
        ],
    );
    assert!(after.same_objects(&relisted), "{after:?} vs {relisted:?}");

    // A viewer may not ask processes what they hold.
    let viewer = as_role(&natsd, &Role::Viewer).await;
    let refused = shoal_bus::inspect::gather_caches(
        &viewer,
        0,
        Duration::from_millis(300),
        Duration::from_secs(2),
    )
    .await;
    assert!(
        refused.as_ref().map(|a| a.is_empty()).unwrap_or(true),
        "a viewer got answers: {refused:?}"
    );
}
