//! **For scale tests only.** Hollow containers use nothing, so a test sets the usage their
//! node reports with pod annotations (quantities, as in a pod's requests):
//!
//! - `hollow.shoal.io/cpu-usage: 250m` and `hollow.shoal.io/memory-usage: 64Mi`: what each
//!   container of the pod uses;
//! - `hollow.shoal.io/cpu-usage.<container>` and `hollow.shoal.io/memory-usage.<container>`:
//!   one container's own figure, over the pod-wide one.
//!
//! The pod's total is the sum of its containers'. A value that is not a quantity counts as
//! zero (and is logged), as an idle container would. Real nodes ignore these annotations.

use bus_schemas::api::PodMetrics;
use bus_schemas::kinds::Pod;
use bus_schemas::quantity::Quantity;

pub const CPU_USAGE: &str = "hollow.shoal.io/cpu-usage";
pub const MEMORY_USAGE: &str = "hollow.shoal.io/memory-usage";

fn lookup(pod: &Pod, key: &str, container: &str) -> Option<Quantity> {
    let annotations = &pod.metadata.annotations;
    let value = annotations
        .get(&format!("{key}.{container}"))
        .or_else(|| annotations.get(key))?;
    match value.parse::<Quantity>() {
        Ok(q) if !q.is_negative() => Some(q),
        _ => {
            tracing::debug!(pod = %pod.metadata.name, %key, %value, "hollow usage is not a quantity");
            None
        }
    }
}

/// Whether the pod sets any usage (hollow nodes publish samples only for such pods).
pub fn annotated(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .keys()
        .any(|k| k.starts_with(CPU_USAGE) || k.starts_with(MEMORY_USAGE))
}

/// Overrides the sample's per-container and pod usage from the pod's annotations; a sample
/// of a pod without any is left as the runtime reported it.
pub fn apply(pod: &Pod, sample: &mut PodMetrics) {
    if !annotated(pod) {
        return;
    }
    for c in &mut sample.containers {
        if let Some(q) = lookup(pod, CPU_USAGE, &c.name) {
            c.cpu_millicores = u64::try_from(q.milli_value()).unwrap_or(u64::MAX);
        }
        if let Some(q) = lookup(pod, MEMORY_USAGE, &c.name) {
            c.memory_working_set_bytes = u64::try_from(q.value()).unwrap_or(u64::MAX);
        }
    }
    sample.cpu_millicores = sample.containers.iter().map(|c| c.cpu_millicores).sum();
    sample.memory_working_set_bytes = sample
        .containers
        .iter()
        .map(|c| c.memory_working_set_bytes)
        .sum();
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::api::ContainerMetrics;

    #[test]
    fn annotations_set_each_containers_usage_and_the_pod_sums_them() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "annotations": {
                "hollow.shoal.io/cpu-usage": "250m",
                "hollow.shoal.io/memory-usage": "64Mi",
                "hollow.shoal.io/cpu-usage.sidecar": "10m",
                "hollow.shoal.io/memory-usage.sidecar": "lots"
            }},
            "spec": {"containers": [{"name": "app", "image": "x"}, {"name": "sidecar", "image": "y"}]}
        }))
        .unwrap();
        let mut sample = PodMetrics {
            containers: vec![
                ContainerMetrics {
                    name: "app".into(),
                    ..Default::default()
                },
                ContainerMetrics {
                    name: "sidecar".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        apply(&pod, &mut sample);
        assert_eq!(sample.containers[0].cpu_millicores, 250);
        assert_eq!(sample.containers[0].memory_working_set_bytes, 64 << 20);
        assert_eq!(sample.containers[1].cpu_millicores, 10);
        assert_eq!(
            sample.containers[1].memory_working_set_bytes, 0,
            "not a quantity: idle"
        );
        assert_eq!(sample.cpu_millicores, 260);
        assert_eq!(sample.memory_working_set_bytes, 64 << 20);

        let plain = Pod::default();
        let mut untouched = PodMetrics {
            cpu_millicores: 7,
            ..Default::default()
        };
        apply(&plain, &mut untouched);
        assert_eq!(untouched.cpu_millicores, 7);
    }
}
