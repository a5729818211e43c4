//! Job and DaemonSet controllers against a real cluster. No node agent: the test reports
//! pods Succeeded/Failed/Ready itself, and registers nodes itself, only to drive the
//! controllers.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::{DaemonSet, Job, Node, Pod};
use bus_schemas::meta::find_condition;
use bus_schemas::selector::Selector;
use common::*;
use shoal_controllers::job::{INDEX_ANNOTATION, INDEX_ENV};

const T: Duration = Duration::from_secs(30);

fn job(name: &str, completions: i32, parallelism: i32, extra: serde_json::Value) -> Job {
    let mut spec = serde_json::json!({
        "completions": completions,
        "parallelism": parallelism,
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1"}]}
        }
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    from_json(serde_json::json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}))
}

fn job_pods(env: &Env, app: &str) -> Vec<Arc<Pod>> {
    env.cluster.informers.get::<Pod>().list(
        Some("default"),
        &Selector::from_labels(&labels(&[("app", app)])),
    )
}

fn running(env: &Env, app: &str) -> Vec<Arc<Pod>> {
    job_pods(env, app)
        .into_iter()
        .filter(|p| !p.is_terminal() && !p.metadata.is_deleting())
        .collect()
}

async fn condition(env: &Env, name: &str, type_: &str) -> Option<String> {
    let j = env.api.get::<Job>("default", name).await.ok()?;
    find_condition(&j.status.conditions, type_)
        .filter(|c| c.is_true())
        .map(|c| c.reason.clone())
}

/// Plays the node for a job: each round, finishes one running pod with `phase(pod)` until
/// `done` holds; returns the most pods that ran at once.
async fn drive<F, D, Fut>(env: &Env, app: &str, phase: F, mut done: D) -> usize
where
    F: Fn(&Pod) -> &'static str,
    D: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    let mut max_running = 0;
    loop {
        if done().await {
            return max_running;
        }
        assert!(start.elapsed() < T, "job did not finish");
        let now = running(env, app);
        max_running = max_running.max(now.len());
        if let Some(p) = now.first() {
            finish(&env.api, p, phase(p)).await;
            let name = p.metadata.name.clone();
            eventually("finish seen", T, || async {
                job_pods(env, app)
                    .iter()
                    .all(|q| q.metadata.name != name || q.is_terminal())
            })
            .await;
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[actix::test]
async fn job_completes_with_parallelism_two() {
    let (env, _c) = env().await;
    env.api
        .create(&job("calc", 4, 2, serde_json::json!({})))
        .await
        .unwrap();
    eventually("2 running", T, || async {
        running(&env, "calc").len() == 2
    })
    .await;
    let max = drive(
        &env,
        "calc",
        |_| "Succeeded",
        || async { condition(&env, "calc", "Complete").await.is_some() },
    )
    .await;
    assert!(max <= 2, "parallelism exceeded: {max}");
    let j = env.api.get::<Job>("default", "calc").await.unwrap();
    assert_eq!(j.status.succeeded, 4);
    assert_eq!(j.status.active, 0);
    assert!(j.status.start_time.is_some() && j.status.completion_time.is_some());
    assert_eq!(
        job_pods(&env, "calc")
            .iter()
            .filter(|p| p.status.phase == "Succeeded")
            .count(),
        4,
        "terminal pods kept"
    );
}

#[actix::test]
async fn indexed_job_gets_distinct_indexes_and_ttl_deletes_it() {
    let (env, _c) = env().await;
    let extra = serde_json::json!({"completionMode": "Indexed", "ttlSecondsAfterFinished": 1});
    env.api.create(&job("idx", 3, 3, extra)).await.unwrap();
    eventually("3 running", T, || async { running(&env, "idx").len() == 3 }).await;
    let pods = running(&env, "idx");
    let indexes: BTreeSet<String> = pods
        .iter()
        .map(|p| p.metadata.annotations[INDEX_ANNOTATION].clone())
        .collect();
    assert_eq!(
        indexes,
        ["0", "1", "2"].iter().map(|s| s.to_string()).collect()
    );
    for p in &pods {
        let want = &p.metadata.annotations[INDEX_ANNOTATION];
        assert!(p.spec.containers.iter().all(|c| c
            .env
            .iter()
            .any(|e| e.name == INDEX_ENV && e.value == *want)));
    }
    drive(
        &env,
        "idx",
        |_| "Succeeded",
        || async { condition(&env, "idx", "Complete").await.is_some() },
    )
    .await;
    let j = env.api.get::<Job>("default", "idx").await;
    if let Ok(j) = j {
        assert_eq!(j.status.completed_indexes, "0-2");
    }
    eventually("ttl deleted job and pods", T, || async {
        env.api
            .get::<Job>("default", "idx")
            .await
            .is_err_and(|e| e.is_not_found())
            && job_pods(&env, "idx").is_empty()
    })
    .await;
}

#[actix::test]
async fn job_fails_after_backoff_limit() {
    let (env, _c) = env().await;
    env.api
        .create(&job("flaky", 1, 1, serde_json::json!({"backoffLimit": 2})))
        .await
        .unwrap();
    drive(
        &env,
        "flaky",
        |_| "Failed",
        || async { condition(&env, "flaky", "Failed").await.is_some() },
    )
    .await;
    assert_eq!(
        condition(&env, "flaky", "Failed").await.as_deref(),
        Some("BackoffLimitExceeded")
    );
    let j = env.api.get::<Job>("default", "flaky").await.unwrap();
    assert_eq!(j.status.failed, 3);
    assert!(running(&env, "flaky").is_empty());
}

#[actix::test]
async fn job_deadline_fails_and_stops_pods() {
    let (env, _c) = env().await;
    env.api
        .create(&job(
            "slow",
            1,
            1,
            serde_json::json!({"activeDeadlineSeconds": 1}),
        ))
        .await
        .unwrap();
    eventually("DeadlineExceeded", T, || async {
        condition(&env, "slow", "Failed").await.as_deref() == Some("DeadlineExceeded")
    })
    .await;
    eventually("active pods deleted", T, || async {
        running(&env, "slow").is_empty()
    })
    .await;
}

#[actix::test]
async fn daemonset_follows_nodes() {
    let (env, _c) = env().await;
    add_node(&env.api, "w1", &[("role", "worker")]).await;
    add_node(&env.api, "w2", &[("role", "worker")]).await;
    add_node(&env.api, "db1", &[("role", "db")]).await;
    let ds: DaemonSet = from_json(serde_json::json!({
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"nodeSelector": {"role": "worker"},
                                       "containers": [{"name": "main", "image": "agent:1"}]}}}
    }));
    env.api.create(&ds).await.unwrap();
    let on_nodes = |env: &Env| -> BTreeSet<String> {
        live_pods(env, "default", "agent")
            .iter()
            .map(|p| p.spec.node_name.clone())
            .collect()
    };
    eventually("one pod per worker", T, || async {
        on_nodes(&env) == ["w1", "w2"].iter().map(|s| s.to_string()).collect()
            && live_pods(&env, "default", "agent").len() == 2
    })
    .await;
    add_node(&env.api, "w3", &[("role", "worker")]).await;
    eventually("new node gets a pod", T, || async {
        on_nodes(&env).contains("w3") && live_pods(&env, "default", "agent").len() == 3
    })
    .await;
    delete_now::<Node>(&env.api, "", "w1", None).await;
    eventually("pod leaves with its node", T, || async {
        !on_nodes(&env).contains("w1") && live_pods(&env, "default", "agent").len() == 2
    })
    .await;
    let _sim = node_sim(&env, |p| {
        p.metadata.labels.get("app").is_some_and(|a| a == "agent")
    });
    eventually("status", T, || async {
        let s = env
            .api
            .get::<DaemonSet>("default", "agent")
            .await
            .unwrap()
            .status;
        s.desired_number_scheduled == 2 && s.number_ready == 2 && s.updated_number_scheduled == 2
    })
    .await;
    // Rolling update to a new image, node by node.
    let mut ds = env.api.get::<DaemonSet>("default", "agent").await.unwrap();
    ds.spec.template.spec.containers[0].image = "agent:2".into();
    env.api.update(&ds).await.unwrap();
    eventually("rolled to agent:2", T, || async {
        let pods = live_pods(&env, "default", "agent");
        pods.len() == 2
            && pods
                .iter()
                .all(|p| p.spec.containers[0].image == "agent:2" && p.is_ready())
    })
    .await;
}
