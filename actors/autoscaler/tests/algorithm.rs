//! The pure decision against Kubernetes' documented HPA examples (the algorithm details, the
//! walkthrough and the `behavior` examples of the HorizontalPodAutoscaler documentation).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bus_schemas::kinds::hpa::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, MetricIdentifier,
};
use bus_schemas::{manifest, Resource, Time};
use chrono::TimeZone;
use shoal_autoscaler::calc::{ContainerRequests, PodInfo, Readiness, Sample};
use shoal_autoscaler::decide::{self, Decision, Input, MetricsView, Plan, Settings, TargetScale};
use shoal_autoscaler::normalize::History;

fn t0() -> Time {
    chrono::Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap()
}

fn at(seconds: i64) -> Time {
    t0() + chrono::Duration::seconds(seconds)
}

/// An HPA from a manifest as written for Kubernetes, defaulted and validated as the API does.
fn hpa(yaml: &str) -> HorizontalPodAutoscaler {
    let docs = manifest::parse(yaml).expect("manifest");
    let mut hpa: HorizontalPodAutoscaler = manifest::decode(&docs[0]).expect("decode");
    hpa.apply_defaults();
    let causes = hpa.validate_kind();
    assert!(causes.is_empty(), "invalid HPA: {causes:?}");
    hpa
}

/// An HPA on the Deployment `web`: `metrics` (the list's items) and `behavior` are YAML
/// indented as under `spec`.
fn web_hpa(min: i32, max: i32, metrics: &str, behavior: &str) -> HorizontalPodAutoscaler {
    hpa(&format!(
        "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: web, namespace: default}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
  minReplicas: {min}
  maxReplicas: {max}
  metrics:
{metrics}{behavior}"
    ))
}

fn cpu_hpa(min: i32, max: i32, percent: i32, behavior: &str) -> HorizontalPodAutoscaler {
    let cpu = format!(
        "  - type: Resource
    resource:
      name: cpu
      target: {{type: Utilization, averageUtilization: {percent}}}
"
    );
    web_hpa(min, max, &cpu, behavior)
}

/// A running, long-ready pod requesting `request_milli` CPU.
fn pod(name: &str, request_milli: i64) -> PodInfo {
    PodInfo {
        name: name.into(),
        phase: "Running".into(),
        deleting: false,
        ready: Some(Readiness {
            ready: true,
            last_transition: at(-3590),
        }),
        start_time: Some(at(-3600)),
        container_requests: vec![ContainerRequests {
            name: "app".into(),
            requests: BTreeMap::from([("cpu".to_string(), request_milli)]),
        }],
    }
}

/// Usage keyed by (pod, resource, container): another resource than a whole pod's CPU.
type UsageKey = (String, &'static str, Option<&'static str>);

#[derive(Default)]
struct Table {
    /// Whole pods' CPU, in millicores.
    cpu: HashMap<String, i64>,
    /// Memory, or one container's usage.
    usage: HashMap<UsageKey, i64>,
    /// A custom per-pod metric, by pod.
    custom: HashMap<String, i64>,
    object: Option<i64>,
    external: Option<i64>,
    now: Option<Time>,
}

impl Table {
    fn sample(&self, milli: i64) -> Sample {
        Sample {
            milli,
            timestamp: self.now.unwrap_or(t0()),
            window: Duration::from_secs(1),
        }
    }
}

impl MetricsView for Table {
    fn pod_usage(
        &self,
        _: &str,
        pod: &str,
        resource: &str,
        container: Option<&str>,
    ) -> Option<Sample> {
        let keyed = self
            .usage
            .iter()
            .find(|((p, r, c), _)| p == pod && *r == resource && c.as_deref() == container);
        if let Some((_, milli)) = keyed {
            return Some(self.sample(*milli));
        }
        (resource == "cpu" && container.is_none()).then_some(())?;
        self.cpu.get(pod).map(|milli| self.sample(*milli))
    }
    fn pod_metric(&self, _: &str, pod: &str, _: &MetricIdentifier) -> Option<Sample> {
        self.custom.get(pod).map(|milli| self.sample(*milli))
    }
    fn object_metric(
        &self,
        _: &str,
        _: &CrossVersionObjectReference,
        _: &MetricIdentifier,
    ) -> Result<i64, String> {
        self.object
            .ok_or_else(|| "no object metrics here".to_string())
    }
    fn external_metric(&self, _: &str, _: &MetricIdentifier) -> Result<i64, String> {
        self.external.ok_or_else(|| "no value".to_string())
    }
}

fn pass(
    hpa: &HorizontalPodAutoscaler,
    replicas: i32,
    pods: &[PodInfo],
    metrics: &Table,
    now: Time,
    history: &mut History,
) -> Decision {
    let settings = Settings::default();
    let input = Input {
        hpa,
        target: TargetScale {
            spec_replicas: replicas,
            status_replicas: replicas,
        },
        pods,
        metrics,
        now,
        settings: &settings,
    };
    let plan = decide::plan(&input);
    decide::decide(&input, plan, None, history)
}

/// `n` pods at `usage` millicores each, requesting 100m.
fn uniform(n: usize, usage: i64) -> (Vec<PodInfo>, Table) {
    let pods: Vec<PodInfo> = (0..n).map(|i| pod(&format!("p{i}"), 100)).collect();
    let cpu = pods.iter().map(|p| (p.name.clone(), usage)).collect();
    (
        pods,
        Table {
            cpu,
            ..Table::default()
        },
    )
}

fn condition<'a>(d: &'a Decision, type_: &str) -> &'a decide::CondSpec {
    d.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} in {:?}", d.conditions))
}

// Algorithm details: "if the current metric value is 200m, and the desired value is 100m,
// the number of replicas will be doubled … if the current value is instead 50m, you'll halve
// the number of replicas".
#[test]
fn ratio_doubles_and_halves() {
    let hpa = cpu_hpa(1, 100, 100, "");
    let (pods, metrics) = uniform(4, 200);
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 8);
    assert!(d.rescale);
    assert_eq!(
        d.rescale_reason,
        "cpu resource utilization (percentage of request) above target"
    );
    let status = &d.statuses[0].resource.as_ref().unwrap().current;
    assert_eq!(status.average_utilization, Some(200));

    let (pods, metrics) = uniform(4, 50);
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 2);
    assert_eq!(d.rescale_reason, "All metrics below target");
}

// "The control plane skips any scaling action if the ratio is sufficiently close to 1.0
// (within a globally-configurable tolerance, 0.1 by default)."
#[test]
fn within_tolerance_nothing_changes() {
    let hpa = cpu_hpa(1, 100, 50, "");
    // 45% is a ratio of 0.9; 54% one of 1.08 (55% would be 1.1000000000000000888 in floating
    // point, just outside the band, in Kubernetes too).
    for usage in [45, 54] {
        let (pods, metrics) = uniform(4, usage);
        let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
        assert_eq!(d.desired_replicas, 4, "usage {usage}m on a 50% target");
        assert!(!d.rescale);
    }
    // Just outside: 56% of 50% is 1.12.
    let (pods, metrics) = uniform(4, 56);
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 5);
}

// The walkthrough's php-apache: 1 replica at 50% target sees 305% and ends at 7 replicas;
// without `behavior` a step may at most reach max(2 × current, 4).
#[test]
fn walkthrough_reaches_seven_in_bounded_steps() {
    let hpa = cpu_hpa(1, 10, 50, "");
    let mut history = History::default();
    let mut replicas = 1;
    let mut seen = Vec::new();
    for step in 0..5 {
        let pods: Vec<PodInfo> = (0..replicas).map(|i| pod(&format!("p{i}"), 200)).collect();
        // The load is fixed: 305% of one pod's request spread over the replicas.
        let each = 610 / i64::from(replicas);
        let metrics = Table {
            cpu: pods.iter().map(|p| (p.name.clone(), each)).collect(),
            ..Table::default()
        };
        let d = pass(&hpa, replicas, &pods, &metrics, at(step * 15), &mut history);
        replicas = d.desired_replicas;
        seen.push(replicas);
    }
    assert_eq!(seen[0], 4, "first step limited by max(2×1, 4): {seen:?}");
    assert_eq!(
        *seen.last().unwrap(),
        7,
        "settles at ceil(305/50): {seen:?}"
    );
}

// "If there were any missing metrics … assuming those pods were consuming 100% of the desired
// value in case of a scale down, and 0% in case of a scale up."
#[test]
fn missing_metrics_are_counted_conservatively() {
    let hpa = cpu_hpa(1, 100, 50, "");
    // Scale-up: 2 pods at 100% (ratio 2.0), 2 without metrics count as 0 → average 50% →
    // within tolerance: no change.
    let (pods, mut metrics) = uniform(4, 100);
    metrics.cpu.remove("p2");
    metrics.cpu.remove("p3");
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 4);

    // Scale-up still happens when the rest is hot enough: 2 at 150% + 2 missing → 75% → 6.
    let (pods, mut metrics) = uniform(4, 150);
    metrics.cpu.remove("p2");
    metrics.cpu.remove("p3");
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 6);

    // Scale-down: 2 idle pods (10%) and 2 missing count as 100% of their request →
    // (10+10+100+100)/4 = 55% of 50% → ratio 1.1: within tolerance, no change.
    let (pods, mut metrics) = uniform(4, 10);
    metrics.cpu.remove("p2");
    metrics.cpu.remove("p3");
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 4);
}

// "If any not-yet-ready pods were present, and the workload would have scaled up … the
// controller conservatively assumes that the not-yet-ready pods are consuming 0%", and no
// action when the recomputed ratio reverses direction.
#[test]
fn unready_pods_hold_back_a_scale_up_and_a_reversal_is_dropped() {
    let hpa = cpu_hpa(1, 100, 50, "");
    let (mut pods, metrics) = uniform(4, 80);
    // Two pods just started and are not ready yet.
    for p in &mut pods[2..] {
        p.start_time = Some(at(-5));
        p.ready = Some(Readiness {
            ready: false,
            last_transition: at(-5),
        });
    }
    // Ready pods at 80% → ratio 1.6; with the unready at 0: (80+80+0+0)/4 = 40% → 0.8,
    // a reversal: no change.
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 4);

    // Hotter: ready at 200% → with unready at 0: 100% → 2.0 → ceil(2.0 × 4) = 8.
    let (_, hot) = uniform(4, 200);
    let d = pass(&hpa, 4, &pods, &hot, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 8);
}

// Pending pods and pods on their way out: pending count as unready, deleting ones not at all.
#[test]
fn pending_and_deleting_pods() {
    let hpa = cpu_hpa(1, 100, 50, "");
    let (mut pods, mut metrics) = uniform(3, 100);
    pods[2].phase = "Pending".into();
    metrics.cpu.remove("p2");
    let mut gone = pod("old", 100);
    gone.deleting = true;
    pods.push(gone);
    metrics.cpu.insert("old".into(), 1000);
    // Two ready pods at 100% (2.0); the pending one at 0 → 66% → 1.33 → ceil(1.33 × 3) = 4.
    let d = pass(&hpa, 3, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 4);
}

#[test]
fn a_pod_without_a_cpu_request_is_an_error_not_a_guess() {
    let hpa = cpu_hpa(1, 10, 50, "");
    let (mut pods, metrics) = uniform(2, 100);
    pods[1].container_requests[0].requests.clear();
    let d = pass(&hpa, 2, &pods, &metrics, t0(), &mut History::default());
    assert!(d.failed);
    assert!(!d.rescale);
    let active = condition(&d, "ScalingActive");
    assert!(!active.status);
    assert_eq!(active.reason, "FailedGetResourceMetric");
    assert!(
        active.message.contains("missing request for cpu"),
        "{active:?}"
    );
    assert!(d
        .events
        .iter()
        .any(|e| e.reason == "FailedComputeMetricsReplicas"));
}

#[test]
fn no_metrics_at_all_sets_scaling_active_false() {
    let hpa = cpu_hpa(1, 10, 50, "");
    let (pods, _) = uniform(2, 100);
    let d = pass(
        &hpa,
        2,
        &pods,
        &Table::default(),
        t0(),
        &mut History::default(),
    );
    assert!(d.failed);
    let active = condition(&d, "ScalingActive");
    assert!(!active.status);
    assert!(active.message.contains("no metrics returned"), "{active:?}");
}

// "the HPA controller … uses the highest" of several metrics' proposals.
#[test]
fn several_metrics_the_largest_proposal_wins() {
    let hpa = hpa("apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 50
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
  - type: External
    external:
      metric: {name: queue_depth}
      target: {type: AverageValue, averageValue: '30'}
");
    let (pods, mut metrics) = uniform(2, 75); // cpu proposes 3
    metrics.external = Some(300_000); // 300 messages / 30 per replica → 10
    let d = pass(&hpa, 2, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(
        d.desired_replicas, 4,
        "10 asked, limited to max(2×2, 4) in one step"
    );
    assert_eq!(d.rescale_reason, "external metric queue_depth above target");
    assert!(condition(&d, "ScalingLimited").status);
    assert_eq!(condition(&d, "ScalingLimited").reason, "ScaleUpLimit");

    // A failing metric does not block a scale-up the other one asks for…
    metrics.external = None;
    let (_, hot) = uniform(2, 150);
    let d = pass(&hpa, 2, &pods, &hot, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 4);
    assert!(!d.failed);
    // … but it blocks a scale-down: it might have asked for more.
    let (_, cold) = uniform(2, 5);
    let d = pass(&hpa, 2, &pods, &cold, t0(), &mut History::default());
    assert!(d.failed);
    assert!(!d.rescale);
}

// Scale to and from zero on an External Value metric (minReplicas: 0).
#[test]
fn external_value_scales_from_and_to_zero() {
    let hpa = hpa("apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: worker, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker}
  minReplicas: 0
  maxReplicas: 10
  behavior:
    scaleDown: {stabilizationWindowSeconds: 0}
  metrics:
  - type: External
    external:
      metric: {name: backlog}
      target: {type: Value, value: '10'}
");
    let mut history = History::default();
    let metrics = Table {
        external: Some(25_000),
        ..Table::default()
    };
    let d = pass(&hpa, 0, &[], &metrics, t0(), &mut history);
    assert_eq!(d.desired_replicas, 3, "ceil(25 / 10) from zero");
    history.record_scale(hpa.spec.behavior.as_ref(), 0, 3, t0());

    let pods: Vec<PodInfo> = (0..3).map(|i| pod(&format!("w{i}"), 100)).collect();
    let idle = Table {
        external: Some(0),
        ..Table::default()
    };
    let d = pass(&hpa, 3, &pods, &idle, at(60), &mut history);
    assert_eq!(d.desired_replicas, 0, "nothing left to do: back to zero");
}

// KEDA's activation threshold: a target at zero wakes only above it; once awake, the
// ordinary algorithm decides.
#[test]
fn a_target_at_zero_wakes_only_above_the_activation_threshold() {
    let hpa = hpa("apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: worker
  namespace: default
  annotations: {autoscaling.shoal.io/activation-threshold: '5'}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker}
  minReplicas: 0
  maxReplicas: 10
  metrics:
  - type: External
    external:
      metric: {name: backlog}
      target: {type: AverageValue, averageValue: '2'}
");
    let with = |value: i64| Table {
        external: Some(value),
        ..Table::default()
    };
    let mut history = History::default();
    let d = pass(&hpa, 0, &[], &with(4_000), t0(), &mut history);
    assert_eq!(d.desired_replicas, 0, "4 is not above 5: stays asleep");
    let d = pass(&hpa, 0, &[], &with(6_000), at(1), &mut history);
    assert_eq!(d.desired_replicas, 3, "6 wakes it: ceil(6 / 2)");
    let pods: Vec<PodInfo> = (0..3).map(|i| pod(&format!("w{i}"), 100)).collect();
    let d = pass(&hpa, 3, &pods, &with(4_000), at(2), &mut history);
    assert_eq!(
        d.desired_replicas, 3,
        "awake, 4 asks for 2 but the scale-down window holds 3"
    );
}

#[test]
fn target_at_zero_with_a_positive_minimum_disables_scaling() {
    let hpa = cpu_hpa(1, 10, 50, "");
    let d = pass(
        &hpa,
        0,
        &[],
        &Table::default(),
        t0(),
        &mut History::default(),
    );
    assert!(!d.rescale);
    assert_eq!(d.desired_replicas, 0);
    let active = condition(&d, "ScalingActive");
    assert_eq!(active.reason, "ScalingDisabled");
}

#[test]
fn outside_min_and_max_goes_to_the_bound() {
    let hpa = cpu_hpa(2, 5, 50, "");
    let (pods, metrics) = uniform(8, 50);
    let d = pass(&hpa, 8, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 5);
    assert_eq!(
        d.rescale_reason,
        "Current number of replicas above Spec.MaxReplicas"
    );
    let (pods, metrics) = uniform(1, 50);
    let d = pass(&hpa, 1, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 2);
    assert_eq!(
        d.rescale_reason,
        "Current number of replicas below Spec.MinReplicas"
    );
}

#[test]
fn max_replicas_limits_and_says_so() {
    let hpa = cpu_hpa(1, 3, 50, "");
    let (pods, metrics) = uniform(2, 500);
    let d = pass(&hpa, 2, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 3);
    let limited = condition(&d, "ScalingLimited");
    assert!(limited.status);
    assert_eq!(limited.reason, "TooManyReplicas");
}

// Default scale-down stabilization (300 s): "uses the highest value from the specified
// interval".
#[test]
fn scale_down_waits_for_the_stabilization_window() {
    // The 300 s default holds without `behavior`, and with a `behavior` that only sets
    // scaleUp.
    let scale_up_only = "  behavior:
    scaleUp: {policies: [{type: Pods, value: 10, periodSeconds: 15}]}
";
    for behavior in ["", scale_up_only] {
        let hpa = cpu_hpa(1, 10, 50, behavior);
        let mut history = History::default();
        let (pods, busy) = uniform(4, 50);
        let d = pass(&hpa, 4, &pods, &busy, t0(), &mut history);
        assert_eq!(d.desired_replicas, 4);
        let (_, idle) = uniform(4, 10);
        let d = pass(&hpa, 4, &pods, &idle, at(60), &mut history);
        assert_eq!(
            d.desired_replicas, 4,
            "a higher recommendation 60 s ago holds ({behavior:?})"
        );
        let able = condition(&d, "AbleToScale");
        assert_eq!(able.reason, "ScaleDownStabilized");
        let d = pass(&hpa, 4, &pods, &idle, at(301), &mut history);
        assert_eq!(
            d.desired_replicas, 1,
            "the window has passed ({behavior:?})"
        );
    }
}

// Behavior example "scaleUp: policies: [{type: Percent, value: 900, periodSeconds: 60}]":
// "a maximum of 9 times the current number of pods can be added" (1 → 10).
#[test]
fn behavior_percent_900_allows_tenfold() {
    let hpa = cpu_hpa(
        1,
        100,
        50,
        "  behavior:
    scaleUp:
      policies: [{type: Percent, value: 900, periodSeconds: 60}]",
    );
    let (pods, metrics) = uniform(1, 5000);
    let d = pass(&hpa, 1, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 10);
    assert_eq!(condition(&d, "ScalingLimited").reason, "ScaleUpLimit");
}

// Behavior example: scale-down by at most 4 pods or 10% per minute, whichever removes more
// ("80 replicas … 8 replicas will be reduced in the first step. In the next iteration when
// the number of replicas is 72, 10% of the pods is 7.2 but the number is rounded up to 8" —
// i.e. 64 remain; below 40 replicas the 4-pod policy removes more).
#[test]
fn behavior_scale_down_pods_or_percent_per_minute() {
    let hpa = cpu_hpa(
        1,
        100,
        50,
        "  behavior:
    scaleDown:
      stabilizationWindowSeconds: 0
      policies:
      - {type: Pods, value: 4, periodSeconds: 60}
      - {type: Percent, value: 10, periodSeconds: 60}",
    );
    let mut history = History::default();
    let mut replicas = 80;
    let mut seen = Vec::new();
    for minute in 0..3 {
        let (pods, idle) = uniform(replicas as usize, 5);
        let now = at(minute * 61);
        let d = pass(&hpa, replicas, &pods, &idle, now, &mut history);
        history.record_scale(
            hpa.spec.behavior.as_ref(),
            replicas,
            d.desired_replicas,
            now,
        );
        replicas = d.desired_replicas;
        seen.push(replicas);
    }
    assert_eq!(seen, vec![72, 64, 57]);

    // Within one period, a second pass may not remove more.
    let (pods, idle) = uniform(57, 5);
    let d = pass(&hpa, 57, &pods, &idle, at(2 * 61 + 10), &mut history);
    assert_eq!(d.desired_replicas, 57);
    assert_eq!(condition(&d, "ScalingLimited").reason, "ScaleDownLimit");

    let mut history = History::default();
    let (pods, idle) = uniform(30, 5);
    let d = pass(&hpa, 30, &pods, &idle, t0(), &mut history);
    assert_eq!(d.desired_replicas, 26, "4 pods remove more than 10% of 30");
}

// selectPolicy Min picks the policy allowing the smaller change.
#[test]
fn behavior_select_policy_min() {
    let hpa = cpu_hpa(
        1,
        100,
        50,
        "  behavior:
    scaleDown:
      stabilizationWindowSeconds: 0
      selectPolicy: Min
      policies:
      - {type: Pods, value: 4, periodSeconds: 60}
      - {type: Percent, value: 10, periodSeconds: 60}",
    );
    let (pods, idle) = uniform(80, 5);
    let d = pass(&hpa, 80, &pods, &idle, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 76);
}

// Behavior example "scaleDown: selectPolicy: Disabled": never scale down.
#[test]
fn behavior_disabled_scale_down() {
    let hpa = cpu_hpa(
        1,
        100,
        50,
        "  behavior:
    scaleDown:
      selectPolicy: Disabled",
    );
    let (pods, idle) = uniform(10, 5);
    let d = pass(&hpa, 10, &pods, &idle, at(3600), &mut History::default());
    assert_eq!(d.desired_replicas, 10);
    assert!(!d.rescale);
}

// Default behavior policies: scale up by at most max(100%, 4 pods) per 15 s.
#[test]
fn behavior_default_scale_up_policies() {
    let hpa = cpu_hpa(
        1,
        100,
        50,
        "  behavior:
    scaleDown: {stabilizationWindowSeconds: 60}",
    );
    let up = hpa
        .spec
        .behavior
        .as_ref()
        .unwrap()
        .scale_up
        .as_ref()
        .unwrap();
    assert_eq!(up.stabilization_window_seconds, Some(0));
    let mut history = History::default();
    let (pods, hot) = uniform(2, 1000);
    let d = pass(&hpa, 2, &pods, &hot, t0(), &mut history);
    assert_eq!(d.desired_replicas, 6, "2 + max(4 pods, 100%)");
    history.record_scale(hpa.spec.behavior.as_ref(), 2, 6, t0());
    let (pods, hot) = uniform(6, 1000);
    let d = pass(&hpa, 6, &pods, &hot, at(5), &mut history);
    assert_eq!(d.desired_replicas, 6, "the period's budget is spent");
    let d = pass(&hpa, 6, &pods, &hot, at(16), &mut history);
    assert_eq!(d.desired_replicas, 12, "a new period: +100%");
}

// Behavior scaleUp stabilization: the lowest recommendation of the window applies.
#[test]
fn behavior_scale_up_stabilization() {
    let hpa = cpu_hpa(
        1,
        100,
        50,
        "  behavior:
    scaleUp: {stabilizationWindowSeconds: 60}",
    );
    let mut history = History::default();
    let (pods, calm) = uniform(4, 50);
    pass(&hpa, 4, &pods, &calm, t0(), &mut history);
    let (_, hot) = uniform(4, 100);
    let d = pass(&hpa, 4, &pods, &hot, at(30), &mut history);
    assert_eq!(d.desired_replicas, 4);
    assert_eq!(condition(&d, "AbleToScale").reason, "ScaleUpStabilized");
    let d = pass(&hpa, 4, &pods, &hot, at(61), &mut history);
    assert_eq!(d.desired_replicas, 8);
}

#[test]
fn a_resumed_history_keeps_the_predecessors_decision_for_a_window() {
    let hpa = cpu_hpa(1, 10, 50, "");
    let mut history = History::resumed(6, t0());
    let (pods, idle) = uniform(6, 5);
    let d = pass(&hpa, 6, &pods, &idle, at(10), &mut history);
    assert_eq!(d.desired_replicas, 6);
}

#[test]
fn status_keeps_transition_times_and_orders_conditions() {
    let hpa = cpu_hpa(1, 10, 50, "");
    let (pods, metrics) = uniform(2, 50);
    let d = pass(&hpa, 2, &pods, &metrics, t0(), &mut History::default());
    let first = decide::status_after(&hpa.status, &d, &[], false, t0());
    let types: Vec<&str> = first.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["AbleToScale", "ScalingActive", "ScalingLimited"]);
    let again = decide::status_after(&first, &d, &[], false, at(30));
    assert_eq!(
        again.conditions[1].last_transition_time,
        Some(t0()),
        "an unchanged condition keeps its transition time"
    );
    assert_eq!(again.current_replicas, 2);
    assert_eq!(again.desired_replicas, 2);
    assert!(again.last_scale_time.is_none());
}

#[test]
fn plan_reports_the_proposal_a_hook_may_replace() {
    let hpa = cpu_hpa(1, 10, 50, "");
    let (pods, metrics) = uniform(2, 100);
    let settings = Settings::default();
    let input = Input {
        hpa: &hpa,
        target: TargetScale {
            spec_replicas: 2,
            status_replicas: 2,
        },
        pods: &pods,
        metrics: &metrics,
        now: t0(),
        settings: &settings,
    };
    let plan = decide::plan(&input);
    let Plan::Metrics(proposal) = &plan else {
        panic!("expected a metrics plan, got {plan:?}");
    };
    assert_eq!(proposal.replicas, Some(4));
    // A hook asking for 30 is still held to max 10 and the rate limit.
    let d = decide::decide(&input, plan, Some(30), &mut History::default());
    assert_eq!(d.desired_replicas, 4);
}

/// An HPA on the Deployment `web` between 1 and 50 replicas with the metrics given in YAML.
fn hpa_with(metrics_yaml: &str) -> HorizontalPodAutoscaler {
    web_hpa(1, 50, metrics_yaml, "")
}

// ContainerResource: the utilization of one container's request, not the pod's. The sidecar's
// large idle request would hide the hot container from a pod-level Resource metric.
#[test]
fn container_resource_reads_one_containers_usage_against_its_request() {
    let hpa = hpa_with(
        "  - type: ContainerResource
    containerResource:
      name: cpu
      container: app
      target: {type: Utilization, averageUtilization: 100}
",
    );
    let mut pods = Vec::new();
    let mut metrics = Table::default();
    for i in 0..2 {
        let mut p = pod(&format!("p{i}"), 100);
        p.container_requests.push(ContainerRequests {
            name: "sidecar".into(),
            requests: BTreeMap::from([("cpu".to_string(), 900)]),
        });
        metrics
            .usage
            .insert((p.name.clone(), "cpu", Some("app")), 200);
        // The whole pod: 200m of 1000m requested, 20 %.
        metrics.cpu.insert(p.name.clone(), 200);
        pods.push(p);
    }
    let d = pass(&hpa, 2, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 4, "app at 200 % of its 100m → double");
    let status = d.statuses[0].container_resource.as_ref().unwrap();
    assert_eq!(status.container, "app");
    assert_eq!(status.current.average_utilization, Some(200));
    assert_eq!(
        d.rescale_reason,
        "cpu container resource utilization (percentage of request) above target"
    );

    // The same pods under a pod-level Resource metric are at 20 %: a scale-down.
    let d = pass(
        &cpu_hpa(1, 50, 100, ""),
        2,
        &pods,
        &metrics,
        t0(),
        &mut History::default(),
    );
    assert_eq!(d.desired_replicas, 1);
}

// Memory Utilization works like CPU's, without CPU's start-up grace for unready pods.
#[test]
fn memory_utilization_scales_on_the_memory_request() {
    let hpa = hpa_with(
        "  - type: Resource
    resource: {name: memory, target: {type: Utilization, averageUtilization: 50}}
",
    );
    let mut metrics = Table::default();
    let pods: Vec<PodInfo> = (0..4)
        .map(|i| {
            let mut p = pod(&format!("p{i}"), 100);
            p.container_requests[0]
                .requests
                .insert("memory".into(), 64 << 20);
            metrics
                .usage
                .insert((p.name.clone(), "memory", None), 48 << 20);
            p
        })
        .collect();
    // 48 Mi of 64 Mi is 75 % against 50 %: ratio 1.5 → 6.
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 6);
    let status = d.statuses[0].resource.as_ref().unwrap();
    assert_eq!(status.name, "memory");
    assert_eq!(status.current.average_utilization, Some(75));
}

// Resource AverageValue: the average usage per pod against an absolute target.
#[test]
fn resource_average_value_divides_usage_by_the_target() {
    let hpa = hpa_with(
        "  - type: Resource
    resource: {name: cpu, target: {type: AverageValue, averageValue: 100m}}
",
    );
    // Without `behavior`, one step may reach max(2 × current, 4): 4 replicas leave room.
    let (pods, metrics) = uniform(4, 150);
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 6, "150m / 100m × 4");
    let status = d.statuses[0].resource.as_ref().unwrap();
    assert_eq!(status.current.average_utilization, None);
    assert!(status.current.average_value.is_some());
}

// Pods metrics: a custom per-pod average, the same rules for missing pods as resources.
#[test]
fn pods_metric_averages_a_custom_metric() {
    let hpa = hpa_with(
        "  - type: Pods
    pods:
      metric: {name: requests_per_second}
      target: {type: AverageValue, averageValue: '10'}
",
    );
    let (pods, mut metrics) = uniform(4, 0);
    for p in &pods {
        metrics.custom.insert(p.name.clone(), 15_000);
    }
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 6, "15 per pod against 10 → 1.5 × 4");
    assert_eq!(
        d.statuses[0].pods.as_ref().unwrap().metric.name,
        "requests_per_second"
    );
}

// Object Value: the value against the target, times the ready pods only (a pending pod does
// not count, as in Kubernetes' GetObjectMetricReplicas).
#[test]
fn object_value_multiplies_the_ratio_by_the_ready_pods() {
    let hpa = hpa_with(
        "  - type: Object
    object:
      describedObject: {apiVersion: networking.k8s.io/v1, kind: Ingress, name: main}
      metric: {name: requests_per_second}
      target: {type: Value, value: '100'}
",
    );
    let (mut pods, mut metrics) = uniform(4, 0);
    pods[3].phase = "Pending".into();
    pods[3].ready = None;
    metrics.object = Some(150_000);
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 5, "ratio 1.5 × 3 ready pods, not × 4");
    let status = d.statuses[0].object.as_ref().unwrap();
    assert_eq!(status.described_object.kind, "Ingress");
    assert!(status.current.value.is_some());

    // Within the tolerance nothing changes, whatever the ready count.
    metrics.object = Some(105_000);
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 4);
}

// Object AverageValue: the value divided over the current replicas.
#[test]
fn object_average_value_divides_over_the_replicas() {
    let hpa = hpa_with(
        "  - type: Object
    object:
      describedObject: {apiVersion: v1, kind: Service, name: web}
      metric: {name: connections}
      target: {type: AverageValue, averageValue: '50'}
",
    );
    let (pods, mut metrics) = uniform(4, 0);
    metrics.object = Some(300_000);
    let d = pass(&hpa, 4, &pods, &metrics, t0(), &mut History::default());
    assert_eq!(d.desired_replicas, 6, "300 / 50");
    let status = d.statuses[0].object.as_ref().unwrap();
    assert_eq!(
        status
            .current
            .average_value
            .map(|q| q.to_string())
            .as_deref(),
        Some("75"),
        "300 over 4 replicas"
    );
}
