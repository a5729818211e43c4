//! The replica calculator: one metric's observations → a replica proposal.
//!
//! This follows Kubernetes' replica calculator step for step, because users compare the
//! numbers with what they know: utilization is an integer percentage before it becomes a
//! ratio, the tolerance is a band around 1.0, and pods that are not ready or report nothing
//! are counted in whichever way moves the proposal *least* (missing pods count as at target on
//! a scale-down and as idle on a scale-up; unready pods as idle on a scale-up), and a proposal
//! whose direction flips because of that is dropped. All values are in milli-units, as
//! Kubernetes' `MilliValue`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bus_schemas::Time;

/// What the calculator needs to know about one pod the target selects.
#[derive(Debug, Clone, Default)]
pub struct PodInfo {
    pub name: String,
    /// `Pending`, `Running`, `Failed`, …
    pub phase: String,
    /// Has a deletionTimestamp: on its way out, ignored entirely.
    pub deleting: bool,
    /// The Ready condition, when the pod has one.
    pub ready: Option<Readiness>,
    pub start_time: Option<Time>,
    /// Requests per container and resource, in milli-units; a container without a request
    /// for a resource has no entry.
    pub container_requests: Vec<ContainerRequests>,
}

#[derive(Debug, Clone, Default)]
pub struct ContainerRequests {
    pub name: String,
    pub requests: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Copy)]
pub struct Readiness {
    pub ready: bool,
    pub last_transition: Time,
}

/// One pod's usage sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub milli: i64,
    pub timestamp: Time,
    /// The span the sample averages over (the node agent's sample period).
    pub window: Duration,
}

/// The knobs Kubernetes exposes as controller-manager flags.
#[derive(Debug, Clone)]
pub struct Tolerances {
    /// A ratio within 1 ± tolerance changes nothing.
    pub tolerance: f64,
    /// A CPU sample of a pod younger than this counts only once the pod is ready and a full
    /// window has passed since it became so (start-up spikes are not load).
    pub cpu_initialization_period: Duration,
    /// A pod not ready within this long of starting counts as never having been ready.
    pub initial_readiness_delay: Duration,
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances {
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
        }
    }
}

/// A proposal and what was observed on the way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Proposal {
    pub replicas: i32,
    /// Percent of requests (Utilization targets only).
    pub utilization: Option<i32>,
    /// Average (or, for Value targets, total) observed value in milli-units.
    pub value_milli: i64,
}

#[derive(Debug, Default)]
struct Groups {
    ready: i32,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
    ignored: BTreeSet<String>,
}

fn add(t: Time, d: Duration) -> Time {
    t + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

fn group_pods(
    pods: &[PodInfo],
    samples: &BTreeMap<String, Sample>,
    cpu: bool,
    now: Time,
    tol: &Tolerances,
) -> Groups {
    let mut groups = Groups::default();
    for pod in pods {
        if pod.deleting || pod.phase == "Failed" {
            groups.ignored.insert(pod.name.clone());
            continue;
        }
        if pod.phase == "Pending" {
            groups.unready.insert(pod.name.clone());
            continue;
        }
        let Some(sample) = samples.get(&pod.name) else {
            groups.missing.insert(pod.name.clone());
            continue;
        };
        if cpu {
            let unready = match (pod.ready, pod.start_time) {
                (None, _) | (_, None) => true,
                (Some(ready), Some(started)) => {
                    if add(started, tol.cpu_initialization_period) > now {
                        !ready.ready || sample.timestamp < add(ready.last_transition, sample.window)
                    } else {
                        !ready.ready
                            && add(started, tol.initial_readiness_delay) > ready.last_transition
                    }
                }
            };
            if unready {
                groups.unready.insert(pod.name.clone());
                continue;
            }
        }
        groups.ready += 1;
    }
    groups
}

/// Sum of each pod's requests for `resource` (one container's only, for ContainerResource).
fn pod_requests(
    pods: &[PodInfo],
    resource: &str,
    container: Option<&str>,
) -> Result<BTreeMap<String, i64>, String> {
    let mut out = BTreeMap::new();
    for pod in pods {
        let mut sum = 0;
        let mut found = container.is_none();
        for c in &pod.container_requests {
            if container.is_some_and(|want| want != c.name) {
                continue;
            }
            found = true;
            match c.requests.get(resource) {
                Some(v) => sum += v,
                None => {
                    return Err(format!(
                        "missing request for {resource} in container {} of Pod {}",
                        c.name, pod.name
                    ))
                }
            }
        }
        if !found {
            return Err(format!(
                "container {} not present in Pod {}",
                container.unwrap_or_default(),
                pod.name
            ));
        }
        out.insert(pod.name.clone(), sum);
    }
    Ok(out)
}

/// (ratio to target, utilization percent, average usage) over the pods with a request.
fn utilization_ratio(
    metrics: &BTreeMap<String, i64>,
    requests: &BTreeMap<String, i64>,
    target_percent: i32,
) -> Result<(f64, i32, i64), String> {
    let (mut used, mut requested, mut counted) = (0i64, 0i64, 0i64);
    for (pod, value) in metrics {
        if let Some(request) = requests.get(pod) {
            used += value;
            requested += request;
            counted += 1;
        }
    }
    if requested == 0 {
        return Err("no metrics returned matched known pods".into());
    }
    // Truncated to a whole percent first, exactly as Kubernetes does.
    let utilization = (used * 100 / requested) as i32;
    Ok((
        f64::from(utilization) / f64::from(target_percent),
        utilization,
        used / counted,
    ))
}

/// Resource or ContainerResource with a Utilization target.
#[allow(clippy::too_many_arguments)]
pub fn utilization_replicas(
    current: i32,
    target_percent: i32,
    resource: &str,
    container: Option<&str>,
    pods: &[PodInfo],
    samples: &BTreeMap<String, Sample>,
    now: Time,
    tol: &Tolerances,
) -> Result<Proposal, String> {
    if samples.is_empty() {
        return Err(format!(
            "unable to get metrics for resource {resource}: no metrics returned from resource metrics API"
        ));
    }
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let groups = group_pods(pods, samples, resource == "cpu", now, tol);
    let mut metrics: BTreeMap<String, i64> = samples
        .iter()
        .filter(|(pod, _)| !groups.ignored.contains(*pod) && !groups.unready.contains(*pod))
        .filter(|(pod, _)| pods.iter().any(|p| &p.name == *pod))
        .map(|(pod, s)| (pod.clone(), s.milli))
        .collect();
    let requests = pod_requests(pods, resource, container)?;
    if metrics.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let (ratio, utilization, average) = utilization_ratio(&metrics, &requests, target_percent)?;
    let observed = |replicas| Proposal {
        replicas,
        utilization: Some(utilization),
        value_milli: average,
    };
    let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && groups.missing.is_empty() {
        if (1.0 - ratio).abs() <= tol.tolerance {
            return Ok(observed(current));
        }
        return Ok(observed((ratio * f64::from(groups.ready)).ceil() as i32));
    }
    if !groups.missing.is_empty() {
        if ratio < 1.0 {
            // At least the request (or the target, when it is above 100%) on a scale-down.
            let fallback = i64::from(target_percent.max(100));
            for pod in &groups.missing {
                metrics.insert(pod.clone(), requests[pod] * fallback / 100);
            }
        } else if ratio > 1.0 {
            for pod in &groups.missing {
                metrics.insert(pod.clone(), 0);
            }
        }
    }
    if scale_up_with_unready {
        for pod in &groups.unready {
            metrics.insert(pod.clone(), 0);
        }
    }
    let (new_ratio, _, _) = utilization_ratio(&metrics, &requests, target_percent)?;
    settle_with(current, ratio, new_ratio, metrics.len(), tol.tolerance).map(observed)
}

/// After counting missing and unready pods conservatively: no change within tolerance or
/// when the direction flipped.
fn settle_with(
    current: i32,
    ratio: f64,
    new_ratio: f64,
    counted: usize,
    tolerance: f64,
) -> Result<i32, String> {
    if (1.0 - new_ratio).abs() <= tolerance
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok(current);
    }
    let replicas = (new_ratio * counted as f64).ceil() as i32;
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return Ok(current);
    }
    Ok(replicas)
}

/// Per-pod values against an AverageValue target: Resource and ContainerResource
/// AverageValue (`cpu` readiness rules apply) and Pods metrics.
#[allow(clippy::too_many_arguments)]
pub fn average_value_replicas(
    current: i32,
    target_milli: i64,
    resource: Option<&str>,
    pods: &[PodInfo],
    samples: &BTreeMap<String, Sample>,
    now: Time,
    tol: &Tolerances,
) -> Result<Proposal, String> {
    if samples.is_empty() {
        return Err("no metrics returned for the selected pods".into());
    }
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let groups = group_pods(pods, samples, resource == Some("cpu"), now, tol);
    let mut metrics: BTreeMap<String, i64> = samples
        .iter()
        .filter(|(pod, _)| !groups.ignored.contains(*pod) && !groups.unready.contains(*pod))
        .filter(|(pod, _)| pods.iter().any(|p| &p.name == *pod))
        .map(|(pod, s)| (pod.clone(), s.milli))
        .collect();
    if metrics.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let usage_ratio = |m: &BTreeMap<String, i64>| {
        let sum: i64 = m.values().sum();
        let average = sum as f64 / m.len() as f64;
        (average / target_milli as f64, sum / m.len() as i64)
    };
    let (ratio, average) = usage_ratio(&metrics);
    let observed = |replicas| Proposal {
        replicas,
        utilization: None,
        value_milli: average,
    };
    let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && groups.missing.is_empty() {
        if (1.0 - ratio).abs() <= tol.tolerance {
            return Ok(observed(current));
        }
        return Ok(observed((ratio * f64::from(groups.ready)).ceil() as i32));
    }
    if !groups.missing.is_empty() {
        let fill = if ratio < 1.0 { target_milli } else { 0 };
        for pod in &groups.missing {
            metrics.insert(pod.clone(), fill);
        }
    }
    if scale_up_with_unready {
        for pod in &groups.unready {
            metrics.insert(pod.clone(), 0);
        }
    }
    let (new_ratio, _) = usage_ratio(&metrics);
    settle_with(current, ratio, new_ratio, metrics.len(), tol.tolerance).map(observed)
}

/// A single value against a Value target (Object and External metrics): the ratio scales
/// the ready pods; from zero replicas the ratio itself is the answer (scale from zero).
pub fn value_replicas(
    current: i32,
    usage_milli: i64,
    target_milli: i64,
    ready_pods: impl FnOnce() -> Result<i32, String>,
    tol: &Tolerances,
) -> Result<Proposal, String> {
    let ratio = usage_milli as f64 / target_milli as f64;
    let replicas = if current != 0 {
        if (1.0 - ratio).abs() <= tol.tolerance {
            current
        } else {
            (ratio * f64::from(ready_pods()?)).ceil() as i32
        }
    } else {
        ratio.ceil() as i32
    };
    Ok(Proposal {
        replicas,
        utilization: None,
        value_milli: usage_milli,
    })
}

/// A single value against an AverageValue target (Object and External metrics): the value
/// divided over the replicas. The reported value is the per-replica average, rounded up.
pub fn average_of_value_replicas(
    current: i32,
    usage_milli: i64,
    target_milli: i64,
    tol: &Tolerances,
) -> Proposal {
    let ratio = usage_milli as f64 / (target_milli as f64 * f64::from(current));
    // NaN (nothing over zero replicas) compares false and keeps zero.
    let replicas = if (1.0 - ratio).abs() > tol.tolerance {
        (usage_milli as f64 / target_milli as f64).ceil() as i32
    } else {
        current
    };
    let per_replica = if current != 0 {
        (usage_milli as f64 / f64::from(current)).ceil() as i64
    } else {
        usage_milli
    };
    Proposal {
        replicas,
        utilization: None,
        value_milli: per_replica,
    }
}

/// Pods that count for an Object metric's Value target: Running and Ready.
pub fn ready_pod_count(pods: &[PodInfo]) -> Result<i32, String> {
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    Ok(pods
        .iter()
        .filter(|p| p.phase == "Running" && p.ready.is_some_and(|r| r.ready))
        .count() as i32)
}
