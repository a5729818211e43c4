//! The two checks that look inside the running processes once the cluster settled: every
//! node's runtime holds exactly the containers of the pods bound to it (nothing leaked, nothing
//! lost), and every actor process's caches hold what a fresh list holds.
//!
//! The comparisons are pure ([`node_findings`], [`cache_findings`]); [`containers`] and
//! [`caches`] ask the cluster, retrying until the views agree or a deadline passes, since a
//! node may still be removing a deleted pod's sandbox and a Node's status may be rewritten
//! between two reads. Only a difference that outlasts the deadline is a finding.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bus_schemas::api::ListOptions;
use bus_schemas::inspect::{CacheSummary, NodeContainers, ProcessCaches};
use bus_schemas::kinds::Pod;
use bus_schemas::Resource;
use shoal_bus::ApiClient;

/// How long the views may take to agree before a difference is a finding.
const AGREE_WITHIN: Duration = Duration::from_secs(30);
/// Kinds rewritten continuously by design (leases renewed, events counted): a fresh list
/// and a cache can agree only by chance at any moment, so they are not compared.
const CHURNING_KINDS: [&str; 2] = ["Lease", "Event"];

/// What is wrong between the pods bound to `node` (live ones) and what its runtime holds.
pub fn node_findings(node: &str, bound: &[&Pod], runtime: &NodeContainers) -> Vec<String> {
    if !runtime.error.is_empty() {
        return vec![format!("node {node}: {}", runtime.error)];
    }
    let mut findings = Vec::new();
    let sandboxes: BTreeMap<&str, _> = runtime
        .sandboxes
        .iter()
        .map(|s| (s.pod_uid.as_str(), s))
        .collect();
    for pod in bound {
        let name = &pod.metadata.name;
        let Some(sandbox) = sandboxes.get(pod.metadata.uid.as_str()) else {
            findings.push(format!("node {node} runs no sandbox for its pod {name}"));
            continue;
        };
        for container in &pod.spec.containers {
            let running = sandbox
                .containers
                .iter()
                .any(|c| c.name == container.name && c.state == "running");
            if !running {
                findings.push(format!(
                    "node {node} does not run container {} of its pod {name}",
                    container.name
                ));
            }
        }
    }
    let wanted: BTreeSet<&str> = bound.iter().map(|p| p.metadata.uid.as_str()).collect();
    for sandbox in &runtime.sandboxes {
        if !wanted.contains(sandbox.pod_uid.as_str()) {
            findings.push(format!(
                "node {node} leaked a sandbox of pod uid {} ({}/{}, {} container(s)) no pod bound to it accounts for",
                sandbox.pod_uid,
                sandbox.namespace,
                sandbox.hostname,
                sandbox.containers.len()
            ));
        }
    }
    findings
}

fn live(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.phase != "Succeeded"
        && pod.status.phase != "Failed"
}

/// Every node's runtime against the live pods bound to it.
pub async fn containers(
    api: &ApiClient,
    nats: &async_nats::Client,
    nodes: &[String],
) -> Vec<String> {
    let start = Instant::now();
    loop {
        let findings = containers_once(api, nats, nodes).await;
        if findings.is_empty() || start.elapsed() > AGREE_WITHIN {
            return findings;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn containers_once(
    api: &ApiClient,
    nats: &async_nats::Client,
    nodes: &[String],
) -> Vec<String> {
    let pods = match api.list::<Pod>(&ListOptions::default()).await {
        Ok(list) => list.items,
        Err(e) => return vec![format!("listing pods for the node check: {e}")],
    };
    let mut findings = Vec::new();
    for node in nodes {
        let bound: Vec<&Pod> = pods
            .iter()
            .filter(|p| live(p) && p.spec.node_name == *node)
            .collect();
        match shoal_bus::inspect::node_containers(nats, node, Duration::from_secs(5)).await {
            Ok(runtime) => findings.extend(node_findings(node, &bound, &runtime)),
            Err(e) => findings.push(e),
        }
    }
    findings
}

/// What differs between each process's caches and `fresh` (kind → the summary of a fresh
/// list). Kinds a process does not cache, and the churning kinds, are not compared.
pub fn cache_findings(
    processes: &[ProcessCaches],
    fresh: &BTreeMap<String, CacheSummary>,
) -> Vec<String> {
    let mut findings = Vec::new();
    for process in processes {
        for cache in &process.caches {
            let Some(list) = fresh.get(&cache.kind) else {
                continue;
            };
            if !cache.synced {
                findings.push(format!(
                    "{}: its {} cache never finished its initial list",
                    process.process, cache.kind
                ));
            } else if !cache.same_objects(list) {
                findings.push(format!(
                    "{}: its {} cache holds {} objects (digest {:016x}, revision {}), a fresh list {} (digest {:016x})",
                    process.process,
                    cache.kind,
                    cache.count,
                    cache.digest,
                    cache.revision,
                    list.count,
                    list.digest
                ));
            }
        }
    }
    findings
}

/// Every actor process's caches against fresh lists. `expected` processes must answer.
pub async fn caches(api: &ApiClient, nats: &async_nats::Client, expected: usize) -> Vec<String> {
    let start = Instant::now();
    loop {
        let findings = caches_once(api, nats, expected).await;
        if findings.is_empty() || start.elapsed() > AGREE_WITHIN {
            return findings;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn caches_once(api: &ApiClient, nats: &async_nats::Client, expected: usize) -> Vec<String> {
    let processes = match shoal_bus::inspect::gather_caches(
        nats,
        expected,
        Duration::from_millis(500),
        Duration::from_secs(10),
    )
    .await
    {
        Ok(p) => p,
        Err(e) => return vec![format!("asking the processes for their caches: {e}")],
    };
    let mut findings = Vec::new();
    if processes.len() < expected {
        findings.push(format!(
            "only {} of {expected} actor processes answered for their caches: {:?}",
            processes.len(),
            processes.iter().map(|p| &p.process).collect::<Vec<_>>()
        ));
    }
    let kinds: BTreeSet<&str> = processes
        .iter()
        .flat_map(|p| p.caches.iter().map(|c| c.kind.as_str()))
        .filter(|k| !CHURNING_KINDS.contains(k))
        .collect();
    let mut fresh = BTreeMap::new();
    for kind in kinds {
        match fresh_summary(api, kind).await {
            Ok(Some(summary)) => {
                fresh.insert(kind.to_string(), summary);
            }
            Ok(None) => {}
            Err(e) => findings.push(format!("listing {kind} for the cache check: {e}")),
        }
    }
    findings.extend(cache_findings(&processes, &fresh));
    findings
}

async fn fresh_summary(api: &ApiClient, kind: &str) -> Result<Option<CacheSummary>, String> {
    bus_schemas::with_kind!(kind, K => {
        let list = api
            .list::<K>(&ListOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(Some(CacheSummary::of(
            kind,
            list.items.iter().map(|o| {
                let meta = o.meta();
                (
                    meta.namespace.as_str(),
                    meta.name.as_str(),
                    meta.resource_version.as_str(),
                )
            }),
        )))
    }, _ => Ok(None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::inspect::{ContainerView, SandboxView};

    fn pod(name: &str, uid: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {"containers": [{"name": "app"}], "nodeName": "n1"},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    }

    fn sandbox(uid: &str, state: &str) -> SandboxView {
        SandboxView {
            pod_uid: uid.into(),
            namespace: "default".into(),
            hostname: "x".into(),
            containers: vec![ContainerView {
                name: "app".into(),
                id: format!("{uid}-app"),
                state: state.into(),
            }],
        }
    }

    #[test]
    fn a_node_running_exactly_its_pods_passes() {
        let (a, b) = (pod("a", "u1"), pod("b", "u2"));
        let runtime = NodeContainers {
            node: "n1".into(),
            sandboxes: vec![sandbox("u1", "running"), sandbox("u2", "running")],
            error: String::new(),
        };
        assert!(node_findings("n1", &[&a, &b], &runtime).is_empty());
    }

    #[test]
    fn a_lost_container_and_a_leaked_sandbox_are_found() {
        let (a, b) = (pod("a", "u1"), pod("b", "u2"));
        let runtime = NodeContainers {
            node: "n1".into(),
            sandboxes: vec![sandbox("u1", "exited"), sandbox("u9", "running")],
            error: String::new(),
        };
        let findings = node_findings("n1", &[&a, &b], &runtime);
        assert!(
            findings
                .iter()
                .any(|f| f.contains("container app of its pod a")),
            "{findings:?}"
        );
        assert!(
            findings
                .iter()
                .any(|f| f.contains("no sandbox for its pod b")),
            "{findings:?}"
        );
        assert!(
            findings
                .iter()
                .any(|f| f.contains("leaked a sandbox of pod uid u9")),
            "{findings:?}"
        );
    }

    #[test]
    fn a_cache_behind_the_list_is_found_and_churning_kinds_are_not_compared() {
        let list = CacheSummary::of("Pod", [("d", "a", "5"), ("d", "b", "6")]);
        let mut stale = CacheSummary::of("Pod", [("d", "a", "5"), ("d", "b", "4")]);
        stale.revision = 4;
        let processes = vec![
            ProcessCaches {
                process: "good".into(),
                caches: vec![list.clone()],
            },
            ProcessCaches {
                process: "stale".into(),
                caches: vec![stale, CacheSummary::of("Lease", [("d", "l", "1")])],
            },
        ];
        let fresh = BTreeMap::from([("Pod".to_string(), list)]);
        let findings = cache_findings(&processes, &fresh);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(
            findings[0].starts_with("stale: its Pod cache"),
            "{findings:?}"
        );
    }
}
