//! Claims bound to PersistentVolumes made by hand, against a real cluster (nats-server + API
//! actors + the controllers): the smallest volume that fits, selectors, a claim that fits
//! none staying Pending with the reason, two claims racing for one volume, a volume reserved
//! for a claim, and what becomes of a volume once its claim is gone.

mod common;

use std::time::Duration;

use bus_schemas::api::ListOptions;
use bus_schemas::kinds::persistent_volume_claim::SELECTED_NODE_ANNOTATION;
use bus_schemas::kinds::{Event, PersistentVolume, PersistentVolumeClaim, StorageClass};
use common::*;
use shoal_bus::ApiClient;

const T: Duration = Duration::from_secs(20);

fn volume(name: &str, size: &str, class: &str, policy: &str) -> PersistentVolume {
    from_json(serde_json::json!({
        "metadata": {"name": name, "labels": {"disk": name}},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": class, "persistentVolumeReclaimPolicy": policy,
                 "hostPath": {"path": format!("/mnt/{name}")}}
    }))
}

fn claim(name: &str, size: &str, class: &str) -> PersistentVolumeClaim {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": size}}}
    }))
}

async fn get_claim(api: &ApiClient, name: &str) -> PersistentVolumeClaim {
    api.get("default", name).await.expect("claim")
}

async fn get_volume(api: &ApiClient, name: &str) -> PersistentVolume {
    api.get("", name).await.expect("volume")
}

/// Waits until the claim is Bound, and returns its volume's name.
async fn bound_to(api: &ApiClient, name: &str) -> String {
    eventually(&format!("{name} bound"), T, || async {
        get_claim(api, name).await.is_bound()
    })
    .await;
    get_claim(api, name).await.spec.volume_name
}

/// The messages of the claim's events with this reason.
async fn events(api: &ApiClient, claim: &str, reason: &str) -> Vec<String> {
    let options = ListOptions {
        namespace: "default".into(),
        ..Default::default()
    };
    api.list::<Event>(&options)
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.involved_object.name == claim && e.reason == reason)
        .map(|e| e.message)
        .collect()
}

/// Waits for an event of the claim with this reason and message (a first one may have
/// been written from a cache a write behind).
async fn wait_event(api: &ApiClient, claim: &str, reason: &str, message: &str) {
    eventually(
        &format!("{reason} event on {claim}: {message}"),
        T,
        || async {
            events(api, claim, reason)
                .await
                .iter()
                .any(|m| m == message)
        },
    )
    .await;
}

#[actix::test]
async fn a_claim_binds_to_the_smallest_volume_that_fits() {
    let (env, _c) = env().await;
    let api = &env.api;
    for (name, size) in [("ten", "10Gi"), ("one", "1Gi"), ("five", "5Gi")] {
        api.create(&volume(name, size, "manual", "Retain"))
            .await
            .unwrap();
    }
    eventually("new volumes Available", T, || async {
        get_volume(api, "one").await.status.phase == "Available"
    })
    .await;

    let created = api.create(&claim("data", "3Gi", "manual")).await.unwrap();
    assert_eq!(bound_to(api, "data").await, "five");
    let pv = get_volume(api, "five").await;
    assert_eq!(pv.status.phase, "Bound");
    assert!(pv.claimed_by("default", "data", &created.metadata.uid));
    let bound = get_claim(api, "data").await;
    assert_eq!(bound.status.capacity["storage"].to_string(), "5Gi");
    assert_eq!(bound.status.access_modes, ["ReadWriteOnce"]);
    assert_eq!(
        bound.metadata.annotations["pv.kubernetes.io/bind-completed"],
        "yes"
    );

    // A selector narrows the choice to the big one.
    let mut picky = claim("picky", "1Gi", "manual");
    picky.spec.selector =
        Some(serde_json::from_value(serde_json::json!({"matchLabels": {"disk": "ten"}})).unwrap());
    api.create(&picky).await.unwrap();
    assert_eq!(bound_to(api, "picky").await, "ten");

    // Another class, or too big: Pending, with the reason in an Event.
    api.create(&claim("elsewhere", "1Gi", "fast"))
        .await
        .unwrap();
    wait_event(
        api,
        "elsewhere",
        "FailedBinding",
        "no persistent volumes available for this claim: 2 taken, 1 wrong class",
    )
    .await;
    api.create(&claim("greedy", "50Gi", "manual"))
        .await
        .unwrap();
    wait_event(
        api,
        "greedy",
        "FailedBinding",
        "no persistent volumes available for this claim: 2 taken, 1 too small",
    )
    .await;
    assert_eq!(get_claim(api, "greedy").await.status.phase, "Pending");
    // A volume that fits, made later, is found.
    api.create(&volume("huge", "100Gi", "manual", "Retain"))
        .await
        .unwrap();
    assert_eq!(bound_to(api, "greedy").await, "huge");
}

#[actix::test]
async fn two_claims_racing_for_one_volume_bind_one() {
    let (env, _c) = env().await;
    let api = &env.api;
    api.create(&volume("only", "1Gi", "", "Retain"))
        .await
        .unwrap();
    let (claim_a, claim_b) = (claim("a", "1Gi", ""), claim("b", "1Gi", ""));
    let (a, b) = tokio::join!(api.create(&claim_a), api.create(&claim_b));
    let (a, b) = (a.unwrap(), b.unwrap());
    eventually("one claim bound", T, || async {
        get_claim(api, "a").await.is_bound() || get_claim(api, "b").await.is_bound()
    })
    .await;
    let (winner, loser) = if get_claim(api, "a").await.is_bound() {
        (a, b)
    } else {
        (b, a)
    };
    // The loser looked again and found the volume taken.
    wait_event(
        api,
        &loser.metadata.name,
        "FailedBinding",
        "no persistent volumes available for this claim: 1 taken and no storage class is set",
    )
    .await;
    assert!(!get_claim(api, &loser.metadata.name).await.is_bound());
    let pv = get_volume(api, "only").await;
    assert!(pv.claimed_by("default", &winner.metadata.name, &winner.metadata.uid));
}

#[actix::test]
async fn a_reserved_volume_wins_and_a_gone_claim_frees_nothing_it_should_not() {
    let (env, _c) = env().await;
    let api = &env.api;
    // Reserved by name for "mine", though a smaller volume would fit.
    let mut reserved = volume("reserved", "10Gi", "manual", "Retain");
    reserved.spec.claim_ref = Some(bus_schemas::kinds::ObjectReference {
        namespace: "default".into(),
        name: "mine".into(),
        ..Default::default()
    });
    api.create(&reserved).await.unwrap();
    api.create(&volume("small", "1Gi", "manual", "Delete"))
        .await
        .unwrap();
    api.create(&claim("mine", "1Gi", "manual")).await.unwrap();
    assert_eq!(bound_to(api, "mine").await, "reserved");
    api.create(&claim("other", "1Gi", "manual")).await.unwrap();
    assert_eq!(bound_to(api, "other").await, "small");

    // Retain: Released, kept. Delete of a volume made by hand: Failed, kept, said why.
    delete_now::<PersistentVolumeClaim>(api, "default", "mine", None).await;
    delete_now::<PersistentVolumeClaim>(api, "default", "other", None).await;
    eventually("reserved Released", T, || async {
        get_volume(api, "reserved").await.status.phase == "Released"
    })
    .await;
    eventually("small Failed", T, || async {
        get_volume(api, "small").await.status.phase == "Failed"
    })
    .await;
    let failed = get_volume(api, "small").await;
    assert!(
        failed.status.message.contains("its data is kept"),
        "{}",
        failed.status.message
    );
    // A Released volume is not offered to a new claim of the same name.
    api.create(&claim("mine", "1Gi", "manual")).await.unwrap();
    wait_event(
        api,
        "mine",
        "FailedBinding",
        "no persistent volumes available for this claim: 2 taken",
    )
    .await;
}

#[actix::test]
async fn a_local_disk_waits_for_its_pods_node_and_binds_there() {
    let (env, _c) = env().await;
    let api = &env.api;
    let class: StorageClass = from_json(serde_json::json!({
        "metadata": {"name": "disks"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer"
    }));
    api.create(&class).await.unwrap();
    for node in ["n1", "n2"] {
        let pv: PersistentVolume = from_json(serde_json::json!({
            "metadata": {"name": format!("disk-{node}")},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": "disks", "local": {"path": "/mnt/disk"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}
        }));
        api.create(&pv).await.unwrap();
    }
    api.create(&claim("data", "1Gi", "disks")).await.unwrap();
    eventually("volumes Available", T, || async {
        get_volume(api, "disk-n2").await.status.phase == "Available"
    })
    .await;
    // No node chosen yet: nothing binds (a reconcile of the claim has run once the class
    // is cached and the volumes Available; its annotation below re-queues it).
    assert!(!get_claim(api, "data").await.is_bound());

    let mut chosen = get_claim(api, "data").await;
    chosen
        .metadata
        .annotations
        .insert(SELECTED_NODE_ANNOTATION.into(), "n2".into());
    api.update(&chosen).await.unwrap();
    assert_eq!(bound_to(api, "data").await, "disk-n2");
}
