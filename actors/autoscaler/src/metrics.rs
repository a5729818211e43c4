//! The latest metrics, as the bus delivers them: node agents' pod usage on
//! `shoal.v1.metrics.<node>.<ns>.<pod>` and external samples on
//! `shoal.v1.metrics.external.<ns>.<name>`.
//!
//! Bad external samples (NaN, infinite, negative, older than the staleness bound, or
//! undecodable) are dropped and counted, never stored: one broken publisher must not steer
//! a workload.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bus_schemas::api::PodMetrics;
use bus_schemas::autoscaling::{decode_json_or_msgpack, ExternalSample};
use bus_schemas::kinds::hpa::{CrossVersionObjectReference, MetricIdentifier};
use bus_schemas::{codec, subjects, Time};

use crate::calc::Sample;
use crate::decide::MetricsView;

/// Why an external sample was dropped.
#[derive(Debug, Default)]
pub struct Dropped {
    pub undecodable: AtomicU64,
    pub not_a_number: AtomicU64,
    pub negative: AtomicU64,
    pub stale: AtomicU64,
}

impl Dropped {
    pub fn total(&self) -> u64 {
        [
            &self.undecodable,
            &self.not_a_number,
            &self.negative,
            &self.stale,
        ]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum()
    }
}

fn count_dropped(reason: &'static str) {
    shoal_telemetry::metrics()
        .autoscaler
        .dropped_samples
        .get_or_create(&[shoal_telemetry::metrics::label("reason", reason)])
        .inc();
}

#[derive(Debug, Clone)]
struct Series {
    labels: BTreeMap<String, String>,
    milli: i64,
    at: Time,
}

#[derive(Default)]
struct Inner {
    pods: HashMap<(String, String), PodMetrics>,
    /// (namespace, metric name) → one entry per label set.
    external: HashMap<(String, String), Vec<Series>>,
}

/// Shared between the bus feed and the passes.
#[derive(Clone)]
pub struct MetricStore {
    inner: Arc<RwLock<Inner>>,
    pub dropped: Arc<Dropped>,
    /// Samples older than this are not used (pod usage) or not accepted (external).
    max_age: Duration,
    /// The span a pod usage sample averages over (the agents' sample period).
    pub sample_window: Duration,
    /// Built-in external sources (JetStream consumer lag) answered before the bus samples.
    builtin: Arc<BuiltinSource>,
}

/// An External metric answered by the autoscaler itself: `None` when the identifier is not
/// one of its own, else the value or why it could not be read.
pub type BuiltinSource =
    dyn Fn(&str, &MetricIdentifier) -> Option<Result<i64, String>> + Send + Sync;

impl MetricStore {
    pub fn new(max_age: Duration, sample_window: Duration) -> Self {
        MetricStore {
            inner: Arc::default(),
            dropped: Arc::default(),
            max_age,
            sample_window,
            builtin: Arc::new(|_, _| None),
        }
    }

    /// Answers some External metrics from elsewhere than the bus samples.
    pub fn with_builtin(
        mut self,
        builtin: impl Fn(&str, &MetricIdentifier) -> Option<Result<i64, String>> + Send + Sync + 'static,
    ) -> Self {
        self.builtin = Arc::new(builtin);
        self
    }

    fn now() -> Time {
        chrono::Utc::now()
    }

    fn fresh(&self, at: Time, now: Time) -> bool {
        now.signed_duration_since(at)
            .to_std()
            .map(|age| age <= self.max_age)
            .unwrap_or(true)
    }

    /// Takes one message from `shoal.v1.metrics.>`. Returns the external metric's
    /// (namespace, name) when one was stored (a pass may want to run at once).
    pub fn ingest(&self, subject: &str, body: &[u8]) -> Option<(String, String)> {
        let rest = subject.strip_prefix("shoal.v1.metrics.")?;
        let tokens: Vec<&str> = rest.split('.').collect();
        if tokens.len() != 3 {
            return None;
        }
        let decode = |t: &str| subjects::decode_token(t).ok();
        if tokens[0] == "external" {
            let (ns, name) = (decode(tokens[1])?, decode(tokens[2])?);
            self.ingest_external(&ns, &name, body).then_some((ns, name))
        } else {
            let Ok(sample) = codec::from_msgpack::<PodMetrics>(body) else {
                return None;
            };
            if sample.pod.is_empty() {
                return None; // the node's total
            }
            let key = (sample.namespace.clone(), sample.pod.clone());
            self.inner
                .write()
                .expect("metrics lock")
                .pods
                .insert(key, sample);
            None
        }
    }

    fn ingest_external(&self, namespace: &str, name: &str, body: &[u8]) -> bool {
        let sample: ExternalSample = match decode_json_or_msgpack(body) {
            Ok(s) => s,
            Err(e) => {
                self.dropped.undecodable.fetch_add(1, Ordering::Relaxed);
                count_dropped("undecodable");
                tracing::debug!(%namespace, %name, error = %e, "undecodable external metric dropped");
                return false;
            }
        };
        let now = Self::now();
        let at = sample.timestamp.unwrap_or(now);
        let counter = if !sample.value.is_finite() {
            Some(&self.dropped.not_a_number)
        } else if sample.value < 0.0 {
            Some(&self.dropped.negative)
        } else if !self.fresh(at, now) {
            Some(&self.dropped.stale)
        } else {
            None
        };
        if let Some(counter) = counter {
            counter.fetch_add(1, Ordering::Relaxed);
            let reason = if !sample.value.is_finite() {
                "not_a_number"
            } else if sample.value < 0.0 {
                "negative"
            } else {
                "stale"
            };
            count_dropped(reason);
            return false;
        }
        let milli = (sample.value * 1000.0).round().min(i64::MAX as f64) as i64;
        let mut inner = self.inner.write().expect("metrics lock");
        let series = inner
            .external
            .entry((namespace.to_string(), name.to_string()))
            .or_default();
        match series.iter_mut().find(|s| s.labels == sample.labels) {
            Some(s) if s.at <= at => {
                s.milli = milli;
                s.at = at;
            }
            Some(_) => {} // an older sample arriving late
            None => series.push(Series {
                labels: sample.labels,
                milli,
                at,
            }),
        }
        true
    }

    /// Forgets pods that are gone (their last sample would otherwise linger).
    pub fn retain_pods(&self, keep: impl Fn(&str, &str) -> bool) {
        self.inner
            .write()
            .expect("metrics lock")
            .pods
            .retain(|(ns, pod), _| keep(ns, pod));
    }
}

impl MetricsView for MetricStore {
    fn pod_usage(
        &self,
        namespace: &str,
        pod: &str,
        resource: &str,
        container: Option<&str>,
    ) -> Option<Sample> {
        let inner = self.inner.read().expect("metrics lock");
        let m = inner.pods.get(&(namespace.to_string(), pod.to_string()))?;
        if !self.fresh(m.timestamp, Self::now()) {
            return None;
        }
        let pick = |cpu: u64, memory: u64| match resource {
            "cpu" => Some(cpu as i64),
            "memory" => Some((memory as i64).saturating_mul(1000)),
            _ => None,
        };
        let milli = match container {
            None => pick(m.cpu_millicores, m.memory_working_set_bytes)?,
            Some(name) => {
                let c = m.containers.iter().find(|c| c.name == name)?;
                pick(c.cpu_millicores, c.memory_working_set_bytes)?
            }
        };
        Some(Sample {
            milli,
            timestamp: m.timestamp,
            window: self.sample_window,
        })
    }

    fn pod_metric(&self, namespace: &str, pod: &str, metric: &MetricIdentifier) -> Option<Sample> {
        let inner = self.inner.read().expect("metrics lock");
        let m = inner.pods.get(&(namespace.to_string(), pod.to_string()))?;
        if !self.fresh(m.timestamp, Self::now()) {
            return None;
        }
        // The pod's series of that name the selector matches, summed (as Prometheus' `sum`
        // over the pod would); none at all is a missing metric, not a zero.
        let values: Vec<f64> = m
            .app
            .iter()
            .filter(|s| s.name == metric.name)
            .filter(|s| {
                metric
                    .selector
                    .as_ref()
                    .is_none_or(|sel| sel.matches(&s.labels))
            })
            .map(|s| s.value)
            .filter(|v| v.is_finite() && *v >= 0.0)
            .collect();
        if values.is_empty() {
            return None;
        }
        let milli = (values.iter().sum::<f64>() * 1000.0)
            .round()
            .min(i64::MAX as f64) as i64;
        Some(Sample {
            milli,
            timestamp: m.timestamp,
            window: self.sample_window,
        })
    }

    fn object_metric(
        &self,
        namespace: &str,
        object: &CrossVersionObjectReference,
        metric: &MetricIdentifier,
    ) -> Result<i64, String> {
        // Objects' metrics travel as external samples labelled with the object.
        let mut wanted = metric.clone();
        let selector = wanted.selector.get_or_insert_with(Default::default);
        selector
            .match_labels
            .insert("kind".into(), object.kind.clone());
        selector
            .match_labels
            .insert("name".into(), object.name.clone());
        self.external_metric(namespace, &wanted)
    }

    fn external_metric(&self, namespace: &str, metric: &MetricIdentifier) -> Result<i64, String> {
        if let Some(answer) = (self.builtin)(namespace, metric) {
            return answer;
        }
        let inner = self.inner.read().expect("metrics lock");
        let series = inner
            .external
            .get(&(namespace.to_string(), metric.name.clone()))
            .ok_or_else(|| {
                format!(
                    "unable to get external metric {namespace}/{}: no samples received on {}",
                    metric.name,
                    subjects::external_metric(namespace, &metric.name)
                )
            })?;
        let now = Self::now();
        let matching: Vec<&Series> = series
            .iter()
            .filter(|s| {
                metric
                    .selector
                    .as_ref()
                    .is_none_or(|sel| sel.matches(&s.labels))
            })
            .filter(|s| self.fresh(s.at, now))
            .collect();
        if matching.is_empty() {
            return Err(format!(
                "unable to get external metric {namespace}/{}: no recent sample matches its selector",
                metric.name
            ));
        }
        Ok(matching.iter().map(|s| s.milli).sum())
    }
}
