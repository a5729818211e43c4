//! Step response on real pods: busybox pods with a CPU request (and a limit, so a burning
//! pod takes a bounded share of this shared machine) idle until a switch file exists, then
//! burn. The switch is a hostPath directory of the benchmark's, so the step is one file
//! created at a known instant (the same load switch as `autoscale_pods.rs`, without the exec
//! round trip). Per trial, timestamps on this machine's clock:
//! - the step (the file created);
//! - the first usage sample published after it that is above the target (read from the bus);
//! - the HPA's decision to rescale (its published decision);
//! - the Deployment's new replicas Ready.
//!
//! The node samples usage every second (`--metrics-period 1`); the controllers and the
//! autoscaler run as `shoal up --join URL --actors controllers,autoscaler --metrics-period 1`.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bus_schemas::api::PodMetrics;
use bus_schemas::roles::Role;
use bus_schemas::subjects;
use clap::Args;
use futures::StreamExt;

use crate::autoscaler_process::ActorProcess;
use crate::common::describe;
use crate::objects::{active_hpa, cpu_hpa, decode, delete_workload, ready_replicas, wait_until};
use crate::real_node::{with_real_node_on_bus, NodeOptions, NODE_NAME};

const NAMESPACE: &str = "hpa-bench";
const TARGET_PERCENT: u32 = 50;
const REQUEST_MILLICORES: u64 = 100;

#[derive(Args)]
pub struct StepArgs {
    #[arg(long, default_value_t = 5)]
    trials: usize,
    /// The burning pod's CPU limit in millicores (its request is 100m, the target 50 %).
    #[arg(long, default_value_t = 300)]
    limit_millicores: u64,
    #[arg(long, default_value_t = 3)]
    max_replicas: i32,
    /// Pod CIDR of the benchmark node (its own bridge is created and removed).
    #[arg(long, default_value = "10.215.0.0/22")]
    pod_cidr: String,
}

/// A Deployment whose pods burn a core (up to their limit) while `/switch/load` exists.
fn burner(
    name: &str,
    switch: &std::path::Path,
    limit: u64,
) -> Result<bus_schemas::kinds::Deployment> {
    decode(&format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {NAMESPACE}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 0
      volumes: [{{name: switch, hostPath: {{path: "{switch}", type: Directory}}}}]
      containers:
      - name: main
        image: shoal/busybox:1.35
        command:
        - sh
        - -c
        - |
          while true; do
            if [ -f /switch/load ]; then
              yes > /dev/null & p=$!
              while [ -f /switch/load ]; do usleep 50000; done
              kill $p
            fi
            usleep 50000
          done
        volumeMounts: [{{name: switch, mountPath: /switch, readOnly: true}}]
        resources:
          requests: {{cpu: {REQUEST_MILLICORES}m, memory: 8Mi}}
          limits: {{cpu: {limit}m}}
"#,
        switch = switch.display()
    ))
}

struct Trial {
    to_cross: Duration,
    cross_to_decision: Duration,
    to_decision: Duration,
    to_ready: Duration,
    replicas: i32,
}

pub fn run(args: StepArgs) -> Result<()> {
    let switches = tempfile::tempdir()?;
    let pod_cidr = args.pod_cidr.clone();
    let options = NodeOptions {
        bridge_prefix: "sha",
        pod_cidr: &pod_cidr,
        cgroup_parent: "shoal-bench-hpa",
        sync_period: None,
        metrics_period: Some(Duration::from_secs(1)),
        allow_host_path: vec![switches.path().to_path_buf()],
        ..Default::default()
    };
    let switch_root = switches.path().to_path_buf();
    with_real_node_on_bus(options, |node, bus| async move {
        let actors = ActorProcess::start(
            &bus.url,
            &bus.auth_dir,
            "controllers,autoscaler",
            Duration::from_secs(1),
        )?;
        let api = node.api.clone();
        crate::objects::privileged_namespace(&api, NAMESPACE).await?;
        // Usage samples are for the autoscaler's eyes: this observer reads them as it does.
        let observer = shoal_bus::connect(
            &bus.url,
            "bench-usage-observer",
            &bus.creds(&Role::Autoscaler)?,
        )
        .await?;
        let mut samples = observer
            .subscribe(format!(
                "shoal.v1.metrics.{}.{}.>",
                subjects::encode_token(NODE_NAME),
                subjects::encode_token(NAMESPACE)
            ))
            .await?;
        observer.flush().await?;
        let mut decisions = crate::objects::decisions(&node.nats, NAMESPACE).await?;
        let mut trials = Vec::new();
        for i in 0..args.trials {
            let name = format!("step-{i}");
            let switch = switch_root.join(&name);
            std::fs::create_dir_all(&switch)?;
            let trial = one_trial(&api, &name, &switch, &args, &mut samples, &mut decisions).await;
            let _ = std::fs::remove_file(switch.join("load"));
            delete_workload(&api, NAMESPACE, &name).await?;
            let trial = trial.with_context(|| format!("trial {i}"))?;
            println!(
                "  trial {i}: step → sample above target {:.2} s, → decision {:.2} s (after the crossing {:.2} s), → {} replicas Ready {:.2} s",
                trial.to_cross.as_secs_f64(),
                trial.to_decision.as_secs_f64(),
                trial.cross_to_decision.as_secs_f64(),
                trial.replicas,
                trial.to_ready.as_secs_f64()
            );
            trials.push(trial);
        }
        let pick = |f: fn(&Trial) -> Duration| trials.iter().map(f).collect::<Vec<_>>();
        println!(
            "\n== step response on real pods (busybox, request {REQUEST_MILLICORES}m, limit {}m, target {TARGET_PERCENT} %, node sampling every 1 s), {} trials ==",
            args.limit_millicores, args.trials
        );
        println!(
            "step → first sample above target:   {}",
            describe(&mut pick(|t| t.to_cross))
        );
        println!(
            "sample above target → decision:     {}   (goal <= 2 s; Kubernetes: 15 s sync period on metrics-server windows of 15-60 s)",
            describe(&mut pick(|t| t.cross_to_decision))
        );
        println!(
            "step → decision:                    {}",
            describe(&mut pick(|t| t.to_decision))
        );
        println!(
            "step → new replicas Ready:          {}   (goal <= 3 s)",
            describe(&mut pick(|t| t.to_ready))
        );
        drop(actors);
        node.delete_pods_and_stop(&[], Duration::from_secs(30))
            .await
    })
}

async fn one_trial(
    api: &shoal_bus::ApiClient,
    name: &str,
    switch: &std::path::Path,
    args: &StepArgs,
    samples: &mut async_nats::Subscriber,
    decisions: &mut tokio::sync::mpsc::UnboundedReceiver<(
        Instant,
        bus_schemas::autoscaling::Decision,
    )>,
) -> Result<Trial> {
    api.create(&burner(name, switch, args.limit_millicores)?)
        .await?;
    api.create(&cpu_hpa(
        NAMESPACE,
        name,
        1,
        args.max_replicas,
        TARGET_PERCENT,
    )?)
    .await?;
    wait_until("1 replica Ready", Duration::from_secs(120), || async {
        ready_replicas(api, NAMESPACE, name).await >= 1
    })
    .await?;
    wait_until(
        "the HPA reading the idle pod",
        Duration::from_secs(60),
        || async {
            active_hpa(api, NAMESPACE, name)
                .await
                .is_some_and(|h| !h.status.current_metrics.is_empty())
        },
    )
    .await?;
    // Only what follows the step counts.
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(1), samples.next()).await {}
    while decisions.try_recv().is_ok() {}

    let step = Instant::now();
    std::fs::write(switch.join("load"), b"")?;
    let threshold = REQUEST_MILLICORES * u64::from(TARGET_PERCENT) / 100;
    let prefix = format!("{name}-");
    let crossed = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(msg) = samples.next().await {
            let Ok(sample) = bus_schemas::codec::from_msgpack::<PodMetrics>(&msg.payload) else {
                continue;
            };
            if sample.pod.starts_with(&prefix) && sample.cpu_millicores > threshold {
                return Some(Instant::now());
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .context("no usage sample above the target within 30 s of the step")?;
    let (decided, replicas) = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some((at, d)) = decisions.recv().await {
            if d.hpa == name && d.rescaled && d.desired_replicas > d.current_replicas {
                return Some((at, d.desired_replicas));
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .context("no scale-up decision within 60 s of the step")?;
    wait_until(
        &format!("{replicas} replicas Ready"),
        Duration::from_secs(120),
        || async { ready_replicas(api, NAMESPACE, name).await >= replicas },
    )
    .await?;
    let ready = Instant::now();
    Ok(Trial {
        to_cross: crossed - step,
        cross_to_decision: decided.saturating_duration_since(crossed),
        to_decision: decided - step,
        to_ready: ready - step,
        replicas,
    })
}
