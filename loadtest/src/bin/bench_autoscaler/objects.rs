//! What the benchmarks create (a privileged namespace, Deployments, HPAs), how they wait for
//! a condition with a deadline, and the HPA decisions they listen to.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use bus_schemas::api::DeleteOptions;
use bus_schemas::autoscaling::Decision;
use bus_schemas::kinds::{Deployment, HorizontalPodAutoscaler, Namespace, Pod};
use bus_schemas::{manifest, subjects};
use futures::StreamExt;
use shoal_bus::ApiClient;

/// Polls `check` every 20 ms until it holds; an error naming `what` after `limit`.
pub async fn wait_until<F, Fut>(what: &str, limit: Duration, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        if Instant::now() >= deadline {
            bail!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// A namespace whose pods may use hostPath volumes (Pod Security `privileged`).
pub async fn privileged_namespace(api: &ApiClient, name: &str) -> Result<()> {
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}
    }))?;
    match api.create(&ns).await {
        Ok(_) => Ok(()),
        Err(e) if e.is(bus_schemas::Reason::AlreadyExists) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Decodes one manifest document (the benchmarks write theirs as Kubernetes users would).
pub fn decode<K: bus_schemas::resource::Resource>(yaml: &str) -> Result<K> {
    let docs = manifest::parse(yaml).map_err(|e| anyhow::anyhow!("{e}"))?;
    let Some(doc) = docs.first() else {
        bail!("empty manifest")
    };
    manifest::decode(doc).map_err(|e| anyhow::anyhow!("{e}"))
}

/// A Deployment of `replicas` pods labelled `app: <name>` running `pod_spec` (JSON).
pub fn deployment(
    namespace: &str,
    name: &str,
    replicas: i32,
    pod_spec: serde_json::Value,
) -> Result<Deployment> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
        }
    }))?)
}

/// An HPA on CPU utilization of `name`'s requests.
pub fn cpu_hpa(
    namespace: &str,
    name: &str,
    min: i32,
    max: i32,
    percent: u32,
) -> Result<HorizontalPodAutoscaler> {
    decode(&format!(
        "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {name}}}
  minReplicas: {min}
  maxReplicas: {max}
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {{type: Utilization, averageUtilization: {percent}}}
"
    ))
}

/// Deletes a Deployment and its HPA (no grace for its pods) and waits until its pods are gone.
pub async fn delete_workload(api: &ApiClient, namespace: &str, name: &str) -> Result<()> {
    let options = DeleteOptions {
        namespace: namespace.into(),
        name: name.into(),
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let _ = api.delete::<HorizontalPodAutoscaler>(&options).await;
    let _ = api.delete::<Deployment>(&options).await;
    wait_until(
        &format!("the pods of {namespace}/{name} gone"),
        Duration::from_secs(90),
        || async {
            let Ok(pods) = api
                .list::<Pod>(&bus_schemas::api::ListOptions {
                    namespace: namespace.into(),
                    label_selector: format!("app={name}"),
                    ..Default::default()
                })
                .await
            else {
                return false;
            };
            for pod in &pods.items {
                // Pods the ReplicaSet left behind go too.
                let _ = api
                    .delete::<Pod>(&DeleteOptions {
                        namespace: namespace.into(),
                        name: pod.metadata.name.clone(),
                        grace_period_seconds: Some(0),
                        ..Default::default()
                    })
                    .await;
            }
            pods.items.is_empty()
        },
    )
    .await
}

/// The HPA, once it says ScalingActive (it reads its metrics); None before, or if unreadable.
pub async fn active_hpa(
    api: &ApiClient,
    namespace: &str,
    name: &str,
) -> Option<HorizontalPodAutoscaler> {
    api.get::<HorizontalPodAutoscaler>(namespace, name)
        .await
        .ok()
        .filter(|h| {
            bus_schemas::meta::find_condition(&h.status.conditions, "ScalingActive")
                .is_some_and(|c| c.is_true())
        })
}

pub async fn ready_replicas(api: &ApiClient, namespace: &str, name: &str) -> i32 {
    api.get::<Deployment>(namespace, name)
        .await
        .map(|d| d.status.ready_replicas)
        .unwrap_or(0)
}

/// Every decision the autoscaler publishes about HPAs in `namespace`, with when it arrived.
pub async fn decisions(
    nats: &async_nats::Client,
    namespace: &str,
) -> Result<tokio::sync::mpsc::UnboundedReceiver<(Instant, Decision)>> {
    let subject = format!(
        "shoal.v1.autoscaler.decisions.{}.>",
        subjects::encode_token(namespace)
    );
    let mut sub = nats.subscribe(subject).await?;
    nats.flush().await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(msg) = sub.next().await {
            let at = Instant::now();
            if let Ok(d) = bus_schemas::codec::from_msgpack::<Decision>(&msg.payload) {
                if tx.send((at, d)).is_err() {
                    return;
                }
            }
        }
    });
    Ok(rx)
}
