//! Filters: can this pod run on this node at all? Each failure has a reason, rendered the way
//! kube-scheduler words it so that people's habits (and grep patterns) carry over.

use std::fmt;

use bus_schemas::kinds::affinity::Toleration;
use bus_schemas::kinds::node::Taint;
use bus_schemas::kinds::Pod;
use shoal_bus::ObjectKey;

use crate::affinity::{AffinityFailure, AffinityState};
use crate::cache::ClusterCache;
use crate::resources::{check_fit, fits, Resources, Shortfall};
use crate::volumes::{Conflict, VolumePlan};

pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    NotReady,
    Unschedulable,
    NodeAffinity,
    Taint {
        key: String,
        value: String,
    },
    TooManyPods,
    Insufficient(String),
    PodAffinity,
    PodAntiAffinity,
    ExistingAntiAffinity,
    /// A volume of the pod lives on other nodes.
    VolumeNodeAffinity,
    /// No volume that fits an unbound claim (made by hand) is reachable from the node.
    NoVolumeToBind,
    /// The node's allocation record is ahead of this scheduler's pod cache: decide later.
    /// Never shown to people (it resolves itself within milliseconds).
    CacheBehind,
}

impl Reason {
    /// Whether evicting lower-priority pods could make the node fit.
    pub fn resolvable_by_preemption(&self) -> bool {
        matches!(self, Reason::TooManyPods | Reason::Insufficient(_))
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::NotReady => write!(f, "node(s) were not ready"),
            Reason::Unschedulable => write!(f, "node(s) were unschedulable"),
            Reason::NodeAffinity => write!(f, "node(s) didn't match Pod's node affinity/selector"),
            Reason::Taint { key, value } => {
                write!(f, "node(s) had untolerated taint {{{key}: {value}}}")
            }
            Reason::TooManyPods => write!(f, "Too many pods"),
            Reason::Insufficient(r) => write!(f, "Insufficient {r}"),
            Reason::PodAffinity => write!(f, "node(s) didn't match pod affinity rules"),
            Reason::PodAntiAffinity => write!(f, "node(s) didn't match pod anti-affinity rules"),
            Reason::ExistingAntiAffinity => {
                write!(
                    f,
                    "node(s) didn't satisfy existing pods anti-affinity rules"
                )
            }
            Reason::VolumeNodeAffinity => write!(f, "node(s) had volume node affinity conflict"),
            Reason::NoVolumeToBind => {
                write!(
                    f,
                    "node(s) didn't find available persistent volumes to bind"
                )
            }
            Reason::CacheBehind => write!(
                f,
                "node(s) had allocations not yet in this scheduler's cache"
            ),
        }
    }
}

/// What the filters need of a pod, computed once per attempt.
pub struct PodCtx<'a> {
    pub pod: &'a Pod,
    pub key: &'a ObjectKey,
    pub requests: Resources,
    pub priority: i32,
    pub affinity: Option<AffinityState>,
    /// Where the pod's claims let it run; None for a pod without claims.
    pub volumes: Option<VolumePlan>,
}

impl<'a> PodCtx<'a> {
    pub fn new(pod: &'a Pod, key: &'a ObjectKey, cache: &ClusterCache) -> PodCtx<'a> {
        PodCtx {
            pod,
            key,
            requests: Resources::of_pod(pod),
            priority: pod.spec.priority.unwrap_or(0),
            affinity: AffinityState::compute(pod, cache),
            volumes: None,
        }
    }
}

fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

fn tolerates_condition(pod: &Pod, key: &str) -> bool {
    let taint = Taint {
        key: key.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    tolerated(&pod.spec.tolerations, &taint)
}

/// nodeSelector and required node affinity.
pub fn matches_node_selection(pod: &Pod, node: &bus_schemas::kinds::Node) -> bool {
    let labels = &node.metadata.labels;
    let selector_ok = pod
        .spec
        .node_selector
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v));
    let affinity_ok = pod
        .spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_none_or(|s| s.matches(labels, &node.metadata.name));
    selector_ok && affinity_ok
}

/// The first NoSchedule/NoExecute taint the pod does not tolerate.
pub fn untolerated_taint<'n>(pod: &Pod, taints: &'n [Taint]) -> Option<&'n Taint> {
    taints.iter().find(|t| {
        (t.effect == "NoSchedule" || t.effect == "NoExecute")
            && !tolerated(&pod.spec.tolerations, t)
    })
}

/// Runs every filter on node `i`. On failure pushes the reasons (all resource shortfalls, or
/// the first other failure, as kube-scheduler's filter chain reports) and returns false.
pub fn filter(
    ctx: &PodCtx<'_>,
    cache: &ClusterCache,
    i: usize,
    out: &mut Vec<Reason>,
    shortfalls: &mut Vec<Shortfall>,
) -> bool {
    let info = &cache.nodes()[i];
    let node = &*info.node;
    let pod = ctx.pod;
    if !info.ready && !tolerates_condition(pod, TAINT_NOT_READY) {
        out.push(Reason::NotReady);
        return false;
    }
    if node.spec.unschedulable && !tolerates_condition(pod, TAINT_UNSCHEDULABLE) {
        out.push(Reason::Unschedulable);
        return false;
    }
    if !matches_node_selection(pod, node) {
        out.push(Reason::NodeAffinity);
        return false;
    }
    if let Some(plan) = &ctx.volumes {
        if let Some(conflict) = plan.conflict(&node.metadata.labels, &node.metadata.name) {
            out.push(match conflict {
                Conflict::NodeAffinity => Reason::VolumeNodeAffinity,
                Conflict::NoVolumeToBind => Reason::NoVolumeToBind,
            });
            return false;
        }
    }
    if let Some(t) = untolerated_taint(pod, &node.spec.taints) {
        out.push(Reason::Taint {
            key: t.key.clone(),
            value: t.value.clone(),
        });
        return false;
    }
    if cache.alloc_ahead(i) {
        out.push(Reason::CacheBehind);
        return false;
    }
    // Fast path: nothing in flight from other schedulers, nobody nominated here.
    let simple = info.alloc.pending.is_empty() && info.nominated.is_empty();
    if !(simple && fits(&ctx.requests, &info.requested, &info.allocatable)) {
        let mut used = info.requested.clone();
        if !simple {
            used.add(&cache.foreign_pending(i));
            for (key, (prio, req)) in &info.nominated {
                if key != ctx.key && *prio >= ctx.priority {
                    used.add(req);
                }
            }
        }
        shortfalls.clear();
        check_fit(&ctx.requests, &used, &info.allocatable, shortfalls);
        if !shortfalls.is_empty() {
            out.extend(shortfalls.drain(..).map(|s| match s {
                Shortfall::TooManyPods => Reason::TooManyPods,
                Shortfall::Insufficient(r) => Reason::Insufficient(r),
            }));
            return false;
        }
    }
    if let Some(state) = &ctx.affinity {
        if let Err(f) = state.check(info.labels()) {
            out.push(match f {
                AffinityFailure::Affinity => Reason::PodAffinity,
                AffinityFailure::AntiAffinity => Reason::PodAntiAffinity,
                AffinityFailure::ExistingAntiAffinity => Reason::ExistingAntiAffinity,
            });
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bus_schemas::kinds::affinity::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
        PodAffinity, PodAffinityTerm,
    };
    use bus_schemas::selector::LabelSelector;

    use super::*;
    use crate::cache::tests::{bound, node, pod};

    fn run(cache: &ClusterCache, p: &Pod, name: &str) -> Vec<Reason> {
        let key = ObjectKey::new(p.metadata.namespace.clone(), p.metadata.name.clone());
        let ctx = PodCtx::new(p, &key, cache);
        let mut out = Vec::new();
        let ok = filter(
            &ctx,
            cache,
            cache.node_position(name).unwrap(),
            &mut out,
            &mut Vec::new(),
        );
        assert_eq!(ok, out.is_empty());
        out
    }

    fn one_node(n: bus_schemas::kinds::Node) -> ClusterCache {
        let mut cache = ClusterCache::new();
        cache.upsert_node(Arc::new(n));
        cache
    }

    #[test]
    fn resources_and_pod_count() {
        let mut cache = one_node(node("n1", "2", "1Gi", "2"));
        assert!(run(&cache, &pod("p", "1", "512Mi"), "n1").is_empty());
        assert_eq!(
            run(&cache, &pod("p", "3", "2Gi"), "n1"),
            vec![
                Reason::Insufficient("cpu".into()),
                Reason::Insufficient("memory".into())
            ]
        );
        cache.apply_pod(Arc::new(bound(pod("a", "", ""), "n1")), 1);
        cache.apply_pod(Arc::new(bound(pod("b", "", ""), "n1")), 2);
        assert_eq!(
            run(&cache, &pod("p", "", ""), "n1"),
            vec![Reason::TooManyPods]
        );
    }

    #[test]
    fn readiness_and_cordon() {
        let mut n = node("n1", "2", "1Gi", "10");
        n.status.conditions.clear();
        assert_eq!(
            run(&one_node(n), &pod("p", "", ""), "n1"),
            vec![Reason::NotReady]
        );
        let mut n = node("n1", "2", "1Gi", "10");
        n.spec.unschedulable = true;
        let cache = one_node(n);
        assert_eq!(
            run(&cache, &pod("p", "", ""), "n1"),
            vec![Reason::Unschedulable]
        );
        let mut tolerant = pod("p", "", "");
        tolerant.spec.tolerations.push(Toleration {
            key: TAINT_UNSCHEDULABLE.into(),
            operator: "Exists".into(),
            ..Default::default()
        });
        assert!(run(&cache, &tolerant, "n1").is_empty());
    }

    #[test]
    fn selector_and_node_affinity() {
        let mut n = node("n1", "2", "1Gi", "10");
        n.metadata.labels.insert("disk".into(), "ssd".into());
        let cache = one_node(n);
        let mut p = pod("p", "", "");
        p.spec.node_selector.insert("disk".into(), "hdd".into());
        assert_eq!(run(&cache, &p, "n1"), vec![Reason::NodeAffinity]);
        p.spec.node_selector.insert("disk".into(), "ssd".into());
        assert!(run(&cache, &p, "n1").is_empty());
        let mut q = pod("q", "", "");
        q.spec.affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: vec![NodeSelectorRequirement {
                            key: "disk".into(),
                            operator: "NotIn".into(),
                            values: vec!["ssd".into()],
                        }],
                        ..Default::default()
                    }],
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(run(&cache, &q, "n1"), vec![Reason::NodeAffinity]);
    }

    #[test]
    fn taints_and_tolerations() {
        let mut n = node("n1", "2", "1Gi", "10");
        n.spec.taints.push(Taint {
            key: "soft".into(),
            effect: "PreferNoSchedule".into(),
            ..Default::default()
        });
        n.spec.taints.push(Taint {
            key: "dedicated".into(),
            value: "gpu".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
        let cache = one_node(n);
        let mut p = pod("p", "", "");
        assert_eq!(
            run(&cache, &p, "n1"),
            vec![Reason::Taint {
                key: "dedicated".into(),
                value: "gpu".into()
            }]
        );
        assert_eq!(
            Reason::Taint {
                key: "dedicated".into(),
                value: "gpu".into()
            }
            .to_string(),
            "node(s) had untolerated taint {dedicated: gpu}"
        );
        p.spec.tolerations.push(Toleration {
            key: "dedicated".into(),
            value: "gpu".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
        assert!(
            run(&cache, &p, "n1").is_empty(),
            "PreferNoSchedule does not filter"
        );
        let mut n = node("n2", "2", "1Gi", "10");
        n.spec.taints.push(Taint {
            key: "evict".into(),
            effect: "NoExecute".into(),
            ..Default::default()
        });
        assert_eq!(
            run(&one_node(n), &pod("p", "", ""), "n2"),
            vec![Reason::Taint {
                key: "evict".into(),
                value: String::new()
            }]
        );
    }

    fn term(app: &str, key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: [("app".to_string(), app.to_string())].into(),
                ..Default::default()
            }),
            topology_key: key.into(),
            ..Default::default()
        }
    }

    #[test]
    fn pod_affinity_and_anti_affinity() {
        let mut cache = ClusterCache::new();
        for (name, zone) in [("n1", "a"), ("n2", "a"), ("n3", "b")] {
            let mut n = node(name, "4", "4Gi", "10");
            n.metadata.labels.insert("zone".into(), zone.into());
            n.metadata
                .labels
                .insert("kubernetes.io/hostname".into(), name.into());
            cache.upsert_node(Arc::new(n));
        }
        let mut db = bound(pod("db", "", ""), "n1");
        db.metadata.labels.insert("app".into(), "db".into());
        cache.apply_pod(Arc::new(db), 1);

        let mut near = pod("web", "", "");
        near.spec.affinity = Some(Affinity {
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: vec![term("db", "zone")],
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(run(&cache, &near, "n2").is_empty(), "same zone as db");
        assert_eq!(run(&cache, &near, "n3"), vec![Reason::PodAffinity]);

        let mut away = pod("cache", "", "");
        away.spec.affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: vec![term(
                    "db",
                    "kubernetes.io/hostname",
                )],
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(run(&cache, &away, "n1"), vec![Reason::PodAntiAffinity]);
        assert!(run(&cache, &away, "n2").is_empty());

        // An existing pod's anti-affinity keeps matching pods out of its zone.
        let mut loner = bound(pod("loner", "", ""), "n3");
        loner.spec.affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: vec![term("noisy", "zone")],
                ..Default::default()
            }),
            ..Default::default()
        });
        cache.apply_pod(Arc::new(loner), 2);
        let mut noisy = pod("noisy", "", "");
        noisy.metadata.labels.insert("app".into(), "noisy".into());
        assert_eq!(
            run(&cache, &noisy, "n3"),
            vec![Reason::ExistingAntiAffinity]
        );
        assert!(run(&cache, &noisy, "n1").is_empty());

        // The first pod of a self-affine group may go anywhere.
        let mut first = pod("g1", "", "");
        first.metadata.labels.insert("app".into(), "group".into());
        first.spec.affinity = Some(Affinity {
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: vec![term("group", "zone")],
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(run(&cache, &first, "n3").is_empty());
    }
}
