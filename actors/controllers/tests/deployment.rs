//! Deployment controller against a real cluster (no node agent: see `common`; a `NodeSim`
//! marks pods ready in place of the node).

mod common;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::{Deployment, Event, Pod, ReplicaSet};
use bus_schemas::meta::find_condition;
use bus_schemas::selector::Selector;
use common::*;
use shoal_controllers::deployment::REVISION_ANNOTATION;
use shoal_controllers::ControllersConfig;

const T: Duration = Duration::from_secs(30);

fn deployment(name: &str, replicas: i32, image: &str, strategy: serde_json::Value) -> Deployment {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]}
            }
        }
    }))
}

fn image(p: &Pod) -> &str {
    p.spec
        .containers
        .first()
        .map(|c| c.image.as_str())
        .unwrap_or("")
}

async fn set_image(env: &Env, name: &str, img: &str) {
    loop {
        let mut d = env.api.get::<Deployment>("default", name).await.unwrap();
        d.spec.template.spec.containers[0].image = img.into();
        match env.api.update(&d).await {
            Ok(_) => return,
            Err(e) if e.is_conflict() => continue,
            Err(e) => panic!("{e}"),
        }
    }
}

async fn rolled_out(env: &Env, name: &str, replicas: i32, img: &str) -> bool {
    let Ok(d) = env.api.get::<Deployment>("default", name).await else {
        return false;
    };
    let s = &d.status;
    let pods = live_pods(env, "default", name);
    s.observed_generation == d.metadata.generation
        && s.updated_replicas == replicas
        && s.replicas == replicas
        && s.available_replicas == replicas
        && pods.len() == replicas as usize
        && pods.iter().all(|p| image(p) == img)
}

/// Counts ready pods of `app` after every pod change; returns the minimum seen.
fn watch_min_ready(
    env: &Env,
    app: &str,
    armed: Arc<AtomicBool>,
) -> (Arc<AtomicI64>, tokio::task::JoinHandle<()>) {
    let informer = env.cluster.informers.get::<Pod>();
    let mut rx = informer.subscribe();
    let min = Arc::new(AtomicI64::new(i64::MAX));
    let out = min.clone();
    let sel = Selector::from_labels(&labels(&[("app", app)]));
    let handle = actix::spawn(async move {
        while let Ok(_change) = rx.recv().await {
            if !armed.load(Ordering::SeqCst) {
                continue;
            }
            let ready = informer
                .list(Some("default"), &sel)
                .iter()
                .filter(|p| p.is_ready() && !p.metadata.is_deleting())
                .count() as i64;
            min.fetch_min(ready, Ordering::SeqCst);
        }
    });
    (out, handle)
}

#[actix::test]
async fn rolling_update_keeps_availability() {
    let (env, _c) = env().await;
    let _sim = node_sim(&env, |p| {
        p.metadata.labels.get("app").is_some_and(|a| a == "web")
    });
    let strategy = serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}});
    env.api
        .create(&deployment("web", 4, "web:v1", strategy))
        .await
        .unwrap();
    eventually("v1 rolled out", T, || rolled_out(&env, "web", 4, "web:v1")).await;
    let d = env.api.get::<Deployment>("default", "web").await.unwrap();
    assert_eq!(
        d.metadata
            .annotations
            .get(REVISION_ANNOTATION)
            .map(String::as_str),
        Some("1")
    );

    let armed = Arc::new(AtomicBool::new(true));
    let (min_ready, watcher) = watch_min_ready(&env, "web", armed.clone());
    set_image(&env, "web", "web:v2").await;
    eventually("v2 rolled out", T, || rolled_out(&env, "web", 4, "web:v2")).await;
    armed.store(false, Ordering::SeqCst);
    watcher.abort();
    let min = min_ready.load(Ordering::SeqCst);
    assert!(
        min >= 3,
        "ready pods fell to {min} (< replicas - maxUnavailable = 3)"
    );

    let d = env.api.get::<Deployment>("default", "web").await.unwrap();
    assert_eq!(
        d.metadata
            .annotations
            .get(REVISION_ANNOTATION)
            .map(String::as_str),
        Some("2")
    );
    let avail = find_condition(&d.status.conditions, "Available").unwrap();
    assert!(avail.is_true());
    let prog = find_condition(&d.status.conditions, "Progressing").unwrap();
    assert_eq!(prog.reason, "NewReplicaSetAvailable");
    let rss = env
        .cluster
        .informers
        .get::<ReplicaSet>()
        .list(Some("default"), &Selector::everything());
    assert_eq!(
        rss.len(),
        2,
        "the old ReplicaSet is kept (scaled to 0) as history"
    );
    assert!(rss.iter().any(|r| r.spec.replicas == Some(0)));

    // Restart: an annotation on the template rolls new pods.
    let mut d = env.api.get::<Deployment>("default", "web").await.unwrap();
    d.spec
        .template
        .metadata
        .annotations
        .insert("kubectl.kubernetes.io/restartedAt".into(), "now".into());
    d.metadata.resource_version.clear();
    env.api.update(&d).await.unwrap();
    eventually("restarted", T, || async {
        let d = env.api.get::<Deployment>("default", "web").await.unwrap();
        let pods = live_pods(&env, "default", "web");
        rolled_out(&env, "web", 4, "web:v2").await
            && d.metadata
                .annotations
                .get(REVISION_ANNOTATION)
                .map(String::as_str)
                == Some("3")
            && pods.iter().all(|p| {
                p.metadata
                    .annotations
                    .contains_key("kubectl.kubernetes.io/restartedAt")
            })
    })
    .await;
}

#[actix::test]
async fn recreate_never_mixes_versions() {
    let (env, _c) = env().await;
    let _sim = node_sim(&env, |p| {
        p.metadata.labels.get("app").is_some_and(|a| a == "db")
    });
    env.api
        .create(&deployment(
            "db",
            3,
            "db:v1",
            serde_json::json!({"type": "Recreate"}),
        ))
        .await
        .unwrap();
    eventually("v1", T, || rolled_out(&env, "db", 3, "db:v1")).await;

    let informer = env.cluster.informers.get::<Pod>();
    let mut rx = informer.subscribe();
    let mixed = Arc::new(AtomicBool::new(false));
    let flag = mixed.clone();
    let sel = Selector::from_labels(&labels(&[("app", "db")]));
    let watcher = actix::spawn(async move {
        while let Ok(_c) = rx.recv().await {
            let pods = informer.list(Some("default"), &sel);
            let v1 = pods.iter().any(|p| image(p) == "db:v1");
            let v2 = pods.iter().any(|p| image(p) == "db:v2");
            if v1 && v2 {
                flag.store(true, Ordering::SeqCst);
            }
        }
    });
    set_image(&env, "db", "db:v2").await;
    eventually("v2", T, || rolled_out(&env, "db", 3, "db:v2")).await;
    watcher.abort();
    assert!(
        !mixed.load(Ordering::SeqCst),
        "Recreate ran old and new pods at once"
    );
}

#[actix::test]
async fn rolls_back_when_progress_deadline_passes() {
    let (env, _c) = env().await;
    // The "node" only ever gets v1 ready: v2 never becomes available.
    let _sim = node_sim(&env, |p| {
        p.metadata.labels.get("app").is_some_and(|a| a == "api") && image(p) == "api:v1"
    });
    let mut d = deployment(
        "api",
        2,
        "api:v1",
        serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
    );
    d.spec.progress_deadline_seconds = Some(2);
    d.spec.auto_rollback = Some(true);
    env.api.create(&d).await.unwrap();
    eventually("v1", T, || rolled_out(&env, "api", 2, "api:v1")).await;
    set_image(&env, "api", "api:v2").await;
    eventually("rolled back to v1", T, || async {
        let d = env.api.get::<Deployment>("default", "api").await.unwrap();
        d.spec.template.spec.containers[0].image == "api:v1"
            && rolled_out(&env, "api", 2, "api:v1").await
    })
    .await;
    let d = env.api.get::<Deployment>("default", "api").await.unwrap();
    assert_eq!(
        d.metadata
            .annotations
            .get(REVISION_ANNOTATION)
            .map(String::as_str),
        Some("3")
    );
    eventually("a DeploymentRollback event", T, || async {
        env.cluster
            .informers
            .get::<Event>()
            .list(Some("default"), &Selector::everything())
            .iter()
            .any(|e| e.reason == "DeploymentRollback" && e.involved_object.name == "api")
    })
    .await;
}

/// Stops the controllers mid-rollout and starts a new instance: the rollout finishes with
/// exactly the desired pods (none lost, none duplicated).
#[actix::test]
async fn restarted_controllers_finish_the_rollout() {
    let cluster = shoal_api::local::LocalCluster::start().await.unwrap();
    let env = Env {
        api: cluster.api(),
        cluster,
    };
    let config = ControllersConfig {
        tunables: tunables(),
        ..Default::default()
    };
    let first = start_controllers(&env.cluster, config.clone()).await;
    let _sim = node_sim(&env, |p| {
        p.metadata.labels.get("app").is_some_and(|a| a == "svc")
    });
    let strategy = serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    env.api
        .create(&deployment("svc", 5, "svc:v1", strategy))
        .await
        .unwrap();
    eventually("v1", T, || rolled_out(&env, "svc", 5, "svc:v1")).await;
    set_image(&env, "svc", "svc:v2").await;
    eventually("mid-rollout", T, || async {
        let pods = live_pods(&env, "default", "svc");
        pods.iter().any(|p| image(p) == "svc:v2") && pods.iter().any(|p| image(p) == "svc:v1")
    })
    .await;
    first.stop().await;
    let second = start_controllers(&env.cluster, config).await;
    eventually("v2 after restart", T, || {
        rolled_out(&env, "svc", 5, "svc:v2")
    })
    .await;
    // Exact end state, and it stays so.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pods = env.cluster.informers.get::<Pod>().list(
        Some("default"),
        &Selector::from_labels(&labels(&[("app", "svc")])),
    );
    assert_eq!(
        pods.len(),
        5,
        "{:?}",
        pods.iter().map(|p| &p.metadata.name).collect::<Vec<_>>()
    );
    assert!(pods.iter().all(|p| image(p) == "svc:v2" && p.is_ready()));
    second.stop().await;
}
