//! Keyed informer subscriptions against a real nats-server: a subscriber to one index value
//! (a node's pods) hears every change that touches that value, before or after the change,
//! and nothing else; one that falls behind is told to resync instead of silently missing.

mod common;

use std::time::Duration;

use bus_schemas::kinds::Pod;
use bus_schemas::subjects;
use common::{put_pod as put, setup};
use shoal_bus::informer::INDEX_NODE;
use shoal_bus::store::EventType;
use shoal_bus::{InformerFactory, Store};
use tokio::sync::broadcast::error::RecvError;

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

/// A TCP forwarder to the nats-server that the test can shut: while shut, every connection
/// through it is cut and new ones are dropped, so a client behind it misses what happens
/// meanwhile, as one cut off by the network would.
struct Gate {
    port: u16,
    open: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Gate {
    async fn to(upstream: u16) -> Gate {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (open, _) = tokio::sync::watch::channel(true);
        let gate = open.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut shut = gate.subscribe();
                if !*shut.borrow_and_update() {
                    continue; // dropped at once
                }
                tokio::spawn(async move {
                    let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = shut.wait_for(|open| !*open) => {}
                    }
                });
            }
        });
        Gate { port, open, task }
    }

    fn set(&self, open: bool) {
        self.open.send_replace(open);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Issue 14: a watch that resumes below the compaction revision expires, and the informer
/// relists: the object deleted (and purged) while it was away is removed from the cache
/// with a DELETED change, the one created meanwhile arrives, and the watch goes on.
#[tokio::test]
async fn an_informer_cut_off_while_the_log_is_compacted_relists_and_converges() {
    use bus_schemas::state_log::CompactionRecord;
    use shoal_bus::informer::Informer;

    let dir = tempfile::tempdir().unwrap();
    let (mut natsd, store) = setup(dir.path()).await;
    let gate = Gate::to(natsd.config().port).await;
    let api = natsd.creds(&bus_schemas::roles::Role::Api).await.unwrap();
    let url = natsd.url().replace(
        &format!(":{}", natsd.config().port),
        &format!(":{}", gate.port),
    );
    let behind = shoal_bus::connect(&url, "behind-the-gate", &api)
        .await
        .unwrap();
    put(&store, "x", "n1", EventType::Added).await;
    put(&store, "y", "n1", EventType::Added).await;
    let informer = Informer::<Pod>::start(Store::open(behind).await.unwrap());
    informer.wait_synced().await.unwrap();
    assert_eq!(informer.len(), 2);
    let mut changes = informer.subscribe();

    gate.set(false);
    // The server forgets the informer's consumer: it must be recreated, from its revision.
    natsd.restart().await.unwrap();
    let tombstone = loop {
        match store
            .get_raw(&subjects::object("pod", "default", "y"))
            .await
        {
            Ok(_) => break put(&store, "y", "n1", EventType::Deleted).await,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let z = put(&store, "z", "n2", EventType::Added).await;
    // What the compactor does once the tombstone is old enough: record, then purge.
    store
        .write_compaction_record(
            &CompactionRecord {
                revision: tombstone,
                ..Default::default()
            },
            0,
        )
        .await
        .unwrap();
    store
        .purge_through(&subjects::object("pod", "default", "y"), tombstone)
        .await
        .unwrap();
    assert!(store
        .get_raw(&subjects::object("pod", "default", "y"))
        .await
        .unwrap()
        .is_none());
    gate.set(true);

    let mut deleted = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !(deleted && informer.get("default", "z").is_some()) {
        let change = tokio::time::timeout_at(deadline, changes.recv())
            .await
            .expect("the informer relists and converges")
            .unwrap();
        if change.key.name == "y" {
            assert_eq!(change.event, EventType::Deleted);
            assert_eq!(
                change.new.metadata.name, "y",
                "the final version is the cached one"
            );
            deleted = true;
        }
    }
    assert!(informer.get("default", "y").is_none());
    assert!(informer.get("default", "x").is_some());
    assert!(informer.revision() >= z);
    // And it watches on from the relist.
    let w = put(&store, "w", "n3", EventType::Added).await;
    tokio::time::timeout(Duration::from_secs(10), informer.wait_for_revision(w))
        .await
        .expect("the watch after the relist delivers new writes");
    assert!(informer.get("default", "w").is_some());
}
