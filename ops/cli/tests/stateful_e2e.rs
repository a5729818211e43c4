//! StatefulSets end to end on a one-machine cluster with real containers: a 3-replica set
//! behind a headless Service comes up in order, each pod answers by its own DNS name from
//! another pod, and a partitioned rolling update stops at the partition.

mod up_cluster;

use std::collections::BTreeMap;

use up_cluster::Cluster;

const APP: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 3
  serviceName: web
  selector: {matchLabels: {app: web}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 2}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: shoal/busybox:1.35
        command: ["sh", "-c", "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
"#;

/// Pod name → (created, Ready since, revision), from `shoal get po -o json`.
fn pods(cluster: &Cluster) -> BTreeMap<String, (String, String, String)> {
    let (_, out, _) = cluster.run(&["get", "po", "-l", "app=web", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            let ready = p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Ready" && c["status"] == "True")
                .and_then(|c| c["lastTransitionTime"].as_str())
                .unwrap_or("")
                .to_string();
            (
                p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                (
                    p["metadata"]["creationTimestamp"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    ready,
                    p["metadata"]["labels"]["controller-revision-hash"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                ),
            )
        })
        .collect()
}

fn time(s: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("{s:?}: {e}"))
        .with_timezone(&chrono::Utc)
}

#[test]
fn a_three_replica_statefulset_comes_up_in_order_resolves_by_name_and_rolls_to_its_partition() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), &[]);
    cluster.apply(dir.path(), "web.yaml", APP);
    cluster.wait("3/3 ready", |c| {
        c.run(&["get", "sts", "web", "--no-headers"])
            .1
            .split_whitespace()
            .nth(1)
            == Some("3/3")
    });

    // In order: each pod created only once the one before it was Ready.
    let up = pods(&cluster);
    assert_eq!(
        up.keys().cloned().collect::<Vec<_>>(),
        ["web-0", "web-1", "web-2"]
    );
    for i in 1..3 {
        let (created, _, _) = &up[&format!("web-{i}")];
        let (_, ready, _) = &up[&format!("web-{}", i - 1)];
        assert!(
            time(created) >= time(ready),
            "web-{i} created {created}, web-{} ready {ready}",
            i - 1
        );
    }

    // Stable network identity: web-1.web from another pod, served by web-1 itself.
    let mut answer = String::new();
    cluster.wait("web-1.web answers from web-0", |c| {
        let (ok, out, _) = c.run(&[
            "exec",
            "web-0",
            "--",
            "wget",
            "-q",
            "-O",
            "-",
            "http://web-1.web:8080/",
        ]);
        answer = out;
        ok
    });
    assert_eq!(answer.trim(), "web-1");
    let (ok, out, _) = cluster.run(&[
        "exec",
        "web-2",
        "--",
        "nslookup",
        "web-0.web.default.svc.cluster.local",
    ]);
    assert!(ok, "{out}");

    // A partitioned rolling update: only ordinals >= 2 move.
    let old = up["web-0"].2.clone();
    cluster.apply(
        dir.path(),
        "web.yaml",
        &APP.replace("hostname >", "echo v2 && hostname >"),
    );
    cluster.wait("web-2 at the new revision and Ready", |c| {
        let now = pods(c);
        now.get("web-2")
            .is_some_and(|(_, ready, rev)| *rev != old && !ready.is_empty())
    });
    let (_, status, _) = cluster.run(&["rollout", "status", "sts/web"]);
    assert!(
        status.contains("partitioned roll out complete: 1 new pods"),
        "{status}"
    );
    let now = pods(&cluster);
    assert_eq!(now["web-0"].2, old, "below the partition");
    assert_eq!(now["web-1"].2, old, "below the partition");
    let (_, history, _) = cluster.run(&["rollout", "history", "sts/web"]);
    assert!(
        history.contains("\n1 ") && history.contains("\n2 "),
        "{history}"
    );
}
