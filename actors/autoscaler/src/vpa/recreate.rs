//! Which pod Recreate replaces next (pure): one whose requests lie outside the
//! recommendation's [lowerBound, upperBound], one at a time, only while every replica the
//! workload asks for is available and at least `updatePolicy.minReplicas` (upstream
//! default 2) are, so a replacement never takes the workload below its available minimum.
//! (Shoal has no PodDisruptionBudgets; this availability rule stands in for one.)

use bus_schemas::kinds::vpa::VerticalPodAutoscaler;
use bus_schemas::kinds::Pod;
use bus_schemas::quantity::Quantity;

/// Upstream's default `--min-replicas` of the updater.
pub const DEFAULT_MIN_REPLICAS: i32 = 2;

/// A pod to replace and why (the Event's message).
#[derive(Debug, Clone, PartialEq)]
pub struct Eviction {
    pub pod: String,
    pub uid: String,
    pub reason: String,
}

/// Why nothing is replaced now, when something would be.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Evict(Eviction),
    /// Pods are outside their bounds but replacing one now would lower availability.
    Wait(String),
    Nothing,
}

/// How far `request` is outside [lower, upper] as a ratio (0 inside); a missing request is
/// as far as can be.
fn distance(request: Option<&Quantity>, lower: Option<&Quantity>, upper: Option<&Quantity>) -> f64 {
    let Some(request) = request else {
        return if lower.is_some() { f64::INFINITY } else { 0.0 };
    };
    let r = request.milli_value() as f64;
    match (lower, upper) {
        (Some(l), _) if r < l.milli_value() as f64 => l.milli_value() as f64 / r.max(1.0),
        (_, Some(u)) if r > u.milli_value() as f64 => r / (u.milli_value() as f64).max(1.0),
        _ => 0.0,
    }
}

/// The first container resource of `pod` outside its bounds, as words, and how far.
fn outside(vpa: &VerticalPodAutoscaler, pod: &Pod) -> Option<(f64, String)> {
    let mut worst: Option<(f64, String)> = None;
    for container in &pod.spec.containers {
        let Some(rec) = vpa.recommendation_for(&container.name) else {
            continue;
        };
        for (resource, target) in &rec.target {
            let request = container.resources.requests.get(resource);
            let d = distance(
                request,
                rec.lower_bound.get(resource),
                rec.upper_bound.get(resource),
            );
            if d > 0.0 && worst.as_ref().is_none_or(|(w, _)| d > *w) {
                let had = request
                    .map(|q| q.to_string())
                    .unwrap_or_else(|| "none".into());
                let message = format!(
                    "container {:?} requests {resource} {had}, outside [{}, {}]; recommended {target}",
                    container.name,
                    rec.lower_bound.get(resource).map(|q| q.to_string()).unwrap_or_default(),
                    rec.upper_bound.get(resource).map(|q| q.to_string()).unwrap_or_default(),
                );
                worst = Some((d, message));
            }
        }
    }
    worst
}

/// The pod to replace now among the workload's `pods`, given the replicas it asks for.
pub fn next(vpa: &VerticalPodAutoscaler, pods: &[&Pod], replicas: Option<i32>) -> Decision {
    if !vpa.recreates() || vpa.status.recommendation.is_none() {
        return Decision::Nothing;
    }
    let mut candidates: Vec<(f64, &Pod, String)> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| outside(vpa, p).map(|(d, why)| (d, *p, why)))
        .collect();
    if candidates.is_empty() {
        return Decision::Nothing;
    }
    let live = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count() as i32;
    let available = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && p.is_ready())
        .count() as i32;
    let wanted = replicas.unwrap_or(live);
    let min = vpa
        .spec
        .update_policy
        .as_ref()
        .and_then(|p| p.min_replicas)
        .unwrap_or(DEFAULT_MIN_REPLICAS);
    if live < min {
        return Decision::Wait(format!(
            "{live} live replicas, fewer than updatePolicy.minReplicas {min}"
        ));
    }
    if available < wanted || live > available {
        return Decision::Wait(format!(
            "{available} of {wanted} replicas available: one replacement at a time, and only \
             with all replicas available"
        ));
    }
    candidates.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then_with(|| a.1.metadata.name.cmp(&b.1.metadata.name))
    });
    let (_, pod, why) = candidates.swap_remove(0);
    Decision::Evict(Eviction {
        pod: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        reason: why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::kinds::vpa::{
        PodUpdatePolicy, RecommendedContainerResources, RecommendedPodResources,
    };
    use bus_schemas::meta::Condition;
    use std::collections::BTreeMap;

    fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
            .collect()
    }

    fn vpa(mode: &str, min_replicas: Option<i32>) -> VerticalPodAutoscaler {
        let mut vpa = VerticalPodAutoscaler::default();
        vpa.spec.update_policy = Some(PodUpdatePolicy {
            update_mode: Some(mode.into()),
            min_replicas,
        });
        vpa.status.recommendation = Some(RecommendedPodResources {
            container_recommendations: vec![RecommendedContainerResources {
                container_name: "app".into(),
                target: list(&[("cpu", "500m"), ("memory", "256Mi")]),
                lower_bound: list(&[("cpu", "400m"), ("memory", "200Mi")]),
                upper_bound: list(&[("cpu", "1"), ("memory", "1Gi")]),
                ..Default::default()
            }],
        });
        vpa
    }

    fn pod(name: &str, cpu: &str, ready: bool) -> Pod {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "app", "image": "x",
                "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}
        }))
        .unwrap();
        if ready {
            pod.status.phase = "Running".into();
            pod.status.conditions = vec![Condition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }];
        }
        pod
    }

    #[test]
    fn the_pod_farthest_outside_its_bounds_goes_first() {
        let pods = [
            pod("a", "450m", true),
            pod("b", "100m", true),
            pod("c", "300m", true),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        match next(&vpa("Recreate", None), &refs, Some(3)) {
            Decision::Evict(e) => {
                assert_eq!(e.pod, "b");
                assert!(e.reason.contains("cpu 100m"), "{}", e.reason);
            }
            other => panic!("{other:?}"),
        }
        let inside = [pod("a", "450m", true), pod("b", "900m", true)];
        let refs: Vec<&Pod> = inside.iter().collect();
        assert_eq!(
            next(&vpa("Recreate", None), &refs, Some(2)),
            Decision::Nothing
        );
    }

    #[test]
    fn nothing_is_replaced_below_full_availability_or_the_minimum() {
        let pods = [pod("a", "100m", true), pod("b", "100m", false)];
        let refs: Vec<&Pod> = pods.iter().collect();
        assert!(matches!(
            next(&vpa("Auto", None), &refs, Some(2)),
            Decision::Wait(_)
        ));
        // A replacement in flight (the old pod terminating) holds the next one back.
        let mut going = pod("c", "100m", true);
        going.metadata.deletion_timestamp = Some(chrono::Utc::now());
        let pods = [pod("a", "100m", true), going];
        let refs: Vec<&Pod> = pods.iter().collect();
        assert!(matches!(
            next(&vpa("Auto", None), &refs, Some(2)),
            Decision::Wait(_)
        ));
        // One replica: upstream's default minimum of 2 keeps it; minReplicas 1 allows it.
        let single = [pod("a", "100m", true)];
        let refs: Vec<&Pod> = single.iter().collect();
        assert!(matches!(
            next(&vpa("Recreate", None), &refs, Some(1)),
            Decision::Wait(_)
        ));
        assert!(matches!(
            next(&vpa("Recreate", Some(1)), &refs, Some(1)),
            Decision::Evict(_)
        ));
    }

    #[test]
    fn only_recreate_and_auto_replace_pods() {
        let pods = [pod("a", "100m", true), pod("b", "100m", true)];
        let refs: Vec<&Pod> = pods.iter().collect();
        for mode in ["Off", "Initial"] {
            assert_eq!(
                next(&vpa(mode, None), &refs, Some(2)),
                Decision::Nothing,
                "{mode}"
            );
        }
        let mut no_recommendation = vpa("Recreate", None);
        no_recommendation.status.recommendation = None;
        assert_eq!(next(&no_recommendation, &refs, Some(2)), Decision::Nothing);
    }
}
