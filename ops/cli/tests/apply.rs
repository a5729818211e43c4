//! `shoal apply` (server-side, merging), `--force-conflicts`, `--prune -l`, and `shoal get`'s
//! kubectl flags, run as a person runs them: the `shoal` binary per command against a real
//! API actor on a real nats-server (no controllers, scheduler or node: pods are bound through
//! the API under the scheduler's field manager where a test needs a bound pod).

use std::path::PathBuf;
use std::time::Duration;

use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::{Deployment, Pod};
use shoal_api::local::{eventually, LocalCluster};

mod common;

use common::{shoal_at, Out};

const T: Duration = Duration::from_secs(30);

/// Runs `shoal ARGS` against the cluster.
async fn shoal(cluster: &LocalCluster, args: &[&str]) -> Out {
    shoal_at(cluster, args).await
}

async fn succeeds(cluster: &LocalCluster, args: &[&str]) -> String {
    let out = shoal(cluster, args).await;
    assert!(out.ok, "shoal {args:?} failed: {}", out.stderr);
    out.stdout
}

fn demo_dir() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../demo")
        .display()
        .to_string()
}

/// Binds a pod as the scheduler does (there is none here).
async fn bind(cluster: &LocalCluster, pod: &str, node: &str) {
    let scheduler = cluster
        .api()
        .with_field_manager(shoal_scheduler::FIELD_MANAGER);
    let mut bound: Pod = scheduler.get("default", pod).await.unwrap();
    bound.spec.node_name = node.into();
    scheduler.update(&bound).await.unwrap();
}

/// Applies [`POD`] with the CLI, named `name` and labelled `app: {app}`, and binds it to a
/// node no agent runs, so a delete leaves it Terminating until someone confirms for the node.
async fn apply_bound(cluster: &LocalCluster, name: &str, app: &str) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = POD
        .replace("name: solo", &format!("name: {name}"))
        .replace("app: solo", &format!("app: {app}"));
    let pod_yaml = write(&dir, "pod.yaml", &manifest);
    succeeds(cluster, &["apply", "-f", &pod_yaml]).await;
    bind(cluster, name, "node-1").await;
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[actix::test]
async fn label_and_annotate_then_apply_keeps_both() {
    let cluster = LocalCluster::start().await.unwrap();
    let demo = demo_dir();
    let out = succeeds(&cluster, &["apply", "-f", &demo]).await;
    assert!(out.contains("deployment/web created"), "{out}");
    succeeds(&cluster, &["label", "deploy", "web", "team=blue"]).await;
    succeeds(&cluster, &["annotate", "deploy", "web", "note=keep"]).await;

    let out = succeeds(&cluster, &["apply", "-f", &demo]).await;
    assert!(out.contains("deployment/web unchanged"), "{out}");
    assert!(out.contains("service/web unchanged"), "{out}");
    let web: Deployment = cluster.api().get("default", "web").await.unwrap();
    assert_eq!(
        web.metadata.labels.get("team").map(String::as_str),
        Some("blue")
    );
    assert_eq!(
        web.metadata.annotations.get("note").map(String::as_str),
        Some("keep")
    );
    let managers: Vec<&str> = web
        .metadata
        .managed_fields
        .iter()
        .map(|e| e.manager.as_str())
        .collect();
    assert_eq!(managers, ["shoal", "shoal-label", "shoal-annotate"]);
}

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: solo, labels: {app: solo}}
spec:
  containers:
  - {name: main, image: "shoal/busybox:1.35", command: ["sleep", "3600"]}
"#;

#[actix::test]
async fn applying_a_bare_pod_twice_is_unchanged_even_once_bound() {
    let cluster = LocalCluster::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pod_yaml = write(&dir, "pod.yaml", POD);
    let out = succeeds(&cluster, &["apply", "-f", &pod_yaml]).await;
    assert!(out.contains("pod/solo created"), "{out}");
    let out = succeeds(&cluster, &["apply", "-f", &pod_yaml]).await;
    assert!(out.contains("pod/solo unchanged"), "{out}");

    bind(&cluster, "solo", "node-1").await;

    let out = shoal(&cluster, &["apply", "-f", &pod_yaml]).await;
    assert!(out.ok, "{}", out.stderr);
    assert!(out.stdout.contains("pod/solo unchanged"), "{}", out.stdout);
    assert!(!out.stderr.contains("immutable"), "{}", out.stderr);
}

const SCALED: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: api, image: "shoal/busybox:1.35"}]
"#;

#[actix::test]
async fn a_field_another_command_owns_conflicts_until_forced() {
    let cluster = LocalCluster::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "api.yaml", SCALED);
    succeeds(&cluster, &["apply", "-f", &file]).await;
    succeeds(&cluster, &["scale", "deploy", "api", "--replicas", "5"]).await;

    let out = shoal(&cluster, &["apply", "-f", &file]).await;
    assert!(!out.ok);
    assert!(
        out.stderr
            .contains(r#"conflict with "shoal-scale": .spec.replicas"#),
        "{}",
        out.stderr
    );
    let api: Deployment = cluster.api().get("default", "api").await.unwrap();
    assert_eq!(api.spec.replicas, Some(5), "a conflict writes nothing");

    // Another field manager is just another owner.
    let out = shoal(&cluster, &["apply", "-f", &file, "--field-manager", "ci"]).await;
    assert!(out.stderr.contains("shoal-scale"), "{}", out.stderr);

    let out = succeeds(&cluster, &["apply", "-f", &file, "--force-conflicts"]).await;
    assert!(out.contains("deployment/api configured"), "{out}");
    let api: Deployment = cluster.api().get("default", "api").await.unwrap();
    assert_eq!(api.spec.replicas, Some(2));
}

fn labelled_pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: demo}}}}\nspec:\n  containers: [{{name: main, image: \"shoal/busybox:1.35\"}}]\n"
    )
}

#[actix::test]
async fn prune_deletes_only_what_this_manager_applied_and_the_manifests_dropped() {
    let cluster = LocalCluster::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = write(&dir, "a.yaml", &labelled_pod("a"));
    let b = write(&dir, "b.yaml", &labelled_pod("b"));
    succeeds(&cluster, &["apply", "-f", &a, "-f", &b]).await;
    // Same labels, but another manager's: prune leaves it alone.
    let other = write(&dir, "c.yaml", &labelled_pod("c"));
    succeeds(
        &cluster,
        &["apply", "-f", &other, "--field-manager", "someone"],
    )
    .await;

    let out = shoal(&cluster, &["apply", "-f", &a, "--prune"]).await;
    assert!(!out.ok, "--prune needs -l");

    let out = succeeds(&cluster, &["apply", "-f", &a, "--prune", "-l", "app=demo"]).await;
    assert!(out.contains("pod/a unchanged"), "{out}");
    assert!(out.contains("pod/b pruned"), "{out}");
    assert!(!out.contains("pod/c"), "{out}");
    let api = cluster.api();
    eventually("b is gone", T, || async {
        match api.get::<Pod>("default", "b").await {
            Err(e) => e.is_not_found(),
            Ok(p) => p.metadata.is_deleting(),
        }
    })
    .await;
    assert!(api.get::<Pod>("default", "a").await.is_ok());
    assert!(api.get::<Pod>("default", "c").await.is_ok());
}

#[actix::test]
async fn get_without_headers_and_ignoring_absent_names() {
    let cluster = LocalCluster::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pod_yaml = write(&dir, "pod.yaml", POD);
    succeeds(&cluster, &["apply", "-f", &pod_yaml]).await;
    let with = succeeds(&cluster, &["get", "po"]).await;
    assert!(with.starts_with("NAME"), "{with}");
    let without = succeeds(&cluster, &["get", "po", "--no-headers"]).await;
    assert!(without.starts_with("solo "), "{without}");
    assert_eq!(without.lines().count(), 1, "{without}");

    let kinded = succeeds(&cluster, &["get", "po", "--show-kind", "--no-headers"]).await;
    assert!(kinded.starts_with("pod/solo "), "{kinded}");

    let yaml = succeeds(&cluster, &["get", "po", "solo", "-o", "yaml"]).await;
    assert!(!yaml.contains("managedFields"), "{yaml}");
    let yaml = succeeds(
        &cluster,
        &["get", "po", "solo", "-o", "yaml", "--show-managed-fields"],
    )
    .await;
    assert!(
        yaml.contains("managedFields") && yaml.contains("manager: shoal"),
        "{yaml}"
    );

    let out = shoal(&cluster, &["get", "po", "missing"]).await;
    assert!(!out.ok);
    let out = succeeds(&cluster, &["get", "po", "missing", "--ignore-not-found"]).await;
    assert!(out.is_empty(), "{out}");
}

/// `shoal` prints the API's warnings as kubectl does, and a pod security refusal in
/// Kubernetes' words.
#[actix::test]
async fn pod_security_warnings_and_refusals_reach_the_terminal() {
    let cluster = LocalCluster::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let namespace = write(
        &dir,
        "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: lenient\n  labels:\n    \
         pod-security.kubernetes.io/warn: restricted\n",
    );
    succeeds(&cluster, &["apply", "-f", &namespace]).await;
    let pod = |name: &str, ns: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n{extra}  \
             containers:\n  - name: main\n    image: busybox:1.36\n"
        )
    };
    let plain = write(&dir, "plain.yaml", &pod("plain", "lenient", ""));
    let out = shoal(&cluster, &["apply", "-f", &plain]).await;
    assert!(out.ok, "{}", out.stderr);
    assert!(out.stdout.contains("pod/plain created"), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("Warning: would violate PodSecurity \"restricted:latest\": ")
            && out.stderr.contains("runAsNonRoot != true"),
        "{}",
        out.stderr
    );

    let host = write(
        &dir,
        "host.yaml",
        &pod("host", "default", "  hostNetwork: true\n"),
    );
    let out = shoal(&cluster, &["apply", "-f", &host]).await;
    assert!(!out.ok, "a hostNetwork pod is refused under baseline");
    assert!(
        out.stderr.contains(
            "pods \"host\" is forbidden: violates PodSecurity \"baseline:latest\": \
             host namespaces (hostNetwork=true)"
        ),
        "{}",
        out.stderr
    );
    assert!(
        cluster.api().get::<Pod>("default", "host").await.is_err(),
        "nothing written"
    );
}

/// A bound pod's delete waits for its node; `--force` (kubectl's) removes it at once, and
/// says that its containers may outlive it.
#[actix::test]
async fn delete_force_removes_a_bound_pod_without_waiting_for_its_node() {
    let cluster = LocalCluster::start().await.unwrap();
    apply_bound(&cluster, "solo", "solo").await;

    succeeds(&cluster, &["delete", "po", "solo"]).await;
    let terminating: Pod = cluster.api().get("default", "solo").await.unwrap();
    assert!(
        terminating.metadata.deletion_timestamp.is_some(),
        "a bound pod waits for its node"
    );

    let out = shoal(&cluster, &["delete", "po", "solo", "--force"]).await;
    assert!(out.ok, "{}", out.stderr);
    assert!(out.stderr.contains("warning: --force"), "{}", out.stderr);
    let gone = cluster.api().get::<Pod>("default", "solo").await;
    assert!(
        matches!(&gone, Err(e) if e.is_not_found()),
        "removed at once: {gone:?}"
    );
}

/// `--wait` (kubectl's default) returns once the object is gone, not when the API accepted
/// the delete; with `--timeout` it gives up, says what holds the object back and fails.
#[actix::test]
async fn delete_wait_returns_once_the_pod_is_gone_and_says_what_holds_it() {
    let cluster = LocalCluster::start().await.unwrap();
    apply_bound(&cluster, "solo", "solo").await;

    // No agent runs node-1, so nobody confirms the pod stopped: it stays Terminating.
    let out = shoal(
        &cluster,
        &["delete", "po", "solo", "--wait", "--timeout", "2s"],
    )
    .await;
    assert!(!out.ok, "{}", out.stdout);
    assert!(
        out.stderr.contains("timed out after 2 s waiting for the deletion of pod/solo: the node is still stopping the containers (grace period 30 s; --force removes at once)"),
        "{}",
        out.stderr
    );
    let terminating: Pod = cluster.api().get("default", "solo").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    succeeds(&cluster, &["delete", "po", "solo", "--force"]).await;

    // A pod the node confirms once the CLI's delete has landed: the CLI returns after that.
    apply_bound(&cluster, "solo", "solo").await;
    let api = cluster.api();
    let node = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let pod: Pod = api.get("default", "solo").await.unwrap();
            if pod.metadata.deletion_timestamp.is_some() {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the CLI never deleted the pod"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        api.delete::<Pod>(&DeleteOptions {
            name: "solo".into(),
            grace_period_seconds: Some(0),
            ..Default::default()
        })
        .await
        .unwrap();
        tokio::time::Instant::now()
    };
    let cli = async {
        let out = shoal(
            &cluster,
            &["delete", "po", "solo", "--wait", "--timeout", "60s"],
        )
        .await;
        (out, tokio::time::Instant::now())
    };
    let (confirmed_at, (out, returned_at)) = tokio::join!(node, cli);
    assert!(out.ok, "{}", out.stderr);
    assert!(
        returned_at >= confirmed_at,
        "the CLI returned before the node confirmed the deletion"
    );
}

/// `--wait` over a selector reads the pods it waits for with one list a poll, and pods held
/// back for one reason share one line.
#[actix::test]
async fn delete_wait_over_a_selector_names_the_pods_held_back_together() {
    let cluster = LocalCluster::start().await.unwrap();
    for name in ["pair-a", "pair-b"] {
        apply_bound(&cluster, name, "pair").await;
    }
    let out = shoal(
        &cluster,
        &[
            "delete",
            "po",
            "-l",
            "app=pair",
            "--wait",
            "--timeout",
            "2s",
        ],
    )
    .await;
    assert!(!out.ok, "{}", out.stdout);
    assert!(
        out.stderr.contains("waiting for the deletion of pod/pair-a, pod/pair-b: the node is still stopping the containers (grace period 30 s; --force removes at once)"),
        "{}",
        out.stderr
    );
    succeeds(
        &cluster,
        &["delete", "po", "-l", "app=pair", "--force", "--wait"],
    )
    .await;
    let left = cluster
        .api()
        .list::<Pod>(&bus_schemas::api::ListOptions {
            namespace: "default".into(),
            label_selector: "app=pair".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(left.items.is_empty(), "{:?}", left.items.len());
}
