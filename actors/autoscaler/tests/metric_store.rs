//! The metric store's handling of what publishers send: bad external samples are dropped
//! and counted, series are told apart by labels and summed by selector, old samples age out.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bus_schemas::api::PodMetrics;
use bus_schemas::kinds::hpa::MetricIdentifier;
use bus_schemas::selector::LabelSelector;
use bus_schemas::{codec, subjects};
use shoal_autoscaler::decide::MetricsView;
use shoal_autoscaler::metrics::MetricStore;

fn store() -> MetricStore {
    MetricStore::new(Duration::from_secs(60), Duration::from_secs(1))
}

fn backlog(selector: Option<(&str, &str)>) -> MetricIdentifier {
    MetricIdentifier {
        name: "backlog".into(),
        selector: selector.map(|(k, v)| LabelSelector {
            match_labels: BTreeMap::from([(k.to_string(), v.to_string())]),
            ..Default::default()
        }),
    }
}

#[test]
fn bad_external_samples_are_dropped_and_counted() {
    let store = store();
    let subject = subjects::external_metric("default", "backlog");
    let old = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
    let stale = format!(r#"{{"value": 3, "timestamp": "{old}"}}"#);
    let bodies: [&[u8]; 5] = [
        b"\x00\x01 not a sample",
        br#"{"value": "NaN"}"#,
        br#"{"value": -1}"#,
        stale.as_bytes(),
        br#"{"value": 1e400}"#,
    ];
    for body in bodies {
        assert!(
            store.ingest(&subject, body).is_none(),
            "{body:?} was accepted"
        );
    }
    // "NaN" as a string and 1e400 do not decode as numbers in JSON.
    assert_eq!(store.dropped.undecodable.load(Ordering::Relaxed), 3);
    assert_eq!(store.dropped.negative.load(Ordering::Relaxed), 1);
    assert_eq!(store.dropped.stale.load(Ordering::Relaxed), 1);
    assert_eq!(store.dropped.total(), 5);
    assert!(store.external_metric("default", &backlog(None)).is_err());

    // msgpack NaN decodes, and is refused as not a number.
    let nan = codec::to_msgpack(&bus_schemas::autoscaling::ExternalSample {
        value: f64::NAN,
        ..Default::default()
    })
    .unwrap();
    assert!(store.ingest(&subject, &nan).is_none());
    assert_eq!(store.dropped.not_a_number.load(Ordering::Relaxed), 1);
}

#[test]
fn series_are_summed_by_selector_and_replaced_by_newer_samples() {
    let store = store();
    let subject = subjects::external_metric("default", "backlog");
    let ingest = |body: &str| store.ingest(&subject, body.as_bytes());
    assert_eq!(
        ingest(r#"{"value": 5, "labels": {"queue": "a"}}"#),
        Some(("default".into(), "backlog".into()))
    );
    ingest(r#"{"value": 7.5, "labels": {"queue": "b"}}"#);
    ingest(r#"{"value": 2, "labels": {"queue": "a"}}"#);
    assert_eq!(store.external_metric("default", &backlog(None)), Ok(9_500));
    assert_eq!(
        store.external_metric("default", &backlog(Some(("queue", "a")))),
        Ok(2_000)
    );
    assert!(store
        .external_metric("default", &backlog(Some(("queue", "c"))))
        .is_err());
    assert!(store.external_metric("other", &backlog(None)).is_err());
}

#[test]
fn pod_usage_comes_from_the_agents_samples_and_ages_out() {
    let store = store();
    let sample = |age_seconds: i64, cpu: u64| PodMetrics {
        namespace: "default".into(),
        pod: "web-1".into(),
        node: "n1".into(),
        timestamp: chrono::Utc::now() - chrono::Duration::seconds(age_seconds),
        cpu_millicores: cpu,
        memory_working_set_bytes: 64 << 20,
        ..Default::default()
    };
    let subject = subjects::metrics("n1", "default", "web-1");
    store.ingest(&subject, &codec::to_msgpack(&sample(1, 250)).unwrap());
    let cpu = store.pod_usage("default", "web-1", "cpu", None).unwrap();
    assert_eq!(cpu.milli, 250);
    let memory = store.pod_usage("default", "web-1", "memory", None).unwrap();
    assert_eq!(memory.milli, (64 << 20) * 1000);
    store.ingest(&subject, &codec::to_msgpack(&sample(120, 900)).unwrap());
    assert!(
        store.pod_usage("default", "web-1", "cpu", None).is_none(),
        "a two-minute-old sample is not used"
    );
}
