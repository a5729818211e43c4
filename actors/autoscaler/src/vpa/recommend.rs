//! The recommender's arithmetic (pure): per container, decaying histograms of CPU usage and of
//! memory peaks, and from them target (p90), lowerBound (p50) and upperBound (p95) with a
//! safety margin, minimums, widening for short histories and the VPA's container policy.
//!
//! Upstream's choices are kept (its defaults in [`Settings::default`]), with two documented
//! differences: every CPU sample weighs the same (upstream weighs it by the pod's CPU
//! request), and the minimums apply per container (upstream splits a per-pod minimum among
//! containers).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bus_schemas::kinds::vpa::{RecommendedContainerResources, VerticalPodAutoscaler};
use bus_schemas::quantity::Quantity;

use super::histogram::{Buckets, DecayingHistogram};

const TARGET_PERCENTILE: f64 = 0.9;
const LOWER_BOUND_PERCENTILE: f64 = 0.5;
const UPPER_BOUND_PERCENTILE: f64 = 0.95;

#[derive(Debug, Clone)]
pub struct Settings {
    /// A sample this old weighs half a new one (upstream: 24 h).
    pub half_life: Duration,
    /// Memory enters the histogram as the peak of each interval this long (upstream: 24 h),
    /// so a daily spike counts once per day, as much as a day's steady usage.
    pub memory_interval: Duration,
    /// History that counts as one unit of confidence (upstream: one day). Bounds are widened
    /// by `(1 + 1/confidence)` above and narrowed by `(1 + 0.001/confidence)^-2` below.
    pub confidence_unit: Duration,
    /// What one sample stands for when counting history (the node agents' sample period),
    /// so a few samples spread over a day do not count as a full day.
    pub sample_period: Duration,
    /// Added on top of every estimate (upstream: 15 %).
    pub safety_margin: f64,
    /// No recommendation goes below these (upstream: 25 millicores and 250 MiB).
    pub min_cpu_millicores: i64,
    pub min_memory_bytes: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            half_life: Duration::from_secs(24 * 3600),
            memory_interval: Duration::from_secs(24 * 3600),
            confidence_unit: Duration::from_secs(24 * 3600),
            sample_period: Duration::from_secs(5),
            safety_margin: 0.15,
            min_cpu_millicores: 25,
            min_memory_bytes: 250 * 1024 * 1024,
        }
    }
}

/// The memory peak of one pod's container in the current interval.
#[derive(Debug, Clone, Copy)]
struct Peak {
    start: f64,
    bytes: f64,
}

/// Everything the recommender keeps about one container name of one VPA's pods.
#[derive(Debug, Clone)]
pub struct ContainerState {
    cpu: DecayingHistogram,
    memory: DecayingHistogram,
    first: Option<f64>,
    last: f64,
    samples: u64,
    peaks: HashMap<String, Peak>,
}

impl ContainerState {
    pub fn new(settings: &Settings) -> Self {
        let half_life = settings.half_life.as_secs_f64();
        ContainerState {
            cpu: DecayingHistogram::new(Buckets::cpu(), half_life),
            memory: DecayingHistogram::new(Buckets::memory(), half_life),
            first: None,
            last: 0.0,
            samples: 0,
            peaks: HashMap::new(),
        }
    }

    /// One usage sample of the container in pod `pod`, at `at` seconds.
    pub fn add(
        &mut self,
        pod: &str,
        cpu_millicores: f64,
        memory_bytes: f64,
        at: f64,
        s: &Settings,
    ) {
        if !cpu_millicores.is_finite() || !memory_bytes.is_finite() {
            return;
        }
        self.first.get_or_insert(at);
        self.last = self.last.max(at);
        self.samples += 1;
        self.cpu.add((cpu_millicores / 1000.0).max(0.0), 1.0, at);
        let interval = s.memory_interval.as_secs_f64();
        let bytes = memory_bytes.max(0.0);
        match self.peaks.get_mut(pod) {
            Some(peak) if at < peak.start + interval => {
                if bytes > peak.bytes {
                    self.memory.subtract(peak.bytes, 1.0, peak.start);
                    self.memory.add(bytes, 1.0, peak.start);
                    peak.bytes = bytes;
                }
            }
            _ => {
                self.memory.add(bytes, 1.0, at);
                self.peaks
                    .insert(pod.to_string(), Peak { start: at, bytes });
            }
        }
    }

    /// Forgets the peaks of pods that are gone (their samples stay in the histograms).
    pub fn retain_pods(&mut self, keep: impl Fn(&str) -> bool) {
        self.peaks.retain(|pod, _| keep(pod));
    }

    /// How many confidence units of history there are: the shorter of the span between the
    /// first and last sample and what the samples stand for.
    fn confidence(&self, s: &Settings) -> f64 {
        let span = self.first.map(|f| self.last - f).unwrap_or(0.0);
        let sampled = self.samples as f64 * s.sample_period.as_secs_f64();
        span.min(sampled) / s.confidence_unit.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// (target, lower bound, upper bound) in (millicores, bytes), before policy; `None`
    /// without samples.
    pub fn estimate(&self, s: &Settings) -> Option<Estimate> {
        if self.cpu.is_empty() && self.memory.is_empty() {
            return None;
        }
        let margin = 1.0 + s.safety_margin;
        let confidence = self.confidence(s).max(1e-9);
        let upper_factor = 1.0 + 1.0 / confidence;
        let lower_factor = (1.0 + 0.001 / confidence).powi(-2);
        let cpu_cap = Buckets::cpu().start(Buckets::cpu().count - 1) * 1000.0;
        let memory_cap = Buckets::memory().start(Buckets::memory().count - 1);
        let cpu = |p: f64, factor: f64| {
            (self.cpu.percentile(p) * 1000.0 * margin * factor)
                .min(cpu_cap)
                .max(s.min_cpu_millicores as f64)
        };
        let memory = |p: f64, factor: f64| {
            (self.memory.percentile(p) * margin * factor)
                .min(memory_cap)
                .max(s.min_memory_bytes as f64)
        };
        Some(Estimate {
            target: Amounts {
                cpu_millicores: cpu(TARGET_PERCENTILE, 1.0),
                memory_bytes: memory(TARGET_PERCENTILE, 1.0),
            },
            lower: Amounts {
                cpu_millicores: cpu(LOWER_BOUND_PERCENTILE, lower_factor),
                memory_bytes: memory(LOWER_BOUND_PERCENTILE, lower_factor),
            },
            upper: Amounts {
                cpu_millicores: cpu(UPPER_BOUND_PERCENTILE, upper_factor),
                memory_bytes: memory(UPPER_BOUND_PERCENTILE, upper_factor),
            },
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Amounts {
    pub cpu_millicores: f64,
    pub memory_bytes: f64,
}

impl Amounts {
    fn quantities(&self) -> BTreeMap<String, Quantity> {
        BTreeMap::from([
            (
                "cpu".to_string(),
                Quantity::from_milli(self.cpu_millicores.ceil() as i128),
            ),
            (
                "memory".to_string(),
                Quantity::from_value(self.memory_bytes.ceil() as i128),
            ),
        ])
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub target: Amounts,
    pub lower: Amounts,
    pub upper: Amounts,
}

/// The VPA's recommendation for one container from its estimate: only the resources its
/// policy controls, each bound held within minAllowed and maxAllowed, the target as it was
/// before that kept as `uncappedTarget`. `None` for a container whose policy is `Off`.
pub fn recommend(
    vpa: &VerticalPodAutoscaler,
    container: &str,
    estimate: &Estimate,
) -> Option<RecommendedContainerResources> {
    let policy = vpa.container_policy(container);
    if policy.is_some_and(|p| !p.is_auto()) {
        return None;
    }
    let controlled = |resource: &str| policy.is_none_or(|p| p.controls(resource));
    let only_controlled = |mut list: BTreeMap<String, Quantity>| {
        list.retain(|resource, _| controlled(resource));
        list
    };
    let cap = |list: BTreeMap<String, Quantity>| {
        let mut list = only_controlled(list);
        if let Some(policy) = policy {
            for (resource, q) in list.iter_mut() {
                if let Some(min) = policy.min_allowed.get(resource) {
                    if q.milli_value() < min.milli_value() {
                        *q = *min;
                    }
                }
                if let Some(max) = policy.max_allowed.get(resource) {
                    if q.milli_value() > max.milli_value() {
                        *q = *max;
                    }
                }
            }
        }
        list
    };
    Some(RecommendedContainerResources {
        container_name: container.to_string(),
        target: cap(estimate.target.quantities()),
        lower_bound: cap(estimate.lower.quantities()),
        upper_bound: cap(estimate.upper.quantities()),
        uncapped_target: only_controlled(estimate.target.quantities()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::kinds::vpa::{ContainerResourcePolicy, PodResourcePolicy};

    const MI: f64 = 1024.0 * 1024.0;

    fn settings() -> Settings {
        Settings {
            half_life: Duration::from_secs(3600),
            memory_interval: Duration::from_secs(60),
            confidence_unit: Duration::from_secs(600),
            sample_period: Duration::from_secs(1),
            ..Settings::default()
        }
    }

    /// `seconds` samples, one a second, of steady usage.
    fn steady(cpu_millicores: f64, memory_bytes: f64, seconds: u32) -> ContainerState {
        let s = settings();
        let mut state = ContainerState::new(&s);
        for t in 0..seconds {
            state.add("p", cpu_millicores, memory_bytes, t as f64, &s);
        }
        state
    }

    fn milli(list: &BTreeMap<String, Quantity>, resource: &str) -> i128 {
        list[resource].milli_value()
    }

    #[test]
    fn steady_usage_is_recommended_with_the_margin_within_one_bucket() {
        let estimate = steady(500.0, 400.0 * MI, 600)
            .estimate(&settings())
            .unwrap();
        // p90 is the end of the usage's bucket, then +15 %. Buckets are 5 % of their start
        // wide plus the first bucket's width: 2 % above 500m, 6 % above 400Mi.
        let cpu = estimate.target.cpu_millicores;
        assert!((500.0 * 1.15..=500.0 * 1.15 * 1.03).contains(&cpu), "{cpu}");
        let memory = estimate.target.memory_bytes;
        assert!(
            (400.0 * MI * 1.15..=400.0 * MI * 1.15 * 1.07).contains(&memory),
            "{memory}"
        );
        // Ten minutes is one confidence unit here: upper ×2, lower ×(1.001)^-2.
        assert!((estimate.upper.cpu_millicores / cpu - 2.0).abs() < 0.01);
        assert!(estimate.lower.cpu_millicores <= cpu && estimate.lower.cpu_millicores > cpu * 0.99);
    }

    #[test]
    fn a_short_history_widens_the_upper_bound_and_a_long_one_narrows_it() {
        let s = settings();
        let short = steady(500.0, 400.0 * MI, 30).estimate(&s).unwrap();
        let long = steady(500.0, 400.0 * MI, 6000).estimate(&s).unwrap();
        assert_eq!(short.target, long.target);
        assert!(short.upper.cpu_millicores > 10.0 * short.target.cpu_millicores);
        assert!(long.upper.cpu_millicores < 1.2 * long.target.cpu_millicores);
        assert!(short.lower.cpu_millicores < long.lower.cpu_millicores);
    }

    #[test]
    fn idle_containers_get_the_minimums() {
        let estimate = steady(1.0, 1.0 * MI, 600).estimate(&settings()).unwrap();
        assert_eq!(estimate.target.cpu_millicores, 25.0);
        assert_eq!(estimate.target.memory_bytes, 250.0 * MI);
        assert!(ContainerState::new(&settings())
            .estimate(&settings())
            .is_none());
    }

    #[test]
    fn memory_counts_each_interval_once_at_its_peak() {
        let s = settings();
        let mut state = ContainerState::new(&s);
        // One minute mostly at 100Mi with a single 900Mi spike, then nine quiet minutes at
        // 100Mi: one peak of 900Mi among ten intervals sits above p90 but not p95.
        for t in 0..600 {
            let bytes = if t == 30 { 900.0 * MI } else { 100.0 * MI };
            state.add("p", 100.0, bytes, t as f64, &s);
        }
        let e = state.estimate(&s).unwrap();
        assert!(
            e.target.memory_bytes < 260.0 * MI,
            "the spike does not set the target"
        );
        let unfloored = Settings {
            min_memory_bytes: 0,
            ..s.clone()
        };
        let e = state.estimate(&unfloored).unwrap();
        assert!(
            e.target.memory_bytes < 130.0 * MI,
            "{}",
            e.target.memory_bytes / MI
        );
        assert!(
            e.upper.memory_bytes / 2.0 > 900.0 * MI,
            "the spike sets the upper bound"
        );
    }

    #[test]
    fn the_policy_caps_the_bounds_and_keeps_the_uncapped_target() {
        let mut vpa = VerticalPodAutoscaler::default();
        let estimate = steady(500.0, 400.0 * MI, 600)
            .estimate(&settings())
            .unwrap();
        let rec = recommend(&vpa, "app", &estimate).unwrap();
        assert_eq!(rec.target, rec.uncapped_target);
        assert!(milli(&rec.upper_bound, "cpu") > milli(&rec.target, "cpu"));

        vpa.spec.resource_policy = Some(PodResourcePolicy {
            container_policies: vec![
                ContainerResourcePolicy {
                    container_name: "*".into(),
                    max_allowed: BTreeMap::from([("cpu".into(), "300m".parse().unwrap())]),
                    min_allowed: BTreeMap::from([("memory".into(), "1Gi".parse().unwrap())]),
                    ..Default::default()
                },
                ContainerResourcePolicy {
                    container_name: "sidecar".into(),
                    mode: Some("Off".into()),
                    ..Default::default()
                },
                ContainerResourcePolicy {
                    container_name: "cpu-only".into(),
                    controlled_resources: Some(vec!["cpu".into()]),
                    ..Default::default()
                },
            ],
        });
        let rec = recommend(&vpa, "app", &estimate).unwrap();
        assert_eq!(milli(&rec.target, "cpu"), 300);
        assert_eq!(milli(&rec.upper_bound, "cpu"), 300);
        assert!(milli(&rec.uncapped_target, "cpu") > 500);
        assert_eq!(milli(&rec.target, "memory"), 1024 * 1024 * 1024 * 1000);
        assert_eq!(milli(&rec.lower_bound, "memory"), 1024 * 1024 * 1024 * 1000);
        assert!(recommend(&vpa, "sidecar", &estimate).is_none());
        let cpu_only = recommend(&vpa, "cpu-only", &estimate).unwrap();
        assert_eq!(cpu_only.target.keys().collect::<Vec<_>>(), ["cpu"]);
        assert_eq!(cpu_only.uncapped_target.keys().collect::<Vec<_>>(), ["cpu"]);
    }
}
