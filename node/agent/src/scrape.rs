//! Scraping pods' own Prometheus endpoints: a pod annotated `prometheus.io/scrape: "true"`
//! is read at `prometheus.io/port` (its first container port when unset) and
//! `prometheus.io/path` (default `/metrics`) from the node's network, where pod IPs are
//! reachable, and its series ride along with the pod's usage sample on the bus.

use std::net::IpAddr;
use std::time::Duration;

use bus_schemas::api::AppMetric;
use bus_schemas::kinds::Pod;
use prometheus_parse::{Scrape, Value};

use crate::hostnet::HostNet;

pub const SCRAPE_ANNOTATION: &str = "prometheus.io/scrape";
pub const PORT_ANNOTATION: &str = "prometheus.io/port";
pub const PATH_ANNOTATION: &str = "prometheus.io/path";

/// A scrape answer larger than this is refused: one pod must not swamp its node's samples.
const MAX_BODY: usize = 1 << 20;

/// Where to scrape a pod, when it asks to be scraped and has an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub ip: IpAddr,
    pub port: u16,
    pub path: String,
}

impl Target {
    /// `Ok(None)` when the pod does not ask to be scraped (or has no IP yet); `Err` when its
    /// annotations are unusable, naming the one at fault.
    pub fn of(pod: &Pod) -> Result<Option<Target>, String> {
        let annotations = &pod.metadata.annotations;
        if annotations.get(SCRAPE_ANNOTATION).map(String::as_str) != Some("true") {
            return Ok(None);
        }
        let Ok(ip) = pod.status.pod_ip.parse::<IpAddr>() else {
            return Ok(None);
        };
        let port = match annotations.get(PORT_ANNOTATION) {
            Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                format!("metadata.annotations[{PORT_ANNOTATION}]: {p:?} is not a port number")
            })?,
            None => pod
                .spec
                .containers
                .iter()
                .flat_map(|c| c.ports.iter())
                .map(|p| p.container_port)
                .find(|p| *p > 0)
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(|| {
                    format!("metadata.annotations[{PORT_ANNOTATION}]: required (no container port)")
                })?,
        };
        let path = annotations
            .get(PATH_ANNOTATION)
            .cloned()
            .unwrap_or_else(|| "/metrics".into());
        Ok(Some(Target { ip, port, path }))
    }
}

/// Reads and parses one pod's metrics from the node's network.
pub async fn scrape(
    net: HostNet,
    target: Target,
    timeout: Duration,
) -> Result<Vec<AppMetric>, String> {
    let body = tokio::task::spawn_blocking(move || {
        net.run(move || {
            shoal_node::probe::http_fetch(target.ip, target.port, &target.path, timeout, MAX_BODY)
        })
    })
    .await
    .map_err(|e| format!("scrape task: {e}"))?
    .map_err(|e| e.to_string())??;
    parse(&body)
}

/// The text exposition format → one sample per counter, gauge or untyped series (a
/// histogram's buckets and a summary's quantiles are left out); NaN and infinite values are
/// dropped, as the autoscaler would refuse them anyway.
pub fn parse(body: &str) -> Result<Vec<AppMetric>, String> {
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let scrape = Scrape::parse(lines).map_err(|e| format!("unparsable metrics: {e}"))?;
    let mut out = Vec::with_capacity(scrape.samples.len());
    for sample in scrape.samples {
        let labels: std::collections::BTreeMap<String, String> = sample
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut push = |name: String, value: f64| {
            if value.is_finite() {
                out.push(AppMetric {
                    name,
                    labels: labels.clone(),
                    value,
                });
            }
        };
        match sample.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => push(sample.metric, v),
            // Buckets and quantiles are not values an HPA can average.
            Value::Histogram(_) | Value::Summary(_) => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_gauges_and_labels_become_series() {
        let body = "# HELP http_requests_total Requests.\n\
                    # TYPE http_requests_total counter\n\
                    http_requests_total{code=\"200\"} 1027\n\
                    http_requests_total{code=\"500\"} 3\n\
                    # TYPE queue_depth gauge\n\
                    queue_depth 42.5\n\
                    bogus_nan NaN\n";
        let series = parse(body).unwrap();
        let find = |name: &str, code: Option<&str>| {
            series
                .iter()
                .find(|s| s.name == name && s.labels.get("code").map(String::as_str) == code)
                .map(|s| s.value)
        };
        assert_eq!(find("http_requests_total", Some("200")), Some(1027.0));
        assert_eq!(find("http_requests_total", Some("500")), Some(3.0));
        assert_eq!(find("queue_depth", None), Some(42.5));
        assert_eq!(find("bogus_nan", None), None, "NaN is dropped");
    }

    #[test]
    fn a_pod_asks_to_be_scraped_through_its_annotations() {
        let pod = |annotations: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "annotations": annotations},
                "spec": {"containers": [{"name": "c", "image": "i",
                                         "ports": [{"containerPort": 8080}]}]},
                "status": {"podIP": "10.0.0.7"}
            }))
            .unwrap()
        };
        assert_eq!(Target::of(&pod(serde_json::json!({}))), Ok(None));
        assert_eq!(
            Target::of(&pod(serde_json::json!({"prometheus.io/scrape": "true"}))),
            Ok(Some(Target {
                ip: "10.0.0.7".parse().unwrap(),
                port: 8080,
                path: "/metrics".into()
            }))
        );
        let custom = Target::of(&pod(serde_json::json!({
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9100",
            "prometheus.io/path": "/stats"
        })))
        .unwrap()
        .unwrap();
        assert_eq!((custom.port, custom.path.as_str()), (9100, "/stats"));
        let bad = Target::of(&pod(serde_json::json!({
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "http"
        })));
        assert!(bad
            .unwrap_err()
            .starts_with("metadata.annotations[prometheus.io/port]"),);
    }
}
