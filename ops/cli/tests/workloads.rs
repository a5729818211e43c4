//! `shoal rollout|scale|cordon|uncordon|drain` end to end: a real cluster (nats-server + API
//! actor) and the controllers run in this process, the `shoal` binary is run per command.
//!
//! There is NO node agent and NO scheduler here. Where pods must be bound, running, ready or
//! confirmed stopped, a [`NodeStandIn`] writes that through the API in their place, only to
//! drive the controllers the commands talk to.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shoal_api::local::eventually;
use shoal_bus::tied::TiedToThisThread;

use bus_schemas::api::{DeleteOptions, ListOptions};
use bus_schemas::kinds::pod::{ContainerState, ContainerStateRunning, ContainerStatus};
use bus_schemas::kinds::{DaemonSet, Deployment, Node, Pod, ReplicaSet};
use bus_schemas::meta::Condition;
use bus_schemas::roles::Role;
use bus_schemas::Resource;
use shoal_api::local::LocalCluster;
use shoal_bus::shutdown::{self, Trigger};
use shoal_bus::ApiClient;
use shoal_controllers::{ControllersConfig, Tunables};

mod common;

use common::{shoal_at, Out, SHOAL};

/// Bound on every wait; generous for a loaded 2-core machine.
const T: Duration = Duration::from_secs(60);

struct Env {
    cluster: LocalCluster,
    api: ApiClient,
    _controllers: Trigger,
}

impl Env {
    async fn start() -> Env {
        let cluster = LocalCluster::start().await.expect("cluster starts");
        let (trigger, shutdown) = shutdown::channel();
        let config = ControllersConfig {
            informers: Some(cluster.informers.clone()),
            tunables: Tunables {
                // No agent renews node leases here: without this the node lifecycle would
                // mark our stand-in node unreachable and evict its pods behind drain's back.
                node_monitor_grace: Duration::from_secs(3600),
                ..Default::default()
            },
            ..Default::default()
        };
        let nats = cluster
            .connect_as(&Role::Controllers, "test-controllers")
            .await
            .expect("the controllers connect");
        actix::spawn(async move {
            if let Err(e) = shoal_controllers::run(config, nats, shutdown.wait()).await {
                eprintln!("controllers failed: {e}");
            }
        });
        let api = cluster.api();
        Env {
            cluster,
            api,
            _controllers: trigger,
        }
    }

    fn url(&self) -> String {
        self.cluster.url()
    }
}

/// Runs `shoal ARGS` and asserts it failed with `needle` in its stderr.
async fn fails_with(env: &Env, args: &[&str], needle: &str) -> Out {
    let out = shoal(env, args).await;
    assert!(!out.ok && out.stderr.contains(needle), "{}", out.stderr);
    out
}

/// Runs `shoal ARGS` and asserts it succeeded with `needle` in its stdout.
async fn succeeds_with(env: &Env, args: &[&str], needle: &str) -> Out {
    let out = shoal(env, args).await;
    assert!(out.ok && out.stdout.contains(needle), "{}", out.stdout);
    out
}

/// Runs `shoal ARGS` against the test's cluster.
async fn shoal(env: &Env, args: &[&str]) -> Out {
    shoal_at(&env.cluster, args).await
}

fn from_json<K: Resource>(v: serde_json::Value) -> K {
    serde_json::from_value(v).expect("fixture")
}

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]}
            }
        }
    }))
}

/// Changes a Deployment through the API (CAS, retried on Conflict), as `kubectl edit` would.
async fn edit(api: &ApiClient, name: &str, change: impl Fn(&mut Deployment)) {
    loop {
        let mut d = api.get::<Deployment>("default", name).await.unwrap();
        change(&mut d);
        match api.update(&d).await {
            Ok(_) => return,
            Err(e) if e.is_conflict() => continue,
            Err(e) => panic!("edit deployment {name}: {e}"),
        }
    }
}

fn image_of(template_spec: &bus_schemas::kinds::PodSpec) -> &str {
    template_spec
        .containers
        .first()
        .map(|c| c.image.as_str())
        .unwrap_or("")
}

async fn owned_replicasets(api: &ApiClient, name: &str) -> Vec<ReplicaSet> {
    let d = api.get::<Deployment>("default", name).await.unwrap();
    let rss = api
        .list::<ReplicaSet>(&ListOptions {
            namespace: "default".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    rss.items
        .into_iter()
        .filter(|rs| {
            rs.metadata
                .controller_ref()
                .is_some_and(|r| r.uid == d.metadata.uid)
        })
        .collect()
}

async fn live_pods(api: &ApiClient, app: &str) -> Vec<Pod> {
    let options = ListOptions {
        namespace: "default".into(),
        label_selector: format!("app={app}"),
        ..Default::default()
    };
    api.list::<Pod>(&options)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| !p.metadata.is_deleting())
        .collect()
}

/// Stands in for the node agent of `node` (and for the scheduler's binding): every pod
/// `wanted` selects is bound to `node` unless that Node is cordoned (as the scheduler
/// respects spec.unschedulable), then reported Running and Ready; a graceful deletion of a
/// pod bound to `node` is confirmed (deleted again with grace 0), as the agent does once the
/// containers stopped. It acts only while enabled, so a test can hold a rollout mid-way.
/// The Node object must exist, as an agent registers it: pods bound to a node that does not
/// exist are garbage collected.
struct NodeStandIn {
    enabled: Arc<AtomicBool>,
    handle: tokio::task::JoinHandle<()>,
}

impl NodeStandIn {
    fn start(api: ApiClient, node: &str, wanted: impl Fn(&Pod) -> bool + 'static) -> NodeStandIn {
        let enabled = Arc::new(AtomicBool::new(true));
        let on = enabled.clone();
        let node = node.to_string();
        let handle = actix::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if !on.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(pods) = api.list::<Pod>(&ListOptions::default()).await else {
                    continue;
                };
                let cordoned = api
                    .get::<Node>("", &node)
                    .await
                    .is_ok_and(|n| n.spec.unschedulable);
                for pod in pods.items.iter().filter(|p| wanted(p)) {
                    let result = if pod.metadata.is_deleting() {
                        if pod.spec.node_name != node {
                            continue;
                        }
                        let options = DeleteOptions {
                            namespace: pod.metadata.namespace.clone(),
                            name: pod.metadata.name.clone(),
                            grace_period_seconds: Some(0),
                            ..Default::default()
                        };
                        api.delete::<Pod>(&options).await.map(drop)
                    } else if pod.is_terminal() || (pod.spec.node_name.is_empty() && cordoned) {
                        continue;
                    } else if pod.spec.node_name.is_empty() {
                        let mut p = pod.clone();
                        p.metadata.resource_version.clear();
                        p.spec.node_name = node.clone();
                        api.update(&p).await.map(drop)
                    } else if pod.spec.node_name == node && !pod.is_ready() {
                        api.update_status(&running_and_ready(pod)).await.map(drop)
                    } else {
                        continue;
                    };
                    match result {
                        Ok(()) => {}
                        Err(e) if e.is_not_found() || e.is_conflict() => {}
                        Err(e) => eprintln!("node stand-in: pod {}: {e}", pod.metadata.name),
                    }
                }
            }
        });
        NodeStandIn { enabled, handle }
    }

    fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::SeqCst);
    }
}

impl Drop for NodeStandIn {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

fn running_and_ready(pod: &Pod) -> Pod {
    let now = chrono::Utc::now();
    let mut p = pod.clone();
    p.metadata.resource_version.clear();
    p.status.phase = "Running".into();
    p.status.conditions.retain(|c| c.type_ != "Ready");
    p.status.conditions.push(Condition {
        type_: "Ready".into(),
        status: "True".into(),
        last_transition_time: Some(now),
        ..Default::default()
    });
    p.status.container_statuses = p
        .spec
        .containers
        .iter()
        .map(|c| ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone(),
            ready: true,
            started: Some(true),
            state: ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(now),
                }),
                ..Default::default()
            },
            ..Default::default()
        })
        .collect();
    p
}

fn has_label(pod: &Pod, apps: &[&str]) -> bool {
    pod.metadata
        .labels
        .get("app")
        .is_some_and(|a| apps.contains(&a.as_str()))
}

/// Runs `shoal rollout status` while the stand-in is held, and lets the rollout continue only
/// once the command has reported it waiting: so the progress output is really exercised.
async fn status_across_a_held_rollout(env: &Env, standin: &NodeStandIn, name: &str) -> Out {
    let target = format!("deploy/{name}");
    let mut child = Command::new(SHOAL)
        .args(["rollout", "status", &target, "--timeout", "90s"])
        .env("SHOAL_NATS", env.url())
        .env("SHOAL_CREDS", common::admin_creds(&env.cluster))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .tied_to_this_thread()
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::task::spawn_blocking(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    while !lines
        .iter()
        .any(|l: &String| l.contains("rollout to finish"))
    {
        match tokio::time::timeout(T, rx.recv()).await {
            Ok(Some(line)) => lines.push(line),
            other => {
                panic!("rollout status never reported progress ({other:?}); printed {lines:?}")
            }
        }
    }
    standin.set_enabled(true);
    while let Some(line) = tokio::time::timeout(T, rx.recv())
        .await
        .expect("rollout status finishes")
    {
        lines.push(line);
    }
    reader.await.unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let out = Out {
        ok: out.status.success(),
        stdout: lines.join("\n"),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    eprintln!(
        "$ shoal rollout status {target}\n{}\n{}",
        out.stdout, out.stderr
    );
    out
}

async fn create_node(api: &ApiClient, name: &str) {
    let node: Node = from_json(serde_json::json!({"metadata": {"name": name}}));
    api.create(&node).await.unwrap();
}

async fn rolled_out_to(env: &Env, name: &str, image: &str) {
    let out = shoal(
        env,
        &[
            "rollout",
            "status",
            &format!("deploy/{name}"),
            "--timeout",
            "90s",
        ],
    )
    .await;
    if !out.ok {
        for p in live_pods(&env.api, name).await {
            eprintln!(
                "pod {} node={:?} phase={} ready={} owners={:?}",
                p.metadata.name,
                p.spec.node_name,
                p.status.phase,
                p.is_ready(),
                p.metadata.owner_references
            );
        }
        for rs in owned_replicasets(&env.api, name).await {
            eprintln!(
                "rs {} spec={:?} status={:?}",
                rs.metadata.name, rs.spec.replicas, rs.status
            );
        }
    }
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(
        out.stdout.lines().last(),
        Some(format!("deployment \"{name}\" successfully rolled out").as_str())
    );
    let pods = live_pods(&env.api, name).await;
    assert!(
        pods.iter().all(|p| image_of(&p.spec) == image),
        "every pod runs {image}"
    );
}

#[actix::test]
async fn scale_status_history_and_undo() {
    let env = Env::start().await;
    create_node(&env.api, "sim-1").await;
    let standin = NodeStandIn::start(env.api.clone(), "sim-1", |p| has_label(p, &["web"]));
    env.api
        .create(&deployment("web", 2, "shoal/web:v1"))
        .await
        .unwrap();

    // scale: both target forms, the precondition, and kinds that cannot scale.
    let out = shoal(&env, &["scale", "deploy/web", "--replicas", "3"]).await;
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "deployment.apps/web scaled");
    assert_eq!(
        env.api
            .get::<Deployment>("default", "web")
            .await
            .unwrap()
            .spec
            .replicas,
        Some(3)
    );
    fails_with(
        &env,
        &[
            "scale",
            "deployment",
            "web",
            "--replicas",
            "5",
            "--current-replicas",
            "2",
        ],
        "has 3 replicas, not the 2",
    )
    .await;
    assert_eq!(
        env.api
            .get::<Deployment>("default", "web")
            .await
            .unwrap()
            .spec
            .replicas,
        Some(3)
    );
    fails_with(
        &env,
        &["scale", "svc/web", "--replicas", "1"],
        "cannot scale a Service",
    )
    .await;
    rolled_out_to(&env, "web", "shoal/web:v1").await;
    assert_eq!(live_pods(&env.api, "web").await.len(), 3);

    // A new image, held mid-way: status reports progress, times out, then succeeds.
    standin.set_enabled(false);
    edit(&env.api, "web", |d| {
        d.spec.template.spec.containers[0].image = "shoal/web:v2".into();
        d.metadata
            .annotations
            .insert("kubernetes.io/change-cause".into(), "ship v2".into());
    })
    .await;
    fails_with(
        &env,
        &["rollout", "status", "deploy/web", "--timeout", "1s"],
        "timed out after",
    )
    .await;
    let out = shoal(&env, &["rollout", "status", "deploy/web", "-w=false"]).await;
    assert!(
        out.ok && out.stdout.starts_with("Waiting for deployment"),
        "{}",
        out.stdout
    );
    let out = status_across_a_held_rollout(&env, &standin, "web").await;
    assert!(out.ok, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("Waiting for deployment \"web\" rollout to finish: "),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .ends_with("deployment \"web\" successfully rolled out"),
        "{}",
        out.stdout
    );
    rolled_out_to(&env, "web", "shoal/web:v2").await;

    // history: two revisions, the current one with the Deployment's change cause.
    let out = shoal(&env, &["rollout", "history", "deploy/web"]).await;
    assert!(out.ok, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().map(str::trim_end).collect();
    assert_eq!(
        lines,
        [
            "deployment.apps/web",
            "REVISION  CHANGE-CAUSE",
            "1         <none>",
            "2         ship v2"
        ]
    );
    let out = shoal(
        &env,
        &["rollout", "history", "deploy/web", "--revision", "1"],
    )
    .await;
    assert!(out.ok, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("deployment.apps/web with revision #1\n"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("image: shoal/web:v1"), "{}", out.stdout);
    fails_with(
        &env,
        &["rollout", "history", "deploy/web", "--revision", "9"],
        "available revisions are 1, 2",
    )
    .await;

    // undo: back to the first template, which becomes revision 3.
    let out = shoal(&env, &["rollout", "undo", "deploy/web"]).await;
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "deployment.apps/web rolled back");
    let d = env.api.get::<Deployment>("default", "web").await.unwrap();
    assert_eq!(image_of(&d.spec.template.spec), "shoal/web:v1");
    assert!(
        !d.metadata
            .annotations
            .contains_key("kubernetes.io/change-cause"),
        "revision 1 had no change cause"
    );
    rolled_out_to(&env, "web", "shoal/web:v1").await;
    assert_eq!(
        owned_replicasets(&env.api, "web").await.len(),
        2,
        "undo reuses the old ReplicaSet"
    );
    let out = shoal(&env, &["rollout", "history", "deploy/web"]).await;
    let revisions: Vec<&str> = out
        .stdout
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(revisions, ["2", "3"], "{}", out.stdout);
    succeeds_with(
        &env,
        &["rollout", "undo", "deploy/web", "--to-revision", "3"],
        "skipped rollback",
    )
    .await;
    fails_with(
        &env,
        &["rollout", "undo", "deploy/web", "--to-revision", "7"],
        "unable to find revision 7",
    )
    .await;
    fails_with(&env, &["rollout", "undo", "deploy/nosuch"], "not found").await;
}

#[actix::test]
async fn pause_resume_restart_and_deadline() {
    let env = Env::start().await;
    create_node(&env.api, "sim-1").await;
    let _standin = NodeStandIn::start(env.api.clone(), "sim-1", |p| has_label(p, &["api"]));
    env.api
        .create(&deployment("api", 2, "shoal/api:v1"))
        .await
        .unwrap();
    rolled_out_to(&env, "api", "shoal/api:v1").await;

    // pause: a template change makes no new ReplicaSet.
    let out = shoal(&env, &["rollout", "pause", "deploy/api"]).await;
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "deployment.apps/api paused");
    assert!(
        env.api
            .get::<Deployment>("default", "api")
            .await
            .unwrap()
            .spec
            .paused
    );
    let out = shoal(&env, &["rollout", "pause", "deploy/api"]).await;
    assert_eq!(out.stdout.trim(), "deployment.apps/api already paused");
    edit(&env.api, "api", |d| {
        d.spec.template.spec.containers[0].image = "shoal/api:v2".into()
    })
    .await;
    eventually("the controller to observe the paused change", T, || async {
        let d = env.api.get::<Deployment>("default", "api").await.unwrap();
        d.status.observed_generation >= d.metadata.generation
    })
    .await;
    let rss = owned_replicasets(&env.api, "api").await;
    assert_eq!(rss.len(), 1, "paused: no new ReplicaSet");
    assert_eq!(image_of(&rss[0].spec.template.spec), "shoal/api:v1");
    fails_with(
        &env,
        &["rollout", "status", "deploy/api", "--timeout", "30s"],
        "is paused",
    )
    .await;
    fails_with(
        &env,
        &["rollout", "restart", "deploy/api"],
        "resume it first",
    )
    .await;
    fails_with(&env, &["rollout", "undo", "deploy/api"], "resume it first").await;

    // resume: the held change rolls out.
    let out = shoal(&env, &["rollout", "resume", "deploy/api"]).await;
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "deployment.apps/api resumed");
    rolled_out_to(&env, "api", "shoal/api:v2").await;
    assert_eq!(owned_replicasets(&env.api, "api").await.len(), 2);

    // restart: a new revision with the restartedAt annotation, same image.
    let out = shoal(&env, &["rollout", "restart", "deploy/api"]).await;
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "deployment.apps/api restarted");
    let d = env.api.get::<Deployment>("default", "api").await.unwrap();
    assert!(d
        .spec
        .template
        .metadata
        .annotations
        .contains_key("kubectl.kubernetes.io/restartedAt"));
    rolled_out_to(&env, "api", "shoal/api:v2").await;
    let out = shoal(&env, &["rollout", "history", "deploy/api"]).await;
    let revisions: Vec<&str> = out
        .stdout
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(revisions, ["1", "2", "3"], "{}", out.stdout);
    let pods = live_pods(&env.api, "api").await;
    assert!(
        pods.iter().all(|p| p
            .metadata
            .annotations
            .contains_key("kubectl.kubernetes.io/restartedAt")),
        "every pod replaced"
    );

    // A rollout that cannot progress (no node stands in for its pods) fails its deadline.
    let mut stuck = deployment("stuck", 1, "shoal/stuck:v1");
    stuck.spec.progress_deadline_seconds = Some(1);
    env.api.create(&stuck).await.unwrap();
    fails_with(
        &env,
        &["rollout", "status", "deploy/stuck", "--timeout", "60s"],
        "exceeded its progress deadline",
    )
    .await;
    fails_with(
        &env,
        &["rollout", "pause", "node/x"],
        "not supported for nodes",
    )
    .await;
}

#[actix::test]
async fn cordon_uncordon_and_drain() {
    let env = Env::start().await;
    create_node(&env.api, "worker-1").await;
    let unschedulable = || async {
        env.api
            .get::<Node>("", "worker-1")
            .await
            .unwrap()
            .spec
            .unschedulable
    };

    let out = shoal(&env, &["cordon", "worker-1"]).await;
    assert_eq!(
        out.stdout.trim(),
        "node/worker-1 cordoned",
        "{}",
        out.stderr
    );
    assert!(unschedulable().await);
    let out = shoal(&env, &["cordon", "worker-1"]).await;
    assert_eq!(out.stdout.trim(), "node/worker-1 already cordoned");
    let out = shoal(&env, &["uncordon", "worker-1"]).await;
    assert_eq!(
        out.stdout.trim(),
        "node/worker-1 uncordoned",
        "{}",
        out.stderr
    );
    assert!(!unschedulable().await);
    fails_with(&env, &["cordon", "nosuch"], "node \"nosuch\" not found").await;

    // On worker-1: a ReplicaSet's pod (with an emptyDir), a DaemonSet's pod and a bare pod.
    let _standin = NodeStandIn::start(env.api.clone(), "worker-1", |p| {
        has_label(p, &["cache", "agent", "bare"])
    });
    let cache: ReplicaSet = from_json(serde_json::json!({
        "metadata": {"name": "cache", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "cache"}},
            "template": {
                "metadata": {"labels": {"app": "cache"}},
                "spec": {
                    "containers": [{"name": "main", "image": "shoal/cache:v1"}],
                    "volumes": [{"name": "scratch", "emptyDir": {}}]
                }
            }
        }
    }));
    env.api.create(&cache).await.unwrap();
    let agent: DaemonSet = from_json(serde_json::json!({
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "main", "image": "shoal/agent:v1"}]}
            }
        }
    }));
    env.api.create(&agent).await.unwrap();
    let bare: Pod = from_json(serde_json::json!({
        "metadata": {"name": "bare", "namespace": "default", "labels": {"app": "bare"}},
        "spec": {"nodeName": "worker-1", "containers": [{"name": "main", "image": "shoal/bare:v1"}]}
    }));
    env.api.create(&bare).await.unwrap();
    let ready_on_node = |app: &'static str| {
        let api = env.api.clone();
        async move {
            let pods = live_pods(&api, app).await;
            pods.len() == 1 && pods[0].spec.node_name == "worker-1" && pods[0].is_ready()
        }
    };
    for app in ["cache", "agent", "bare"] {
        eventually(&format!("the {app} pod ready on worker-1"), T, || {
            ready_on_node(app)
        })
        .await;
    }
    let out = shoal(&env, &["rollout", "status", "ds/agent", "--timeout", "60s"]).await;
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(
        out.stdout.lines().last(),
        Some("daemon set \"agent\" successfully rolled out")
    );
    let cache_pod = live_pods(&env.api, "cache").await.remove(0).metadata.name;
    let agent_pod = live_pods(&env.api, "agent").await.remove(0);

    // Without flags every blocker is listed and nothing is evicted; the node stays cordoned.
    let out = shoal(&env, &["drain", "worker-1", "--timeout", "60s"]).await;
    assert!(!out.ok, "{}", out.stdout);
    for expected in [
        "DaemonSet-managed".to_string(),
        format!("default/{}", agent_pod.metadata.name),
        "no controller".into(),
        "default/bare".into(),
        "local storage".into(),
        format!("default/{cache_pod}"),
    ] {
        assert!(
            out.stderr.contains(&expected),
            "{expected:?} in {}",
            out.stderr
        );
    }
    assert!(!out.stdout.contains("evicting"), "{}", out.stdout);
    assert!(unschedulable().await, "drain cordons first");
    for app in ["cache", "agent", "bare"] {
        assert!(ready_on_node(app).await, "{app} untouched");
    }
    let out = shoal(
        &env,
        &[
            "drain",
            "worker-1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout",
            "60s",
        ],
    )
    .await;
    assert!(
        !out.ok && out.stderr.contains("default/bare") && out.stderr.contains("--force"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("cannot delete DaemonSet-managed"),
        "{}",
        out.stderr
    );

    // With the flags: the DaemonSet pod is skipped, the others evicted once their node
    // confirmed they stopped; the ReplicaSet's replacement stays unbound (cordoned).
    let out = shoal(
        &env,
        &[
            "drain",
            "worker-1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--force",
            "--timeout",
            "60s",
        ],
    )
    .await;
    assert!(out.ok, "{}", out.stderr);
    for expected in [
        format!("evicting pod default/{cache_pod}"),
        format!("pod/{cache_pod} evicted"),
        "evicting pod default/bare".into(),
        "pod/bare evicted".into(),
    ] {
        assert!(
            out.stdout.contains(&expected),
            "{expected:?} in {}",
            out.stdout
        );
    }
    assert_eq!(out.stdout.lines().last(), Some("node/worker-1 drained"));
    assert!(
        out.stderr
            .contains("Warning: ignoring DaemonSet-managed Pods"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stdout.contains(&agent_pod.metadata.name),
        "{}",
        out.stdout
    );
    let still = env
        .api
        .get::<Pod>("default", &agent_pod.metadata.name)
        .await
        .unwrap();
    assert!(still.metadata.uid == agent_pod.metadata.uid && !still.metadata.is_deleting());
    assert!(env
        .api
        .get::<Pod>("default", "bare")
        .await
        .unwrap_err()
        .is_not_found());
    eventually("the ReplicaSet's replacement pod, unbound", T, || async {
        let pods = live_pods(&env.api, "cache").await;
        pods.len() == 1 && pods[0].metadata.name != cache_pod && pods[0].spec.node_name.is_empty()
    })
    .await;

    let out = shoal(&env, &["uncordon", "worker-1"]).await;
    assert_eq!(
        out.stdout.trim(),
        "node/worker-1 uncordoned",
        "{}",
        out.stderr
    );
}
