//! Deployments and ReplicaSets the parts' tests decide over.

use std::sync::Arc;

use bus_schemas::kinds::deployment::RollingUpdateDeployment;
use bus_schemas::kinds::{Deployment, IntOrString, ReplicaSet};
use bus_schemas::meta::Condition;
use bus_schemas::selector::LabelSelector;

use super::{new_replica_set, template_hash, COMPLETE_ANNOTATION};
use crate::podutil;

pub fn deployment(replicas: i32, image: &str) -> Deployment {
    let mut d = Deployment::default();
    d.metadata.name = "web".into();
    d.metadata.namespace = "default".into();
    d.metadata.uid = "d-uid".into();
    d.metadata.generation = 1;
    d.spec.replicas = Some(replicas);
    let mut sel = LabelSelector::default();
    sel.match_labels.insert("app".into(), "web".into());
    d.spec.selector = Some(sel);
    d.spec
        .template
        .metadata
        .labels
        .insert("app".into(), "web".into());
    d.spec
        .template
        .spec
        .containers
        .push(bus_schemas::kinds::Container {
            name: "main".into(),
            image: image.into(),
            ..Default::default()
        });
    d.spec.strategy.type_ = "RollingUpdate".into();
    d.spec.strategy.rolling_update = Some(RollingUpdateDeployment {
        max_surge: Some(IntOrString::Int(1)),
        max_unavailable: Some(IntOrString::Int(1)),
    });
    d.spec.revision_history_limit = Some(2);
    d.spec.progress_deadline_seconds = Some(600);
    d
}

pub fn rs_of(
    d: &Deployment,
    image: &str,
    spec: i32,
    available: i32,
    revision: i64,
) -> Arc<ReplicaSet> {
    let mut d2 = d.clone();
    d2.spec.template.spec.containers[0].image = image.into();
    let hash = template_hash(&d2.spec.template, None);
    let mut rs = new_replica_set(&d2, &hash, spec, revision);
    rs.metadata.uid = format!("uid-{image}");
    rs.status.replicas = spec;
    rs.status.ready_replicas = available;
    rs.status.available_replicas = available;
    Arc::new(rs)
}

/// An auto-rollback Deployment whose rollout to `v2` has not progressed for a minute
/// (deadline 5 s), with a complete `v1` (revision 1) and the stuck `v2` (revision 2).
pub fn stalled_rollout() -> (Deployment, ReplicaSet, Arc<ReplicaSet>) {
    let mut d = deployment(2, "v2");
    d.spec.progress_deadline_seconds = Some(5);
    d.spec.auto_rollback = Some(true);
    let mut good = (*rs_of(&d, "v1", 1, 1, 1)).clone();
    good.metadata
        .annotations
        .insert(COMPLETE_ANNOTATION.into(), "true".into());
    let bad = rs_of(&d, "v2", 2, 0, 2);
    let long_ago = podutil::now() - chrono::Duration::seconds(60);
    d.status.observed_generation = 1;
    d.status.replicas = 3;
    d.status.updated_replicas = 2;
    d.status.available_replicas = 1;
    d.status.ready_replicas = 1;
    d.status.conditions.push(Condition {
        type_: "Progressing".into(),
        status: "True".into(),
        reason: "ReplicaSetUpdated".into(),
        last_update_time: Some(long_ago),
        last_transition_time: Some(long_ago),
        ..Default::default()
    });
    (d, good, bad)
}
