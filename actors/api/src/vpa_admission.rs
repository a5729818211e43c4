//! VerticalPodAutoscaler's `Initial` (and `Recreate`/`Auto`) mode at admission: a new pod of
//! a workload a VPA targets gets the VPA's current recommendation as its container requests
//! (limits scaled in proportion unless the policy says `RequestsOnly`), and annotations
//! saying what changed. VPAs and workloads are read from this API's own caches; the
//! autoscaler is never asked.

use bus_schemas::kinds::vpa::{
    VerticalPodAutoscaler, OBSERVED_CONTAINERS_ANNOTATION, UPDATES_ANNOTATION,
};
use bus_schemas::kinds::Pod;
use bus_schemas::quantity::Quantity;
use bus_schemas::selector::Selector;
use bus_schemas::Status;

use crate::state::ApiServer;

/// Applies the recommendation of the VPA (the first by name, if several) whose target
/// selects the new pod.
pub(crate) async fn admit(server: &ApiServer, pod: &mut Pod) -> Result<(), Status> {
    let vpas = server.informers.get::<VerticalPodAutoscaler>();
    vpas.wait_synced()
        .await
        .map_err(|e| Status::internal(format!("listing VerticalPodAutoscalers: {e}")))?;
    let mut candidates = vpas.list(Some(&pod.metadata.namespace), &Selector::everything());
    candidates.retain(|v| v.sets_initial() && v.status.recommendation.is_some());
    candidates.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for vpa in candidates {
        let Some(target) = &vpa.spec.target_ref else {
            continue;
        };
        let workload = shoal_bus::workloads::workload(
            &server.informers,
            &pod.metadata.namespace,
            &target.kind,
            &target.name,
        )
        .await
        .map_err(|e| Status::internal(format!("reading the VPA's target: {e}")))?;
        let Some(workload) = workload else {
            continue;
        };
        // An empty selector would size every pod of the namespace.
        if workload.selector.is_empty() || !workload.selector.matches(&pod.metadata.labels) {
            continue;
        }
        resize(pod, &vpa);
        return Ok(());
    }
    Ok(())
}

/// Sets the pod's requests from the recommendation and annotates what changed (pure).
pub fn resize(pod: &mut Pod, vpa: &VerticalPodAutoscaler) {
    let mut updates = Vec::new();
    for (i, container) in pod.spec.containers.iter_mut().enumerate() {
        let Some(rec) = vpa.recommendation_for(&container.name) else {
            continue;
        };
        let policy = vpa.container_policy(&container.name);
        if policy.is_some_and(|p| !p.is_auto()) {
            continue;
        }
        let scales_limits = policy.is_none_or(|p| p.scales_limits());
        let mut changed = Vec::new();
        for (resource, target) in &rec.target {
            let resources = &mut container.resources;
            let old = resources.requests.get(resource).cloned();
            let mut request = *target;
            match resources.limits.get(resource).cloned() {
                Some(limit) if scales_limits => {
                    // Limits keep their ratio to requests; with no request to take the
                    // ratio from, the request was the limit (Kubernetes' defaulting).
                    let base = old.unwrap_or(limit);
                    if base.milli_value() > 0 {
                        let scaled = target.milli_value().saturating_mul(limit.milli_value())
                            / base.milli_value();
                        let scaled = Quantity::from_milli(scaled).with_format(limit.format());
                        if scaled != limit {
                            resources.limits.insert(resource.clone(), scaled);
                            changed.push(format!("{resource} limit"));
                        }
                    }
                }
                // A request may not exceed its limit: the limit stays and caps it.
                Some(limit) if request.milli_value() > limit.milli_value() => request = limit,
                _ => {}
            }
            if old.as_ref() != Some(&request) {
                resources.requests.insert(resource.clone(), request);
                changed.insert(0, format!("{resource} request"));
            }
        }
        if !changed.is_empty() {
            changed.sort();
            updates.push(format!("container {i}: {}", changed.join(", ")));
        }
    }
    let observed: Vec<&str> = pod
        .spec
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let annotations = &mut pod.metadata.annotations;
    annotations.insert(OBSERVED_CONTAINERS_ANNOTATION.into(), observed.join(", "));
    if !updates.is_empty() {
        annotations.insert(
            UPDATES_ANNOTATION.into(),
            format!(
                "Pod resources updated by {}: {}",
                vpa.metadata.name,
                updates.join("; ")
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vpa(policy: serde_json::Value) -> VerticalPodAutoscaler {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {"targetRef": {"kind": "Deployment", "name": "web"},
                     "updatePolicy": {"updateMode": "Initial"},
                     "resourcePolicy": {"containerPolicies": policy}},
            "status": {"recommendation": {"containerRecommendations": [
                {"containerName": "app", "target": {"cpu": "300m", "memory": "400Mi"}},
                {"containerName": "sidecar", "target": {"cpu": "50m"}}
            ]}}
        }))
        .unwrap()
    }

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1"},
            "spec": {"containers": [
                {"name": "app", "image": "x", "resources": {
                    "requests": {"cpu": "100m", "memory": "100Mi"},
                    "limits": {"cpu": "200m"}}},
                {"name": "sidecar", "image": "y"},
                {"name": "other", "image": "z", "resources": {"requests": {"cpu": "1"}}}
            ]}
        }))
        .unwrap()
    }

    fn q(s: &str) -> Quantity {
        s.parse().unwrap()
    }

    #[test]
    fn requests_take_the_target_and_limits_keep_their_ratio() {
        let mut p = pod();
        resize(&mut p, &vpa(serde_json::json!([])));
        let app = &p.spec.containers[0].resources;
        assert_eq!(app.requests["cpu"], q("300m"));
        assert_eq!(app.requests["memory"], q("400Mi"));
        assert_eq!(
            app.limits["cpu"].milli_value(),
            600,
            "2× the request, as before"
        );
        assert!(!app.limits.contains_key("memory"));
        assert_eq!(p.spec.containers[1].resources.requests["cpu"], q("50m"));
        assert_eq!(
            p.spec.containers[2].resources.requests["cpu"],
            q("1"),
            "no recommendation"
        );
        assert_eq!(
            p.metadata.annotations[UPDATES_ANNOTATION],
            "Pod resources updated by web: container 0: cpu limit, cpu request, memory request; \
             container 1: cpu request"
        );
        assert_eq!(
            p.metadata.annotations[OBSERVED_CONTAINERS_ANNOTATION],
            "app, sidecar, other"
        );
    }

    #[test]
    fn requests_only_leaves_limits_and_is_capped_by_them_and_off_is_untouched() {
        let mut p = pod();
        resize(
            &mut p,
            &vpa(serde_json::json!([
                {"containerName": "app", "controlledValues": "RequestsOnly"},
                {"containerName": "sidecar", "mode": "Off"}
            ])),
        );
        let app = &p.spec.containers[0].resources;
        assert_eq!(app.limits["cpu"], q("200m"));
        assert_eq!(app.requests["cpu"], q("200m"), "capped at the limit");
        assert!(p.spec.containers[1].resources.requests.is_empty());
    }
}
