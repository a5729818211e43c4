//! The autoscaler actor against a real nats-server, API and controllers: External metrics
//! posted on the bus scale a Deployment from zero and back, a missing target is reported and
//! retried, a hook written in Python decides, a hook that times out falls back, and a
//! standby takes over from a killed leader without scaling twice.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bus_schemas::kinds::{Deployment, Event, HorizontalPodAutoscaler};
use bus_schemas::meta::find_condition;
use bus_schemas::roles::Role;
use bus_schemas::{manifest, subjects};
use futures::StreamExt;
use shoal_api::local::{eventually, LocalCluster};
use shoal_autoscaler::AutoscalerConfig;
use shoal_bus::leader::LeaderElectionConfig;
use shoal_bus::shutdown::{self, Trigger};
use shoal_bus::tied::TiedToThisThread;
use shoal_bus::ApiClient;

const WAIT: Duration = Duration::from_secs(30);

struct Running {
    trigger: Trigger,
    handle: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops as a crash would: no lease release, no goodbye.
    fn kill(self) {
        self.handle.abort();
        drop(self.trigger);
    }
}

async fn start_controllers(cluster: &LocalCluster) -> Running {
    let (trigger, sd) = shutdown::channel();
    let config = shoal_controllers::ControllersConfig {
        informers: Some(cluster.informers.clone()),
        ..Default::default()
    };
    let nats = cluster
        .connect_as(&Role::Controllers, "controllers")
        .await
        .expect("controllers connect");
    let handle = actix::spawn(async move {
        let _ = shoal_controllers::run(config, nats, sd.wait()).await;
    });
    Running { trigger, handle }
}

fn config() -> AutoscalerConfig {
    AutoscalerConfig {
        sync_period: Duration::from_millis(500),
        hook_timeout: Duration::from_millis(500),
        ..AutoscalerConfig::default()
    }
}

/// An autoscaler with its own NATS connection and caches, as a separate process would have.
async fn start_autoscaler(cluster: &LocalCluster, config: AutoscalerConfig) -> Running {
    let (trigger, sd) = shutdown::channel();
    let nats = cluster
        .connect_as(&Role::Autoscaler, "autoscaler-test")
        .await
        .unwrap();
    let handle = actix::spawn(async move {
        if let Err(e) = shoal_autoscaler::run(config, nats, sd.wait()).await {
            panic!("autoscaler failed: {e}");
        }
    });
    Running { trigger, handle }
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.35"}]}
            }
        }
    }))
    .unwrap()
}

fn hpa(yaml: &str) -> HorizontalPodAutoscaler {
    let docs = manifest::parse(yaml).unwrap();
    manifest::decode(&docs[0]).unwrap()
}

/// An HPA on the External metric `backlog` (10 per replica), as written for Kubernetes.
/// (No node runs here, so no pod is ever ready: a Value target, which scales the ready pods,
/// would not move; a per-replica AverageValue does.)
fn backlog_hpa(name: &str, target: &str, min: i32, annotations: &str) -> HorizontalPodAutoscaler {
    hpa(&format!(
        "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {name}
  annotations: {{{annotations}}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {target}}}
  minReplicas: {min}
  maxReplicas: 10
  behavior:
    scaleDown: {{stabilizationWindowSeconds: 1}}
  metrics:
  - type: External
    external:
      metric:
        name: backlog
        selector: {{matchLabels: {{queue: {target}}}}}
      target: {{type: AverageValue, averageValue: '10'}}
"
    ))
}

async fn publish_backlog(nats: &async_nats::Client, queue: &str, value: f64) {
    let body = serde_json::json!({"value": value, "labels": {"queue": queue}});
    nats.publish(
        subjects::external_metric("default", "backlog"),
        serde_json::to_vec(&body).unwrap().into(),
    )
    .await
    .unwrap();
    nats.flush().await.unwrap();
}

async fn spec_replicas(api: &ApiClient, name: &str) -> Option<i32> {
    api.get::<Deployment>("default", name)
        .await
        .ok()
        .and_then(|d| d.spec.replicas)
}

async fn wait_replicas(
    api: &ApiClient,
    nats: &async_nats::Client,
    name: &str,
    backlog: f64,
    want: i32,
) {
    eventually(&format!("{name} at {want} replicas"), WAIT, || async {
        // Samples are republished as a real publisher would (they age out otherwise).
        publish_backlog(nats, name, backlog).await;
        spec_replicas(api, name).await == Some(want)
    })
    .await;
}

async fn events_of(api: &ApiClient, name: &str) -> Vec<Event> {
    let list = api
        .list::<Event>(&bus_schemas::api::ListOptions {
            namespace: "default".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter(|e| e.involved_object.name == name)
        .collect()
}

#[actix::test]
async fn external_metric_scales_from_zero_to_n_and_back_to_zero() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let _controllers = start_controllers(&cluster).await;
    let _autoscaler = start_autoscaler(&cluster, config()).await;
    api.create(&deployment("worker", 0)).await.unwrap();
    api.create(&backlog_hpa("worker", "worker", 0, ""))
        .await
        .unwrap();

    // 25 waiting against a target of 10: ceil(2.5) = 3 replicas, straight from zero.
    wait_replicas(&api, &cluster.nats, "worker", 25.0, 3).await;
    // Undecodable, NaN and negative samples change nothing.
    for junk in [
        &b"not json"[..],
        br#"{"value": "NaN"}"#,
        br#"{"value": -5}"#,
    ] {
        cluster
            .nats
            .publish(
                subjects::external_metric("default", "backlog"),
                junk.to_vec().into(),
            )
            .await
            .unwrap();
    }
    // The backlog is gone: back to zero once the 1 s stabilization window has passed.
    wait_replicas(&api, &cluster.nats, "worker", 0.0, 0).await;

    let status = api
        .get::<HorizontalPodAutoscaler>("default", "worker")
        .await
        .unwrap()
        .status;
    let active = find_condition(&status.conditions, "ScalingActive").unwrap();
    assert_eq!(active.status, "True", "{active:?}");
    assert_eq!(active.reason, "ValidMetricFound");
    let external = status.current_metrics[0].external.as_ref().unwrap();
    assert_eq!(
        external
            .current
            .average_value
            .as_ref()
            .map(|q| q.milli_value()),
        Some(0)
    );
    assert!(status.last_scale_time.is_some());
    let events = events_of(&api, "worker").await;
    let messages: Vec<&str> = events.iter().map(|e| e.message.as_str()).collect();
    assert!(
        messages
            .contains(&"New size: 3; reason: external metric backlog(queue=worker) above target"),
        "{messages:?}"
    );
    assert!(
        messages.contains(&"New size: 0; reason: All metrics below target"),
        "{messages:?}"
    );
}

// Scale from zero: a sample above the target wakes an HPA at zero replicas at once, not at
// the next periodic pass (an hour away here). Sent in msgpack: the subject takes both.
#[actix::test]
async fn an_external_sample_wakes_a_target_at_zero_without_waiting_for_a_pass() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let _controllers = start_controllers(&cluster).await;
    let hourly = AutoscalerConfig {
        sync_period: Duration::from_secs(3600),
        ..config()
    };
    let _autoscaler = start_autoscaler(&cluster, hourly).await;
    api.create(&deployment("dozing", 0)).await.unwrap();
    api.create(&backlog_hpa("dozing", "dozing", 0, ""))
        .await
        .unwrap();
    eventually("the new HPA looked at once", WAIT, || async {
        api.get::<HorizontalPodAutoscaler>("default", "dozing")
            .await
            .is_ok_and(|h| !h.status.conditions.is_empty())
    })
    .await;
    let sample = bus_schemas::autoscaling::ExternalSample {
        value: 25.0,
        timestamp: None,
        labels: [("queue".to_string(), "dozing".to_string())].into(),
    };
    cluster
        .nats
        .publish(
            subjects::external_metric("default", "backlog"),
            bus_schemas::codec::to_msgpack(&sample).unwrap().into(),
        )
        .await
        .unwrap();
    eventually("dozing woken to 3 replicas by one sample", WAIT, || async {
        spec_replicas(&api, "dozing").await == Some(3)
    })
    .await;
}

#[actix::test]
async fn a_missing_target_is_reported_and_retried_then_scaled_once_it_exists() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let _controllers = start_controllers(&cluster).await;
    let _autoscaler = start_autoscaler(&cluster, config()).await;
    api.create(&backlog_hpa("ghost", "ghost", 1, ""))
        .await
        .unwrap();
    eventually("AbleToScale=False FailedGetScale", WAIT, || async {
        let hpa = api
            .get::<HorizontalPodAutoscaler>("default", "ghost")
            .await
            .unwrap();
        find_condition(&hpa.status.conditions, "AbleToScale")
            .is_some_and(|c| c.status == "False" && c.reason == "FailedGetScale")
    })
    .await;
    eventually("a FailedGetScale event", WAIT, || async {
        events_of(&api, "ghost")
            .await
            .iter()
            .any(|e| e.reason == "FailedGetScale" && e.type_ == "Warning")
    })
    .await;

    // Missing metrics for an existing target: ScalingActive=False, nothing scaled.
    api.create(&deployment("ghost", 2)).await.unwrap();
    eventually("ScalingActive=False without metrics", WAIT, || async {
        let hpa = api
            .get::<HorizontalPodAutoscaler>("default", "ghost")
            .await
            .unwrap();
        find_condition(&hpa.status.conditions, "ScalingActive")
            .is_some_and(|c| c.status == "False" && c.reason == "FailedGetExternalMetric")
    })
    .await;
    assert_eq!(spec_replicas(&api, "ghost").await, Some(2));
    // The back-off is at most a few seconds this early: the target is picked up.
    wait_replicas(&api, &cluster.nats, "ghost", 40.0, 4).await;
}

/// The Python hook from ops/examples, killed when the test ends however it ends.
struct PythonHook(Child);

impl Drop for PythonHook {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The hook runs with an integration identity's credential, as a user's hook would.
async fn start_python_hook(cluster: &LocalCluster, name: &str, capacity: &str) -> PythonHook {
    cluster.creds(&Role::Integration).await.unwrap();
    let creds = cluster
        .natsd
        .config()
        .auth
        .as_ref()
        .expect("identities are on")
        .creds_path(&shoal_bus::auth::default_name(&Role::Integration));
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../ops/examples/autoscale_hook.py"
    );
    let child = Command::new("python3")
        .arg(script)
        .args([
            "--nats",
            &cluster.url(),
            "--name",
            name,
            "--capacity",
            capacity,
        ])
        .arg("--creds")
        .arg(creds)
        .stdin(Stdio::null())
        .tied_to_this_thread()
        .spawn()
        .expect("python3 runs the example hook");
    PythonHook(child)
}

#[actix::test]
async fn the_python_hook_decides_and_a_silent_hook_falls_back() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let _controllers = start_controllers(&cluster).await;
    let _autoscaler = start_autoscaler(&cluster, config()).await;
    let _hook = start_python_hook(&cluster, "per-five", "5").await;
    // Wait until the hook listens (it answers a request with no HPA in it with an error),
    // asking as the autoscaler: only it calls hooks.
    let caller = cluster
        .connect_as(&Role::Autoscaler, "hook-probe")
        .await
        .unwrap();
    eventually("the Python hook is subscribed", WAIT, || async {
        caller
            .request(subjects::autoscale_hook("per-five"), "{}".into())
            .await
            .is_ok()
    })
    .await;

    let mut decisions = cluster
        .nats
        .subscribe("shoal.v1.autoscaler.decisions.default.hooked")
        .await
        .unwrap();
    api.create(&deployment("hooked", 1)).await.unwrap();
    let annotations = "autoscaling.shoal.io/hook: per-five";
    api.create(&backlog_hpa("hooked", "hooked", 1, annotations))
        .await
        .unwrap();
    // Built-in: ceil(20 / 10) = 2; the hook says ceil(20 / 5) = 4 instead.
    wait_replicas(&api, &cluster.nats, "hooked", 20.0, 4).await;
    eventually("HookAnswered=True on hooked", WAIT, || async {
        let hpa = api
            .get::<HorizontalPodAutoscaler>("default", "hooked")
            .await
            .unwrap();
        find_condition(&hpa.status.conditions, "HookAnswered").is_some_and(|c| c.status == "True")
    })
    .await;
    let record = tokio::time::timeout(WAIT, async {
        loop {
            let msg = decisions.next().await.expect("decisions");
            let d: bus_schemas::autoscaling::Decision =
                bus_schemas::codec::from_msgpack(&msg.payload).unwrap();
            if d.hook_replicas.is_some() {
                return d;
            }
        }
    })
    .await
    .expect("a decision record with the hook's answer");
    assert_eq!(record.hook_replicas, Some(4));

    // A hook nobody serves: the built-in proposal, a warning Event and condition.
    api.create(&deployment("orphan", 1)).await.unwrap();
    let annotations = "autoscaling.shoal.io/hook: nobody-home";
    api.create(&backlog_hpa("orphan", "orphan", 1, annotations))
        .await
        .unwrap();
    wait_replicas(&api, &cluster.nats, "orphan", 30.0, 3).await;
    eventually("HookAnswered=False HookFailed on orphan", WAIT, || async {
        let hpa = api
            .get::<HorizontalPodAutoscaler>("default", "orphan")
            .await
            .unwrap();
        find_condition(&hpa.status.conditions, "HookAnswered")
            .is_some_and(|c| c.status == "False" && c.reason == "HookFailed")
    })
    .await;

    // Hooks that answer too late, answer garbage or ask for a negative count: the same
    // fallback each time, scaling goes on, and the Event says what was wrong.
    for (name, delay, reply, why) in [
        (
            "late",
            Duration::from_secs(3),
            r#"{"desiredReplicas": 9}"#,
            "did not answer",
        ),
        (
            "garbled",
            Duration::ZERO,
            "<html>oops</html>",
            "not a HookReply",
        ),
        (
            "negative",
            Duration::ZERO,
            r#"{"desiredReplicas": -3}"#,
            "must be 0 or more",
        ),
    ] {
        let hook = serve_fixed_hook(&cluster, name, delay, reply).await;
        api.create(&deployment(name, 1)).await.unwrap();
        let annotations = format!("autoscaling.shoal.io/hook: {name}");
        api.create(&backlog_hpa(name, name, 1, &annotations))
            .await
            .unwrap();
        wait_replicas(&api, &cluster.nats, name, 20.0, 2).await;
        eventually(&format!("a HookFailed event for {name}"), WAIT, || async {
            events_of(&api, name)
                .await
                .iter()
                .any(|e| e.reason == "HookFailed" && e.message.contains(why))
        })
        .await;
        hook.abort();
    }
}

/// Serves hook `name` as a user's hook is served (an integration identity), answering every
/// request with `reply` after `delay`.
async fn serve_fixed_hook(
    cluster: &LocalCluster,
    name: &str,
    delay: Duration,
    reply: &'static str,
) -> tokio::task::JoinHandle<()> {
    let nats = cluster
        .connect_as(&Role::Integration, &format!("{name}-hook"))
        .await
        .unwrap();
    let mut sub = nats
        .subscribe(subjects::autoscale_hook(name))
        .await
        .unwrap();
    nats.flush().await.unwrap();
    tokio::spawn(async move {
        while let Some(msg) = sub.next().await {
            let nats = nats.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                if let Some(to) = msg.reply {
                    let _ = nats.publish(to, reply.into()).await;
                }
            });
        }
    })
}

#[actix::test]
async fn a_standby_takes_over_from_a_killed_leader_without_scaling_twice() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let _controllers = start_controllers(&cluster).await;
    let election = |id: &str| {
        let mut le = LeaderElectionConfig::new("shoal-system", "shoal-autoscaler", id);
        le.lease_duration = Duration::from_secs(3);
        le.renew_period = Duration::from_millis(500);
        le.retry_period = Duration::from_millis(250);
        le
    };
    let first = start_autoscaler(
        &cluster,
        AutoscalerConfig {
            leader_election: Some(election("first")),
            ..config()
        },
    )
    .await;
    api.create(&deployment("steady", 1)).await.unwrap();
    // Every write of the Deployment's replicas, in order.
    let mut history: Vec<i32> = vec![1];
    api.create(&backlog_hpa("steady", "steady", 1, ""))
        .await
        .unwrap();
    wait_replicas(&api, &cluster.nats, "steady", 30.0, 3).await;
    let lease: bus_schemas::kinds::Lease =
        api.get("shoal-system", "shoal-autoscaler").await.unwrap();
    assert_eq!(lease.spec.holder_identity.as_deref(), Some("first"));

    let second = start_autoscaler(
        &cluster,
        AutoscalerConfig {
            leader_election: Some(election("second")),
            ..config()
        },
    )
    .await;
    first.kill();
    wait_replicas(&api, &cluster.nats, "steady", 60.0, 6).await;
    let lease: bus_schemas::kinds::Lease =
        api.get("shoal-system", "shoal-autoscaler").await.unwrap();
    assert_eq!(lease.spec.holder_identity.as_deref(), Some("second"));
    // Hold the load a while: the new leader must not move what is already right.
    for _ in 0..6 {
        publish_backlog(&cluster.nats, "steady", 60.0).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let events: Vec<String> = events_of(&api, "steady")
        .await
        .into_iter()
        .map(|e| format!("{} {} {}", e.reason, e.message, e.count))
        .collect();
    assert_eq!(spec_replicas(&api, "steady").await, Some(6), "{events:?}");
    // The versions the state log stored: a write it refused (a stale compare-and-set) was
    // published on the subject too, but never happened.
    let stored = cluster
        .store
        .history(&subjects::object("deployment", "default", "steady"))
        .await
        .unwrap();
    for version in stored {
        if let Ok(d) = bus_schemas::codec::from_msgpack::<Deployment>(&version.payload) {
            let r = d.spec.replicas.unwrap_or(1);
            if history.last() != Some(&r) {
                history.push(r);
            }
        }
    }
    let events: Vec<String> = events_of(&api, "steady")
        .await
        .into_iter()
        .map(|e| format!("{} {}", e.reason, e.message))
        .collect();
    assert_eq!(
        history,
        vec![1, 3, 6],
        "each change made once, never past the target; events: {events:?}"
    );
    second.kill();
}

/// An HPA on the built-in JetStream consumer lag of `APP_jobs`/`worker`, 5 messages per replica,
/// from zero (any pending message wakes the workload).
fn lag_hpa(name: &str) -> HorizontalPodAutoscaler {
    hpa(&format!(
        "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {name}
  annotations: {{autoscaling.shoal.io/activation-threshold: '0'}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {name}}}
  minReplicas: 0
  maxReplicas: 5
  behavior:
    scaleDown: {{stabilizationWindowSeconds: 0}}
  metrics:
  - type: External
    external:
      metric:
        name: jetstream_consumer_lag
        selector: {{matchLabels: {{stream: APP_jobs, consumer: worker}}}}
      target: {{type: AverageValue, averageValue: '5'}}
"
    ))
}

/// No node runs here, so the test plays the consumer pod: once the Deployment has a
/// replica, it pulls and acks what is pending on the durable consumer, as the pod would.
#[actix::test]
async fn jetstream_lag_wakes_a_consumer_from_zero_at_once_and_lets_it_go_when_drained() {
    use async_nats::jetstream::{self, consumer::pull, stream};
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let _controllers = start_controllers(&cluster).await;
    // Passes only at start and when prompted: whatever happens later is the push path.
    let _autoscaler = start_autoscaler(
        &cluster,
        AutoscalerConfig {
            sync_period: Duration::from_secs(3600),
            lag_period: Duration::from_millis(300),
            ..config()
        },
    )
    .await;
    // The application keeps its work queue in a stream of its own, with an `app` identity:
    // its subjects `apps.jobs.>`, its stream `APP_jobs`.
    let app = cluster
        .connect_as(&Role::App("jobs".into()), "jobs-app")
        .await
        .unwrap();
    let queue = "apps.jobs.resize".to_string();
    let js = jetstream::new(app);
    let jobs = js
        .create_stream(stream::Config {
            name: bus_schemas::roles::app_stream("jobs"),
            subjects: vec!["apps.jobs.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let worker = jobs
        .create_consumer(pull::Config {
            durable_name: Some("worker".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    api.create(&deployment("worker", 0)).await.unwrap();
    api.create(&lag_hpa("worker")).await.unwrap();
    eventually("the HPA reading a lag of 0", WAIT, || async {
        let hpa = api
            .get::<HorizontalPodAutoscaler>("default", "worker")
            .await
            .unwrap();
        find_condition(&hpa.status.conditions, "ScalingActive").is_some_and(|c| c.status == "True")
    })
    .await;
    assert_eq!(spec_replicas(&api, "worker").await, Some(0));

    // One message: the first replica, without a periodic pass to wait for.
    js.publish(queue.clone(), "photo-1".into())
        .await
        .unwrap()
        .await
        .unwrap();
    eventually("worker woken to 1", WAIT, || async {
        spec_replicas(&api, "worker").await == Some(1)
    })
    .await;
    // A burst: ceil(12 / 5) = 3.
    for i in 2..=12 {
        js.publish(queue.clone(), format!("photo-{i}").into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    eventually("worker at 3 for 12 pending", WAIT, || async {
        spec_replicas(&api, "worker").await == Some(3)
    })
    .await;

    // The pods' work: every pending message consumed and acked.
    let mut consumed = Vec::new();
    let mut batch = worker.fetch().max_messages(100).messages().await.unwrap();
    while let Some(msg) = batch.next().await {
        let msg = msg.unwrap();
        consumed.push(String::from_utf8_lossy(&msg.payload).into_owned());
        msg.double_ack().await.unwrap();
    }
    assert_eq!(consumed.len(), 12, "{consumed:?}");
    assert_eq!(consumed[0], "photo-1");
    eventually("worker back to 0 once drained", WAIT, || async {
        spec_replicas(&api, "worker").await == Some(0)
    })
    .await;
    let events: Vec<String> = events_of(&api, "worker")
        .await
        .into_iter()
        .map(|e| e.message)
        .collect();
    assert!(
        events.iter().any(|m| m
            == "New size: 1; reason: external metric jetstream_consumer_lag(consumer=worker,stream=APP_jobs) above target"),
        "{events:?}"
    );
}
