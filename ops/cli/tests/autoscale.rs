//! `shoal autoscale`, `shoal get hpa` and `shoal describe hpa` end to end: a real cluster
//! (nats-server + API), the controllers and the autoscaler in this process, the `shoal`
//! binary per command.
//!
//! There is NO node agent here: the test stands in for one by marking the pods running and
//! ready through the API and publishing their usage on the metrics subject, exactly as an
//! agent would, so the autoscaler acts on real bus traffic.

use std::time::Duration;

use bus_schemas::api::{ListOptions, PodMetrics};
use bus_schemas::kinds::{Deployment, Pod};
use bus_schemas::meta::Condition;
use bus_schemas::roles::Role;
use bus_schemas::{codec, subjects};
use shoal_api::local::{eventually, LocalCluster};
use shoal_bus::shutdown;

mod common;

use common::shoal_at;

const T: Duration = Duration::from_secs(60);

async fn shoal(cluster: &LocalCluster, args: &[&str]) -> (bool, String) {
    let out = shoal_at(cluster, args).await;
    (out.ok, out.stdout)
}

/// Pods of `app=web` marked Running and Ready (long since), as their node would report.
async fn mark_running(api: &shoal_bus::ApiClient) -> Vec<Pod> {
    let pods = api
        .list::<Pod>(&ListOptions {
            namespace: "default".into(),
            label_selector: "app=web".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .items;
    let long_ago = chrono::Utc::now() - chrono::Duration::minutes(10);
    for pod in &pods {
        if pod.status.phase == "Running" {
            continue;
        }
        let mut running = pod.clone();
        running.status.phase = "Running".into();
        running.status.start_time = Some(long_ago);
        running.status.conditions = vec![Condition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: Some(long_ago),
            ..Condition::default()
        }];
        let _ = api.update_status(&running).await;
    }
    pods
}

#[actix::test]
async fn autoscale_get_and_describe_hpa() {
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
    let (_autoscaler, sd) = shutdown::channel();
    let config = shoal_autoscaler::AutoscalerConfig {
        sync_period: Duration::from_millis(500),
        ..Default::default()
    };
    let nats = cluster
        .connect_as(&Role::Autoscaler, "test-autoscaler")
        .await
        .unwrap();
    actix::spawn(async move {
        let _ = shoal_autoscaler::run(config, nats, sd.wait()).await;
    });

    let web: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.35",
                                          "resources": {"requests": {"cpu": "100m"}}}]}
            }
        }
    }))
    .unwrap();
    api.create(&web).await.unwrap();

    let (ok, out) = shoal(
        &cluster,
        &[
            "autoscale",
            "deploy/web",
            "--min",
            "2",
            "--max",
            "5",
            "--cpu-percent",
            "60",
        ],
    )
    .await;
    assert!(ok, "{out}");
    assert!(
        out.contains("horizontalpodautoscaler.autoscaling/web autoscaled"),
        "{out}"
    );
    let (ok, _) = shoal(&cluster, &["autoscale", "pod/web", "--max", "3"]).await;
    assert!(!ok, "a pod has no scale subresource");

    // Below its minimum: straight to 2.
    eventually("web at 2 replicas", T, || async {
        api.get::<Deployment>("default", "web")
            .await
            .unwrap()
            .spec
            .replicas
            == Some(2)
    })
    .await;
    // A fixed load of 146m over the pods: two at 73m of 100m against 60% → ceil(2 × 73/60)
    // = 3; then three at 48% → a scale-down the 5-minute stabilization holds back.
    // The samples come from the node's own connection: only a node publishes its metrics.
    let node = cluster
        .connect_as(&Role::Node("stand-in".into()), "test-stand-in")
        .await
        .unwrap();
    let load = || async {
        let pods = mark_running(&api).await;
        for pod in &pods {
            let sample = PodMetrics {
                namespace: "default".into(),
                pod: pod.metadata.name.clone(),
                node: "stand-in".into(),
                timestamp: chrono::Utc::now(),
                cpu_millicores: 146 / pods.len().max(1) as u64,
                ..Default::default()
            };
            let subject = subjects::metrics("stand-in", "default", &pod.metadata.name);
            let body = codec::to_msgpack(&sample).unwrap();
            node.publish(subject, body.into()).await.unwrap();
        }
    };
    eventually("web at 3 replicas on CPU", T, || async {
        load().await;
        api.get::<Deployment>("default", "web")
            .await
            .unwrap()
            .spec
            .replicas
            == Some(3)
    })
    .await;

    eventually("get hpa shows the targets", T, || async {
        load().await;
        let (ok, out) = shoal(&cluster, &["get", "hpa"]).await;
        ok && out.contains("cpu: 48%/60%")
    })
    .await;
    let (_, out) = shoal(&cluster, &["get", "hpa"]).await;
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ]
    );
    let row = out.lines().nth(1).unwrap();
    assert!(row.starts_with("web"), "{row}");
    assert!(row.contains("Deployment/web"), "{row}");
    let cells: Vec<&str> = row.split_whitespace().collect();
    let after_targets = cells.iter().position(|c| *c == "48%/60%").expect("TARGETS") + 1;
    assert_eq!(
        &cells[after_targets..after_targets + 3],
        ["2", "5", "3"],
        "{row}"
    );

    eventually("describe hpa shows metrics, conditions and events", T, || async {
        load().await;
        let (ok, out) = shoal(&cluster, &["describe", "hpa", "web"]).await;
        ok && out.contains("resource cpu on pods  (as a percentage of request):  48% / 60%")
            && out.contains("AbleToScale")
            && out.contains("ScalingActive")
            && out.contains("New size: 2; reason: Current number of replicas below Spec.MinReplicas")
            && out.contains(
                "New size: 3; reason: cpu resource utilization (percentage of request) above target",
            )
    })
    .await;
}
