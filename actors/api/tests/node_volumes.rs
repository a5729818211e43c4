//! A node's local provisioner writes volumes and claims through its own report subject,
//! against a real nats-server: only volumes pinned to the reporting node and claims selected
//! for it are written (403 and nothing stored otherwise), and what is written is exactly what
//! the general verbs write (defaults, field manager, optimistic concurrency).

use std::time::Duration;

use bus_schemas::api::{DeleteOptions, Preconditions};
use bus_schemas::kinds::persistent_volume_claim::SELECTED_NODE_ANNOTATION;
use bus_schemas::kinds::{Event, PersistentVolume, PersistentVolumeClaim};
use bus_schemas::roles::Role;
use bus_schemas::subjects::NodeReport;
use bus_schemas::{Reason, Resource};
use shoal_api::local::{eventually, LocalCluster};
use shoal_bus::{ApiClient, ApiError};

const MANAGER: &str = "test-local-provisioner";

fn volume(name: &str, pinned_to: &str) -> PersistentVolume {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "local": {"path": format!("/var/lib/shoal/volumes/{name}")},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [pinned_to]}]}]}}
        }
    }))
    .unwrap()
}

fn claim(name: &str, selected: &str) -> PersistentVolumeClaim {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default",
                     "annotations": {SELECTED_NODE_ANNOTATION: selected}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
                 "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .unwrap()
}

fn forbidden<T: std::fmt::Debug>(result: Result<T, ApiError>, mentions: &str) {
    match result {
        Err(e) if e.is(Reason::Forbidden) => {
            assert!(
                e.to_string().contains(mentions),
                "{e} should mention {mentions:?}"
            )
        }
        other => panic!("expected Forbidden, got {other:?}"),
    }
}

/// Sends `what` as node `node` itself: the bus admits a node's reports only on its own
/// credential, so what the API refuses here is another node's object, not another's subject.
async fn report<T: serde::Serialize, R: serde::de::DeserializeOwned>(
    cluster: &LocalCluster,
    node: &str,
    what: NodeReport,
    body: &T,
) -> Result<R, ApiError> {
    let nats = cluster
        .connect_as(&Role::Node(node.to_string()), node)
        .await
        .unwrap();
    let node_api = ApiClient::new(nats).with_field_manager(MANAGER);
    node_api.report(node, what, body).await
}

#[actix::test]
async fn a_node_creates_only_volumes_pinned_to_itself() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();

    let elsewhere = report::<_, PersistentVolume>(
        &cluster,
        "n2",
        NodeReport::VolumeCreate,
        &volume("pvc-a", "n1"),
    )
    .await;
    forbidden(elsewhere, "spec.nodeAffinity");
    let unpinned = {
        let mut pv = volume("pvc-b", "n2");
        pv.spec.node_affinity = None;
        pv
    };
    forbidden(
        report::<_, PersistentVolume>(&cluster, "n2", NodeReport::VolumeCreate, &unpinned).await,
        "spec.nodeAffinity",
    );
    for name in ["pvc-a", "pvc-b"] {
        let absent = api.get::<PersistentVolume>("", name).await.unwrap_err();
        assert!(absent.is_not_found(), "{name}: {absent}");
    }

    let created: PersistentVolume = report(
        &cluster,
        "n1",
        NodeReport::VolumeCreate,
        &volume("pvc-a", "n1"),
    )
    .await
    .unwrap();
    assert_eq!(created.pinned_node(), Some("n1"));
    // The general create's defaults and field manager apply.
    assert_eq!(created.spec.persistent_volume_reclaim_policy, "Retain");
    assert!(!created.metadata.uid.is_empty());
    assert!(
        created
            .metadata
            .managed_fields
            .iter()
            .any(|m| m.manager == MANAGER),
        "{:?}",
        created.metadata.managed_fields
    );
    let stored: PersistentVolume = api.get("", "pvc-a").await.unwrap();
    assert_eq!(stored.metadata.uid, created.metadata.uid);

    let again = report::<_, PersistentVolume>(
        &cluster,
        "n1",
        NodeReport::VolumeCreate,
        &volume("pvc-a", "n1"),
    )
    .await
    .unwrap_err();
    assert!(again.is_already_exists(), "{again}");

    // Validation is the general create's, with the field path.
    let mut invalid = volume("pvc-c", "n1");
    invalid.spec.capacity.clear();
    let refused = report::<_, PersistentVolume>(&cluster, "n1", NodeReport::VolumeCreate, &invalid)
        .await
        .unwrap_err();
    assert!(refused.is(Reason::Invalid), "{refused}");
    assert!(refused.to_string().contains("spec.capacity"), "{refused}");
}

#[actix::test]
async fn a_node_updates_and_deletes_only_its_own_volumes() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    // Made by an administrator: a volume any node could be given.
    let mine = api.create(&volume("pv-1", "n1")).await.unwrap();

    let mut bound = mine.clone();
    bound.status.phase = "Bound".into();
    forbidden(
        report::<_, PersistentVolume>(&cluster, "n2", NodeReport::VolumeStatus, &bound).await,
        "does not pin it to that node",
    );
    let marked: PersistentVolume = report(&cluster, "n1", NodeReport::VolumeStatus, &bound)
        .await
        .unwrap();
    assert_eq!(marked.status.phase, "Bound");

    // Optimistic concurrency is the general verb's: a stale resourceVersion conflicts.
    let stale = report::<_, PersistentVolume>(&cluster, "n1", NodeReport::VolumeStatus, &bound)
        .await
        .unwrap_err();
    assert!(stale.is_conflict(), "{stale}");

    let options = DeleteOptions {
        name: "pv-1".into(),
        preconditions: Some(Preconditions {
            uid: Some(mine.metadata.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    forbidden(
        report::<_, PersistentVolume>(&cluster, "n2", NodeReport::VolumeDelete, &options).await,
        "does not pin it to that node",
    );
    assert!(api.get::<PersistentVolume>("", "pv-1").await.is_ok());
    report::<_, PersistentVolume>(&cluster, "n1", NodeReport::VolumeDelete, &options)
        .await
        .unwrap();
    eventually("pv-1 deleted", Duration::from_secs(10), || async {
        api.get::<PersistentVolume>("", "pv-1")
            .await
            .is_err_and(|e| e.is_not_found())
    })
    .await;
}

#[actix::test]
async fn a_node_binds_only_claims_selected_for_it_to_its_own_volumes() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let pvc = api.create(&claim("data", "n1")).await.unwrap();
    api.create(&volume("pvc-n1", "n1")).await.unwrap();
    api.create(&volume("pvc-n2", "n2")).await.unwrap();

    let mut to_own = pvc.clone();
    to_own.spec.volume_name = "pvc-n1".into();
    forbidden(
        report::<_, PersistentVolumeClaim>(&cluster, "n2", NodeReport::ClaimUpdate, &to_own).await,
        "selected-node",
    );
    let mut to_other = pvc.clone();
    to_other.spec.volume_name = "pvc-n2".into();
    forbidden(
        report::<_, PersistentVolumeClaim>(&cluster, "n1", NodeReport::ClaimUpdate, &to_other)
            .await,
        "spec.volumeName",
    );
    let mut handed_off = pvc.clone();
    handed_off
        .metadata
        .annotations
        .insert(SELECTED_NODE_ANNOTATION.into(), "n2".into());
    forbidden(
        report::<_, PersistentVolumeClaim>(&cluster, "n1", NodeReport::ClaimUpdate, &handed_off)
            .await,
        "selected-node",
    );
    let unchanged: PersistentVolumeClaim = api.get("default", "data").await.unwrap();
    assert_eq!(unchanged.spec.volume_name, "");
    assert_eq!(unchanged.selected_node(), Some("n1"));

    let bound: PersistentVolumeClaim = report(&cluster, "n1", NodeReport::ClaimUpdate, &to_own)
        .await
        .unwrap();
    assert_eq!(bound.spec.volume_name, "pvc-n1");
    let mut status = bound.clone();
    status.status.phase = "Bound".into();
    forbidden(
        report::<_, PersistentVolumeClaim>(&cluster, "n2", NodeReport::ClaimStatus, &status).await,
        "selected-node",
    );
    let bound: PersistentVolumeClaim = report(&cluster, "n1", NodeReport::ClaimStatus, &status)
        .await
        .unwrap();
    assert!(bound.is_bound());

    // The provisioner's warnings about a claim are the claim's node's to report.
    let mut event: Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "data.quota", "namespace": "default"},
        "involvedObject": {"kind": "PersistentVolumeClaim", "namespace": "default",
                           "name": "data", "uid": pvc.metadata.uid},
        "reason": "VolumeSizeNotEnforced", "message": "no quota", "type": "Warning"
    }))
    .unwrap();
    event.set_type_meta();
    forbidden(
        report::<_, Event>(&cluster, "n2", NodeReport::PodEvent, &event).await,
        "not selected for that node",
    );
    let recorded: Event = report(&cluster, "n1", NodeReport::PodEvent, &event)
        .await
        .unwrap();
    assert_eq!(recorded.reason, "VolumeSizeNotEnforced");
}
