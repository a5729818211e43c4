//! Scores: among feasible nodes, which is best? Each plugin gives 0..=100 per node; the total
//! is their weighted sum, with kube-scheduler's default weights.

use bus_schemas::kinds::affinity::Toleration;

use crate::cache::{ClusterCache, NodeInfo};
use crate::filter::PodCtx;

/// Plugin weights (kube-scheduler's defaults).
#[derive(Debug, Clone, Copy)]
pub struct Weights {
    pub least_allocated: i64,
    pub balanced: i64,
    pub spread: i64,
    pub node_affinity: i64,
    pub pod_affinity: i64,
    pub taints: i64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            least_allocated: 1,
            balanced: 1,
            spread: 2,
            node_affinity: 2,
            pod_affinity: 2,
            taints: 3,
        }
    }
}

const MAX: i64 = 100;

fn fraction_free(requested: i64, allocatable: i64) -> i64 {
    if allocatable <= 0 || requested > allocatable {
        return 0;
    }
    (allocatable - requested) * MAX / allocatable
}

/// LeastAllocated: prefers emptier nodes (cpu and memory, with the pod added).
pub fn least_allocated(ctx: &PodCtx<'_>, node: &NodeInfo) -> i64 {
    let (pc, pm) = ctx.requests.non_zero();
    let cpu = fraction_free(node.non_zero.0 + pc, node.allocatable.milli_cpu);
    let mem = fraction_free(node.non_zero.1 + pm, node.allocatable.memory);
    (cpu + mem) / 2
}

/// BalancedAllocation: prefers nodes whose cpu and memory use stay alike with the pod added.
pub fn balanced(ctx: &PodCtx<'_>, node: &NodeInfo) -> i64 {
    let (pc, pm) = ctx.requests.non_zero();
    let frac = |req: i64, alloc: i64| {
        if alloc <= 0 {
            1.0
        } else {
            (req as f64 / alloc as f64).min(1.0)
        }
    };
    let c = frac(node.non_zero.0 + pc, node.allocatable.milli_cpu);
    let m = frac(node.non_zero.1 + pm, node.allocatable.memory);
    ((1.0 - (c - m).abs()) * MAX as f64) as i64
}

fn preferred_node_affinity(ctx: &PodCtx<'_>, node: &NodeInfo) -> i64 {
    let Some(na) = ctx
        .pod
        .spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
    else {
        return 0;
    };
    na.preferred_during_scheduling_ignored_during_execution
        .iter()
        .filter(|t| t.preference.matches(node.labels(), &node.name))
        .map(|t| i64::from(t.weight))
        .sum()
}

fn intolerable_prefer_no_schedule(tolerations: &[Toleration], node: &NodeInfo) -> i64 {
    node.node
        .spec
        .taints
        .iter()
        .filter(|t| {
            t.effect == "PreferNoSchedule" && !tolerations.iter().any(|tol| tol.tolerates(t))
        })
        .count() as i64
}

/// Scales raw values to 0..=100 with the highest getting 100 (or, with `reverse`, the lowest).
fn normalize(raw: &mut [i64], reverse: bool) {
    let max = raw.iter().copied().max().unwrap_or(0);
    for v in raw.iter_mut() {
        *v = match (max, reverse) {
            (0, false) => 0,
            (0, true) => MAX,
            (m, false) => *v * MAX / m,
            (m, true) => MAX - *v * MAX / m,
        };
    }
}

/// Scales possibly negative values to 0..=100 (min-max).
fn normalize_min_max(raw: &mut [i64]) {
    let (min, max) = (
        raw.iter().copied().min().unwrap_or(0),
        raw.iter().copied().max().unwrap_or(0),
    );
    for v in raw.iter_mut() {
        *v = if max == min {
            0
        } else {
            (*v - min) * MAX / (max - min)
        };
    }
}

/// Spreading of one controller's pods across nodes and zones (SelectorSpread): fewer
/// siblings scores higher; zones weigh two thirds when nodes carry zone labels.
fn spread(ctx: &PodCtx<'_>, cache: &ClusterCache, feasible: &[usize], out: &mut [i64]) {
    let Some(owner) = ctx.pod.controller_uid() else {
        out.fill(0);
        return;
    };
    let nodes = cache.nodes();
    let counts: Vec<i64> = feasible
        .iter()
        .map(|&i| i64::from(nodes[i].owners.get(owner).copied().unwrap_or(0)))
        .collect();
    let max_node = counts.iter().copied().max().unwrap_or(0);
    let zone_counts: Vec<Option<i64>> = feasible
        .iter()
        .map(|&i| {
            nodes[i]
                .zone
                .as_ref()
                .map(|z| i64::from(cache.zone_count(owner, z)))
        })
        .collect();
    let max_zone = zone_counts.iter().flatten().copied().max();
    for (k, v) in out.iter_mut().enumerate() {
        let node_score = if max_node == 0 {
            MAX
        } else {
            (max_node - counts[k]) * MAX / max_node
        };
        *v = match (max_zone, zone_counts[k]) {
            (Some(mz), Some(zc)) => {
                let zone_score = if mz == 0 { MAX } else { (mz - zc) * MAX / mz };
                (node_score + 2 * zone_score) / 3
            }
            _ => node_score,
        };
    }
}

/// Total weighted scores of the feasible nodes, in their order.
pub fn score(ctx: &PodCtx<'_>, cache: &ClusterCache, feasible: &[usize], w: &Weights) -> Vec<i64> {
    let nodes = cache.nodes();
    let n = feasible.len();
    let mut total: Vec<i64> = feasible
        .iter()
        .map(|&i| {
            w.least_allocated * least_allocated(ctx, &nodes[i])
                + w.balanced * balanced(ctx, &nodes[i])
        })
        .collect();
    let mut raw = vec![0i64; n];

    spread(ctx, cache, feasible, &mut raw);
    total
        .iter_mut()
        .zip(&raw)
        .for_each(|(t, v)| *t += w.spread * v);

    for (k, &i) in feasible.iter().enumerate() {
        raw[k] = preferred_node_affinity(ctx, &nodes[i]);
    }
    normalize(&mut raw, false);
    total
        .iter_mut()
        .zip(&raw)
        .for_each(|(t, v)| *t += w.node_affinity * v);

    if let Some(state) = ctx.affinity.as_ref().filter(|s| s.has_preferences()) {
        for (k, &i) in feasible.iter().enumerate() {
            raw[k] = state.preference(nodes[i].labels());
        }
        normalize_min_max(&mut raw);
        total
            .iter_mut()
            .zip(&raw)
            .for_each(|(t, v)| *t += w.pod_affinity * v);
    }

    for (k, &i) in feasible.iter().enumerate() {
        raw[k] = intolerable_prefer_no_schedule(&ctx.pod.spec.tolerations, &nodes[i]);
    }
    normalize(&mut raw, true);
    total
        .iter_mut()
        .zip(&raw)
        .for_each(|(t, v)| *t += w.taints * v);
    total
}

/// The best feasible node; ties go to the first in sampling order (which rotates).
pub fn pick(
    ctx: &PodCtx<'_>,
    cache: &ClusterCache,
    feasible: &[usize],
    w: &Weights,
) -> Option<usize> {
    if feasible.len() == 1 {
        return Some(feasible[0]);
    }
    let scores = score(ctx, cache, feasible, w);
    let mut best: Option<(i64, usize)> = None;
    for (k, s) in scores.iter().enumerate() {
        if best.is_none_or(|(b, _)| *s > b) {
            best = Some((*s, feasible[k]));
        }
    }
    best.map(|(_, i)| i)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bus_schemas::kinds::node::Taint;
    use shoal_bus::ObjectKey;

    use super::*;
    use crate::cache::tests::{bound, node, owned, pod};
    use crate::cache::ZONE_LABEL;

    fn best(cache: &ClusterCache, p: &bus_schemas::kinds::Pod) -> String {
        let key = ObjectKey::new("default", p.metadata.name.clone());
        let ctx = PodCtx::new(p, &key, cache);
        let feasible: Vec<usize> = (0..cache.nodes().len()).collect();
        let i = pick(&ctx, cache, &feasible, &Weights::default()).unwrap();
        cache.nodes()[i].name.clone()
    }

    #[test]
    fn least_allocated_prefers_the_emptier_node() {
        let mut cache = ClusterCache::new();
        cache.upsert_node(Arc::new(node("busy", "4", "8Gi", "110")));
        cache.upsert_node(Arc::new(node("idle", "4", "8Gi", "110")));
        cache.apply_pod(Arc::new(bound(pod("a", "3", "6Gi"), "busy")), 1);
        assert_eq!(best(&cache, &pod("p", "500m", "512Mi")), "idle");
        let key = ObjectKey::new("default", "p");
        let p = pod("p", "500m", "512Mi");
        let ctx = PodCtx::new(&p, &key, &cache);
        let busy = least_allocated(&ctx, cache.node("busy").unwrap());
        let idle = least_allocated(&ctx, cache.node("idle").unwrap());
        assert!(idle > busy, "{idle} > {busy}");
    }

    #[test]
    fn spreading_goes_across_zones() {
        let mut cache = ClusterCache::new();
        for (name, zone) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
            let mut n = node(name, "8", "16Gi", "110");
            n.metadata.labels.insert(ZONE_LABEL.into(), zone.into());
            cache.upsert_node(Arc::new(n));
        }
        // One sibling in zone a (on a1): the emptiest choice by spreading is zone b.
        cache.apply_pod(
            Arc::new(bound(owned(pod("s0", "100m", "100Mi"), "rs"), "a1")),
            1,
        );
        // Make b1 a little busier with unrelated pods, so resources alone would pick a2.
        cache.apply_pod(Arc::new(bound(pod("other", "1", "1Gi"), "b1")), 2);
        assert_eq!(best(&cache, &owned(pod("s1", "100m", "100Mi"), "rs")), "b1");
        // Without an owner, resources decide.
        assert_eq!(best(&cache, &pod("free", "100m", "100Mi")), "a2");
    }

    #[test]
    fn prefer_no_schedule_taints_are_avoided() {
        let mut cache = ClusterCache::new();
        let mut tainted = node("tainted", "8", "16Gi", "110");
        tainted.spec.taints.push(Taint {
            key: "spot".into(),
            effect: "PreferNoSchedule".into(),
            ..Default::default()
        });
        cache.upsert_node(Arc::new(tainted));
        cache.upsert_node(Arc::new(node("clean", "8", "16Gi", "110")));
        cache.apply_pod(Arc::new(bound(pod("x", "1", "1Gi"), "clean")), 1);
        assert_eq!(best(&cache, &pod("p", "100m", "100Mi")), "clean");
    }
}
