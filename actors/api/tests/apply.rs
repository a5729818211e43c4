//! Server-side apply through the real API on a real nats-server: other writers' fields
//! survive, server-set fields never fail an unchanged manifest, conflicts name the field and
//! its owner, force takes over, and an unchanged manifest is a no-op for every kind.

#[path = "../../../bus-schemas/tests/fixtures/mod.rs"]
mod fixtures;

use bus_schemas::api::{PatchRequest, HEADER_FIELD_MANAGER};
use bus_schemas::kinds::{Deployment, Pod};
use bus_schemas::subjects::{Verb, HEADER_CODE};
use bus_schemas::{codec, with_kind, ManagedFieldsEntry, Reason, Resource, Status};
use serde_json::json;
use shoal_api::local::LocalCluster;
use shoal_bus::client::ApplyOutcome;
use shoal_bus::ApiClient;

fn deployment(replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image,
                                         "ports": [{"containerPort": 80}]}]}
            }
        }
    }))
    .expect("fixture deployment")
}

fn bare_pod() -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "solo"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .expect("fixture pod")
}

fn merge_patch(name: &str, patch: serde_json::Value) -> PatchRequest {
    PatchRequest {
        namespace: "default".into(),
        name: name.into(),
        patch: patch.to_string(),
        status: false,
    }
}

fn managers(entries: &[ManagedFieldsEntry]) -> Vec<(&str, &str)> {
    entries
        .iter()
        .map(|e| (e.manager.as_str(), e.operation.as_str()))
        .collect()
}

#[actix::test]
async fn labels_and_annotations_from_other_writers_survive_apply() {
    let cluster = LocalCluster::start().await.unwrap();
    let shoal = cluster.api();
    let (_, outcome) = shoal.apply(&deployment(3, "web:1"), false).await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Created);

    let label = cluster.api().with_field_manager("shoal-label");
    label
        .patch::<Deployment>(&merge_patch(
            "web",
            json!({"metadata": {"labels": {"team": "blue"}}}),
        ))
        .await
        .unwrap();
    let annotate = cluster.api().with_field_manager("shoal-annotate");
    let annotated: Deployment = annotate
        .patch(&merge_patch(
            "web",
            json!({"metadata": {"annotations": {"note": "keep"}}}),
        ))
        .await
        .unwrap();
    assert_eq!(
        managers(&annotated.metadata.managed_fields),
        [
            ("shoal", "Apply"),
            ("shoal-label", "Update"),
            ("shoal-annotate", "Update")
        ]
    );

    let (same, outcome) = shoal.apply(&deployment(3, "web:1"), false).await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Unchanged);
    assert_eq!(
        same.metadata.resource_version,
        annotated.metadata.resource_version
    );

    let (changed, outcome) = shoal.apply(&deployment(3, "web:2"), false).await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Configured);
    assert_eq!(changed.metadata.labels["team"], "blue");
    assert_eq!(changed.metadata.labels["app"], "web");
    assert_eq!(changed.metadata.annotations["note"], "keep");
    assert_eq!(changed.spec.template.spec.containers[0].image, "web:2");
    assert_eq!(changed.metadata.generation, 2);
}

#[actix::test]
async fn re_applying_a_bound_pods_manifest_is_unchanged() {
    let cluster = LocalCluster::start().await.unwrap();
    let shoal = cluster.api();
    let (_, outcome) = shoal.apply(&bare_pod(), false).await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Created);
    let (_, outcome) = shoal.apply(&bare_pod(), false).await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Unchanged);

    // Bound as the scheduler binds: an update that sets spec.nodeName under its own name.
    let scheduler = cluster.api().with_field_manager("shoal-scheduler");
    let mut pod: Pod = scheduler.get("default", "solo").await.unwrap();
    pod.spec.node_name = "node-1".into();
    let bound = scheduler.update(&pod).await.unwrap();
    assert_eq!(
        managers(&bound.metadata.managed_fields),
        [("shoal", "Apply"), ("shoal-scheduler", "Update")]
    );

    let (again, outcome) = shoal.apply(&bare_pod(), false).await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Unchanged);
    assert_eq!(again.spec.node_name, "node-1");
    assert_eq!(
        again.metadata.resource_version,
        bound.metadata.resource_version
    );

    // A real change to a bound pod's mutable field still goes through.
    let mut relabelled = bare_pod();
    relabelled.metadata.labels.insert("tier".into(), "x".into());
    let (changed, outcome) = shoal.apply(&relabelled, false).await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Configured);
    assert_eq!(changed.spec.node_name, "node-1");
    assert_eq!(changed.metadata.labels["tier"], "x");
}

#[actix::test]
async fn two_managers_conflict_on_one_field_and_force_takes_it_over() {
    let cluster = LocalCluster::start().await.unwrap();
    let shoal = cluster.api();
    shoal.apply(&deployment(3, "web:1"), false).await.unwrap();
    let scale = cluster.api().with_field_manager("shoal-scale");
    scale
        .patch::<Deployment>(&merge_patch("web", json!({"spec": {"replicas": 5}})))
        .await
        .unwrap();

    let err = shoal
        .apply(&deployment(7, "web:1"), false)
        .await
        .unwrap_err();
    let shoal_bus::ApiError::Status(status) = &err else {
        panic!("a Status, got {err}")
    };
    assert_eq!(status.reason, Reason::Conflict);
    assert_eq!(status.code, 409);
    assert!(
        status
            .message
            .contains(r#"conflict with "shoal-scale": .spec.replicas"#),
        "{}",
        status.message
    );
    assert_eq!(status.causes().len(), 1);
    assert_eq!(status.causes()[0].field, ".spec.replicas");
    assert_eq!(status.causes()[0].reason, "FieldManagerConflict");
    let unchanged: Deployment = shoal.get("default", "web").await.unwrap();
    assert_eq!(
        unchanged.spec.replicas,
        Some(5),
        "a conflict writes nothing"
    );

    // The manifest that agrees with the live value is no conflict.
    let (_, outcome) = shoal.apply(&deployment(5, "web:1"), false).await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Unchanged);

    let (forced, outcome) = shoal.apply(&deployment(7, "web:1"), true).await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Configured);
    assert_eq!(forced.spec.replicas, Some(7));
    assert_eq!(
        managers(&forced.metadata.managed_fields),
        [("shoal", "Apply")]
    );
}

#[actix::test]
async fn fields_dropped_from_the_manifest_are_removed() {
    let cluster = LocalCluster::start().await.unwrap();
    let shoal = cluster.api();
    let mut first = deployment(3, "web:1");
    first
        .metadata
        .annotations
        .insert("owner".into(), "ops".into());
    first
        .spec
        .template
        .spec
        .containers
        .push(first.spec.template.spec.containers[0].clone());
    first.spec.template.spec.containers[1].name = "sidecar".into();
    first.spec.template.spec.containers[1].ports.clear();
    shoal.apply(&first, false).await.unwrap();
    let (second, outcome) = shoal.apply(&deployment(3, "web:1"), false).await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Configured);
    assert!(
        second.metadata.annotations.is_empty(),
        "{:?}",
        second.metadata.annotations
    );
    let names: Vec<&str> = second
        .spec
        .template
        .spec
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["web"]);
}

#[actix::test]
async fn apply_without_a_field_manager_is_refused() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let body = codec::to_msgpack(&bare_pod()).unwrap();
    let reply = api.request_raw("pod", Verb::Apply, body).await.unwrap();
    let code = reply.headers.get(HEADER_CODE).map(|v| v.to_string());
    assert_eq!(code.as_deref(), Some("422"));
    let status: Status = codec::from_msgpack(&reply.payload).unwrap();
    assert_eq!(status.causes()[0].field, "fieldManager");
    assert!(api
        .get::<Pod>("default", "solo")
        .await
        .unwrap_err()
        .is_not_found());
    // An empty manager is no manager.
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(HEADER_FIELD_MANAGER, "");
    let body = codec::to_msgpack(&bare_pod()).unwrap();
    let reply = api
        .request_raw_with("pod", Verb::Apply, body, headers)
        .await
        .unwrap();
    assert_eq!(
        reply
            .headers
            .get(HEADER_CODE)
            .map(|v| v.to_string())
            .as_deref(),
        Some("422")
    );
}

/// The object as a person would write it: no server fields, no status.
fn as_manifest<K: Resource>(obj: &K) -> K {
    let mut doc = serde_json::to_value(obj).unwrap();
    let map = doc.as_object_mut().unwrap();
    map.remove("status");
    let meta = map["metadata"].as_object_mut().unwrap();
    meta.retain(|k, _| matches!(k.as_str(), "name" | "namespace" | "labels" | "annotations"));
    serde_json::from_value(doc).unwrap()
}

async fn apply_twice<K: Resource>(api: &ApiClient, obj: K) {
    let manifest = as_manifest(&obj);
    let (first, outcome) = api
        .apply(&manifest, false)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", K::INFO.kind));
    assert_eq!(outcome, ApplyOutcome::Created, "{}", K::INFO.kind);
    let (second, outcome) = api
        .apply(&manifest, false)
        .await
        .unwrap_or_else(|e| panic!("{} re-applied: {e}", K::INFO.kind));
    assert_eq!(outcome, ApplyOutcome::Unchanged, "{}", K::INFO.kind);
    assert_eq!(
        second.meta().resource_version,
        first.meta().resource_version,
        "{}: nothing written",
        K::INFO.kind
    );
}

#[actix::test]
async fn re_applying_an_unchanged_manifest_is_a_no_op_for_every_kind() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    // Namespaces and priority classes first: the others' admission looks them up.
    let mut tested = Vec::new();
    let mut kinds = bus_schemas::kinds::KINDS.to_vec();
    kinds.sort_by_key(|k| !matches!(k.kind, "Namespace" | "PriorityClass"));
    for kind in &kinds {
        with_kind!(kind.kind, K => {
            let fixture = fixture_of::<K>();
            ensure_namespace(&api, &fixture.meta().namespace).await;
            apply_twice(&api, fixture).await;
            tested.push(kind.kind);
        }, _ => unreachable!());
    }
    assert_eq!(tested.len(), bus_schemas::kinds::KINDS.len());
}

/// Where fixtures that need the node's paths or namespaces go.
const PRIVILEGED_NAMESPACE: &str = "privileged-fixtures";

async fn ensure_namespace(api: &ApiClient, name: &str) {
    if name.is_empty() {
        return;
    }
    let mut ns = bus_schemas::kinds::Namespace::default();
    ns.metadata.name = name.into();
    if name == PRIVILEGED_NAMESPACE {
        ns.metadata.labels.insert(
            "pod-security.kubernetes.io/enforce".into(),
            "privileged".into(),
        );
    }
    match api.create(&ns).await {
        Ok(_) => {}
        Err(e) if e.is_already_exists() => {}
        Err(e) => panic!("namespace {name}: {e}"),
    }
}

fn fixture_of<K: Resource>() -> K {
    let value = match K::INFO.kind {
        "Pod" => serde_json::to_value({
            // The fixture sets every field, a hostPath volume among them: baseline refuses it.
            let mut pod = fixtures::pod();
            pod.metadata.namespace = PRIVILEGED_NAMESPACE.into();
            pod
        }),
        "Node" => serde_json::to_value(fixtures::node()),
        "ReplicaSet" => serde_json::to_value(fixtures::replicaset()),
        "Deployment" => serde_json::to_value(fixtures::deployment()),
        "DaemonSet" => serde_json::to_value(fixtures::daemonset()),
        "Job" => serde_json::to_value(fixtures::job()),
        "CronJob" => serde_json::to_value(fixtures::cronjob()),
        "StatefulSet" => serde_json::to_value(fixtures::statefulset()),
        "ControllerRevision" => serde_json::to_value(fixtures::controllerrevision()),
        "Service" => serde_json::to_value(fixtures::service()),
        "Endpoints" => serde_json::to_value(fixtures::endpoints()),
        "Event" => serde_json::to_value(fixtures::event()),
        "HorizontalPodAutoscaler" => serde_json::to_value(fixtures::hpa()),
        "VerticalPodAutoscaler" => serde_json::to_value(fixtures::vpa()),
        "Lease" => serde_json::to_value(fixtures::lease()),
        "PriorityClass" => serde_json::to_value(fixtures::priorityclass()),
        "ConfigMap" => Ok(serde_json::json!({"metadata": {"name": "app-config"},
            "data": {"greeting": "hello"}, "binaryData": {"logo": "iVBORw0K"}})),
        "Secret" => Ok(serde_json::json!({"metadata": {"name": "db"},
            "type": "Opaque", "data": {"password": "aHVudGVyMg=="}})),
        "PersistentVolume" => serde_json::to_value(fixtures::persistentvolume()),
        "PersistentVolumeClaim" => serde_json::to_value(fixtures::persistentvolumeclaim()),
        // The fixture's own name may be one every cluster is born with.
        "StorageClass" => serde_json::to_value({
            let mut class = fixtures::storageclass();
            class.metadata.name = "applied-twice".into();
            class.metadata.annotations.clear();
            class
        }),
        "Namespace" => serde_json::to_value({
            let mut ns = fixtures::namespace();
            ns.metadata.name = "applied-twice".into();
            ns
        }),
        other => panic!("no fixture for {other}: add one"),
    };
    serde_json::from_value(value.unwrap()).unwrap()
}
