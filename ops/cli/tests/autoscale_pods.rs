//! The HPA on real pods: `shoal up` with a real node agent sampling every second.
//! - CPU: busybox pods with a CPU request and a load switch (a file that starts
//!   `yes > /dev/null`), flipped with `shoal exec`. An HPA at 50 % scales the Deployment up
//!   when one pod burns a core, and back down once the load is gone and the HPA's own
//!   (test-shortened) stabilization window has passed.
//! - Application metrics: busybox httpd serves a static Prometheus file; the node scrapes it
//!   (`prometheus.io/scrape`), `shoal top pods --metric` shows it and a `Pods` metric scales
//!   on it.

mod up_cluster;

use std::time::{Duration, Instant};

use up_cluster::Cluster;

/// `shoal up` with the autoscaler and a node sampling usage every second.
fn start(dir: &std::path::Path) -> Cluster {
    Cluster::start_with(
        dir,
        &[],
        &[
            "--actors",
            "api,controllers,scheduler,autoscaler,node",
            "--metrics-period",
            "1",
        ],
    )
}

fn spec_replicas(cluster: &Cluster, deployment: &str) -> Option<i64> {
    let (_, out, _) = cluster.run(&["get", "deploy", deployment, "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).ok()?;
    doc["spec"]["replicas"].as_i64()
}

/// A pod that idles until /tmp/load exists, then burns a core until it is removed.
const BURN: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: burn}
spec:
  replicas: 1
  selector: {matchLabels: {app: burn}}
  template:
    metadata: {labels: {app: burn}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: shoal/busybox:1.35
        command:
        - sh
        - -c
        - |
          while true; do
            if [ -f /tmp/load ]; then
              yes > /dev/null & p=$!
              while [ -f /tmp/load ]; do usleep 200000; done
              kill $p
            fi
            usleep 200000
          done
        resources: {requests: {cpu: 100m, memory: 8Mi}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: burn}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: burn}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 50}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 5
"#;

#[test]
fn cpu_load_scales_a_deployment_up_and_back_down_after_the_stabilization_window() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = start(dir.path());
    let manifest = dir.path().join("burn.yaml");
    std::fs::write(&manifest, BURN).unwrap();
    let (ok, _, err) = cluster.run(&["apply", "-f", manifest.to_str().unwrap()]);
    assert!(ok, "{err}");
    cluster.wait_for("1/1 ready", Duration::from_secs(60), |c| {
        let (_, out, _) = c.run(&["get", "deploy", "burn"]);
        out.lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(1) == Some("1/1"))
    });
    // Idle, the HPA sees the pod's real usage (a few millicores of 100m) and keeps 1.
    cluster.wait_for(
        "the HPA reading the idle pod",
        Duration::from_secs(30),
        |c| {
            let (_, out, _) = c.run(&["get", "hpa", "burn"]);
            out.lines().nth(1).is_some_and(|l| {
                l.contains("cpu: ") && l.contains("%/50%") && !l.contains("<unknown>")
            })
        },
    );
    assert_eq!(spec_replicas(&cluster, "burn"), Some(1));

    let (_, names, _) = cluster.run(&["get", "po", "-l", "app=burn", "-o", "name"]);
    let pod = names.lines().next().unwrap().trim_start_matches("pod/");
    let (ok, _, err) = cluster.run(&["exec", pod, "--", "touch", "/tmp/load"]);
    assert!(ok, "{err}");
    // One pod at hundreds of percent of its 100m request against 50 %: straight to the max.
    cluster.wait_for("burn at 3 replicas", Duration::from_secs(60), |c| {
        spec_replicas(c, "burn") == Some(3)
    });
    let (_, described, _) = cluster.run(&["describe", "hpa", "burn"]);
    assert!(
        described.contains(
            "New size: 3; reason: cpu resource utilization (percentage of request) above target"
        ),
        "{described}"
    );

    let (ok, _, err) = cluster.run(&["exec", pod, "--", "rm", "/tmp/load"]);
    assert!(ok, "{err}");
    let unloaded = Instant::now();
    cluster.wait_for("burn back at 1 replica", Duration::from_secs(90), |c| {
        spec_replicas(c, "burn") == Some(1)
    });
    // Not before the HPA's own 5 s scale-down window (its recommendations must all agree).
    assert!(
        unloaded.elapsed() >= Duration::from_secs(5),
        "scaled down after {:?}, inside the stabilization window",
        unloaded.elapsed()
    );
    let (_, described, _) = cluster.run(&["describe", "hpa", "burn"]);
    assert!(
        described.contains("New size: 1; reason: All metrics below target"),
        "{described}"
    );
    let (ok, _, err) = cluster.run(&["delete", "deploy", "burn"]);
    assert!(ok, "{err}");
    cluster.wait_for("every pod gone", Duration::from_secs(60), |c| {
        c.run(&["get", "po", "-o", "name"]).1.trim().is_empty()
    });
}

/// A pod whose /metrics is a file the test rewrites through `shoal exec`.
const EXPORTER: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: exporter}
spec:
  replicas: 1
  selector: {matchLabels: {app: exporter}}
  template:
    metadata:
      labels: {app: exporter}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: "8080"
        prometheus.io/path: /metrics
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: shoal/busybox:1.35
        command:
        - sh
        - -c
        - |
          mkdir -p /www
          printf '# TYPE queue_depth gauge\nqueue_depth{queue="jobs"} 5\n' > /www/metrics
          exec httpd -f -p 8080 -h /www
        ports: [{containerPort: 8080}]
        resources: {requests: {cpu: 10m, memory: 8Mi}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: exporter}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: exporter}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Pods
    pods:
      metric:
        name: queue_depth
        selector: {matchLabels: {queue: jobs}}
      target: {type: AverageValue, averageValue: '10'}
"#;

#[test]
fn a_scraped_prometheus_metric_shows_in_top_and_scales_a_deployment() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = start(dir.path());
    let manifest = dir.path().join("exporter.yaml");
    std::fs::write(&manifest, EXPORTER).unwrap();
    let (ok, _, err) = cluster.run(&["apply", "-f", manifest.to_str().unwrap()]);
    assert!(ok, "{err}");
    let (_, names, _) = cluster.run(&["get", "po", "-l", "app=exporter", "-o", "name"]);
    let pod = names
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("pod/")
        .to_string();
    cluster.wait_for("the scraped value in top", Duration::from_secs(60), |c| {
        let (_, out, _) = c.run(&["top", "pods", "--metric", "queue_depth"]);
        let last = |l: &str| l.split_whitespace().last().map(str::to_string);
        out.lines().next().and_then(last).as_deref() == Some("queue_depth")
            && out
                .lines()
                .any(|l| l.starts_with(pod.as_str()) && last(l).as_deref() == Some("5"))
    });
    // 5 of 10 per pod: under target, the HPA keeps 1 and reads the metric.
    cluster.wait_for(
        "the HPA reading queue_depth",
        Duration::from_secs(30),
        |c| {
            let (_, out, _) = c.run(&["get", "hpa", "exporter"]);
            out.contains(" 5/10 ")
        },
    );
    assert_eq!(spec_replicas(&cluster, "exporter"), Some(1));

    let rewrite = "printf 'queue_depth{queue=\"jobs\"} 30\\nqueue_depth{queue=\"other\"} 900\\n' > /www/metrics";
    let (ok, _, err) = cluster.run(&["exec", &pod, "--", "sh", "-c", rewrite]);
    assert!(ok, "{err}");
    // 30 against 10 per pod (the other queue's series is not selected): ceil(3.0) = 3.
    cluster.wait_for("exporter at 3 replicas", Duration::from_secs(60), |c| {
        spec_replicas(c, "exporter") == Some(3)
    });
    let (_, described, _) = cluster.run(&["describe", "hpa", "exporter"]);
    assert!(
        described.contains("New size: 3; reason: pods metric queue_depth above target"),
        "{described}"
    );
    let (ok, _, err) = cluster.run(&["delete", "deploy", "exporter"]);
    assert!(ok, "{err}");
    cluster.wait_for("every pod gone", Duration::from_secs(60), |c| {
        c.run(&["get", "po", "-o", "name"]).1.trim().is_empty()
    });
}
