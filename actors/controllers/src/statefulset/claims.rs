//! The claims of a StatefulSet's pods: one per volumeClaimTemplate and ordinal
//! (`<template>-<set>-<ordinal>`), created before the pod and never deleted with it, so a
//! pod recreated or rescheduled finds its data (and, its volume being local, comes back on
//! the volume's node). `persistentVolumeClaimRetentionPolicy` is carried by ownerReferences,
//! as Kubernetes does it: `whenDeleted: Delete` makes the set an owner of its claims, and
//! `whenScaled: Delete` makes a pod removed by a scale-down the owner of its claims, so the
//! garbage collector deletes them after it. `Retain` leaves claims without those owners.

use std::sync::Arc;

use bus_schemas::kinds::{PersistentVolumeClaim, Pod, StatefulSet};
use bus_schemas::{OwnerReference, Resource};

use crate::context::Ctx;
use crate::error::ReconcileError;

/// Before pods are created or removed: the claims of the ordinals about to get pods exist,
/// every existing claim of the set's pods carries the owners the retention policy wants, and
/// the claims of `condemned` pods (removed by a scale-down) get that pod as an owner.
pub async fn sync(
    ctx: &Ctx,
    set: &StatefulSet,
    creating: &[i32],
    existing: &[i32],
    condemned: &[Arc<Pod>],
) -> Result<(), ReconcileError> {
    let ns = &set.metadata.namespace;
    for template in &set.spec.volume_claim_templates {
        for &ordinal in creating {
            let name = set.claim_name(template, ordinal);
            if ctx.claims.get(ns, &name).is_some() {
                continue;
            }
            match ctx.api.create(&claim_for(set, template, ordinal)).await {
                Ok(_) => ctx.events.record(
                    set,
                    crate::events::NORMAL,
                    "SuccessfulCreate",
                    format!(
                        "create Claim {name} Pod {}-{ordinal} in StatefulSet {} success",
                        set.metadata.name, set.metadata.name
                    ),
                ),
                Err(e) if e.is_already_exists() => {}
                Err(e) => {
                    return Err(ReconcileError::api(
                        "create",
                        "PersistentVolumeClaim",
                        format!("{ns}/{name}"),
                        e,
                    ))
                }
            }
        }
        let pods_of = |ordinal: i32| {
            let pod_name = format!("{}-{ordinal}", set.metadata.name);
            condemned
                .iter()
                .find(|p| p.metadata.name == pod_name)
                .cloned()
        };
        let condemned_ordinals = condemned
            .iter()
            .filter_map(|p| super::ordinal_of(&set.metadata.name, p));
        for ordinal in existing.iter().copied().chain(condemned_ordinals) {
            let name = set.claim_name(template, ordinal);
            let Some(claim) = ctx.claims.get(ns, &name) else {
                continue;
            };
            let pod = pods_of(ordinal);
            if let Some(owners) = owners_wanted(set, &claim, pod.as_deref()) {
                let mut next = (*claim).clone();
                next.metadata.owner_references = owners;
                ctx.api.update(&next).await.map_err(|e| {
                    ReconcileError::api(
                        "update",
                        "PersistentVolumeClaim",
                        format!("{ns}/{name}"),
                        e,
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// The claim the pod with `ordinal` gets from `template`.
pub fn claim_for(
    set: &StatefulSet,
    template: &PersistentVolumeClaim,
    ordinal: i32,
) -> PersistentVolumeClaim {
    let mut claim = PersistentVolumeClaim {
        metadata: template.metadata.clone(),
        spec: template.spec.clone(),
        ..Default::default()
    };
    claim.set_type_meta();
    let meta = &mut claim.metadata;
    meta.name = set.claim_name(template, ordinal);
    meta.namespace = set.metadata.namespace.clone();
    meta.uid.clear();
    meta.resource_version.clear();
    meta.owner_references.clear();
    // Kubernetes labels claims with the set's selector, so they can be found by it.
    if let Some(selector) = &set.spec.selector {
        for (k, v) in &selector.match_labels {
            meta.labels.insert(k.clone(), v.clone());
        }
    }
    if when_deleted_deletes(set) {
        meta.owner_references.push(owner_ref_to_set(set));
    }
    claim
}

pub fn when_deleted_deletes(set: &StatefulSet) -> bool {
    set.spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .is_some_and(|p| p.when_deleted == "Delete")
}

pub fn when_scaled_deletes(set: &StatefulSet) -> bool {
    set.spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .is_some_and(|p| p.when_scaled == "Delete")
}

fn owner_ref_to_set(set: &StatefulSet) -> OwnerReference {
    OwnerReference {
        api_version: StatefulSet::INFO.api_version.into(),
        kind: StatefulSet::INFO.kind.into(),
        name: set.metadata.name.clone(),
        uid: set.metadata.uid.clone(),
        // A controller reference: the garbage collector finds dependents through those.
        controller: Some(true),
        block_owner_deletion: None,
    }
}

fn owner_ref_to_pod(pod: &Pod) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// The owner references `claim` should carry under the set's policy now; None when they
/// already do. `condemned` is the pod being removed by a scale-down, if the claim is its:
/// with `whenScaled: Delete` that pod becomes the claim's only controlling owner (the set
/// lets go, or the collector would keep the claim for the set's sake).
pub fn owners_wanted(
    set: &StatefulSet,
    claim: &PersistentVolumeClaim,
    condemned: Option<&Pod>,
) -> Option<Vec<OwnerReference>> {
    let current = &claim.metadata.owner_references;
    let mut owners: Vec<OwnerReference> = current
        .iter()
        .filter(|o| o.uid != set.metadata.uid && o.controller != Some(true))
        .cloned()
        .collect();
    let pod_owned = current
        .iter()
        .find(|o| o.kind == "Pod" && o.controller == Some(true));
    match (condemned.filter(|_| when_scaled_deletes(set)), pod_owned) {
        (Some(pod), _) => owners.push(owner_ref_to_pod(pod)),
        // Already handed to a condemned pod: leave it to the collector.
        (None, Some(pod_ref)) => owners.push(pod_ref.clone()),
        (None, None) if when_deleted_deletes(set) => owners.push(owner_ref_to_set(set)),
        (None, None) => {}
    }
    (owners != *current).then_some(owners)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(policy: serde_json::Value) -> StatefulSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "sts-uid"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "persistentVolumeClaimRetentionPolicy": policy,
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                        "spec": {"accessModes": ["ReadWriteOnce"],
                                 "resources": {"requests": {"storage": "1Gi"}}}}]}
        }))
        .expect("set")
    }

    #[test]
    fn claims_are_named_labelled_and_owned_by_policy() {
        let retain = set(serde_json::json!({"whenDeleted": "Retain", "whenScaled": "Retain"}));
        let claim = claim_for(&retain, &retain.spec.volume_claim_templates[0], 1);
        assert_eq!(claim.metadata.name, "data-web-1");
        assert_eq!(claim.metadata.namespace, "default");
        assert_eq!(claim.metadata.labels["app"], "web");
        assert!(claim.metadata.owner_references.is_empty());
        assert_eq!(owners_wanted(&retain, &claim, None), None);

        let delete = set(serde_json::json!({"whenDeleted": "Delete", "whenScaled": "Delete"}));
        let owned = claim_for(&delete, &delete.spec.volume_claim_templates[0], 1);
        assert_eq!(owned.metadata.owner_references[0].uid, "sts-uid");
        assert_eq!(owners_wanted(&delete, &owned, None), None);
        // The policy changed to Retain: the set lets go of the claim.
        assert_eq!(owners_wanted(&retain, &owned, None), Some(Vec::new()));
        let mut pod = Pod::default();
        pod.metadata.name = "web-1".into();
        pod.metadata.uid = "pod-uid".into();
        let owners = owners_wanted(&delete, &owned, Some(&pod)).expect("pod becomes the owner");
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].uid.as_str()),
            ("Pod", "pod-uid")
        );
        assert_eq!(owners_wanted(&retain, &claim, Some(&pod)), None);
    }
}
