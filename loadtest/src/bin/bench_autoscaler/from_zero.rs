//! From zero on JetStream lag: an application's work queue (stream `APP_<app>`, durable
//! consumer `worker`) and a consumer Deployment at 0 replicas with an HPA on the built-in
//! `jetstream_consumer_lag` (as the autoscaler's from-zero test writes it). Per trial: one
//! message published (timed from just before the publish) → the HPA's decision → the
//! message acked by the pod it started, which reports it on `apps.<app>.done`; then the
//! Deployment goes back to 0 and its pod away before the next trial.
//!
//! The pod is real: a busybox container running this binary's hidden `consume`, mounted
//! read-only from the host with the C library it links (hostPath, in a namespace labelled
//! privileged), connecting to the bus through its bridge's gateway with the application's
//! own credential. The bus therefore listens on every interface for this benchmark.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use async_nats::jetstream::{self, consumer::pull, stream};
use bus_schemas::kinds::{Deployment, HorizontalPodAutoscaler, Pod};
use bus_schemas::roles::Role;
use clap::Args;
use futures::StreamExt;

use crate::autoscaler_process::ActorProcess;
use crate::common::describe;
use crate::objects::{active_hpa, decode, deployment, wait_until};
use crate::real_node::{with_real_node_on_bus, NodeOptions};

const NAMESPACE: &str = "hpa-bench";
const APP: &str = "fz";
const NAME: &str = "fz-worker";

#[derive(Args)]
pub struct FromZeroArgs {
    #[arg(long, default_value_t = 5)]
    trials: usize,
    /// Pod CIDR of the benchmark node (its own bridge is created and removed).
    #[arg(long, default_value = "10.216.0.0/22")]
    pod_cidr: String,
}

/// The host directories the consumer pod mounts: (host path, path in the container).
fn library_mounts() -> Result<Vec<(PathBuf, &'static str)>> {
    ["/lib/x86_64-linux-gnu", "/lib64"]
        .into_iter()
        .filter(|p| Path::new(p).exists())
        .map(|p| {
            let host = std::fs::canonicalize(p).with_context(|| format!("resolving {p}"))?;
            Ok((host, p))
        })
        .collect()
}

fn lag_hpa() -> Result<HorizontalPodAutoscaler> {
    decode(&format!(
        "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {NAME}
  namespace: {NAMESPACE}
  annotations: {{autoscaling.shoal.io/activation-threshold: '0'}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {NAME}}}
  minReplicas: 0
  maxReplicas: 1
  behavior:
    scaleDown: {{stabilizationWindowSeconds: 0}}
  metrics:
  - type: External
    external:
      metric:
        name: jetstream_consumer_lag
        selector: {{matchLabels: {{stream: {stream}, consumer: worker}}}}
      target: {{type: AverageValue, averageValue: '1'}}
",
        stream = bus_schemas::roles::app_stream(APP)
    ))
}

fn consumer_deployment(
    bench_dir: &Path,
    libs: &[(PathBuf, &str)],
    url: &str,
) -> Result<Deployment> {
    let mut volumes = vec![
        serde_json::json!({"name": "bench", "hostPath": {"path": bench_dir, "type": "Directory"}}),
    ];
    let mut mounts =
        vec![serde_json::json!({"name": "bench", "mountPath": "/bench", "readOnly": true})];
    for (i, (host, at)) in libs.iter().enumerate() {
        volumes.push(serde_json::json!({"name": format!("lib{i}"), "hostPath": {"path": host, "type": "Directory"}}));
        mounts.push(
            serde_json::json!({"name": format!("lib{i}"), "mountPath": at, "readOnly": true}),
        );
    }
    let stream = bus_schemas::roles::app_stream(APP);
    let pod_spec = serde_json::json!({
        "terminationGracePeriodSeconds": 0,
        "volumes": volumes,
        "containers": [{
            "name": "main", "image": "shoal/busybox:1.35",
            "command": ["/bench/bench_autoscaler", "consume", "--url", url, "--creds", "/bench/app.nk",
                "--stream", stream, "--consumer", "worker", "--done", format!("apps.{APP}.done")],
            "volumeMounts": mounts,
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
        }]
    });
    deployment(NAMESPACE, NAME, 0, pod_spec)
}

/// The bridge's address (the first of the pod CIDR) and the bus's port: the URL pods use.
fn pod_url(pod_cidr: &str, bus_url: &str) -> Result<String> {
    let (base, _) = pod_cidr
        .split_once('/')
        .with_context(|| format!("--pod-cidr {pod_cidr}: not a CIDR"))?;
    let base: Ipv4Addr = base
        .parse()
        .with_context(|| format!("--pod-cidr {pod_cidr}"))?;
    let gateway = Ipv4Addr::from(u32::from(base) + 1);
    let port = bus_url
        .rsplit(':')
        .next()
        .with_context(|| format!("no port in {bus_url}"))?;
    Ok(format!("nats://{gateway}:{port}"))
}

pub fn run(args: FromZeroArgs) -> Result<()> {
    let bench_dir = tempfile::tempdir()?;
    let libs = library_mounts()?;
    let mut allowed = vec![bench_dir.path().to_path_buf()];
    allowed.extend(libs.iter().map(|(host, _)| host.clone()));
    let app_role = Role::App(APP.into());
    let pod_cidr = args.pod_cidr.clone();
    let options = NodeOptions {
        bridge_prefix: "shz",
        pod_cidr: &pod_cidr,
        cgroup_parent: "shoal-bench-fz",
        allow_host_path: allowed,
        nats_for_pods: true,
        extra_roles: vec![app_role.clone()],
        ..Default::default()
    };
    let bench_path = bench_dir.path().to_path_buf();
    with_real_node_on_bus(options, |node, bus| async move {
        // What the pod mounts: this binary and the application's credential.
        let exe = std::env::current_exe()?;
        let copy = bench_path.join("bench_autoscaler");
        if std::fs::hard_link(&exe, &copy).is_err() {
            std::fs::copy(&exe, &copy).context("copying this binary for the pod")?;
        }
        std::fs::copy(bus.creds_path(&app_role), bench_path.join("app.nk"))?;

        let actors = ActorProcess::start(
            &bus.url,
            &bus.auth_dir,
            "controllers,autoscaler",
            Duration::from_secs(1),
        )?;
        let api = node.api.clone();
        crate::objects::privileged_namespace(&api, NAMESPACE).await?;
        let app = shoal_bus::connect(&bus.url, "fz-app", &bus.creds(&app_role)?).await?;
        let js = jetstream::new(app.clone());
        let queue = js
            .create_stream(stream::Config {
                name: bus_schemas::roles::app_stream(APP),
                subjects: vec![format!("apps.{APP}.work.>")],
                ..Default::default()
            })
            .await?;
        queue
            .create_consumer(pull::Config {
                durable_name: Some("worker".into()),
                ..Default::default()
            })
            .await?;
        let mut done = app.subscribe(format!("apps.{APP}.done")).await?;
        app.flush().await?;
        let mut decisions = crate::objects::decisions(&node.nats, NAMESPACE).await?;

        let url = pod_url(&args.pod_cidr, &bus.url)?;
        api.create(&consumer_deployment(&bench_path, &libs, &url)?)
            .await?;
        api.create(&lag_hpa()?).await?;
        wait_until(
            "the HPA reading a lag of 0",
            Duration::from_secs(60),
            || async { active_hpa(&api, NAMESPACE, NAME).await.is_some() },
        )
        .await?;

        let (mut to_decision, mut to_consumed) = (Vec::new(), Vec::new());
        for i in 0..args.trials {
            while decisions.try_recv().is_ok() {}
            let body = format!("job-{i}");
            let start = Instant::now();
            js.publish(format!("apps.{APP}.work.job"), body.clone().into())
                .await?
                .await?;
            let mut seen = None;
            let decided = tokio::time::timeout(Duration::from_secs(30), async {
                while let Some((at, d)) = decisions.recv().await {
                    if d.hpa == NAME && d.rescaled && d.desired_replicas > 0 {
                        return Some(at);
                    }
                    seen = Some(d);
                }
                None
            })
            .await
            .ok()
            .flatten();
            let Some(decided) = decided else {
                let status = api
                    .get::<HorizontalPodAutoscaler>(NAMESPACE, NAME)
                    .await
                    .map(|h| format!("{:?}", h.status.conditions))
                    .unwrap_or_default();
                bail!("trial {i}: no decision to wake {NAME} within 30 s (last decision {seen:?}; conditions {status})");
            };
            let consumed = tokio::time::timeout(Duration::from_secs(60), async {
                while let Some(msg) = done.next().await {
                    if msg.payload.as_ref() == body.as_bytes() {
                        return Some(Instant::now());
                    }
                }
                None
            })
            .await
            .ok()
            .flatten()
            .with_context(|| {
                format!("trial {i}: {body} not acked by a {NAME} pod within 60 s (its log: `shoal logs` on the node; is the bus reachable from pods at {url}?)")
            })?;
            println!(
                "  trial {i}: publish → decision {:.2} s, → acked by the new pod {:.2} s",
                (decided - start).as_secs_f64(),
                (consumed - start).as_secs_f64()
            );
            to_decision.push(decided - start);
            to_consumed.push(consumed - start);
            // Back at zero, the pod gone, before the next trial.
            wait_until(
                "back to 0 with no pod and no pull waiting",
                Duration::from_secs(60),
                || async {
                    let replicas = api
                        .get::<Deployment>(NAMESPACE, NAME)
                        .await
                        .ok()
                        .and_then(|d| d.spec.replicas);
                    let pods = api
                        .list::<Pod>(&bus_schemas::api::ListOptions {
                            namespace: NAMESPACE.into(),
                            label_selector: format!("app={NAME}"),
                            ..Default::default()
                        })
                        .await
                        .map(|l| l.items.len())
                        .unwrap_or(usize::MAX);
                    // A stopped pod's last pull request can outlive it: it would take the next
                    // message before any new pod exists.
                    let waiting = match queue.clone().consumer_info("worker").await {
                        Ok(info) => info.num_waiting,
                        Err(_) => usize::MAX,
                    };
                    replicas == Some(0) && pods == 0 && waiting == 0
                },
            )
            .await?;
        }
        println!(
            "\n== from zero on jetstream_consumer_lag (real consumer pod), {} trials ==",
            args.trials
        );
        println!(
            "publish → decision:             {}",
            describe(&mut to_decision)
        );
        println!(
            "publish → acked by the new pod: {}   (goal <= 2 s; KEDA polls every 30 s by default, Knative cold starts take seconds)",
            describe(&mut to_consumed)
        );
        crate::objects::delete_workload(&api, NAMESPACE, NAME).await?;
        drop(actors);
        if to_consumed.len() != args.trials {
            bail!(
                "only {} of {} trials completed",
                to_consumed.len(),
                args.trials
            );
        }
        node.delete_pods_and_stop(&[], Duration::from_secs(30))
            .await
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn pods_reach_the_bus_at_their_bridge_gateway_on_the_bus_port() {
        assert_eq!(
            super::pod_url("10.216.0.0/22", "nats://0.0.0.0:4567").unwrap(),
            "nats://10.216.0.1:4567"
        );
        assert!(super::pod_url("10.216.0.0", "nats://0.0.0.0:4567").is_err());
    }
}
