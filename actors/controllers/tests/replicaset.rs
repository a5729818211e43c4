//! ReplicaSet controller against a real cluster (no node agent: see `common`).

mod common;

use std::time::Duration;

use bus_schemas::kinds::{Pod, ReplicaSet};
use common::*;

const T: Duration = Duration::from_secs(20);

fn owned_by(pods: &[std::sync::Arc<Pod>], uid: &str) -> usize {
    pods.iter()
        .filter(|p| p.controller_uid() == Some(uid))
        .count()
}

#[actix::test]
async fn scales_up_and_down() {
    let (env, _c) = env().await;
    let rs = env.api.create(&replicaset("web", "web", 3)).await.unwrap();
    eventually("3 pods", T, || async {
        live_pods(&env, "default", "web").len() == 3
    })
    .await;
    let pods = live_pods(&env, "default", "web");
    assert_eq!(owned_by(&pods, &rs.metadata.uid), 3);
    for p in &pods {
        assert!(p.metadata.name.starts_with("web-"), "{}", p.metadata.name);
        let r = p.metadata.controller_ref().unwrap();
        assert_eq!(r.block_owner_deletion, Some(true));
    }
    eventually("status.replicas 3", T, || async {
        env.api
            .get::<ReplicaSet>("default", "web")
            .await
            .unwrap()
            .status
            .replicas
            == 3
    })
    .await;

    // Ready pods are kept when scaling down; the not-ready one goes first.
    for p in pods.iter().take(2) {
        mark_ready(&env.api, p).await;
    }
    let not_ready = pods[2].metadata.name.clone();
    let mut current = env.api.get::<ReplicaSet>("default", "web").await.unwrap();
    current.spec.replicas = Some(2);
    current.metadata.resource_version.clear(); // unconditional: the controller writes status
    env.api.update(&current).await.unwrap();
    eventually("2 pods", T, || async {
        live_pods(&env, "default", "web").len() == 2
    })
    .await;
    assert!(live_pods(&env, "default", "web")
        .iter()
        .all(|p| p.metadata.name != not_ready));
    eventually("status ready 2", T, || async {
        let s = env
            .api
            .get::<ReplicaSet>("default", "web")
            .await
            .unwrap()
            .status;
        s.replicas == 2
            && s.ready_replicas == 2
            && s.available_replicas == 2
            && s.observed_generation == 2
    })
    .await;
    // And it stays at exactly 2 (no repeated bursts).
    let before = live_pods(&env, "default", "web").len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(before, live_pods(&env, "default", "web").len());
}

#[actix::test]
async fn adopts_orphans_and_releases_relabelled_pods() {
    let (env, _c) = env().await;
    let orphan: Pod = from_json(serde_json::json!({
        "metadata": {"name": "stray", "labels": {"app": "api"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1"}]}
    }));
    env.api.create(&orphan).await.unwrap();
    let rs = env.api.create(&replicaset("api", "api", 2)).await.unwrap();
    eventually("2 owned pods incl. the orphan", T, || async {
        let pods = live_pods(&env, "default", "api");
        pods.len() == 2
            && owned_by(&pods, &rs.metadata.uid) == 2
            && pods.iter().any(|p| p.metadata.name == "stray")
    })
    .await;

    // Quarantine: relabel one pod; it is released and kept, and a replacement starts.
    let victim = env.api.get::<Pod>("default", "stray").await.unwrap();
    let mut relabelled = victim.clone();
    relabelled
        .metadata
        .labels
        .insert("app".into(), "api-debug".into());
    env.api.update(&relabelled).await.unwrap();
    eventually("released and replaced", T, || async {
        let stray = env.api.get::<Pod>("default", "stray").await.unwrap();
        let pods = live_pods(&env, "default", "api");
        stray.metadata.controller_ref().is_none()
            && pods.len() == 2
            && owned_by(&pods, &rs.metadata.uid) == 2
    })
    .await;
    assert!(env
        .api
        .get::<Pod>("default", "stray")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_none());
}
