//! Watches and lists against a real nats-server: a watch survives the server restarting
//! (which also disconnects the client) without losing or repeating an event, and
//! "list at N, then watch from N+1" reproduces the log exactly while writers keep writing or
//! deleting.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use bus_schemas::subjects;
use common::setup;
use shoal_bus::natsd::Natsd;
use shoal_bus::store::{EventType, WriteMeta};
use shoal_bus::watch::RawWatch;
use shoal_bus::Store;

/// Writes one version of `name`, retrying while the server is away.
async fn write(store: &Store, name: &str, value: u32) -> u64 {
    let subject = subjects::object("pod", "default", name);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let last = store
            .get_raw(&subject)
            .await
            .ok()
            .flatten()
            .map(|r| r.revision)
            .unwrap_or(0);
        let body = rmp_serde::to_vec_named(&value).unwrap();
        match store
            .write(
                &subject,
                EventType::Modified,
                body,
                last,
                &WriteMeta::default(),
            )
            .await
        {
            Ok(w) => return w.revision,
            Err(e) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "write kept failing: {e}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The watch's next event, within 30 s.
async fn next_event(watch: &mut RawWatch, what: &str) -> shoal_bus::store::RawEvent {
    tokio::time::timeout(Duration::from_secs(30), watch.next())
        .await
        .unwrap_or_else(|_| panic!("{what}: no event within 30 s"))
        .expect("watch open")
        .expect("nothing compacted")
}

#[tokio::test]
async fn a_watch_survives_a_server_restart_without_loss_or_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let (mut natsd, store) = setup(dir.path()).await;
    let mut watch = RawWatch::start(store.clone(), subjects::objects_of("pod", None), 1);
    let mut written = Vec::new();
    for i in 0..50 {
        written.push(write(&store, &format!("p{}", i % 7), i).await);
    }
    natsd
        .restart()
        .await
        .expect("server restarts on the same store");
    for i in 50..100 {
        written.push(write(&store, &format!("p{}", i % 7), i).await);
    }
    let mut seen = Vec::new();
    while seen.len() < written.len() {
        let ev = next_event(&mut watch, "events keep arriving after the restart").await;
        seen.push(ev.revision);
    }
    let unique: HashSet<u64> = seen.iter().copied().collect();
    assert_eq!(
        unique.len(),
        seen.len(),
        "no event delivered twice: {seen:?}"
    );
    assert_eq!(seen, written, "every write seen once, in log order");
    // Nothing more arrives: no late duplicate.
    let extra = tokio::time::timeout(Duration::from_millis(300), watch.next()).await;
    assert!(
        extra.is_err(),
        "unexpected extra event {:?}",
        extra.ok().flatten().map(|e| e.map(|e| e.revision))
    );
}

/// A watch whose client lost its server for longer than async-nats' quick consumer retries
/// (0.5, 1, 1.5 and 2 s apart, then one every 10 s) still resumes within seconds of the
/// server's return: the ordered consumer looks at its consumer again when its client
/// reconnects, whatever its retry back-off had reached. (A client that stays connected to a
/// server cut off from the stream's leader gets no reconnect, so its failed recreations may
/// reach the 10 s step: a candidate for the slow host cuts, README *Chaos*.)
#[tokio::test]
async fn a_watch_resumes_within_seconds_of_a_long_outage() {
    let dir = tempfile::tempdir().unwrap();
    let (mut natsd, store) = setup(dir.path()).await;
    let mut watch = RawWatch::start(store.clone(), subjects::objects_of("pod", None), 1);
    let before = write(&store, "before", 1).await;
    let first = next_event(&mut watch, "the first event arrives").await;
    assert_eq!(first.revision, before);
    natsd.kill().await;
    // The outage itself (a fault held for its length), not a wait for anything.
    tokio::time::sleep(Duration::from_secs(9)).await;
    natsd.restart().await.expect("the server comes back");
    let back = tokio::time::Instant::now();
    let after = write(&store, "after", 2).await;
    let next = next_event(&mut watch, "events arrive after the outage").await;
    assert_eq!(next.revision, after);
    let waited = back.elapsed();
    assert!(
        waited < Duration::from_secs(6),
        "the watch resumed {waited:?} after the server returned"
    );
}

/// Stores the tombstone of `name` over its newest version.
async fn delete(store: &Store, name: &str) {
    let subject = subjects::object("pod", "default", name);
    let last = store.get_raw(&subject).await.unwrap().unwrap();
    store
        .write(
            &subject,
            EventType::Deleted,
            last.payload.to_vec(),
            last.revision,
            &WriteMeta::default(),
        )
        .await
        .unwrap();
}

/// The bug behind kubectl's `delete --wait` hanging: an object listed from the snapshot
/// whose tombstone came in while the list was still reading stayed listed, at a revision
/// past its deletion, so a watch from there never told anyone it was gone.
#[tokio::test]
async fn an_object_deleted_while_the_list_runs_is_not_listed_past_its_tombstone() {
    let dir = tempfile::tempdir().unwrap();
    let (_natsd, store) = setup(dir.path()).await;
    for i in 0..400 {
        write(&store, &format!("p{i}"), i).await;
    }
    let deleter = {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..400 {
                delete(&store, &format!("p{i}")).await;
            }
        })
    };
    let filter = subjects::objects_of("pod", None);
    let mut lists = 0;
    while !deleter.is_finished() {
        let (items, revision) = store.list_raw(&filter).await.unwrap();
        lists += 1;
        for item in &items {
            let newest = store.get_raw(&item.subject).await.unwrap().unwrap();
            assert!(
                !(newest.is_tombstone() && newest.revision <= revision),
                "{} is listed at revision {revision} but was deleted at {} (list {lists})",
                item.subject,
                newest.revision
            );
        }
    }
    deleter.await.unwrap();
    let (items, _) = store.list_raw(&filter).await.unwrap();
    assert!(items.is_empty(), "{} still listed", items.len());
}

#[tokio::test]
async fn list_at_n_then_watch_from_n_plus_1_misses_nothing_under_concurrent_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (_natsd, store) = setup(dir.path()).await;
    for i in 0..200 {
        write(&store, &format!("p{i}"), i).await;
    }
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..300u32 {
                write(&store, &format!("p{}", i % 250), 1000 + i).await;
            }
        })
    };
    let (items, revision) = store
        .list_raw(&subjects::objects_of("pod", None))
        .await
        .unwrap();
    let mut state: BTreeMap<String, u32> = items
        .iter()
        .map(|r| {
            (
                r.subject.clone(),
                rmp_serde::from_slice(&r.payload).unwrap(),
            )
        })
        .collect();
    writer.await.unwrap();
    let last = store.last_revision().await.unwrap();
    let mut watch = RawWatch::start(
        store.clone(),
        subjects::objects_of("pod", None),
        revision + 1,
    );
    let mut at = revision;
    while at < last {
        let ev = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(ev.revision > at, "strictly increasing revisions");
        at = ev.revision;
        state.insert(
            ev.subject.clone(),
            rmp_serde::from_slice(&ev.payload).unwrap(),
        );
    }
    let (truth, _) = store
        .list_raw(&subjects::objects_of("pod", None))
        .await
        .unwrap();
    let truth: BTreeMap<String, u32> = truth
        .iter()
        .map(|r| {
            (
                r.subject.clone(),
                rmp_serde::from_slice(&r.payload).unwrap(),
            )
        })
        .collect();
    assert_eq!(state.len(), 250);
    assert_eq!(
        state, truth,
        "list + watch reproduces the log's final state exactly"
    );
}

#[tokio::test]
async fn a_missing_state_stream_is_an_alarm_not_an_empty_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let natsd = Natsd::start_in(dir.path()).await.unwrap();
    let admin = natsd.creds(&bus_schemas::roles::Role::Admin).await.unwrap();
    let nats = shoal_bus::connect(&natsd.url(), "test", &admin)
        .await
        .unwrap();
    match Store::open(nats).await {
        Err(shoal_bus::StoreError::StreamMissing) => {}
        Err(other) => panic!("expected StreamMissing, got {other}"),
        Ok(_) => panic!("expected StreamMissing, got a store"),
    }
}

#[tokio::test]
async fn a_state_stream_deleted_under_an_open_store_is_reported_as_missing() {
    let dir = tempfile::tempdir().unwrap();
    let (_natsd, store) = setup(dir.path()).await;
    assert_eq!(store.last_revision().await.unwrap(), 0);
    store
        .jetstream()
        .delete_stream(subjects::OBJECTS_STREAM)
        .await
        .unwrap();
    match store.last_revision().await {
        Err(shoal_bus::StoreError::StreamMissing) => {}
        other => panic!("expected StreamMissing, got {other:?}"),
    }
    // A write nobody answers is told apart from one to a leaderless stream by asking the
    // stream's info: here it is really gone.
    let written = store
        .write(
            &subjects::object("configmap", "default", "x"),
            shoal_bus::EventType::Added,
            vec![1],
            0,
            &shoal_bus::WriteMeta::default(),
        )
        .await;
    match written {
        Err(shoal_bus::StoreError::StreamMissing) => {}
        other => panic!("expected StreamMissing, got {other:?}"),
    }
}

/// Issue 14: the log's compaction revision is where watches must start above. One from at
/// or below it ends with `Expired` (the 410 Gone its owner relists on); one from above is
/// served, and purging leaves the versions written after the tombstone (the name reused).
#[tokio::test]
async fn a_watch_from_at_or_below_the_compaction_revision_expires() {
    use bus_schemas::state_log::CompactionRecord;
    use shoal_bus::watch::Expired;

    let dir = tempfile::tempdir().unwrap();
    let (_natsd, store) = setup(dir.path()).await;
    write(&store, "a", 1).await;
    let subject = subjects::object("pod", "default", "a");
    delete(&store, "a").await;
    let tombstone = store.get_raw(&subject).await.unwrap().unwrap().revision;
    let reused = write(&store, "a", 2).await;
    assert_eq!(store.compacted_revision().await.unwrap(), 0);
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
    assert_eq!(store.purge_through(&subject, tombstone).await.unwrap(), 2);
    assert_eq!(store.compacted_revision().await.unwrap(), tombstone);
    let left: Vec<u64> = store
        .history(&subject)
        .await
        .unwrap()
        .iter()
        .map(|v| v.revision)
        .collect();
    assert_eq!(left, vec![reused], "the reused name's object stays");

    let filter = subjects::objects_of("pod", None);
    for from in [1, tombstone] {
        let mut watch = RawWatch::start(store.clone(), filter.clone(), from);
        let item = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .unwrap();
        assert_eq!(
            item.map(|i| i.map(|e| e.revision)),
            Some(Err(Expired {
                from,
                compacted: tombstone
            }))
        );
        assert!(watch.next().await.is_none(), "an expired watch ends");
    }
    let mut watch = RawWatch::start(store.clone(), filter, tombstone + 1);
    let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(event.revision, reused);
}
