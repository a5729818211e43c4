//! PersistentVolumeClaims on a node, through a real cluster (nats-server + API actors): the
//! local-path provisioner's binding and reclaim, converging from any half-done state, and a
//! real container that waits for its claim and then writes into the volume's directory.

use std::path::Path;
use std::time::Duration;

mod common;

use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::persistent_volume_claim::SELECTED_NODE_ANNOTATION;
use bus_schemas::kinds::{PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use common::{one_node, pod, wait_pod};
use shoal_agent::storage::provisioner::{self, Provisioner};
use shoal_api::local::{eventually, LocalCluster};
use shoal_bus::ApiClient;

const WAIT: Duration = Duration::from_secs(60);

fn claim(name: &str, class: &str, node: &str) -> PersistentVolumeClaim {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default",
                     "annotations": {SELECTED_NODE_ANNOTATION: node}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": "64Mi"}}}
    }))
    .unwrap()
}

async fn get_claim(api: &ApiClient, name: &str) -> Option<PersistentVolumeClaim> {
    api.get("default", name).await.ok()
}

async fn get_volume(api: &ApiClient, name: &str) -> Option<PersistentVolume> {
    api.get("", name).await.ok()
}

async fn delete<K: bus_schemas::Resource>(api: &ApiClient, namespace: &str, name: &str) {
    let options = DeleteOptions {
        namespace: namespace.into(),
        name: name.into(),
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    api.delete::<K>(&options).await.expect("delete");
}

/// Runs provisioner passes until `done` holds: a pass reads caches that trail the writes of
/// the one before, as the running provisioner's event-driven passes do.
async fn converge<F, Fut>(p: &Provisioner, what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    eventually(what, WAIT, || {
        let check = done();
        async {
            p.pass().await;
            check.await
        }
    })
    .await;
}

async fn bound(api: &ApiClient, name: &str) -> bool {
    get_claim(api, name).await.is_some_and(|c| c.is_bound())
}

#[actix::test]
async fn the_provisioner_binds_claims_placed_on_its_node_and_reclaims_them_by_policy() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let state = tempfile::tempdir().unwrap();
    let p = Provisioner::new(
        cluster.nats.clone(),
        &cluster.informers,
        "node-a",
        state.path(),
    );
    let volumes = state.path().join("volumes");

    // Placed on this node: a directory, a volume on this node, both bound.
    let created = api
        .create(&claim("data", "local-path", "node-a"))
        .await
        .unwrap();
    converge(&p, "data bound", || bound(&api, "data")).await;
    let claim_now = get_claim(&api, "data").await.unwrap();
    let pv_name = provisioner::volume_name(&created);
    assert_eq!(claim_now.spec.volume_name, pv_name);
    assert_eq!(claim_now.status.capacity["storage"].to_string(), "64Mi");
    let pv = get_volume(&api, &pv_name).await.expect("volume made");
    assert_eq!(pv.status.phase, "Bound");
    assert_eq!(pv.spec.persistent_volume_reclaim_policy, "Delete");
    assert!(pv.claimed_by("default", "data", &created.metadata.uid));
    let dir = volumes.join(&pv_name);
    assert_eq!(pv.path(), Some(dir.to_str().unwrap()));
    assert!(dir.is_dir());
    let labels = [("kubernetes.io/hostname".to_string(), "node-a".to_string())].into();
    assert!(pv.required_nodes().unwrap().matches(&labels, "node-a"));

    // Placed elsewhere: not this node's business.
    api.create(&claim("elsewhere", "local-path", "node-b"))
        .await
        .unwrap();
    p.pass().await;
    assert!(!bound(&api, "elsewhere").await);

    // A crash after the volume was made but before anything was bound: the next pass
    // finishes the job instead of making a second volume.
    let half = api
        .create(&claim("half", "local-path", "node-a"))
        .await
        .unwrap();
    let class = StorageClass::local_path();
    let dir_half = volumes.join(provisioner::volume_name(&half));
    std::fs::create_dir_all(&dir_half).unwrap();
    api.create(&provisioner::new_volume(&half, &class, "node-a", &dir_half))
        .await
        .unwrap();
    converge(&p, "half bound", || bound(&api, "half")).await;
    assert_eq!(
        get_claim(&api, "half").await.unwrap().spec.volume_name,
        provisioner::volume_name(&half)
    );

    // Delete: the claim's deletion takes the directory and the volume with it.
    std::fs::write(dir.join("file"), "data").unwrap();
    delete::<PersistentVolumeClaim>(&api, "default", "data").await;
    converge(&p, "volume deleted", || async {
        get_volume(&api, &pv_name).await.is_none()
    })
    .await;
    assert!(!dir.exists(), "the directory is removed with the volume");

    // Retain: the volume stays Released with its data.
    let mut keep = StorageClass::local_path();
    keep.metadata.name = "keep".into();
    keep.metadata.annotations.clear();
    keep.reclaim_policy = Some("Retain".into());
    api.create(&keep).await.unwrap();
    let kept = api.create(&claim("kept", "keep", "node-a")).await.unwrap();
    converge(&p, "kept bound", || bound(&api, "kept")).await;
    let kept_pv = provisioner::volume_name(&kept);
    let kept_dir = volumes.join(&kept_pv);
    std::fs::write(kept_dir.join("file"), "precious").unwrap();
    delete::<PersistentVolumeClaim>(&api, "default", "kept").await;
    converge(&p, "volume released", || async {
        get_volume(&api, &kept_pv)
            .await
            .is_some_and(|v| v.status.phase == "Released")
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(kept_dir.join("file")).unwrap(),
        "precious"
    );
}

/// A pod on a node waits for its claim, then runs with the volume mounted: what it writes
/// lands in the volume's directory and survives the pod.
#[actix::test]
async fn a_pod_waits_for_its_claim_and_writes_into_the_volume() {
    let (cluster, dir, node) = one_node().await;
    let api = cluster.api();
    // The claim names a class that does not exist yet: the pod must wait, with a reason.
    api.create(&claim("www", "later", &node.name))
        .await
        .unwrap();
    api.create(&pod(
        &node.name,
        "writer",
        serde_json::json!({
            "volumes": [{"name": "www", "persistentVolumeClaim": {"claimName": "www"}}],
            "containers": [{"name": "c", "image": "shoal/busybox:1.35",
                "command": ["sh", "-c", "echo hello > /www/index.html && sleep 3600"],
                "volumeMounts": [{"name": "www", "mountPath": "/www"}]}]
        }),
    ))
    .await
    .unwrap();
    let waiting = wait_pod(&api, "writer", "waiting for its claim", |p: &Pod| {
        p.status.container_statuses.first().is_some_and(|c| {
            c.state.waiting.as_ref().is_some_and(|w| {
                w.message
                    .contains("persistentvolumeclaim \"www\" is not bound")
            })
        })
    })
    .await;
    assert_ne!(waiting.status.phase, "Running");

    let mut later = StorageClass::local_path();
    later.metadata.name = "later".into();
    later.metadata.annotations.clear();
    api.create(&later).await.unwrap();
    wait_pod(&api, "writer", "Running", |p| p.status.phase == "Running").await;
    let claim = get_claim(&api, "www").await.unwrap();
    let file = dir
        .path()
        .join("node/volumes")
        .join(&claim.spec.volume_name)
        .join("index.html");
    eventually("the container wrote into its volume", WAIT, || async {
        std::fs::read_to_string(&file).is_ok_and(|s| s == "hello\n")
    })
    .await;

    // The claim is not reclaimed while its pod runs; once both are gone, the directory goes.
    delete::<PersistentVolumeClaim>(&api, "default", "www").await;
    assert!(file.exists());
    delete::<Pod>(&api, "default", "writer").await;
    let volume_dir = file.parent().unwrap().to_path_buf();
    eventually("the volume's directory is removed", WAIT, || async {
        !Path::new(&volume_dir).exists()
    })
    .await;
    drop(node);
}
