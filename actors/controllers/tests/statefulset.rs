//! The StatefulSet controller against a real cluster (nats-server, API, every controller).
//! No node agent: a stand-in marks pods Running and Ready, only to drive the controller.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::statefulset::REVISION_LABEL;
use bus_schemas::kinds::{ControllerRevision, PersistentVolumeClaim, Pod, StatefulSet};
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

fn with_claims(mut set: StatefulSet, policy: serde_json::Value) -> StatefulSet {
    let mut spec = serde_json::to_value(&set.spec).unwrap();
    spec["volumeClaimTemplates"] = serde_json::json!([{
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }]);
    spec["persistentVolumeClaimRetentionPolicy"] = policy;
    spec["template"]["spec"]["containers"][0]["volumeMounts"] =
        serde_json::json!([{"name": "data", "mountPath": "/data"}]);
    set.spec = serde_json::from_value(spec).unwrap();
    set
}

fn claim(env: &Env, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
    env.cluster
        .informers
        .get::<PersistentVolumeClaim>()
        .get("default", name)
}

/// Two-replica set `app` with a `data` claim template (whenScaled Retain), its pods run by a
/// simulated node (kept running while the returned handle lives), once both are Ready.
async fn two_ready_with_claims(
    env: &Env,
    app: &'static str,
    mode: &str,
    when_deleted: &str,
) -> NodeSim {
    let node = node_sim(env, move |p| {
        p.metadata.labels.get("app").is_some_and(|a| a == app)
    });
    let policy = serde_json::json!({"whenDeleted": when_deleted, "whenScaled": "Retain"});
    env.api
        .create(&with_claims(statefulset(app, 2, mode), policy))
        .await
        .unwrap();
    eventually("2/2 ready", T, || async {
        set(env, app).await.status.ready_replicas == 2
    })
    .await;
    node
}

#[actix::test]
async fn each_pod_gets_its_claim_first_and_keeps_it() {
    let (env, _c) = env().await;
    let _node = two_ready_with_claims(&env, "db", "OrderedReady", "Delete").await;
    let set_uid = set(&env, "db").await.metadata.uid;
    for i in 0..2 {
        let name = format!("data-db-{i}");
        let c = claim(&env, &name).unwrap_or_else(|| panic!("{name} exists"));
        let p = pod(&env, &format!("db-{i}")).unwrap();
        assert!(
            c.metadata.creation_timestamp <= p.metadata.creation_timestamp,
            "{name} made before its pod"
        );
        assert_eq!(c.spec.storage_class_name.as_deref(), Some("local-path"));
        assert_eq!(c.metadata.labels["app"], "db");
        assert_eq!(
            c.metadata.owner_references[0].uid, set_uid,
            "whenDeleted: Delete"
        );
        let volume = p.spec.volumes.iter().find(|v| v.name == "data").unwrap();
        assert_eq!(
            volume.persistent_volume_claim.as_ref().unwrap().claim_name,
            name
        );
    }

    // A deleted pod comes back on the same claim; the claim itself is untouched.
    let before = claim(&env, "data-db-1").unwrap().metadata.uid.clone();
    let old_pod = pod(&env, "db-1").unwrap().metadata.uid.clone();
    delete_now::<Pod>(&env.api, "default", "db-1", None).await;
    eventually("db-1 recreated", T, || async {
        pod(&env, "db-1").is_some_and(|p| p.metadata.uid != old_pod)
    })
    .await;
    assert_eq!(claim(&env, "data-db-1").unwrap().metadata.uid, before);

    // A changed claim template is refused where immutable.
    let mut refused = None;
    for _ in 0..20 {
        let mut s = set(&env, "db").await;
        s.spec.volume_claim_templates[0].metadata.name = "other".into();
        match env.api.update(&s).await {
            Err(shoal_bus::ApiError::Status(status))
                if status.is(bus_schemas::Reason::Conflict) => {}
            Err(shoal_bus::ApiError::Status(status)) => {
                refused = Some(status);
                break;
            }
            other => panic!("claim template changed: {other:?}"),
        }
    }
    let status = refused.expect("refused");
    assert!(
        status
            .causes()
            .iter()
            .any(|c| c.field == "spec.volumeClaimTemplates"),
        "{status:?}"
    );

    // whenDeleted: Delete: the claims go with the set.
    delete_now::<StatefulSet>(&env.api, "default", "db", None).await;
    eventually("claims collected", T, || async {
        claim(&env, "data-db-0").is_none() && claim(&env, "data-db-1").is_none()
    })
    .await;
}

#[actix::test]
async fn retained_claims_outlive_a_scale_down_and_a_bad_template_is_refused() {
    let (env, _c) = env().await;
    let _node = two_ready_with_claims(&env, "kv", "Parallel", "Retain").await;
    let mut s = set(&env, "kv").await;
    s.spec.replicas = Some(1);
    env.api.update(&s).await.unwrap();
    eventually("kv-1 gone", T, || async { pod(&env, "kv-1").is_none() }).await;
    let kept = claim(&env, "data-kv-1").expect("retained on scale-down");
    assert!(kept.metadata.owner_references.is_empty());

    let mut bad = with_claims(statefulset("bad", 1, "Parallel"), serde_json::json!({}));
    bad.spec.volume_claim_templates[0]
        .spec
        .resources
        .requests
        .clear();
    let err = env.api.create(&bad).await.expect_err("refused");
    let shoal_bus::ApiError::Status(status) = err else {
        panic!("{err:?}")
    };
    assert!(
        status
            .causes()
            .iter()
            .any(|c| c.field == "spec.volumeClaimTemplates[0].spec.resources.requests[storage]"),
        "{status:?}"
    );
}
