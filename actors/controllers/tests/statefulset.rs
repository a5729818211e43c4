//! The StatefulSet controller against a real cluster (nats-server, API, every controller).
//! No node agent: a stand-in marks pods Running and Ready, only to drive the controller.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::statefulset::REVISION_LABEL;
use bus_schemas::kinds::{ControllerRevision, Pod, StatefulSet};
use bus_schemas::meta::find_condition;
use bus_schemas::selector::Selector;
use common::*;

const T: Duration = Duration::from_secs(30);

fn statefulset(name: &str, replicas: i32, policy: &str) -> StatefulSet {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1"}]}
            }
        }
    }))
}

fn pod(env: &Env, name: &str) -> Option<Arc<Pod>> {
    env.cluster
        .informers
        .get::<Pod>()
        .get("default", name)
        .filter(|p| !p.metadata.is_deleting())
}

async fn set(env: &Env, name: &str) -> StatefulSet {
    env.api.get::<StatefulSet>("default", name).await.unwrap()
}

#[actix::test]
async fn ordered_ready_comes_up_in_order_with_stable_identities() {
    let (env, _c) = env().await;
    let _node = node_sim(&env, |p| {
        p.metadata.labels.get("app").is_some_and(|a| a == "web")
    });
    env.api
        .create(&statefulset("web", 3, "OrderedReady"))
        .await
        .unwrap();
    eventually("3/3 ready", T, || async {
        set(&env, "web").await.status.ready_replicas == 3
    })
    .await;
    for i in 0..3 {
        let p = pod(&env, &format!("web-{i}")).expect("stable name");
        assert_eq!(p.spec.hostname, format!("web-{i}"));
        assert_eq!(p.spec.subdomain, "web");
    }
    // Each pod was created only after the one before it was Ready.
    for i in 1..3 {
        let before = pod(&env, &format!("web-{}", i - 1)).unwrap();
        let ready_at = find_condition(&before.status.conditions, "Ready")
            .and_then(|c| c.last_transition_time)
            .unwrap();
        let created = pod(&env, &format!("web-{i}"))
            .unwrap()
            .metadata
            .creation_timestamp
            .unwrap();
        assert!(
            created >= ready_at,
            "web-{i} created {created} before web-{} was ready {ready_at}",
            i - 1
        );
    }
    let s = set(&env, "web").await;
    assert_eq!(s.status.current_revision, s.status.update_revision);
    assert!(!s.status.update_revision.is_empty());
    let revision = env
        .api
        .get::<ControllerRevision>("default", &s.status.update_revision)
        .await
        .expect("the revision is recorded");
    assert_eq!(revision.revision, 1);

    // Scaled down: the highest ordinals go.
    let mut s = set(&env, "web").await;
    s.spec.replicas = Some(1);
    env.api.update(&s).await.unwrap();
    eventually("only web-0 left", T, || async {
        pod(&env, "web-0").is_some() && pod(&env, "web-1").is_none() && pod(&env, "web-2").is_none()
    })
    .await;
}

#[actix::test]
async fn a_partitioned_rolling_update_stops_at_the_partition() {
    let (env, _c) = env().await;
    let _node = node_sim(&env, |p| {
        p.metadata.labels.get("app").is_some_and(|a| a == "canary")
    });
    let mut s = statefulset("canary", 3, "Parallel");
    s.spec.update_strategy.type_ = "RollingUpdate".into();
    s.spec.update_strategy.rolling_update = Some(Default::default());
    s.spec
        .update_strategy
        .rolling_update
        .as_mut()
        .unwrap()
        .partition = Some(1);
    env.api.create(&s).await.unwrap();
    eventually("3/3 ready", T, || async {
        set(&env, "canary").await.status.ready_replicas == 3
    })
    .await;
    let old = set(&env, "canary").await.status.update_revision;

    let mut s = set(&env, "canary").await;
    s.spec
        .template
        .metadata
        .annotations
        .insert("version".into(), "2".into());
    env.api.update(&s).await.unwrap();
    eventually("web-1 and web-2 updated", T, || async {
        let s = set(&env, "canary").await;
        s.status.update_revision != old
            && s.status.updated_replicas == 2
            && s.status.ready_replicas == 3
    })
    .await;
    let s = set(&env, "canary").await;
    let revision = |name: &str| pod(&env, name).unwrap().metadata.labels[REVISION_LABEL].clone();
    assert_eq!(revision("canary-0"), old, "below the partition: untouched");
    assert_eq!(revision("canary-1"), s.status.update_revision);
    assert_eq!(revision("canary-2"), s.status.update_revision);
    assert_eq!(
        s.status.current_revision, old,
        "the rollout is not complete"
    );

    // Lowering the partition finishes it.
    let mut s = set(&env, "canary").await;
    s.spec
        .update_strategy
        .rolling_update
        .as_mut()
        .unwrap()
        .partition = Some(0);
    env.api.update(&s).await.unwrap();
    eventually("the rollout completes", T, || async {
        let s = set(&env, "canary").await;
        s.status.current_revision == s.status.update_revision && s.status.updated_replicas == 3
    })
    .await;
}

#[actix::test]
async fn parallel_creates_every_pod_without_waiting() {
    let (env, _c) = env().await;
    env.api
        .create(&statefulset("many", 5, "Parallel"))
        .await
        .unwrap();
    eventually("5 pods, none ready", T, || async {
        (0..5).all(|i| pod(&env, &format!("many-{i}")).is_some())
    })
    .await;
    let all = env.cluster.informers.get::<Pod>().list(
        Some("default"),
        &Selector::from_labels(&labels(&[("app", "many")])),
    );
    assert!(all.iter().all(|p| !p.is_ready()));
}

#[actix::test]
async fn identity_fields_are_immutable() {
    let (env, _c) = env().await;
    env.api
        .create(&statefulset("fixed", 1, "OrderedReady"))
        .await
        .unwrap();
    for field in ["spec.serviceName", "spec.podManagementPolicy"] {
        // The controller writes the set's status meanwhile: a lost race is a Conflict, and a
        // user would re-read and try again; the change itself must be refused as Invalid.
        let mut refused = None;
        for _ in 0..20 {
            let mut s = set(&env, "fixed").await;
            if field == "spec.serviceName" {
                s.spec.service_name = "other".into();
            } else {
                s.spec.pod_management_policy = "Parallel".into();
            }
            match env.api.update(&s).await {
                Err(shoal_bus::ApiError::Status(status))
                    if status.is(bus_schemas::Reason::Conflict) => {}
                Err(shoal_bus::ApiError::Status(status)) => {
                    refused = Some(status);
                    break;
                }
                other => panic!("{field} changed: {other:?}"),
            }
        }
        let status = refused.unwrap_or_else(|| panic!("{field}: 20 conflicts in a row"));
        assert!(
            status.causes().iter().any(|c| c.field == field),
            "{status:?}"
        );
    }
    let s = set(&env, "fixed").await;
    assert_eq!(
        (
            s.spec.service_name.as_str(),
            s.spec.pod_management_policy.as_str()
        ),
        ("fixed", "OrderedReady")
    );
}
