//! What a StatefulSet should do now, as a pure function of the set, its pods, its two
//! revisions (current and update) and the time: which ordinals to create, which pods to
//! delete, and the status. Follows Kubernetes' stateful set control:
//! - OrderedReady creates ordinals in ascending order, each Running and Ready before the
//!   next, and removes surplus ordinals in descending order, one at a time; Parallel does
//!   both at once.
//! - RollingUpdate replaces outdated pods from the highest ordinal down to `partition`,
//!   never more than `maxUnavailable` down at once; OnDelete replaces only pods someone
//!   deleted. A pod is recreated from the update revision at or above the partition and
//!   from the current revision below it.

use std::collections::BTreeMap;
use std::sync::Arc;

use bus_schemas::kinds::statefulset::{
    StatefulSetStatus, POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL,
};
use bus_schemas::kinds::{Pod, PodTemplateSpec, StatefulSet};
use bus_schemas::meta::Time;

use crate::podutil;

/// A revision: its name (`<set>-<hash>`) and the template it stands for.
#[derive(Debug, Clone, Copy)]
pub struct Revision<'a> {
    pub name: &'a str,
    pub template: &'a PodTemplateSpec,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct StatefulSetDecision {
    /// Ordinals to create, with the revision name each is made from.
    pub create: Vec<(i32, String)>,
    /// Pods to delete: surplus ordinals, finished pods, outdated pods being rolled.
    pub delete: Vec<String>,
    pub status: StatefulSetStatus,
}

/// The ordinal of `pod` in `set`, from its name `<set>-<ordinal>`.
pub fn ordinal_of(set: &str, pod: &Pod) -> Option<i32> {
    let rest = pod.metadata.name.strip_prefix(set)?.strip_prefix('-')?;
    if rest.starts_with('+') || (rest.len() > 1 && rest.starts_with('0')) {
        return None;
    }
    rest.parse().ok()
}

fn revision_of(pod: &Pod) -> &str {
    pod.metadata
        .labels
        .get(REVISION_LABEL)
        .map_or("", String::as_str)
}

fn healthy(pod: &Pod) -> bool {
    pod.status.phase == "Running" && pod.is_ready() && !pod.metadata.is_deleting()
}

pub fn decide(
    set: &StatefulSet,
    pods: &[Arc<Pod>],
    current: Revision<'_>,
    update: Revision<'_>,
    now: Time,
) -> StatefulSetDecision {
    let name = &set.metadata.name;
    let first = set.first_ordinal();
    let replicas = set.replicas().max(0);
    let wanted = first..first + replicas;
    let ordered = !set.is_parallel();
    let mut d = StatefulSetDecision::default();
    let by_ordinal: BTreeMap<i32, &Pod> = pods
        .iter()
        .filter_map(|p| ordinal_of(name, p).map(|i| (i, p.as_ref())))
        .collect();

    // Status from what exists now.
    let status = &mut d.status;
    status.observed_generation = set.metadata.generation;
    status.update_revision = update.name.to_string();
    status.current_revision = current.name.to_string();
    status.collision_count = set.status.collision_count;
    for pod in by_ordinal.values().filter(|p| !p.metadata.is_deleting()) {
        status.replicas += 1;
        if pod.is_ready() {
            status.ready_replicas += 1;
        }
        if podutil::is_available(pod, set.spec.min_ready_seconds, now) {
            status.available_replicas += 1;
        }
        let rev = revision_of(pod);
        if rev == current.name {
            status.current_replicas += 1;
        }
        if rev == update.name {
            status.updated_replicas += 1;
        }
    }
    let rolling_done = set.partition().is_some()
        && status.updated_replicas == replicas
        && status.ready_replicas == replicas
        && status.replicas == replicas;
    if rolling_done || current.name == update.name {
        status.current_revision = update.name.to_string();
        status.current_replicas = status.updated_replicas;
    }
    if set.metadata.is_deleting() {
        return d;
    }

    // Finished pods are replaced: delete now, recreate once gone.
    for (i, pod) in &by_ordinal {
        if wanted.contains(i) && pod.is_terminal() && !pod.metadata.is_deleting() {
            d.delete.push(pod.metadata.name.clone());
        }
    }
    if ordered && !d.delete.is_empty() {
        return d;
    }

    // Missing ordinals, lowest first.
    let partition = set.partition().unwrap_or(0);
    // OnDelete has no partition: whatever is recreated gets the update revision.
    let revision_for = |i: i32| {
        if set.partition().is_some_and(|p| i < first + p) {
            current.name
        } else {
            update.name
        }
    };
    for i in wanted.clone() {
        match by_ordinal.get(&i) {
            None => {
                d.create.push((i, revision_for(i).to_string()));
                if ordered {
                    return d;
                }
            }
            Some(pod) if ordered && !healthy(pod) => return d,
            Some(_) => {}
        }
    }

    // Surplus ordinals, highest first.
    let surplus: Vec<&Pod> = by_ordinal
        .iter()
        .rev()
        .filter(|(i, _)| !wanted.contains(*i))
        .map(|(_, p)| *p)
        .collect();
    if !surplus.is_empty() {
        if ordered {
            if surplus.iter().any(|p| p.metadata.is_deleting()) {
                return d;
            }
            d.delete.push(surplus[0].metadata.name.clone());
            return d;
        }
        d.delete.extend(
            surplus
                .iter()
                .filter(|p| !p.metadata.is_deleting())
                .map(|p| p.metadata.name.clone()),
        );
    }

    // Rolling update, highest ordinal first, down to the partition.
    if set.partition().is_none() {
        return d;
    }
    let mut unavailable = wanted
        .clone()
        .filter(|i| by_ordinal.get(i).is_none_or(|p| !healthy(p)))
        .count() as i32;
    let budget = set.max_unavailable();
    for i in wanted.rev().filter(|i| *i >= first + partition) {
        let Some(pod) = by_ordinal.get(&i) else {
            continue;
        };
        if revision_of(pod) == update.name || pod.metadata.is_deleting() {
            continue;
        }
        if unavailable >= budget && healthy(pod) {
            break;
        }
        if !healthy(pod) {
            // Already down: replacing it costs no more availability.
            d.delete.push(pod.metadata.name.clone());
            continue;
        }
        d.delete.push(pod.metadata.name.clone());
        unavailable += 1;
    }
    d
}

/// The pod for `ordinal`, made from `template` (the revision `revision`): its stable name,
/// its hostname and subdomain (its DNS name under the set's Service), and the labels that
/// find it by name, ordinal and revision.
pub fn pod_for(set: &StatefulSet, ordinal: i32, revision: &str, template: &PodTemplateSpec) -> Pod {
    let name = format!("{}-{ordinal}", set.metadata.name);
    let mut template = set.template_with_claims(template);
    for claim in &set.spec.volume_claim_templates {
        let volume = template
            .spec
            .volumes
            .iter_mut()
            .find(|v| v.name == claim.metadata.name)
            .and_then(|v| v.persistent_volume_claim.as_mut());
        if let Some(source) = volume {
            source.claim_name = set.claim_name(claim, ordinal);
        }
    }
    let mut pod = podutil::pod_from_template(
        &template,
        &set.metadata.namespace,
        "",
        podutil::controller_ref(set),
    );
    pod.metadata.name = name.clone();
    let labels = &mut pod.metadata.labels;
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.to_string());
    pod.spec.hostname = name;
    pod.spec.subdomain = set.spec.service_name.clone();
    pod
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::meta::Condition;
    use bus_schemas::Resource;

    fn set(replicas: i32, parallel: bool) -> StatefulSet {
        let mut s: StatefulSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "sts-uid", "generation": 1},
            "spec": {"replicas": replicas, "serviceName": "web",
                     "podManagementPolicy": if parallel { "Parallel" } else { "OrderedReady" },
                     "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
        }))
        .unwrap();
        s.apply_defaults();
        s
    }

    fn pod(s: &StatefulSet, i: i32, rev: &str, ready: bool) -> Arc<Pod> {
        let mut p = pod_for(s, i, rev, &s.spec.template);
        p.status.phase = "Running".into();
        if ready {
            p.status.conditions.push(Condition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            });
        }
        Arc::new(p)
    }

    fn revs(s: &StatefulSet) -> (Revision<'_>, Revision<'_>) {
        (
            Revision {
                name: "web-old",
                template: &s.spec.template,
            },
            Revision {
                name: "web-new",
                template: &s.spec.template,
            },
        )
    }

    fn same(s: &StatefulSet) -> Revision<'_> {
        Revision {
            name: "web-new",
            template: &s.spec.template,
        }
    }

    #[test]
    fn pods_get_stable_names_and_dns_identity() {
        let s = set(3, false);
        let p = pod_for(&s, 1, "web-new", &s.spec.template);
        assert_eq!(p.metadata.name, "web-1");
        assert_eq!(p.spec.hostname, "web-1");
        assert_eq!(p.spec.subdomain, "web");
        assert_eq!(p.metadata.labels[POD_NAME_LABEL], "web-1");
        assert_eq!(p.metadata.labels[POD_INDEX_LABEL], "1");
        assert_eq!(ordinal_of("web", &p), Some(1));
        let mut other = p.clone();
        other.metadata.name = "web-01".into();
        assert_eq!(ordinal_of("web", &other), None);
    }

    #[test]
    fn ordered_ready_creates_one_at_a_time_and_waits_for_readiness() {
        let s = set(3, false);
        let d = decide(&s, &[], same(&s), same(&s), podutil::now());
        assert_eq!(d.create, vec![(0, "web-new".to_string())]);
        let d = decide(
            &s,
            &[pod(&s, 0, "web-new", false)],
            same(&s),
            same(&s),
            podutil::now(),
        );
        assert!(d.create.is_empty(), "web-0 is not Ready yet");
        let d = decide(
            &s,
            &[pod(&s, 0, "web-new", true)],
            same(&s),
            same(&s),
            podutil::now(),
        );
        assert_eq!(d.create, vec![(1, "web-new".to_string())]);
    }

    #[test]
    fn parallel_creates_all_at_once() {
        let s = set(3, true);
        let d = decide(&s, &[], same(&s), same(&s), podutil::now());
        assert_eq!(
            d.create.iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn scale_down_removes_the_highest_ordinal_first() {
        let s = set(1, false);
        let pods = [
            pod(&s, 0, "web-new", true),
            pod(&s, 1, "web-new", true),
            pod(&s, 2, "web-new", true),
        ];
        let d = decide(&s, &pods, same(&s), same(&s), podutil::now());
        assert_eq!(d.delete, vec!["web-2".to_string()]);
        let s = set(1, true);
        let d = decide(&s, &pods, same(&s), same(&s), podutil::now());
        assert_eq!(d.delete, vec!["web-2".to_string(), "web-1".to_string()]);
    }

    #[test]
    fn rolling_update_goes_down_from_the_top_and_stops_at_the_partition() {
        let mut s = set(3, false);
        s.spec
            .update_strategy
            .rolling_update
            .as_mut()
            .unwrap()
            .partition = Some(1);
        let (cur, upd) = revs(&s);
        let pods = [
            pod(&s, 0, "web-old", true),
            pod(&s, 1, "web-old", true),
            pod(&s, 2, "web-old", true),
        ];
        let d = decide(&s, &pods, cur, upd, podutil::now());
        assert_eq!(d.delete, vec!["web-2".to_string()]);
        let pods = [
            pod(&s, 0, "web-old", true),
            pod(&s, 1, "web-old", true),
            pod(&s, 2, "web-new", true),
        ];
        let d = decide(&s, &pods, cur, upd, podutil::now());
        assert_eq!(d.delete, vec!["web-1".to_string()]);
        let pods = [
            pod(&s, 0, "web-old", true),
            pod(&s, 1, "web-new", true),
            pod(&s, 2, "web-new", true),
        ];
        let d = decide(&s, &pods, cur, upd, podutil::now());
        assert!(d.delete.is_empty(), "web-0 is below the partition");
        assert_eq!(d.status.updated_replicas, 2);
        assert_eq!(
            d.status.current_revision, "web-old",
            "not complete below the partition"
        );
        // Below the partition a missing pod comes back at the current revision.
        let pods = [pod(&s, 1, "web-new", true), pod(&s, 2, "web-new", true)];
        let d = decide(&s, &pods, cur, upd, podutil::now());
        assert_eq!(d.create, vec![(0, "web-old".to_string())]);
    }

    #[test]
    fn max_unavailable_bounds_the_pods_replaced_at_once() {
        let mut s = set(4, true);
        s.spec
            .update_strategy
            .rolling_update
            .as_mut()
            .unwrap()
            .max_unavailable = Some(bus_schemas::kinds::IntOrString::Int(2));
        let (cur, upd) = revs(&s);
        let pods: Vec<Arc<Pod>> = (0..4).map(|i| pod(&s, i, "web-old", true)).collect();
        let d = decide(&s, &pods, cur, upd, podutil::now());
        assert_eq!(d.delete, vec!["web-3".to_string(), "web-2".to_string()]);
    }

    #[test]
    fn on_delete_replaces_nothing_by_itself() {
        let mut s = set(2, false);
        s.spec.update_strategy.type_ = "OnDelete".into();
        s.spec.update_strategy.rolling_update = None;
        let (cur, upd) = revs(&s);
        let pods = [pod(&s, 0, "web-old", true), pod(&s, 1, "web-old", true)];
        let d = decide(&s, &pods, cur, upd, podutil::now());
        assert!(d.delete.is_empty() && d.create.is_empty());
        let d = decide(&s, &pods[..1], cur, upd, podutil::now());
        assert_eq!(d.create, vec![(1, "web-new".to_string())]);
    }

    #[test]
    fn a_complete_rollout_moves_the_current_revision() {
        let s = set(2, false);
        let (cur, upd) = revs(&s);
        let pods = [pod(&s, 0, "web-new", true), pod(&s, 1, "web-new", true)];
        let d = decide(&s, &pods, cur, upd, podutil::now());
        assert_eq!(d.status.current_revision, "web-new");
        assert_eq!(
            (
                d.status.replicas,
                d.status.ready_replicas,
                d.status.current_replicas
            ),
            (2, 2, 2)
        );
    }
}
