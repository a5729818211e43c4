//! VerticalPodAutoscaler: the recommender and the Recreate updater.
//!
//! - [`histogram`]: decaying histograms with exponential buckets (pure).
//! - [`recommend`]: per container, estimates from the histograms and the VPA's policy
//!   applied to them (pure).
//! - [`recreate`]: which pod to replace next without lowering availability (pure).
//! - this module: [`Recommender`], the per-VPA, per-container histograms fed from every pod
//!   usage sample on the bus (standing by too, so a new leader has history).
//! - [`pass`]: one VPA against the cluster: status through the API, evictions, Events.
//!
//! Samples are attributed to a VPA by its target workload's selector, read from the caches
//! ([`shoal_bus::workloads`]); the table of targets is refreshed every sync period.

pub mod histogram;
pub mod pass;
pub mod recommend;
pub mod recreate;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use bus_schemas::api::PodMetrics;
use bus_schemas::kinds::{Pod, VerticalPodAutoscaler};
use bus_schemas::selector::{LabelSelector, Selector};
use shoal_bus::{Informer, InformerFactory};

use recommend::{ContainerState, Estimate, Settings};

/// One VPA as the feed sees it: whose pods its samples come from.
#[derive(Debug, Clone)]
pub struct Target {
    pub namespace: String,
    pub name: String,
    pub selector: Selector,
}

#[derive(Default)]
struct Inner {
    targets: Vec<Target>,
    /// (namespace, VPA name) → container name → state.
    states: HashMap<(String, String), BTreeMap<String, ContainerState>>,
}

/// Shared by the metrics feed (writes samples) and the passes (read estimates).
#[derive(Clone)]
pub struct Recommender {
    inner: Arc<Mutex<Inner>>,
    pub settings: Settings,
}

impl Recommender {
    pub fn new(settings: Settings) -> Self {
        Recommender {
            inner: Arc::default(),
            settings,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the table of targets; the history of VPAs no longer there is dropped.
    pub fn set_targets(&self, targets: Vec<Target>) {
        let mut inner = self.lock();
        let live: HashSet<(String, String)> = targets
            .iter()
            .map(|t| (t.namespace.clone(), t.name.clone()))
            .collect();
        inner.states.retain(|key, _| live.contains(key));
        inner.targets = targets;
    }

    /// Whether any VPA is followed (samples need not be decoded otherwise).
    pub fn has_targets(&self) -> bool {
        !self.lock().targets.is_empty()
    }

    /// One pod usage sample; `labels` are the pod's (a sample of a pod not in the cache
    /// yet is skipped).
    pub fn ingest(&self, sample: &PodMetrics, labels: &BTreeMap<String, String>) {
        let at = sample.timestamp.timestamp_millis() as f64 / 1000.0;
        let mut inner = self.lock();
        let Inner { targets, states } = &mut *inner;
        for target in targets
            .iter()
            .filter(|t| t.namespace == sample.namespace && t.selector.matches(labels))
        {
            let containers = states
                .entry((target.namespace.clone(), target.name.clone()))
                .or_default();
            for c in &sample.containers {
                containers
                    .entry(c.name.clone())
                    .or_insert_with(|| ContainerState::new(&self.settings))
                    .add(
                        &sample.pod,
                        c.cpu_millicores as f64,
                        c.memory_working_set_bytes as f64,
                        at,
                        &self.settings,
                    );
            }
        }
    }

    /// Every container's estimate for a VPA.
    pub fn estimates(&self, namespace: &str, name: &str) -> BTreeMap<String, Estimate> {
        let inner = self.lock();
        inner
            .states
            .get(&(namespace.to_string(), name.to_string()))
            .map(|containers| {
                containers
                    .iter()
                    .filter_map(|(c, s)| Some((c.clone(), s.estimate(&self.settings)?)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Forgets memory peaks of pods that are gone.
    pub fn retain_pods(&self, pods: &Informer<Pod>) {
        let mut inner = self.lock();
        for ((namespace, _), containers) in inner.states.iter_mut() {
            for state in containers.values_mut() {
                state.retain_pods(|pod| pods.get(namespace, pod).is_some());
            }
        }
    }
}

/// The selector of every VPA's target, from the caches (VPAs whose target is missing or
/// has no usable selector are left out until it appears).
pub async fn targets(
    informers: &InformerFactory,
    vpas: &Informer<VerticalPodAutoscaler>,
) -> Vec<Target> {
    let mut out = Vec::new();
    for vpa in vpas.list(None, &Selector::everything()) {
        let Some(target) = &vpa.spec.target_ref else {
            continue;
        };
        let ns = &vpa.metadata.namespace;
        let workload =
            shoal_bus::workloads::workload(informers, ns, &target.kind, &target.name).await;
        let Ok(Some(workload)) = workload else {
            continue;
        };
        if let Some(selector) = usable(&workload.selector) {
            out.push(Target {
                namespace: ns.clone(),
                name: vpa.metadata.name.clone(),
                selector,
            });
        }
    }
    out
}

/// An empty selector would claim every pod of the namespace: not one a workload can have.
fn usable(selector: &LabelSelector) -> Option<Selector> {
    if selector.is_empty() {
        return None;
    }
    selector.to_selector().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::api::ContainerMetrics;

    #[test]
    fn samples_feed_the_vpa_whose_target_selects_the_pod() {
        let rec = Recommender::new(Settings::default());
        rec.set_targets(vec![Target {
            namespace: "default".into(),
            name: "web".into(),
            selector: Selector::parse("app=web").unwrap(),
        }]);
        let sample = |pod: &str, ns: &str| PodMetrics {
            namespace: ns.into(),
            pod: pod.into(),
            timestamp: chrono::Utc::now(),
            containers: vec![ContainerMetrics {
                name: "app".into(),
                cpu_millicores: 400,
                memory_working_set_bytes: 300 << 20,
            }],
            ..Default::default()
        };
        let web = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let other = BTreeMap::from([("app".to_string(), "db".to_string())]);
        rec.ingest(&sample("web-1", "default"), &web);
        rec.ingest(&sample("db-1", "default"), &other);
        rec.ingest(&sample("web-1", "elsewhere"), &web);
        let estimates = rec.estimates("default", "web");
        assert_eq!(estimates.keys().collect::<Vec<_>>(), ["app"]);
        assert!(estimates["app"].target.cpu_millicores > 400.0);
        rec.set_targets(Vec::new());
        assert!(
            rec.estimates("default", "web").is_empty(),
            "a VPA gone takes its history"
        );
    }
}
