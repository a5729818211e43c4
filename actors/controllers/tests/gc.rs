//! Garbage collection and namespace deletion against a real cluster (no node agent: pods
//! stay unbound, so deleting them needs no node confirmation).

mod common;

use std::time::Duration;

use bus_schemas::kinds::{Namespace, Node, Pod, ReplicaSet};
use bus_schemas::selector::Selector;
use common::*;
use shoal_controllers::namespace::FINALIZER;

const T: Duration = Duration::from_secs(20);

async fn rs_gone(env: &Env, ns: &str, name: &str) -> bool {
    env.api
        .get::<ReplicaSet>(ns, name)
        .await
        .is_err_and(|e| e.is_not_found())
}

#[actix::test]
async fn background_deletion_removes_dependents() {
    let (env, _c) = env().await;
    env.api
        .create(&replicaset_in("default", "bg", "bg", 3))
        .await
        .unwrap();
    eventually("3 pods", T, || async {
        live_pods(&env, "default", "bg").len() == 3
    })
    .await;
    delete_now::<ReplicaSet>(&env.api, "default", "bg", None).await;
    eventually("pods collected", T, || async {
        rs_gone(&env, "default", "bg").await && live_pods(&env, "default", "bg").is_empty()
    })
    .await;
}

#[actix::test]
async fn foreground_deletion_waits_for_dependents() {
    let (env, _c) = env().await;
    env.api
        .create(&replicaset_in("default", "fg", "fg", 2))
        .await
        .unwrap();
    eventually("2 pods", T, || async {
        live_pods(&env, "default", "fg").len() == 2
    })
    .await;
    delete_now::<ReplicaSet>(&env.api, "default", "fg", Some("Foreground")).await;
    // The owner is still there (terminating) until its pods are gone.
    eventually("owner gone after pods", T, || async {
        let pods = live_pods(&env, "default", "fg");
        let gone = rs_gone(&env, "default", "fg").await;
        assert!(
            !gone || pods.is_empty(),
            "owner removed while dependents remained"
        );
        gone
    })
    .await;
    let all = env.cluster.informers.get::<Pod>().list(
        Some("default"),
        &Selector::from_labels(&labels(&[("app", "fg")])),
    );
    assert!(all.is_empty());
}

#[actix::test]
async fn orphan_deletion_keeps_dependents() {
    let (env, _c) = env().await;
    env.api
        .create(&replicaset_in("default", "or", "or", 2))
        .await
        .unwrap();
    eventually("2 pods", T, || async {
        live_pods(&env, "default", "or").len() == 2
    })
    .await;
    delete_now::<ReplicaSet>(&env.api, "default", "or", Some("Orphan")).await;
    eventually("owner gone, pods orphaned", T, || async {
        let pods = live_pods(&env, "default", "or");
        rs_gone(&env, "default", "or").await
            && pods.len() == 2
            && pods.iter().all(|p| p.metadata.owner_references.is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        live_pods(&env, "default", "or").len(),
        2,
        "orphans must survive"
    );
}

#[actix::test]
async fn never_deletes_when_owner_exists_with_same_name_but_other_uid() {
    let (env, _c) = env().await;
    // A pod referencing an RS by name but with a stale uid: the owner is gone (uid differs).
    let rs = env
        .api
        .create(&replicaset_in("default", "owner", "owner", 0))
        .await
        .unwrap();
    let mut kept: Pod = from_json(serde_json::json!({
        "metadata": {"name": "kept", "labels": {"x": "1"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1"}]}
    }));
    let mut r = shoal_controllers::podutil::controller_ref(&rs);
    r.controller = Some(false);
    kept.metadata.owner_references.push(r.clone());
    env.api.create(&kept).await.unwrap();
    let mut stale = kept.clone();
    stale.metadata.name = "stale".into();
    stale.metadata.owner_references[0].uid = "not-the-uid".into();
    env.api.create(&stale).await.unwrap();
    eventually("stale collected", T, || async {
        env.api
            .get::<Pod>("default", "stale")
            .await
            .is_err_and(|e| e.is_not_found())
    })
    .await;
    assert!(env.api.get::<Pod>("default", "kept").await.is_ok());
}

#[actix::test]
async fn deleting_a_namespace_empties_it() {
    let (env, _c) = env().await;
    let ns: Namespace = from_json(serde_json::json!({"metadata": {"name": "doomed"}}));
    env.api.create(&ns).await.unwrap();
    eventually("finalizer added", T, || async {
        env.api
            .get::<Namespace>("", "doomed")
            .await
            .unwrap()
            .metadata
            .finalizers
            .iter()
            .any(|f| f == FINALIZER)
    })
    .await;
    env.api
        .create(&replicaset_in("doomed", "a", "a", 2))
        .await
        .unwrap();
    eventually("2 pods", T, || async {
        live_pods(&env, "doomed", "a").len() == 2
    })
    .await;
    delete_now::<Namespace>(&env.api, "", "doomed", None).await;
    let terminating = env.api.get::<Namespace>("", "doomed").await;
    if let Ok(ns) = terminating {
        assert_eq!(ns.status.phase, "Terminating");
    }
    eventually("namespace and content gone", T, || async {
        let gone = env
            .api
            .get::<Namespace>("", "doomed")
            .await
            .is_err_and(|e| e.is_not_found());
        let pods = env
            .cluster
            .informers
            .get::<Pod>()
            .list(Some("doomed"), &Selector::everything());
        let rss = env
            .cluster
            .informers
            .get::<ReplicaSet>()
            .list(Some("doomed"), &Selector::everything());
        gone && pods.is_empty() && rss.is_empty()
    })
    .await;
}

/// Kubernetes' PodGC: nothing is left to stop a pod whose node object is gone, so the pod is
/// deleted at once and its owner can replace it.
#[actix::test]
async fn pods_bound_to_a_deleted_node_are_collected() {
    let (env, _c) = env().await;
    add_node(&env.api, "doomed", &[]).await;
    let pod: Pod = from_json(serde_json::json!({
        "metadata": {"name": "on-doomed", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1"}]}
    }));
    let pod = env.api.create(&pod).await.unwrap();
    bind(&env.api, &pod, "doomed").await;
    eventually("the pod bound", T, || async {
        env.api
            .get::<Pod>("default", "on-doomed")
            .await
            .is_ok_and(|p| p.spec.node_name == "doomed")
    })
    .await;
    delete_now::<Node>(&env.api, "", "doomed", None).await;
    eventually("the pod on the deleted node collected", T, || async {
        env.api
            .get::<Pod>("default", "on-doomed")
            .await
            .is_err_and(|e| e.is_not_found())
    })
    .await;
}
