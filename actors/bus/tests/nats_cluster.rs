//! A three-server NATS cluster with the state stream at R3, each server on a host of its own
//! (network namespaces joined by the test fabric), and this test's client on a fourth host.
//! Real nats-servers only; every server is killed and every namespace removed on drop, even
//! when an assertion fails.

use std::time::{Duration, Instant};

use bus_schemas::roles::Role;
use bus_schemas::subjects;
use shoal_bus::cluster::health::stream_health;
use shoal_bus::cluster::testing::{server_name, NatsCluster, ServerHost};
use shoal_bus::store::{ensure_stream, StreamSettings, WriteMeta};
use shoal_bus::{EventType, Store, StoreError};
use shoal_node::testnet::Fabric;

const SERVERS: usize = 3;
/// Long enough for a Raft election (nats-server: 4–9 s) and a catch-up under CPU contention.
const CONVERGE: Duration = Duration::from_secs(90);

struct World {
    // Field order is drop order: the servers die (inside the client thread) before the
    // namespaces go.
    fabric: Fabric,
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        World {
            fabric: Fabric::new(SERVERS + 1).expect("test fabric (needs root and iproute2)"),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn server_hosts(&self) -> Vec<ServerHost> {
        self.fabric.hosts[..SERVERS]
            .iter()
            .map(|h| ServerHost {
                netns: h.netns.clone(),
                address: h.address,
            })
            .collect()
    }

    fn client_netns(&self) -> String {
        self.fabric.hosts[SERVERS].netns.clone()
    }

    /// Runs the test body on the client host; a panic inside fails the test after the
    /// body's servers were killed by their drop.
    fn run<F, Fut>(&self, body: F)
    where
        F: FnOnce(Vec<ServerHost>, std::path::PathBuf, Links) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()>,
    {
        let (hosts, dir) = (self.server_hosts(), self.dir.path().to_path_buf());
        let links = Links {
            fabric_netns: self.fabric.netns.clone(),
            ports: self
                .fabric
                .hosts
                .iter()
                .map(|h| h.fabric_port.clone())
                .collect(),
        };
        let result =
            shoal_bus::netns::spawn_in(&self.client_netns(), move || body(hosts, dir, links))
                .join();
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("entering the client host: {e}"),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// The hosts' switch ports, to cut a host off and reconnect it from the client's thread.
struct Links {
    fabric_netns: String,
    ports: Vec<String>,
}

impl Links {
    fn set(&self, host: usize, state: &str) {
        shoal_node::testnet::ip(&[
            "-n",
            &self.fabric_netns,
            "link",
            "set",
            &self.ports[host],
            state,
        ])
        .expect("setting a fabric port");
    }

    fn cut(&self, host: usize) {
        self.set(host, "down");
    }

    fn restore(&self, host: usize) {
        self.set(host, "up");
    }
}

/// Reconnects the cut host even when the test fails before it does.
struct Healing<'a>(&'a Links, usize);

impl Drop for Healing<'_> {
    fn drop(&mut self) {
        self.0.restore(self.1);
    }
}

async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Starts the cluster, creates the state at R3 and waits until all three replicas are current.
async fn r3_cluster(hosts: &[ServerHost], dir: &std::path::Path) -> (NatsCluster, Store) {
    let cluster = NatsCluster::start(hosts, dir)
        .await
        .expect("three nats-servers");
    let api = cluster.creds(&Role::Api).await.unwrap();
    let nats = shoal_bus::connect(&cluster.url(), "r3-test", &api)
        .await
        .unwrap();
    let js = async_nats::jetstream::new(nats.clone());
    ensure_stream(&js, &StreamSettings { replicas: 3 })
        .await
        .unwrap();
    let store = Store::open(nats).await.unwrap();
    wait_replicated(&store).await;
    (cluster, store)
}

async fn wait_replicated(store: &Store) {
    eventually(
        "every replica of the state stream current",
        CONVERGE,
        || async {
            stream_health(store.jetstream(), subjects::OBJECTS_STREAM)
                .await
                .fully_replicated()
        },
    )
    .await;
}

async fn leader(store: &Store) -> usize {
    let start = Instant::now();
    loop {
        let health = stream_health(store.jetstream(), subjects::OBJECTS_STREAM).await;
        let found = health
            .leader
            .and_then(|l| (0..SERVERS).find(|i| server_name(*i) == l));
        if let Some(i) = found {
            return i;
        }
        assert!(
            start.elapsed() < CONVERGE,
            "no leader of the state stream within {CONVERGE:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs `work` on a client connected only to server `server`, from inside that server's own
/// host, so a cut of the host leaves the two together. It starts at once; the returned
/// future gives its result (a panic inside fails the test).
async fn client_on_host<T, F, Fut>(
    cluster: &NatsCluster,
    hosts: &[ServerHost],
    server: usize,
    client: &'static str,
    work: F,
) -> impl std::future::Future<Output = T>
where
    T: Send + 'static,
    F: FnOnce(Store) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
{
    let url = cluster.server_url(server);
    let api = cluster.creds(&Role::Api).await.unwrap();
    let netns = hosts[server].netns.clone();
    let running = tokio::task::spawn_blocking(move || {
        shoal_bus::netns::spawn_in(&netns, move || async move {
            let nats = shoal_bus::connect(&url, client, &api).await.unwrap();
            work(Store::open(nats).await.unwrap()).await
        })
        .join()
    });
    async move {
        match running.await.expect("the client thread's join") {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => panic!("entering the server's host: {e}"),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

fn subject(name: &str) -> String {
    subjects::object("configmaps", "default", name)
}

/// A write acknowledged by the cluster: where it landed and what it holds.
#[derive(Debug, Clone)]
struct Acked {
    subject: String,
    revision: u64,
    payload: Vec<u8>,
}

/// Creates `name`, retrying with the same request id until the cluster acknowledges it or
/// `limit` passes (a retried write whose first attempt was stored is a duplicate, not a
/// second version).
async fn create_until_acked(store: &Store, name: &str, limit: Duration) -> Option<Acked> {
    let subject = subject(name);
    let payload = format!("value of {name}").into_bytes();
    let meta = WriteMeta {
        request_id: Some(name),
        traceparent: None,
    };
    let start = Instant::now();
    while start.elapsed() < limit {
        let attempt = store.write(&subject, EventType::Added, payload.clone(), 0, &meta);
        match tokio::time::timeout(Duration::from_secs(5), attempt).await {
            Ok(Ok(written)) => {
                return Some(Acked {
                    subject,
                    revision: written.revision,
                    payload,
                })
            }
            // Stored by an attempt whose acknowledgement was lost, beyond de-duplication:
            // the stored version says whether it was ours.
            Ok(Err(StoreError::Conflict { .. })) => {
                if let Ok(Some(raw)) = store.get_raw(&subject).await {
                    if raw.payload.as_ref() == payload.as_slice() {
                        return Some(Acked {
                            subject,
                            revision: raw.revision,
                            payload,
                        });
                    }
                }
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    None
}

async fn assert_all_present(store: &Store, acked: &[Acked]) {
    for a in acked {
        let start = Instant::now();
        let raw = loop {
            match store.get_at(a.revision).await {
                Ok(raw) => break raw,
                Err(e) => {
                    assert!(
                        start.elapsed() < CONVERGE,
                        "reading revision {}: {e}",
                        a.revision
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        let raw = raw.unwrap_or_else(|| panic!("acknowledged write {a:?} is missing"));
        assert_eq!(
            raw.subject, a.subject,
            "revision {} holds another object",
            a.revision
        );
        assert_eq!(raw.payload.as_ref(), a.payload.as_slice(), "{a:?} changed");
    }
}

#[test]
fn killing_any_one_server_loses_no_acknowledged_write_and_the_cluster_keeps_serving() {
    World::new().run(|hosts, dir, _links| async move {
        let (mut cluster, store) = r3_cluster(&hosts, &dir).await;
        let mut acked = Vec::new();
        for i in 0..10 {
            acked.push(
                create_until_acked(&store, &format!("before-{i}"), CONVERGE)
                    .await
                    .unwrap(),
            );
        }
        for down in 0..SERVERS {
            cluster.kill(down).await;
            for i in 0..10 {
                let name = format!("while-s{}-down-{i}", down + 1);
                let written = create_until_acked(&store, &name, CONVERGE).await;
                acked.push(written.unwrap_or_else(|| {
                    panic!(
                        "the cluster stopped acknowledging writes with {} down",
                        server_name(down)
                    )
                }));
            }
            cluster
                .restart(down)
                .await
                .expect("the killed server restarts on its store");
            wait_replicated(&store).await;
        }
        assert_eq!(acked.len(), 10 + 10 * SERVERS);
        assert_all_present(&store, &acked).await;
    });
}

/// A stream whose replicas have no leader answers no write, exactly as a deleted stream does
/// ("no responders"). The store must not call it missing: that error tells an operator to
/// re-create the cluster's state, while a NATS cluster elects a new leader on its own.
#[test]
fn writes_to_a_leaderless_stream_are_unavailable_not_a_missing_stream() {
    World::new().run(|hosts, dir, _links| async move {
        let (mut cluster, store) = r3_cluster(&hosts, &dir).await;
        let lead = leader(&store).await;
        // The survivor is a follower: with two of three replicas gone it can elect no one.
        cluster.kill(lead).await;
        cluster.kill((lead + 1) % SERVERS).await;
        let start = Instant::now();
        let mut attempts = 0;
        let reason = loop {
            assert!(
                start.elapsed() < CONVERGE,
                "after {attempts} writes in {CONVERGE:?}, none was refused as leaderless"
            );
            attempts += 1;
            let (subject, meta) = (
                subject(&format!("leaderless-{attempts}")),
                WriteMeta::default(),
            );
            let attempt = store.write(&subject, EventType::Added, b"x".to_vec(), 0, &meta);
            match tokio::time::timeout(Duration::from_secs(3), attempt).await {
                Ok(Err(StoreError::StreamMissing)) => {
                    panic!("a write to a leaderless stream was reported as a missing stream")
                }
                Ok(Err(StoreError::Unavailable(why))) if why.contains("no leader") => break why,
                Ok(Ok(w)) => panic!("one server of three acknowledged a write: {w:?}"),
                // Still reconnecting to the survivor, or waiting for an answer.
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        assert!(reason.contains(subjects::OBJECTS_STREAM), "{reason}");
        drop(cluster);
    });
}

#[test]
fn a_partitioned_minority_server_acknowledges_no_write() {
    World::new().run(|hosts, dir, links| async move {
        let (cluster, store) = r3_cluster(&hosts, &dir).await;
        // The stream's leader is the harder case: it believed itself in charge at the cut.
        let cut = leader(&store).await;
        let (cut_tx, cut_rx) = tokio::sync::oneshot::channel::<()>();
        let (connected_tx, connected_rx) = tokio::sync::oneshot::channel::<()>();
        let minority = client_on_host(&cluster, &hosts, cut, "minority", |store| async move {
            let _ = connected_tx.send(());
            let _ = cut_rx.await;
            let mut acked = Vec::new();
            let start = Instant::now();
            let mut i = 0;
            while start.elapsed() < Duration::from_secs(15) {
                let name = format!("minority-{i}");
                let (subject, meta) = (subject(&name), WriteMeta::default());
                let attempt = store.write(&subject, EventType::Added, b"x".to_vec(), 0, &meta);
                if let Ok(Ok(w)) = tokio::time::timeout(Duration::from_secs(3), attempt).await {
                    acked.push((name, w.revision));
                }
                i += 1;
            }
            (acked, i)
        })
        .await;
        connected_rx.await.expect("the minority client connects");
        links.cut(cut);
        let healing = Healing(&links, cut);
        let _ = cut_tx.send(());
        // The majority elects a new leader and goes on acknowledging.
        let majority = create_until_acked(&store, "majority-during-partition", CONVERGE).await;
        assert!(
            majority.is_some(),
            "the two connected servers stopped acknowledging writes"
        );
        let (acked, attempts) = minority.await;
        drop(healing);
        assert!(attempts > 0);
        assert!(
            acked.is_empty(),
            "the partitioned server {} acknowledged {acked:?}",
            server_name(cut)
        );
        drop(cluster);
    });
}

#[test]
fn after_healing_a_partition_every_replica_converges() {
    World::new().run(|hosts, dir, links| async move {
        let (cluster, store) = r3_cluster(&hosts, &dir).await;
        let lead = leader(&store).await;
        let cut = (lead + 1) % SERVERS;
        links.cut(cut);
        let healing = Healing(&links, cut);
        let mut acked = Vec::new();
        for i in 0..20 {
            let name = format!("during-partition-{i}");
            acked.push(
                create_until_acked(&store, &name, CONVERGE)
                    .await
                    .expect("the majority acknowledges"),
            );
        }
        drop(healing);
        wait_replicated(&store).await;
        // The healed server itself serves the writes made without it, and takes new ones.
        let seen = acked.clone();
        client_on_host(&cluster, &hosts, cut, "healed", |store| async move {
            assert_all_present(&store, &seen).await;
            create_until_acked(&store, "after-healing", CONVERGE)
                .await
                .expect("the healed server's clients write again");
        })
        .await
        .await;
        assert_all_present(&store, &acked).await;
        drop(cluster);
    });
}

/// After a lost race the API reads an object's version from the stream's leader: a direct get
/// is answered by the client's own server first, which may be a follower that has not yet
/// applied the last acknowledged write; the leader's answer never trails it.
#[test]
fn a_read_from_the_leader_is_never_behind_an_acknowledged_write() {
    World::new().run(|hosts, dir, _links| async move {
        let (cluster, store) = r3_cluster(&hosts, &dir).await;
        let follower = (leader(&store).await + 1) % SERVERS;
        let api = cluster.creds(&Role::Api).await.unwrap();
        let nats = shoal_bus::connect(&cluster.server_url(follower), "near-a-follower", &api)
            .await
            .unwrap();
        let near_follower = Store::open(nats).await.unwrap();
        let object = subject("read-your-write");
        let (mut last, mut direct_behind) = (0, 0);
        for i in 0..200u32 {
            let written = near_follower
                .write(
                    &object,
                    EventType::Modified,
                    i.to_be_bytes().to_vec(),
                    last,
                    &WriteMeta::default(),
                )
                .await
                .unwrap_or_else(|e| panic!("write {i}: {e}"));
            last = written.revision;
            let from_leader = near_follower.get_raw_from_leader(&object).await.unwrap();
            assert_eq!(
                from_leader.map(|raw| (raw.revision, raw.payload.to_vec())),
                Some((last, i.to_be_bytes().to_vec())),
                "the leader's read after write {i}"
            );
            let direct = near_follower.get_raw(&object).await.unwrap();
            if direct.map(|raw| raw.revision) != Some(last) {
                direct_behind += 1;
            }
        }
        assert_eq!(
            near_follower
                .get_raw_from_leader(&subject("never-written"))
                .await
                .unwrap()
                .map(|r| r.revision),
            None
        );
        eprintln!("direct gets behind the acknowledged write: {direct_behind} of 200");
        drop(cluster);
    });
}

/// A server cut off from the others answers a direct get from its own stale copy: an object
/// created without it is "not found" there (as on a replica just healed, until it catches
/// up). The API's write paths ask `get_raw_absence_confirmed`, which takes "absent" only
/// from the leader, so a client of that server is told the log is unavailable (retry), never
/// that an existing object is gone (a node agent told so stops confirming its pod's
/// deletion).
#[test]
fn a_cut_off_replica_cannot_say_an_object_is_absent() {
    World::new().run(|hosts, dir, links| async move {
        let (cluster, store) = r3_cluster(&hosts, &dir).await;
        let cut = (leader(&store).await + 1) % SERVERS;
        let (cut_tx, cut_rx) = tokio::sync::oneshot::channel::<()>();
        let (connected_tx, connected_rx) = tokio::sync::oneshot::channel::<()>();
        let object = subject("created-while-cut");
        let asked = object.clone();
        let near_cut = client_on_host(&cluster, &hosts, cut, "near-the-cut", |store| async move {
            let _ = connected_tx.send(());
            let _ = cut_rx.await;
            let direct = store.get_raw(&asked).await.map(|r| r.is_some());
            let confirmed = store
                .get_raw_absence_confirmed(&asked)
                .await
                .map(|r| r.map(|raw| raw.revision));
            (direct, confirmed)
        })
        .await;
        connected_rx.await.expect("the cut host's client connects");
        links.cut(cut);
        let healing = Healing(&links, cut);
        let created = create_until_acked(&store, "created-while-cut", CONVERGE)
            .await
            .expect("the majority acknowledges");
        let _ = cut_tx.send(());
        let (direct, confirmed) = near_cut.await;
        drop(healing);
        // Its own copy cannot hold the object. Asked soon after the cut it says "not found";
        // once its Raft notices the lost leader it may stop answering direct gets (a
        // timeout). Either way only the leader may say "absent".
        assert!(
            !matches!(direct, Ok(true)),
            "the cut-off server holds {object}, created without it: the cut did not cut"
        );
        eprintln!("the cut-off server's direct get of an object created without it: {direct:?}");
        assert!(
            confirmed.is_err(),
            "a cut-off server's client was told {object} (revision {}) is {confirmed:?}",
            created.revision
        );
        // Once healed, the same question is answered with the object.
        assert_eq!(
            store
                .get_raw_absence_confirmed(&object)
                .await
                .unwrap()
                .map(|raw| raw.revision),
            Some(created.revision)
        );
        drop(cluster);
    });
}
