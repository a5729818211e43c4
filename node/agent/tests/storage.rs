//! PersistentVolumeClaims on a node, through a real cluster (nats-server + API actors): the
//! local-path provisioner's binding and reclaim, converging from any half-done state, and a
//! real container that waits for its claim and then writes into the volume's directory; a
//! volume's size held by a quota (a container writing past it gets "Disk quota exceeded"),
//! and said to be unenforced where the filesystem has no quota.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod common;

use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::persistent_volume_claim::SELECTED_NODE_ANNOTATION;
use bus_schemas::kinds::{PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use bus_schemas::roles::Role;
use common::{one_node, pod, wait_pod};
use shoal_agent::storage::provisioner::{self, Provisioner};
use shoal_agent::storage::quota::QUOTA_ANNOTATION;
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
        cluster
            .connect_as(&Role::Node("node-a".into()), "node-a")
            .await
            .unwrap(),
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

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().expect(program);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A filesystem in an image file, loop-mounted at a directory for one test and unmounted
/// (which frees the loop device: `mount -o loop` sets autoclear) when dropped, even when the
/// test fails.
struct LoopMount {
    dir: PathBuf,
}

impl LoopMount {
    /// `mkfs` (program and options) on a fresh image of `megabytes`, mounted at `dir`.
    fn new(image: &Path, megabytes: u64, mkfs: &[&str], dir: &Path) -> LoopMount {
        std::fs::File::create(image)
            .and_then(|f| f.set_len(megabytes << 20))
            .expect("image");
        let mut args = mkfs[1..].to_vec();
        args.push(image.to_str().unwrap());
        run(mkfs[0], &args);
        std::fs::create_dir_all(dir).unwrap();
        run(
            "mount",
            &["-o", "loop", image.to_str().unwrap(), dir.to_str().unwrap()],
        );
        LoopMount {
            dir: dir.to_path_buf(),
        }
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let dir = self.dir.to_str().unwrap();
        let ok = Command::new("umount")
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still holds it (a container's mount namespace): detach now, and the
            // kernel frees the device when the last user goes.
            let _ = Command::new("umount").args(["-l", dir]).status();
        }
    }
}

fn sized_claim(name: &str, node: &str, size: &str) -> PersistentVolumeClaim {
    let mut c = claim(name, "local-path", node);
    c.spec.resources.requests.insert(
        "storage".into(),
        bus_schemas::quantity::Quantity::parse(size).unwrap(),
    );
    c
}

/// With quotas on the volumes' filesystem (btrfs with quotas enabled: this kernel has no
/// ext4/XFS project-quota support), a container that writes past its claim's size gets
/// EDQUOT, and the volume says its size is enforced.
#[actix::test]
async fn a_container_cannot_write_past_its_claims_size() {
    let cluster = LocalCluster::start().await.unwrap();
    common::push_busybox(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let mut node = common::Node::new(dir.path());
    let volumes = node.state.join("volumes");
    // Declared before the node: dropped after it, once its containers are gone.
    let _mount = LoopMount::new(
        &dir.path().join("volumes.img"),
        128,
        &["mkfs.btrfs", "-q"],
        &volumes,
    );
    run("btrfs", &["quota", "enable", volumes.to_str().unwrap()]);
    node.start(&cluster).await;
    let api = cluster.api();

    api.create(&sized_claim("small", &node.name, "2Mi"))
        .await
        .unwrap();
    api.create(&common::pod(
        &node.name,
        "filler",
        serde_json::json!({
            "restartPolicy": "Never",
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "small"}}],
            "containers": [{"name": "c", "image": "shoal/busybox:1.35",
                "command": ["dd", "if=/dev/zero", "of=/data/f", "bs=1M", "count=4"],
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]
        }),
    ))
    .await
    .unwrap();
    let done = wait_pod(&api, "filler", "finished", |p: &Pod| {
        p.status
            .container_statuses
            .first()
            .is_some_and(|c| c.state.terminated.is_some())
    })
    .await;
    let terminated = done.status.container_statuses[0]
        .state
        .terminated
        .clone()
        .unwrap();
    assert_ne!(terminated.exit_code, 0, "the write past the size must fail");
    assert!(
        terminated.message.contains("Disk quota exceeded"),
        "{terminated:?}"
    );
    let claim = get_claim(&api, "small").await.unwrap();
    let pv = get_volume(&api, &claim.spec.volume_name).await.unwrap();
    let said = &pv.metadata.annotations[QUOTA_ANNOTATION];
    assert!(said.starts_with("enforced at 2097152 bytes"), "{said}");
    let written = std::fs::metadata(volumes.join(&claim.spec.volume_name).join("f"))
        .unwrap()
        .len();
    assert!(written <= 2 << 20, "{written} bytes written");
    drop(node);
}

/// Without quotas (an ext4 without project quotas), the volume is made all the same, and the
/// volume, an Event on the claim and the log say its size is not enforced.
#[actix::test]
async fn a_volume_without_quota_is_made_and_says_so() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let state = tempfile::tempdir().unwrap();
    let volumes = state.path().join("volumes");
    let _mount = LoopMount::new(
        &state.path().join("volumes.img"),
        32,
        &["mkfs.ext4", "-q"],
        &volumes,
    );
    let p = Provisioner::new(
        cluster
            .connect_as(&Role::Node("node-a".into()), "node-a")
            .await
            .unwrap(),
        &cluster.informers,
        "node-a",
        state.path(),
    );
    let created = api
        .create(&sized_claim("plain", "node-a", "2Mi"))
        .await
        .unwrap();
    converge(&p, "plain bound", || bound(&api, "plain")).await;
    let pv = get_volume(&api, &provisioner::volume_name(&created))
        .await
        .unwrap();
    let said = &pv.metadata.annotations[QUOTA_ANNOTATION];
    assert!(
        said.starts_with(&format!(
            "not enforced: ext4 at {} has no project quotas (mount with prjquota)",
            volumes.display()
        )),
        "{said}"
    );
    let event: bus_schemas::kinds::Event = api
        .get("default", &format!("plain.{}.quota", created.metadata.uid))
        .await
        .expect("an Event on the claim");
    assert_eq!(event.reason, "VolumeSizeNotEnforced");
    assert_eq!(event.involved_object.uid, created.metadata.uid);
    let dir = volumes.join(provisioner::volume_name(&created));
    assert!(dir.is_dir());

    // Delete: the directory goes, and lifting a limit that was never set is no error.
    delete::<PersistentVolumeClaim>(&api, "default", "plain").await;
    converge(&p, "volume deleted", || async {
        get_volume(&api, &pv.metadata.name).await.is_none()
    })
    .await;
    assert!(!dir.exists());
}
