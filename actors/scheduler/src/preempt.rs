//! Preemption (Borg's prod over batch): when a pod fits nowhere, find ONE node where evicting
//! the fewest, lowest-priority pods makes it fit. Never a pod of equal or higher priority.
//!
//! Per node, as kube-scheduler does: remove every lower-priority pod; if the pod still does
//! not fit, the node is no candidate. Otherwise give pods back, highest priority first, as
//! long as the pod still fits; what cannot be given back are the victims. Among candidates
//! the one whose most important victim is least important wins, then the fewest victims,
//! then the smallest sum of priorities.

use shoal_bus::ObjectKey;

use crate::cache::ClusterCache;
use crate::filter::PodCtx;
use crate::resources::{fits, Resources};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub node: usize,
    pub victims: Vec<ObjectKey>,
    max_priority: i64,
    sum_priority: i64,
}

/// Whether the pod may preempt at all.
pub fn may_preempt(ctx: &PodCtx<'_>) -> bool {
    ctx.pod.spec.preemption_policy != "Never"
}

/// The victims on node `i`, or None when evicting every lower-priority pod is not enough.
pub fn victims_on_node(ctx: &PodCtx<'_>, cache: &ClusterCache, i: usize) -> Option<Candidate> {
    let info = &cache.nodes()[i];
    let mut used = info.requested.clone();
    used.add(&cache.foreign_pending(i));
    for (key, (prio, req)) in &info.nominated {
        if key != ctx.key && *prio >= ctx.priority {
            used.add(req);
        }
    }
    let mut potential: Vec<(&ObjectKey, i32, &Resources)> = Vec::new();
    for key in &info.pods {
        let Some(entry) = cache.pod(key) else {
            continue;
        };
        if entry.pod.metadata.is_deleting() {
            // Already going: its room is as good as free, and it is nobody's victim.
            used.sub(&entry.requests);
        } else if entry.priority < ctx.priority && !entry.assumed {
            used.sub(&entry.requests);
            potential.push((key, entry.priority, &entry.requests));
        }
    }
    if !fits(&ctx.requests, &used, &info.allocatable) {
        return None;
    }
    // Most important first, so they are the first given back.
    potential.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut victims = Vec::new();
    let (mut max_priority, mut sum_priority) = (i64::MIN, 0i64);
    for (key, prio, req) in potential {
        let mut with = used.clone();
        with.add(req);
        if fits(&ctx.requests, &with, &info.allocatable) {
            used = with;
        } else {
            victims.push(key.clone());
            max_priority = max_priority.max(i64::from(prio));
            sum_priority += i64::from(prio);
        }
    }
    Some(Candidate {
        node: i,
        victims,
        max_priority,
        sum_priority,
    })
}

/// The best candidate among `nodes` (those that failed only for resources).
pub fn select(ctx: &PodCtx<'_>, cache: &ClusterCache, nodes: &[usize]) -> Option<Candidate> {
    if !may_preempt(ctx) {
        return None;
    }
    nodes
        .iter()
        .filter_map(|&i| victims_on_node(ctx, cache, i))
        .min_by(|a, b| {
            (a.max_priority, a.victims.len(), a.sum_priority, a.node).cmp(&(
                b.max_priority,
                b.victims.len(),
                b.sum_priority,
                b.node,
            ))
        })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cache::tests::{bound, node, pod};

    fn prio(mut p: bus_schemas::kinds::Pod, v: i32) -> bus_schemas::kinds::Pod {
        p.spec.priority = Some(v);
        p
    }

    fn names(c: &Candidate) -> Vec<&str> {
        c.victims.iter().map(|k| k.name.as_str()).collect()
    }

    #[test]
    fn fewest_lowest_priority_victims_on_one_node() {
        let mut cache = ClusterCache::new();
        cache.upsert_node(Arc::new(node("n1", "4", "8Gi", "110")));
        cache.upsert_node(Arc::new(node("n2", "4", "8Gi", "110")));
        // n1: two small batch pods; n2: one big batch pod and one prod pod.
        cache.apply_pod(Arc::new(bound(prio(pod("b1", "2", ""), 0), "n1")), 1);
        cache.apply_pod(Arc::new(bound(prio(pod("b2", "2", ""), 0), "n1")), 2);
        cache.apply_pod(Arc::new(bound(prio(pod("b3", "3", ""), 10), "n2")), 3);
        cache.apply_pod(Arc::new(bound(prio(pod("prod", "1", ""), 1000), "n2")), 4);

        let p = prio(pod("big", "3", ""), 100);
        let key = ObjectKey::new("default", "big");
        let ctx = PodCtx::new(&p, &key, &cache);
        let n1 = victims_on_node(&ctx, &cache, 0).unwrap();
        let mut v = names(&n1);
        v.sort();
        assert_eq!(v, vec!["b1", "b2"], "3 cpu needs both 2-cpu pods gone");
        let n2 = victims_on_node(&ctx, &cache, 1).unwrap();
        assert_eq!(names(&n2), vec!["b3"]);
        // n1's victims have lower priority (0 < 10), so n1 wins despite needing two.
        assert_eq!(select(&ctx, &cache, &[0, 1]).unwrap().node, 0);

        // A smaller pod needs only one victim on n1; the other is given back.
        let small = prio(pod("small", "1", ""), 100);
        let key = ObjectKey::new("default", "small");
        let ctx = PodCtx::new(&small, &key, &cache);
        let c = select(&ctx, &cache, &[0, 1]).unwrap();
        assert_eq!(c.node, 0);
        assert_eq!(c.victims.len(), 1);
    }

    #[test]
    fn never_equal_or_higher_priority() {
        let mut cache = ClusterCache::new();
        cache.upsert_node(Arc::new(node("n1", "2", "8Gi", "110")));
        cache.apply_pod(Arc::new(bound(prio(pod("same", "2", ""), 100), "n1")), 1);
        let p = prio(pod("p", "1", ""), 100);
        let key = ObjectKey::new("default", "p");
        let ctx = PodCtx::new(&p, &key, &cache);
        assert!(select(&ctx, &cache, &[0]).is_none());

        let mut never = prio(pod("never", "1", ""), 1000);
        never.spec.preemption_policy = "Never".into();
        let key = ObjectKey::new("default", "never");
        let ctx = PodCtx::new(&never, &key, &cache);
        assert!(select(&ctx, &cache, &[0]).is_none());

        let high = prio(pod("high", "1", ""), 1000);
        let key = ObjectKey::new("default", "high");
        let ctx = PodCtx::new(&high, &key, &cache);
        assert_eq!(names(&select(&ctx, &cache, &[0]).unwrap()), vec!["same"]);
    }
}
