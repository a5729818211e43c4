//! `shoal cordon|uncordon NODE` and `shoal drain NODE`.
//!
//! Drain is kubectl's: cordon first (so nothing new lands while we empty the node), check
//! every pod bound to the node before touching any (DaemonSet pods would come straight back,
//! unmanaged pods would be gone for good, emptyDir data is lost), then delete the rest
//! gracefully and wait until their node confirmed they stopped. Shoal has no eviction
//! subresource (and no PodDisruptionBudgets), so an eviction is a graceful delete.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use bus_schemas::api::{DeleteOptions, ListOptions, PatchRequest};
use bus_schemas::kinds::{Node, Pod};

use crate::cli::DrainArgs;
use crate::remote::Session;
use crate::rollout::{parse_timeout, POLL};

/// Sets `spec.unschedulable` (cordon) or clears it (uncordon).
pub async fn cordon(session: &Session, name: &str, unschedulable: bool) -> Result<i32> {
    let node: Node = session.api.get("", name).await.map_err(|e| {
        if e.is_not_found() {
            anyhow::anyhow!("node {name:?} not found: `shoal get nodes` lists the nodes")
        } else {
            e.into()
        }
    })?;
    let done = if unschedulable {
        "cordoned"
    } else {
        "uncordoned"
    };
    if node.spec.unschedulable == unschedulable {
        println!("node/{name} already {done}");
        return Ok(0);
    }
    let patch = serde_json::json!({"spec": {"unschedulable": unschedulable}});
    let request = PatchRequest {
        namespace: String::new(),
        name: name.into(),
        patch: patch.to_string(),
        status: false,
    };
    session.api.patch::<Node>(&request).await?;
    println!("node/{name} {done}");
    Ok(0)
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.metadata.namespace, pod.metadata.name)
}

/// What drain does with one pod.
#[derive(Debug, PartialEq)]
enum Verdict {
    Evict,
    /// Evict, but say why that may hurt.
    EvictWithWarning(&'static str),
    Skip(&'static str),
    /// Refused: the message explains which flag overrides it.
    Refuse(&'static str),
}

const DAEMONSET: &str =
    "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore them)";
const UNMANAGED: &str = "cannot delete Pods that declare no controller (use --force to override; nothing will recreate them)";
const LOCAL_STORAGE: &str = "cannot delete Pods with local storage (use --delete-emptydir-data to override; their emptyDir data is lost)";

/// kubectl's drain filters. A finished pod holds nothing worth keeping, so only the
/// DaemonSet rule applies to it.
fn verdict(pod: &Pod, args: &DrainArgs) -> Verdict {
    let controller = pod.metadata.controller_ref();
    if controller.is_some_and(|c| c.kind == "DaemonSet") {
        return if args.ignore_daemonsets {
            Verdict::Skip("ignoring DaemonSet-managed Pods")
        } else {
            Verdict::Refuse(DAEMONSET)
        };
    }
    if pod.is_terminal() {
        return Verdict::Evict;
    }
    if pod.spec.volumes.iter().any(|v| v.empty_dir.is_some()) && !args.delete_emptydir_data {
        return Verdict::Refuse(LOCAL_STORAGE);
    }
    if controller.is_none() {
        return if args.force {
            Verdict::EvictWithWarning("deleting Pods that declare no controller")
        } else {
            Verdict::Refuse(UNMANAGED)
        };
    }
    Verdict::Evict
}

pub async fn drain(session: &Session, args: DrainArgs) -> Result<i32> {
    let node = args.node.clone();
    let timeout = parse_timeout(&args.timeout).context("--timeout")?;
    cordon(session, &node, true).await?;

    let options = ListOptions {
        field_selector: format!("spec.nodeName={node}"),
        ..Default::default()
    };
    let pods = session.api.list::<Pod>(&options).await?.items;
    let mut refused: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    let mut warnings: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    let mut evict = Vec::new();
    for pod in pods {
        match verdict(&pod, &args) {
            Verdict::Evict => evict.push(pod),
            Verdict::EvictWithWarning(why) => {
                warnings.entry(why).or_default().push(key(&pod));
                evict.push(pod);
            }
            Verdict::Skip(why) => warnings.entry(why).or_default().push(key(&pod)),
            Verdict::Refuse(why) => refused.entry(why).or_default().push(key(&pod)),
        }
    }
    // Nothing is evicted unless every pod may be: a half-drained node helps nobody.
    if !refused.is_empty() {
        let reasons: Vec<String> = refused
            .iter()
            .map(|(why, pods)| format!("{why}: {}", pods.join(", ")))
            .collect();
        bail!(
            "cannot drain node {node:?}, no pod was evicted:\n  {}\nThe node stays cordoned; `shoal uncordon {node}` makes it schedulable again.",
            reasons.join("\n  ")
        );
    }
    for (why, pods) in &warnings {
        eprintln!("Warning: {why}: {}", pods.join(", "));
    }

    let grace_period_seconds = (args.grace_period >= 0).then_some(args.grace_period);
    let mut pending = Vec::new();
    for pod in evict {
        println!("evicting pod {}", key(&pod));
        let options = DeleteOptions {
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            grace_period_seconds,
            ..Default::default()
        };
        match session.api.delete::<Pod>(&options).await {
            Ok(_) => pending.push(pod),
            Err(e) if e.is_not_found() => println!("pod/{} evicted", pod.metadata.name),
            Err(e) => bail!(
                "evicting pod {}: {e} (node {node:?} stays cordoned; run drain again)",
                key(&pod)
            ),
        }
    }

    // A graceful delete returns at once; the pod goes when its node confirms it stopped.
    // A pod of the same name but another uid is a replacement, so the evicted one is gone.
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    while !pending.is_empty() {
        let mut still = Vec::new();
        for pod in pending {
            match session
                .api
                .get::<Pod>(&pod.metadata.namespace, &pod.metadata.name)
                .await
            {
                Ok(now) if now.metadata.uid == pod.metadata.uid && now.spec.node_name == node => {
                    still.push(pod)
                }
                Ok(_) => println!("pod/{} evicted", pod.metadata.name),
                Err(e) if e.is_not_found() => println!("pod/{} evicted", pod.metadata.name),
                Err(e) => return Err(e.into()),
            }
        }
        pending = still;
        if pending.is_empty() {
            break;
        }
        if let (Some(deadline), Some(timeout)) = (deadline, timeout) {
            if tokio::time::Instant::now() + POLL > deadline {
                let names: Vec<String> = pending.iter().map(key).collect();
                bail!(
                    "drain of node {node:?} did not finish within {timeout:?}: still terminating: {} (their node must confirm they stopped: is its agent running?). The node stays cordoned; run drain again to keep waiting.",
                    names.join(", ")
                );
            }
        }
        tokio::time::sleep(POLL).await;
    }
    println!("node/{node} drained");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::meta::OwnerReference;

    fn args(ignore_daemonsets: bool, delete_emptydir_data: bool, force: bool) -> DrainArgs {
        DrainArgs {
            node: "n1".into(),
            ignore_daemonsets,
            delete_emptydir_data,
            force,
            grace_period: -1,
            timeout: "0s".into(),
        }
    }

    fn pod(owner: Option<&str>, empty_dir: bool, phase: &str) -> Pod {
        let mut p = Pod::default();
        if let Some(kind) = owner {
            p.metadata.owner_references.push(OwnerReference {
                kind: kind.into(),
                controller: Some(true),
                ..Default::default()
            });
        }
        if empty_dir {
            p.spec.volumes.push(bus_schemas::kinds::pod_spec::Volume {
                name: "scratch".into(),
                empty_dir: Some(Default::default()),
                ..Default::default()
            });
        }
        p.status.phase = phase.into();
        p
    }

    #[test]
    fn drain_filters_follow_kubectl() {
        let none = args(false, false, false);
        assert_eq!(
            verdict(&pod(Some("ReplicaSet"), false, "Running"), &none),
            Verdict::Evict
        );
        assert_eq!(
            verdict(&pod(Some("DaemonSet"), false, "Running"), &none),
            Verdict::Refuse(DAEMONSET)
        );
        assert!(matches!(
            verdict(
                &pod(Some("DaemonSet"), false, "Running"),
                &args(true, false, false)
            ),
            Verdict::Skip(_)
        ));
        assert_eq!(
            verdict(&pod(None, false, "Running"), &none),
            Verdict::Refuse(UNMANAGED)
        );
        assert!(matches!(
            verdict(&pod(None, false, "Running"), &args(false, false, true)),
            Verdict::EvictWithWarning(_)
        ));
        assert_eq!(
            verdict(&pod(Some("ReplicaSet"), true, "Running"), &none),
            Verdict::Refuse(LOCAL_STORAGE)
        );
        assert_eq!(
            verdict(
                &pod(Some("ReplicaSet"), true, "Running"),
                &args(false, true, false)
            ),
            Verdict::Evict
        );
        // Finished pods hold nothing: evicted without --force or --delete-emptydir-data.
        assert_eq!(
            verdict(&pod(None, true, "Succeeded"), &none),
            Verdict::Evict
        );
    }
}
