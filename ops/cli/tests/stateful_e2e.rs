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

const STORED: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: store}
spec:
  clusterIP: None
  selector: {app: store}
  ports: [{name: http, port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: store}
spec:
  replicas: 3
  serviceName: store
  selector: {matchLabels: {app: store}}
  template:
    metadata: {labels: {app: store}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: shoal/busybox:1.35
        command: ["sh", "-c", "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 64Mi}}
"#;

fn uid_of(cluster: &Cluster, kind: &str, name: &str) -> String {
    let (_, out, _) = cluster.run(&["get", kind, name, "-o", "json"]);
    let obj: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    obj["metadata"]["uid"].as_str().unwrap_or("").to_string()
}

#[test]
fn a_statefulset_keeps_each_pods_volume_across_its_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), &[]);
    let (ok, classes, _) = cluster.run(&["get", "sc", "--no-headers"]);
    assert!(ok);
    assert!(
        classes.starts_with("local-path (default)")
            && classes.contains("shoal.io/local-path")
            && classes.contains("WaitForFirstConsumer"),
        "{classes}"
    );
    cluster.apply(dir.path(), "store.yaml", STORED);
    cluster.wait("3/3 ready", |c| {
        c.run(&["get", "sts", "store", "--no-headers"])
            .1
            .split_whitespace()
            .nth(1)
            == Some("3/3")
    });
    let (_, out, _) = cluster.run(&["get", "po", "-l", "app=store", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut created: Vec<(String, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                p["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    created.sort();
    let order: Vec<&str> = created.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(order, ["store-0", "store-1", "store-2"], "created in order");

    // Three claims, each Bound to a volume of its own.
    let (_, claims, _) = cluster.run(&["get", "pvc", "--no-headers"]);
    let rows: Vec<Vec<&str>> = claims
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{claims}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row[0], format!("data-store-{i}"), "{claims}");
        assert_eq!(row[1], "Bound", "{claims}");
        assert_eq!(&row[3..6], ["64Mi", "RWO", "local-path"], "{claims}");
    }
    let (_, volumes, _) = cluster.run(&["get", "pv", "--no-headers"]);
    assert_eq!(volumes.lines().count(), 3, "{volumes}");
    assert!(volumes.contains("default/data-store-1"), "{volumes}");

    // store-1 writes; the pod is deleted; its successor reads the same data.
    let (ok, _, err) = cluster.run(&[
        "exec",
        "store-1",
        "--",
        "sh",
        "-c",
        "echo written-by-store-1 > /data/note",
    ]);
    assert!(ok, "{err}");
    let first = uid_of(&cluster, "po", "store-1");
    let (ok, _, err) = cluster.run(&["delete", "po", "store-1"]);
    assert!(ok, "{err}");
    cluster.wait("a new store-1, Ready", |c| {
        let uid = uid_of(c, "po", "store-1");
        !uid.is_empty()
            && uid != first
            && c.run(&["get", "sts", "store", "--no-headers"])
                .1
                .split_whitespace()
                .nth(1)
                == Some("3/3")
    });
    let (ok, note, err) = cluster.run(&["exec", "store-1", "--", "cat", "/data/note"]);
    assert!(ok, "{err}");
    assert_eq!(note.trim(), "written-by-store-1");

    // The set goes, its claims stay (Retain); a claim deleted with the Delete policy takes
    // its directory with it.
    let (_, out, _) = cluster.run(&["get", "pvc", "data-store-2", "-o", "json"]);
    let claim: serde_json::Value = serde_json::from_str(&out).unwrap();
    let volume = claim["spec"]["volumeName"].as_str().unwrap().to_string();
    let volume_dir = dir.path().join("node/volumes").join(&volume);
    assert!(volume_dir.is_dir(), "{}", volume_dir.display());
    let (ok, _, err) = cluster.run(&["delete", "sts", "store"]);
    assert!(ok, "{err}");
    cluster.wait("the set's pods gone", |c| {
        c.run(&["get", "po", "-l", "app=store", "-o", "name"])
            .1
            .trim()
            .is_empty()
    });
    assert_eq!(
        cluster
            .run(&["get", "pvc", "--no-headers"])
            .1
            .lines()
            .count(),
        3
    );
    let (ok, _, err) = cluster.run(&["delete", "pvc", "data-store-2"]);
    assert!(ok, "{err}");
    cluster.wait("the volume and its directory removed", |c| {
        !volume_dir.exists() && !c.run(&["get", "pv", "--no-headers"]).1.contains(&volume)
    });
}
