//! Two one-machine clusters on one host, as tests and people trying things out run them: both
//! nodes carry the host's name, and the second agent's start-up sweep of orphaned pods must
//! leave the first cluster's pods alone (it once deleted their cgroups, killing them).

mod up_cluster;

use up_cluster::Cluster;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: steady}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: shoal/busybox:1.35
    command: [sleep, "3600"]
"#;

fn restart_count(cluster: &Cluster) -> Option<i64> {
    let (_, out, _) = cluster.run(&["get", "po", "steady", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).ok()?;
    doc["status"]["containerStatuses"][0]["restartCount"].as_i64()
}

#[test]
fn a_second_cluster_on_the_same_host_leaves_the_first_ones_pods_running() {
    let first_dir = tempfile::tempdir().unwrap();
    let first = Cluster::start(first_dir.path(), &[]);
    first.apply(first_dir.path(), "pod.yaml", POD);
    first.wait("the pod running", |c| {
        c.run(&["get", "po", "steady", "--no-headers"])
            .1
            .contains("Running")
    });
    // A mark in the container's own filesystem: a restarted container starts without it.
    let (ok, _, err) = first.run(&["exec", "steady", "--", "touch", "/tmp/mark"]);
    assert!(ok, "{err}");

    // Returns once the second node is registered, that is after its agent's orphan sweep.
    let second_dir = tempfile::tempdir().unwrap();
    let second = Cluster::start(second_dir.path(), &[]);
    let (_, nodes, _) = second.run(&["get", "no", "-o", "name"]);
    assert!(nodes.contains("node/"), "{nodes}");

    let (ok, _, err) = first.run(&["exec", "steady", "--", "test", "-f", "/tmp/mark"]);
    assert!(
        ok,
        "the first cluster's container was stopped or replaced: {err}"
    );
    assert_eq!(restart_count(&first), Some(0));
}
