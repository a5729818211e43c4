//! One scheduling decision: filter a sample of the nodes (starting where the last decision
//! stopped), score the feasible ones, pick the best — or explain why none fits.
//!
//! The sample is kube-scheduler's percentageOfNodesToScore: stop filtering after finding
//! `max(min_feasible, percentage% of nodes)` feasible nodes. A decision therefore costs
//! O(sampled nodes), whatever the number of pods.

use std::collections::HashMap;

use crate::cache::ClusterCache;
use crate::filter::{filter, PodCtx, Reason};
use crate::resources::Shortfall;
use crate::score::{pick, Weights};

#[derive(Debug, Clone)]
pub struct Sampling {
    /// Percentage of nodes to find feasible before scoring; 0 picks kube-scheduler's
    /// adaptive default (50% minus 1% per 125 nodes, at least 5%).
    pub percentage: u32,
    /// Never stop before this many feasible nodes (or all nodes, when fewer).
    pub min_feasible: usize,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            percentage: 0,
            min_feasible: 100,
        }
    }
}

impl Sampling {
    pub fn nodes_to_find(&self, total: usize) -> usize {
        if total <= self.min_feasible {
            return total;
        }
        let pct = if self.percentage == 0 {
            50usize.saturating_sub(total / 125).max(5)
        } else {
            (self.percentage as usize).min(100)
        };
        (total * pct / 100).max(self.min_feasible)
    }
}

#[derive(Debug)]
pub enum Decision {
    Bind { node: usize },
    Unfit(Unfit),
}

#[derive(Debug, Default)]
pub struct Unfit {
    pub total: usize,
    pub reasons: HashMap<Reason, usize>,
    /// Nodes skipped because their allocation record is ahead of the pod cache.
    pub cache_behind: usize,
    /// Nodes that failed only for resources: preemption candidates.
    pub preemptable: Vec<usize>,
}

/// Reused buffers and the rotating start, so a decision allocates little.
#[derive(Default)]
pub struct Decider {
    next_start: usize,
    feasible: Vec<usize>,
    reasons: Vec<Reason>,
    shortfalls: Vec<Shortfall>,
}

impl Decider {
    pub fn decide(
        &mut self,
        ctx: &PodCtx<'_>,
        cache: &ClusterCache,
        sampling: &Sampling,
        weights: &Weights,
    ) -> Decision {
        let total = cache.nodes().len();
        // A pod that preemption made room for tries that node first (kube-scheduler does too).
        let nominated = &ctx.pod.status.nominated_node_name;
        if !nominated.is_empty() {
            if let Some(i) = cache.node_position(nominated) {
                self.reasons.clear();
                if filter(ctx, cache, i, &mut self.reasons, &mut self.shortfalls) {
                    return Decision::Bind { node: i };
                }
            }
        }
        let want = sampling.nodes_to_find(total);
        self.feasible.clear();
        let mut unfit = Unfit {
            total,
            ..Default::default()
        };
        let start = if total == 0 {
            0
        } else {
            self.next_start % total
        };
        let mut visited = 0;
        // Steps of the attempt's span, so a trace shows where a slow decision went.
        let filtering = std::time::Instant::now();
        for j in 0..total {
            if self.feasible.len() >= want {
                break;
            }
            let i = (start + j) % total;
            visited += 1;
            self.reasons.clear();
            if filter(ctx, cache, i, &mut self.reasons, &mut self.shortfalls) {
                self.feasible.push(i);
                continue;
            }
            let mut only_resources = true;
            for r in self.reasons.drain(..) {
                if r == Reason::CacheBehind {
                    unfit.cache_behind += 1;
                }
                only_resources &= r.resolvable_by_preemption();
                *unfit.reasons.entry(r).or_default() += 1;
            }
            if only_resources {
                unfit.preemptable.push(i);
            }
        }
        self.next_start = start + visited;
        let candidates = self.feasible.len();
        shoal_telemetry::step!(
            "scheduler.filter",
            filtering,
            true,
            visited = shoal_telemetry::int(visited),
            feasible = shoal_telemetry::int(candidates)
        );
        let scoring = std::time::Instant::now();
        let picked = pick(ctx, cache, &self.feasible, weights);
        shoal_telemetry::step!("scheduler.score", scoring, picked.is_some());
        match picked {
            Some(node) => Decision::Bind { node },
            None => Decision::Unfit(unfit),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use shoal_bus::ObjectKey;

    use super::*;
    use crate::cache::tests::{bound, node, pod};
    use crate::explain::message;

    #[test]
    fn sample_size() {
        let s = Sampling::default();
        assert_eq!(s.nodes_to_find(50), 50);
        assert_eq!(s.nodes_to_find(1000), 420);
        assert_eq!(s.nodes_to_find(5000), 500);
        let fixed = Sampling {
            percentage: 5,
            min_feasible: 100,
        };
        assert_eq!(fixed.nodes_to_find(5000), 250);
        assert_eq!(fixed.nodes_to_find(1000), 100);
    }

    #[test]
    fn binds_or_explains() {
        let mut cache = ClusterCache::new();
        let mut cordoned = node("c", "8", "8Gi", "10");
        cordoned.spec.unschedulable = true;
        cache.upsert_node(Arc::new(cordoned));
        cache.upsert_node(Arc::new(node("m1", "8", "1Gi", "10")));
        cache.upsert_node(Arc::new(node("m2", "8", "2Gi", "10")));
        cache.apply_pod(Arc::new(bound(pod("x", "", "1Gi"), "m2")), 1);
        let mut d = Decider::default();
        let p = pod("p", "1", "1500Mi");
        let key = ObjectKey::new("default", "p");
        let ctx = PodCtx::new(&p, &key, &cache);
        let Decision::Unfit(u) = d.decide(&ctx, &cache, &Sampling::default(), &Weights::default())
        else {
            panic!("must not fit")
        };
        assert_eq!(
            message(u.total, &u.reasons),
            "0/3 nodes are available: 2 Insufficient memory, 1 node(s) were unschedulable."
        );
        assert_eq!(u.preemptable.len(), 2);

        let small = pod("s", "1", "512Mi");
        let key = ObjectKey::new("default", "s");
        let ctx = PodCtx::new(&small, &key, &cache);
        let Decision::Bind { node } =
            d.decide(&ctx, &cache, &Sampling::default(), &Weights::default())
        else {
            panic!("fits")
        };
        assert_eq!(cache.nodes()[node].name, "m1", "emptier memory");
    }
}
