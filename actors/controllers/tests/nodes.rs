//! Node lifecycle and leader election against a real cluster. No node agent: the test
//! writes node status, heartbeats (Leases) and pod bindings itself, standing in for the
//! agent and the scheduler only to drive the controllers.

mod common;

use std::time::Duration;

use bus_schemas::api::ListOptions;
use bus_schemas::kinds::{Event, Lease, Node, ReplicaSet};
use bus_schemas::meta::find_condition;
use common::*;
use shoal_bus::leader::{LeaderElectionConfig, LeaderElector};
use shoal_bus::ApiClient;
use shoal_controllers::nodelifecycle::{NODE_LEASE_NAMESPACE, TAINT_UNREACHABLE};

const T: Duration = Duration::from_secs(30);

async fn heartbeat(api: &ApiClient, node: &str) {
    heartbeat_at(api, node, chrono::Utc::now()).await
}

/// A heartbeat stored as made at `now`.
async fn heartbeat_at(api: &ApiClient, node: &str, now: chrono::DateTime<chrono::Utc>) {
    match api.get::<Lease>(NODE_LEASE_NAMESPACE, node).await {
        Ok(mut l) => {
            l.spec.renew_time = Some(now);
            l.metadata.resource_version.clear();
            let _ = api.update(&l).await;
        }
        Err(_) => {
            let mut l = Lease::default();
            l.metadata.namespace = NODE_LEASE_NAMESPACE.into();
            l.metadata.name = node.into();
            l.spec.holder_identity = Some(node.into());
            l.spec.lease_duration_seconds = Some(40);
            l.spec.renew_time = Some(now);
            let _ = api.create(&l).await;
        }
    }
}

/// Creates the ReplicaSet `web` with `replicas` pods and waits until they exist.
async fn create_web(env: &Env, replicas: usize) {
    let rs: ReplicaSet = from_json(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "main", "image": "busybox:1"}]}}}
    }));
    env.api.create(&rs).await.unwrap();
    eventually(&format!("{replicas} pods"), T, || async {
        live_pods(env, "default", "web").len() == replicas
    })
    .await;
}

#[actix::test]
async fn unreachable_node_is_tainted_and_its_pods_replaced() {
    let (env, _c) = env().await;
    add_node(&env.api, "n1", &[]).await;
    add_node(&env.api, "n2", &[]).await;
    heartbeat(&env.api, "n1").await;
    heartbeat(&env.api, "n2").await;
    // n2 keeps heartbeating; n1 never again.
    let api = env.api.clone();
    let beats = actix::spawn(async move {
        loop {
            heartbeat(&api, "n2").await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    create_web(&env, 2).await;
    let first: Vec<String> = live_pods(&env, "default", "web")
        .iter()
        .map(|p| p.metadata.name.clone())
        .collect();
    for p in live_pods(&env, "default", "web") {
        bind(&env.api, &p, "n1").await;
    }
    for p in live_pods(&env, "default", "web") {
        mark_ready(&env.api, &p).await;
    }
    eventually("n1 NotReady and tainted", T, || async {
        let n = env.api.get::<Node>("", "n1").await.unwrap();
        let ready = find_condition(&n.status.conditions, "Ready").unwrap();
        ready.status == "Unknown"
            && ready.reason == "NodeStatusUnknown"
            && n.spec
                .taints
                .iter()
                .any(|t| t.key == TAINT_UNREACHABLE && t.effect == "NoExecute")
            && n.spec
                .taints
                .iter()
                .any(|t| t.key == TAINT_UNREACHABLE && t.effect == "NoSchedule")
    })
    .await;
    let n2 = env.api.get::<Node>("", "n2").await.unwrap();
    assert!(
        n2.is_ready() && n2.spec.taints.is_empty(),
        "the healthy node is untouched"
    );
    // Evicted and replaced; the stand-in scheduler binds the replacements to n2.
    eventually("pods evicted and replaced on n2", T, || async {
        let pods = live_pods(&env, "default", "web");
        for p in pods.iter().filter(|p| p.spec.node_name.is_empty()) {
            bind(&env.api, p, "n2").await;
        }
        pods.len() == 2
            && pods
                .iter()
                .all(|p| p.spec.node_name == "n2" && !first.contains(&p.metadata.name))
    })
    .await;

    // Heartbeats resume: taints go, Ready comes back.
    heartbeat(&env.api, "n1").await;
    eventually("n1 ready again", T, || async {
        let n = env.api.get::<Node>("", "n1").await.unwrap();
        n.is_ready() && n.spec.taints.is_empty()
    })
    .await;
    beats.abort();
}

/// After a restart the leases read stale until the agents beat again: a controller that
/// starts gives every node a grace period from its start before it judges it.
#[actix::test]
async fn a_node_whose_lease_went_stale_while_nobody_watched_gets_a_grace_period() {
    let cluster = shoal_api::local::LocalCluster::start().await.unwrap();
    let api = cluster.api();
    add_node(&api, "n1", &[]).await;
    heartbeat_at(
        &api,
        "n1",
        chrono::Utc::now() - chrono::Duration::minutes(5),
    )
    .await;
    let grace = tunables().node_monitor_grace;
    let started = std::time::Instant::now();
    let _controllers = start_controllers_tuned(&cluster, tunables()).await;
    eventually("n1 judged NotReady once no heartbeat came", T, || async {
        let n = api.get::<Node>("", "n1").await.unwrap();
        find_condition(&n.status.conditions, "Ready").is_some_and(|c| c.status == "Unknown")
    })
    .await;
    assert!(
        started.elapsed() + Duration::from_millis(100) >= grace,
        "NotReady {:?} after the controllers started, within their {grace:?} grace",
        started.elapsed()
    );
}

#[actix::test]
async fn evictions_pause_while_most_nodes_are_down_and_resume_when_they_return() {
    let (env, _c) = env().await;
    let nodes = ["n1", "n2", "n3"];
    for n in nodes {
        add_node(&env.api, n, &[]).await;
        heartbeat(&env.api, n).await;
    }
    create_web(&env, 3).await;
    for (p, n) in live_pods(&env, "default", "web").iter().zip(nodes) {
        bind(&env.api, p, n).await;
    }
    let first: Vec<String> = live_pods(&env, "default", "web")
        .iter()
        .map(|p| p.metadata.name.clone())
        .collect();

    // Every node stops heartbeating at once: the controller holds the evictions back and
    // says so on each node.
    let paused_on = |node: &'static str| {
        let api = env.api.clone();
        async move {
            api.list::<Event>(&ListOptions::default())
                .await
                .unwrap()
                .items
                .iter()
                .any(|e| e.reason == "EvictionsPaused" && e.involved_object.name == node)
        }
    };
    eventually("evictions paused on every node", T, || async {
        paused_on("n1").await && paused_on("n2").await && paused_on("n3").await
    })
    .await;
    let still: Vec<String> = live_pods(&env, "default", "web")
        .iter()
        .map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(
        still, first,
        "no pod was evicted while most nodes were down"
    );

    // Two of three come back: one down node is a node failure again, and its pod moves.
    let api = env.api.clone();
    let beats = actix::spawn(async move {
        loop {
            heartbeat(&api, "n2").await;
            heartbeat(&api, "n3").await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    eventually("n1's pod evicted and replaced", T, || async {
        let pods = live_pods(&env, "default", "web");
        for p in pods.iter().filter(|p| p.spec.node_name.is_empty()) {
            bind(&env.api, p, "n2").await;
        }
        pods.len() == 3
            && pods.iter().all(|p| p.spec.node_name != "n1")
            && pods
                .iter()
                .filter(|p| first.contains(&p.metadata.name))
                .count()
                == 2
    })
    .await;
    beats.abort();
}

fn election(identity: &str) -> LeaderElectionConfig {
    let mut c = LeaderElectionConfig::new("shoal-system", "test-controller", identity);
    c.lease_duration = Duration::from_secs(3);
    c.renew_period = Duration::from_millis(500);
    c.retry_period = Duration::from_millis(200);
    c
}

#[actix::test]
async fn exactly_one_leader_and_takeover_when_renewals_stop() {
    let cluster = shoal_api::local::LocalCluster::start().await.unwrap();
    let a = LeaderElector::new(cluster.api(), election("a"));
    let b = LeaderElector::new(cluster.api(), election("b"));
    let leader_a = a.acquire().await;
    assert!(leader_a.is_leader());
    // b cannot lead while a renews (a few renewals happen meanwhile).
    assert!(
        tokio::time::timeout(Duration::from_secs(2), b.acquire())
            .await
            .is_err(),
        "two leaders"
    );
    let lease: Lease = cluster
        .api()
        .get("shoal-system", "test-controller")
        .await
        .unwrap();
    assert_eq!(lease.spec.holder_identity.as_deref(), Some("a"));
    // Kill a's renewals (without releasing): b takes over once the lease lapses.
    drop(leader_a);
    let mut leader_b = tokio::time::timeout(Duration::from_secs(10), b.acquire())
        .await
        .expect("b takes over");
    let lease: Lease = cluster
        .api()
        .get("shoal-system", "test-controller")
        .await
        .unwrap();
    assert_eq!(lease.spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(lease.spec.lease_transitions, Some(1));
    // a, campaigning again, would only lose: its attempt sees b's fresh lease.
    assert!(matches!(
        a.try_acquire_or_renew().await.unwrap(),
        shoal_bus::leader::Attempt::Standby { .. }
    ));
    // A released lease is taken at once.
    assert!(leader_b.is_leader());
    tokio::select! {
        _ = leader_b.lost() => panic!("b lost leadership unexpectedly"),
        _ = tokio::time::sleep(Duration::from_millis(1200)) => {}
    }
    leader_b.release().await;
    let leader_a = tokio::time::timeout(Duration::from_secs(2), a.acquire())
        .await
        .expect("a takes the released lease");
    assert!(leader_a.is_leader());
}

#[actix::test]
async fn controllers_run_only_on_the_leader() {
    let cluster = shoal_api::local::LocalCluster::start().await.unwrap();
    let env = Env {
        api: cluster.api(),
        cluster,
    };
    let mut cfg = shoal_controllers::ControllersConfig {
        tunables: tunables(),
        ..Default::default()
    };
    cfg.leader_election = Some(election("one"));
    let one = start_controllers(&env.cluster, cfg.clone()).await;
    cfg.leader_election = Some(election("two"));
    let two = start_controllers(&env.cluster, cfg).await;
    let rs: ReplicaSet = from_json(serde_json::json!({
        "metadata": {"name": "le", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "le"}},
                 "template": {"metadata": {"labels": {"app": "le"}},
                              "spec": {"containers": [{"name": "main", "image": "busybox:1"}]}}}
    }));
    env.api.create(&rs).await.unwrap();
    eventually("2 pods", T, || async {
        live_pods(&env, "default", "le").len() == 2
    })
    .await;
    let holder = env
        .api
        .get::<Lease>("shoal-system", "test-controller")
        .await
        .unwrap()
        .spec
        .holder_identity
        .unwrap();
    // Stop the leader (it releases the lease); the standby takes over and keeps reconciling.
    let (leader, standby) = if holder == "one" {
        (one, two)
    } else {
        (two, one)
    };
    leader.stop().await;
    let mut rs = env.api.get::<ReplicaSet>("default", "le").await.unwrap();
    rs.spec.replicas = Some(3);
    rs.metadata.resource_version.clear();
    env.api.update(&rs).await.unwrap();
    eventually("standby scaled to 3", T, || async {
        live_pods(&env, "default", "le").len() == 3
    })
    .await;
    standby.stop().await;
}
