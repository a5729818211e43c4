//! VerticalPodAutoscaler end to end on a hollow node: a real nats-server and API, the
//! controllers, the autoscaler and one hollow node agent in this process; the pods' usage is
//! set by their `hollow.shoal.io/*-usage` annotations and travels the metrics subjects like
//! any node's.
//!
//! From 500m of CPU and 400Mi of memory per pod the recommendation converges to one
//! histogram bucket above usage plus upstream's 15 % margin; in Recreate mode both pods,
//! created with requests far below it, are replaced one at a time and the replacements get
//! the recommendation at admission (`Initial`), as does a pod added by scaling up; `shoal
//! get vpa` shows the targets, and a bad VPA is refused with field paths.

use std::sync::Arc;
use std::time::Duration;

use bus_schemas::api::ListOptions;
use bus_schemas::kinds::vpa::{VerticalPodAutoscaler, UPDATES_ANNOTATION};
use bus_schemas::kinds::{Deployment, Event, Pod};
use bus_schemas::roles::Role;
use shoal_agent::{AgentConfig, Backend};
use shoal_api::local::{eventually, LocalCluster};
use shoal_bus::shutdown;
use shoal_bus::ApiClient;
use shoal_node::{HollowConfig, HollowRuntime};

mod common;

const T: Duration = Duration::from_secs(90);
const MI: i128 = 1024 * 1024;

async fn pods(api: &ApiClient) -> Vec<Pod> {
    api.list::<Pod>(&ListOptions {
        namespace: "default".into(),
        label_selector: "app=web".into(),
        ..Default::default()
    })
    .await
    .map(|l| l.items)
    .unwrap_or_default()
}

fn request(pod: &Pod, resource: &str) -> i128 {
    pod.spec.containers[0]
        .resources
        .requests
        .get(resource)
        .map(|q| q.milli_value())
        .unwrap_or(0)
}

#[actix::test]
async fn recommendations_from_hollow_usage_resize_pods_one_at_a_time() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();

    let (_controllers, sd) = shutdown::channel();
    let config = shoal_controllers::ControllersConfig {
        informers: Some(cluster.informers.clone()),
        ..Default::default()
    };
    let nats = cluster
        .connect_as(&Role::Controllers, "test-controllers")
        .await
        .unwrap();
    actix::spawn(async move {
        let _ = shoal_controllers::run(config, nats, sd.wait()).await;
    });

    let (_node, sd) = shutdown::channel();
    let mut config = AgentConfig::new("hollow-0", "10.201.0.0/24");
    config.metrics_period = Duration::from_millis(200);
    let backend = Backend::Hollow(Arc::new(HollowRuntime::new(HollowConfig {
        pod_cidr: "10.201.0.0/24".parse().unwrap(),
        ..Default::default()
    })));
    let nats = cluster
        .connect_as(&Role::Node("hollow-0".into()), "hollow-0")
        .await
        .unwrap();
    tokio::spawn(async move {
        if let Err(e) = shoal_agent::run(config, backend, nats, sd.wait()).await {
            eprintln!("hollow node failed: {e}");
        }
    });

    let (_autoscaler, sd) = shutdown::channel();
    let config = shoal_autoscaler::AutoscalerConfig {
        sync_period: Duration::from_millis(300),
        sample_window: Duration::from_millis(200),
        vpa: shoal_autoscaler::vpa::recommend::Settings {
            half_life: Duration::from_secs(3600),
            memory_interval: Duration::from_secs(1),
            // Two seconds of history is a "day": the bounds close in within the test.
            confidence_unit: Duration::from_secs(2),
            ..Default::default()
        },
        vpa_status_period: Duration::from_millis(300),
        ..Default::default()
    };
    let nats = cluster
        .connect_as(&Role::Autoscaler, "test-autoscaler")
        .await
        .unwrap();
    actix::spawn(async move {
        let _ = shoal_autoscaler::run(config, nats, sd.wait()).await;
    });

    // Bad input: the API names each bad field.
    let bad: VerticalPodAutoscaler = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bad"},
        "spec": {"updatePolicy": {"updateMode": "Sometimes"},
                 "resourcePolicy": {"containerPolicies": [{"containerName": "app",
                     "minAllowed": {"cpu": "2"}, "maxAllowed": {"cpu": "1"}}]}}
    }))
    .unwrap();
    let err = api.create(&bad).await.unwrap_err().to_string();
    for field in [
        "spec.targetRef",
        "spec.updatePolicy.updateMode",
        "spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]",
    ] {
        assert!(err.contains(field), "{field} not named in: {err}");
    }

    let web: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": {
                    "hollow.shoal.io/cpu-usage": "500m",
                    "hollow.shoal.io/memory-usage": "400Mi"}},
                "spec": {"nodeName": "hollow-0",
                         "containers": [{"name": "app", "image": "busybox:1.35",
                             "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}
            }
        }
    }))
    .unwrap();
    api.create(&web).await.unwrap();
    let vpa: VerticalPodAutoscaler = serde_json::from_value(serde_json::json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "updatePolicy": {"updateMode": "Recreate"}}
    }))
    .unwrap();
    api.create(&vpa).await.unwrap();

    // The recommendation: the end of usage's bucket (buckets are 5–8 % wide there) plus 15 %.
    let (cpu_lo, cpu_hi) = (500 * 115 / 100, 500 * 115 * 110 / 10000 + 1);
    let (mem_lo, mem_hi) = (
        400 * MI * 115 / 100 * 1000,
        400 * MI * 115 * 110 / 10000 * 1000 + 1000,
    );
    let target = std::cell::Cell::new((0, 0));
    eventually("a recommendation from the hollow usage", T, || async {
        let Ok(vpa) = api.get::<VerticalPodAutoscaler>("default", "web").await else {
            return false;
        };
        let Some(rec) = vpa.recommendation_for("app") else {
            let pods = pods(&api).await;
            let phases: Vec<&str> = pods.iter().map(|p| p.status.phase.as_str()).collect();
            eprintln!("no recommendation yet: {:?}; pods {phases:?}", vpa.status);
            return false;
        };
        eprintln!("recommendation: {rec:?}");
        let cpu = rec.target.get("cpu").map(|q| q.milli_value()).unwrap_or(0);
        let memory = rec
            .target
            .get("memory")
            .map(|q| q.milli_value())
            .unwrap_or(0);
        target.set((cpu, memory));
        (cpu_lo..=cpu_hi).contains(&cpu) && (mem_lo..=mem_hi).contains(&memory)
    })
    .await;
    let (cpu, memory) = target.get();

    // Recreate: both pods replaced, never two at once, the new ones sized at admission.
    let most_going = std::cell::Cell::new(0);
    eventually("every pod sized from the recommendation", T, || async {
        let pods = pods(&api).await;
        let going = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .count();
        most_going.set(most_going.get().max(going));
        let live: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        live.len() == 2
            && live.iter().all(|p| {
                let (c, m) = (request(p, "cpu"), request(p, "memory"));
                c >= cpu * 9 / 10
                    && m >= memory * 9 / 10
                    && p.metadata.annotations.contains_key(UPDATES_ANNOTATION)
            })
    })
    .await;
    let most_going = most_going.get();
    assert!(
        most_going <= 1,
        "{most_going} pods were being replaced at once"
    );
    let events = api
        .list::<Event>(&ListOptions {
            namespace: "default".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .items;
    let evicted = events.iter().filter(|e| e.reason == "EvictedByVPA").count();
    assert!(evicted >= 2, "{evicted} EvictedByVPA events");

    // Initial: a pod added by scaling up gets the recommendation when it is created.
    eventually("the Deployment scaled to 3", T, || async {
        // The controllers write its status meanwhile: a conflict is retried.
        let mut scaled = api.get::<Deployment>("default", "web").await.unwrap();
        scaled.spec.replicas = Some(3);
        api.update(&scaled).await.is_ok()
    })
    .await;
    eventually("the third pod sized at admission", T, || async {
        let pods = pods(&api).await;
        let live: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        live.len() == 3 && live.iter().all(|p| request(p, "cpu") >= cpu * 9 / 10)
    })
    .await;

    let out = common::shoal_at(&cluster, &["get", "vpa"]).await;
    assert!(out.ok, "{}", out.stderr);
    let header = out.stdout.lines().next().unwrap_or_default();
    for column in ["NAME", "MODE", "CPU", "MEM", "PROVIDED", "AGE"] {
        assert!(header.contains(column), "{header}");
    }
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("web"))
        .unwrap_or_default()
        .to_string();
    assert!(row.contains("Recreate") && row.contains("True"), "{row}");
    assert!(row.contains('m'), "the CPU target in millicores: {row}");
}
