//! The scale subresource against a real nats-server: read replicas and selector, set
//! replicas without touching the rest of the spec, preconditions, kinds without it.

use bus_schemas::api::Scale;
use bus_schemas::kinds::{Deployment, Pod, ReplicaSet};
use bus_schemas::{codec, Reason};
use shoal_api::local::LocalCluster;

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.35"}]}
            }
        }
    }))
    .expect("fixture deployment")
}

#[actix::test]
async fn get_and_update_scale_of_a_deployment() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let created = api.create(&deployment("web", 2)).await.unwrap();

    let scale = api.get_scale::<Deployment>("default", "web").await.unwrap();
    assert_eq!(
        (scale.api_version.as_str(), scale.kind.as_str()),
        ("autoscaling/v1", "Scale")
    );
    assert_eq!(scale.spec.replicas, 2);
    assert_eq!(scale.status.selector, "app=web");
    assert_eq!(scale.metadata.uid, created.metadata.uid);
    assert_eq!(
        scale.metadata.resource_version,
        created.metadata.resource_version
    );

    // Someone changes the template meanwhile: an unconditional scale keeps that change.
    let mut changed = created.clone();
    changed.spec.template.spec.containers[0].image = "busybox:1.36".into();
    api.update(&changed).await.unwrap();
    let mut unconditional = Scale::default();
    unconditional.metadata.name = "web".into();
    unconditional.spec.replicas = 5;
    let scaled = api
        .update_scale::<Deployment>(&unconditional)
        .await
        .unwrap();
    assert_eq!(scaled.spec.replicas, 5);
    let stored: Deployment = api.get("default", "web").await.unwrap();
    assert_eq!(stored.spec.replicas, Some(5));
    assert_eq!(
        stored.spec.template.spec.containers[0].image,
        "busybox:1.36"
    );

    // A stale resourceVersion is a precondition that fails.
    let stale = api.update_scale::<Deployment>(&scale).await.unwrap_err();
    assert!(stale.is_conflict(), "{stale}");
    let stored: Deployment = api.get("default", "web").await.unwrap();
    assert_eq!(stored.spec.replicas, Some(5));

    // A current one succeeds.
    let mut fresh = scaled.clone();
    fresh.spec.replicas = 0;
    let zero = api.update_scale::<Deployment>(&fresh).await.unwrap();
    assert_eq!(zero.spec.replicas, 0);
}

#[actix::test]
async fn scale_of_a_replicaset_and_bad_requests() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let d = deployment("rs1", 1);
    let rs: ReplicaSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "rs1"},
        "spec": serde_json::to_value(&d.spec).unwrap(),
    }))
    .unwrap();
    api.create(&rs).await.unwrap();
    let mut scale = api.get_scale::<ReplicaSet>("default", "rs1").await.unwrap();
    assert_eq!(scale.spec.replicas, 1);
    scale.spec.replicas = 3;
    api.update_scale::<ReplicaSet>(&scale).await.unwrap();
    let stored: ReplicaSet = api.get("default", "rs1").await.unwrap();
    assert_eq!(stored.spec.replicas, Some(3));

    // Negative replicas: Invalid, with the field's path; nothing written.
    scale.metadata.resource_version.clear();
    scale.spec.replicas = -1;
    let err = api.update_scale::<ReplicaSet>(&scale).await.unwrap_err();
    assert!(err.is(Reason::Invalid), "{err}");
    assert!(err.to_string().contains("spec.replicas"), "{err}");
    let stored: ReplicaSet = api.get("default", "rs1").await.unwrap();
    assert_eq!(stored.spec.replicas, Some(3));

    // Missing target: NotFound; a kind without the subresource: MethodNotAllowed.
    let missing = api
        .get_scale::<Deployment>("default", "nope")
        .await
        .unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
    let pods = api.get_scale::<Pod>("default", "x").await.unwrap_err();
    assert!(pods.is(Reason::MethodNotAllowed), "{pods}");

    // Garbage body: BadRequest/Invalid, never a crash.
    let reply = api
        .request_raw(
            "deployment",
            bus_schemas::subjects::Verb::GetScale,
            b"\xc1garbage".to_vec(),
        )
        .await
        .unwrap();
    let code = reply
        .headers
        .get(bus_schemas::subjects::HEADER_CODE)
        .map(|v| v.to_string());
    assert_eq!(
        code.as_deref(),
        Some("422"),
        "an undecodable ObjectRef is Invalid"
    );
    let status: bus_schemas::Status = codec::from_msgpack(&reply.payload).unwrap();
    assert!(status.message.contains("ObjectRef"), "{}", status.message);
}
