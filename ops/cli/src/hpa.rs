//! HorizontalPodAutoscalers on the command line, as kubectl shows them: the lines `describe
//! hpa` adds (every metric's current and target value, the conditions), and `shoal
//! autoscale`. The `get hpa` row, TARGETS included, is `shoal_tables`'.

use anyhow::{bail, Result};
use bus_schemas::kinds::hpa::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricSpec,
    MetricTarget, ResourceMetricSource,
};
use serde_json::Value;
use shoal_tables::{metric_values, metrics_with_status};

use crate::cli::AutoscaleArgs;
use crate::kinds;
use crate::remote::Session;

fn text(v: &Value, pointer: &str) -> String {
    match v.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// What `describe hpa` shows beyond the object itself.
pub fn describe(hpa: &Value) {
    let line = |label: &str, value: String| println!("{:<20}{value}", format!("{label}:"));
    line(
        "Reference",
        format!(
            "{}/{}",
            text(hpa, "/spec/scaleTargetRef/kind"),
            text(hpa, "/spec/scaleTargetRef/name")
        ),
    );
    println!("Metrics:            ( current / target )");
    let (specs, statuses) = metrics_with_status(hpa);
    for (i, spec) in specs.iter().enumerate() {
        let (cur, tgt) = metric_values(spec, statuses.get(i));
        println!("  {}:  {cur} / {tgt}", metric_label(spec));
    }
    line("Min replicas", text(hpa, "/spec/minReplicas"));
    line("Max replicas", text(hpa, "/spec/maxReplicas"));
    line(
        "Deployment pods",
        format!(
            "{} current / {} desired",
            hpa.pointer("/status/currentReplicas")
                .and_then(|v| v.as_i64())
                .unwrap_or(0),
            hpa.pointer("/status/desiredReplicas")
                .and_then(|v| v.as_i64())
                .unwrap_or(0)
        ),
    );
    let conditions = hpa
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default();
    if !conditions.is_empty() {
        println!("Conditions:");
        println!("  {:<16}{:<8}{:<28}MESSAGE", "TYPE", "STATUS", "REASON");
        for c in &conditions {
            println!(
                "  {:<16}{:<8}{:<28}{}",
                text(c, "/type"),
                text(c, "/status"),
                text(c, "/reason"),
                text(c, "/message")
            );
        }
    }
}

/// kubectl's label of a metric in `describe`.
fn metric_label(spec: &Value) -> String {
    match text(spec, "/type").as_str() {
        "Resource" => {
            let name = text(spec, "/resource/name");
            if text(spec, "/resource/target/type") == "Utilization" {
                format!("resource {name} on pods  (as a percentage of request)")
            } else {
                format!("resource {name} on pods")
            }
        }
        "ContainerResource" => format!(
            "resource {} of container \"{}\" on pods",
            text(spec, "/containerResource/name"),
            text(spec, "/containerResource/container")
        ),
        "Pods" => format!("\"{}\" on pods", text(spec, "/pods/metric/name")),
        "Object" => format!(
            "\"{}\" on {}/{}",
            text(spec, "/object/metric/name"),
            text(spec, "/object/describedObject/kind"),
            text(spec, "/object/describedObject/name")
        ),
        "External" => format!(
            "\"{}\" (external metric)",
            text(spec, "/external/metric/name")
        ),
        other => other.to_string(),
    }
}

/// `shoal autoscale deploy/web --min 2 --max 20 --cpu-percent 60`.
pub async fn autoscale(session: &Session, args: AutoscaleArgs) -> Result<i32> {
    let (info, name) = kinds::split_slash(&args.target)?;
    let name = match (name, &args.name_arg) {
        (Some(n), _) => n,
        (None, Some(n)) => n.clone(),
        (None, None) => bail!("name the workload: shoal autoscale deploy/NAME --max N"),
    };
    if !matches!(info.kind, "Deployment" | "ReplicaSet") {
        bail!(
            "cannot autoscale a {}: only deployments and replicasets have a scale subresource",
            info.kind
        );
    }
    if args.max < 1 {
        bail!("--max must be at least 1, not {}", args.max);
    }
    let mut hpa = HorizontalPodAutoscaler::default();
    hpa.metadata.name = args.name.clone().unwrap_or_else(|| name.clone());
    hpa.metadata.namespace = kinds::namespace_for(info, &args.namespace);
    hpa.spec = HorizontalPodAutoscalerSpec {
        scale_target_ref: CrossVersionObjectReference {
            api_version: info.api_version.into(),
            kind: info.kind.into(),
            name,
        },
        min_replicas: args.min,
        max_replicas: args.max,
        // None: the API's default, 80% CPU, as kubectl leaves it to the server.
        metrics: args
            .cpu_percent
            .map(|percent| {
                vec![MetricSpec {
                    type_: "Resource".into(),
                    resource: Some(ResourceMetricSource {
                        name: "cpu".into(),
                        target: MetricTarget {
                            type_: "Utilization".into(),
                            average_utilization: Some(percent),
                            ..Default::default()
                        },
                    }),
                    ..Default::default()
                }]
            })
            .unwrap_or_default(),
        behavior: None,
    };
    let created = session.api.create(&hpa).await?;
    println!(
        "horizontalpodautoscaler.autoscaling/{} autoscaled",
        created.metadata.name
    );
    Ok(0)
}
