//! The history checker: after the load stops and the cluster settles, the client's record of
//! acknowledged writes is held against a fresh read of the cluster. Pure functions of the
//! recorded history and the final state, apart from [`settle`], which reads that state.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bus_schemas::api::ListOptions;
use bus_schemas::kinds::{Deployment, Lease, Node, Pod};
use shoal_bus::ApiClient;

use super::churn::{deployment_name, Counts, History, COUNTER, NAMESPACE};

/// The cluster as a fresh list sees it once it settled.
#[derive(Debug, Default)]
pub struct FinalState {
    /// The counter's value and revision.
    pub counter: Option<(i32, u64)>,
    /// Every Lease of the namespace: name → revision.
    pub leases: BTreeMap<String, u64>,
    /// Deployment name → spec.replicas.
    pub deployments: BTreeMap<String, i32>,
    pub pods: Vec<Pod>,
    pub ready_nodes: BTreeSet<String>,
    /// Pods not yet Running on a Ready node, or still terminating, when the settle deadline
    /// passed (empty: settled). Reported, not a violation of the history: a slow node is not
    /// a lost write.
    pub unsettled: Vec<String>,
}

fn revision(rv: &str) -> u64 {
    rv.parse().unwrap_or(0)
}

fn live(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.phase != "Succeeded"
        && pod.status.phase != "Failed"
}

async fn read(api: &ApiClient, deployments: usize) -> Option<FinalState> {
    let ns = ListOptions {
        namespace: NAMESPACE.into(),
        ..Default::default()
    };
    let mut state = FinalState::default();
    for lease in api.list::<Lease>(&ns).await.ok()?.items {
        let rv = revision(&lease.metadata.resource_version);
        if lease.metadata.name == COUNTER {
            state.counter = Some((lease.spec.lease_transitions.unwrap_or(0), rv));
        }
        state.leases.insert(lease.metadata.name, rv);
    }
    for i in 0..deployments {
        let d: Deployment = api.get(NAMESPACE, &deployment_name(i)).await.ok()?;
        state
            .deployments
            .insert(d.metadata.name.clone(), d.spec.replicas.unwrap_or(1));
    }
    state.pods = api.list::<Pod>(&ns).await.ok()?.items;
    state.ready_nodes = api
        .list::<Node>(&ListOptions::default())
        .await
        .ok()?
        .items
        .into_iter()
        .filter(Node::is_ready)
        .map(|n| n.metadata.name)
        .collect();
    Some(state)
}

/// Every Deployment has exactly its spec's pods, all Running on a Ready node, and nothing
/// is terminating.
fn settled(state: &FinalState) -> bool {
    deployment_findings(state).is_empty()
        && state.pods.iter().all(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.phase == "Running"
                && state.ready_nodes.contains(&p.spec.node_name)
        })
}

/// Waits (up to `limit`) until the cluster settled, and returns what it then holds.
pub async fn settle(api: &ApiClient, deployments: usize, limit: Duration) -> FinalState {
    let start = Instant::now();
    let mut last = FinalState::default();
    while start.elapsed() < limit {
        if let Some(state) = read(api, deployments).await {
            if settled(&state) {
                return state;
            }
            last = state;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    last.unsettled = last
        .pods
        .iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_some()
                || p.status.phase != "Running"
                || !last.ready_nodes.contains(&p.spec.node_name)
        })
        .map(|p| {
            format!(
                "{} ({}{}, node {:?})",
                p.metadata.name,
                if p.status.phase.is_empty() {
                    "no phase"
                } else {
                    &p.status.phase
                },
                if p.metadata.deletion_timestamp.is_some() {
                    ", terminating"
                } else {
                    ""
                },
                p.spec.node_name
            )
        })
        .collect();
    if last.unsettled.is_empty() {
        last.unsettled.push("the cluster could not be read".into());
    }
    last
}

fn deployment_findings(state: &FinalState) -> Vec<String> {
    let mut findings = Vec::new();
    for (name, &want) in &state.deployments {
        let have = state
            .pods
            .iter()
            .filter(|p| live(p) && p.metadata.labels.get("app") == Some(name))
            .count();
        if have != want as usize {
            findings.push(format!(
                "Deployment {name} has {have} live pods, its spec asks for {want}"
            ));
        }
    }
    findings
}

/// Checks the history against the final state: findings are violations, empty is a pass.
pub fn check(history: &History, state: &FinalState) -> (Counts, Vec<String>) {
    let mut findings = Vec::new();
    let mut counts = Counts {
        acked_creates: history.created.len(),
        acked_cas: history.cas.len(),
        indeterminate: history.indeterminate,
        scales: history.scales,
        rollouts: history.rollouts,
        pod_deletes: history.pod_deletes,
        ..Default::default()
    };
    // Every acknowledged create is there, at the revision it was acknowledged with (nothing
    // wrote it again).
    for (name, rv) in &history.created {
        match state.leases.get(name) {
            None => {
                counts.lost += 1;
                findings.push(format!(
                    "acknowledged create of lease {name} (revision {rv}) is lost"
                ));
            }
            Some(found) if found != rv => {
                counts.duplicated += 1;
                findings.push(format!(
                    "lease {name} acknowledged at revision {rv} was written again (now {found})"
                ));
            }
            Some(_) => {}
        }
    }
    findings.extend(counter_findings(history, state, &mut counts));
    findings.extend(deployment_findings(state));
    let mut names = BTreeSet::new();
    let mut uids = BTreeSet::new();
    for pod in &state.pods {
        if !names.insert(pod.metadata.name.clone()) {
            findings.push(format!("pod name {} exists twice", pod.metadata.name));
        }
        if !uids.insert(pod.metadata.uid.clone()) {
            findings.push(format!("pod uid {} is held by two pods", pod.metadata.uid));
        }
        if live(pod) && !state.ready_nodes.contains(&pod.spec.node_name) {
            findings.push(format!(
                "pod {} is bound to {:?}, which is not a Ready node",
                pod.metadata.name, pod.spec.node_name
            ));
        }
    }
    (counts, findings)
}

/// A CAS register incremented by read-modify-write: acknowledged writes, in revision order,
/// carry strictly increasing values (two with one value: an update was lost; a value going
/// down: an acknowledged write was overwritten from a stale read), and the final value is at
/// least the last acknowledged one and at most it plus the writes of unknown outcome.
fn counter_findings(history: &History, state: &FinalState, counts: &mut Counts) -> Vec<String> {
    let mut findings = Vec::new();
    let mut acks = history.cas.clone();
    acks.sort_by_key(|a| a.revision);
    let mut seen = BTreeMap::new();
    for a in &acks {
        if let Some(other) = seen.insert(a.value, a.revision) {
            counts.duplicated += 1;
            findings.push(format!(
                "counter value {} acknowledged twice (revisions {other} and {}): a lost update",
                a.value, a.revision
            ));
        }
    }
    for pair in acks.windows(2) {
        if pair[1].value <= pair[0].value && pair[1].revision != pair[0].revision {
            findings.push(format!(
                "counter went from {} (revision {}) to {} (revision {}): an acknowledged CAS was overwritten",
                pair[0].value, pair[0].revision, pair[1].value, pair[1].revision
            ));
        }
    }
    match (state.counter, acks.last()) {
        (None, Some(_)) => {
            counts.lost += acks.len();
            findings.push("the counter object is gone".into());
        }
        (Some((value, rv)), Some(last)) => {
            if value < last.value || rv < last.revision {
                let lost = acks.iter().filter(|a| a.value > value).count();
                counts.lost += lost;
                findings.push(format!(
                    "counter is {value} at revision {rv}, but {} was acknowledged at revision {}",
                    last.value, last.revision
                ));
            }
            let ceiling = last.value as usize + history.indeterminate;
            if value as usize > ceiling {
                findings.push(format!(
                    "counter is {value}, more than the {} acknowledged plus {} indeterminate increments allow",
                    last.value, history.indeterminate
                ));
            }
        }
        _ => {}
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::churn::CasAck;
    use super::*;

    fn history(cas: &[(i32, u64)]) -> History {
        History {
            cas: cas
                .iter()
                .map(|&(value, revision)| CasAck { value, revision })
                .collect(),
            ..Default::default()
        }
    }

    fn state(counter: (i32, u64)) -> FinalState {
        FinalState {
            counter: Some(counter),
            ..Default::default()
        }
    }

    #[test]
    fn a_clean_counter_history_passes() {
        let (counts, findings) = check(&history(&[(1, 10), (2, 12), (3, 15)]), &state((3, 15)));
        assert!(findings.is_empty(), "{findings:?}");
        assert_eq!(counts.acked_cas, 3);
    }

    #[test]
    fn two_acks_of_one_value_are_a_lost_update() {
        let (counts, findings) = check(&history(&[(1, 10), (1, 12)]), &state((1, 12)));
        assert_eq!(counts.duplicated, 1);
        assert!(
            findings.iter().any(|f| f.contains("lost update")),
            "{findings:?}"
        );
    }

    #[test]
    fn a_final_value_below_the_last_ack_loses_writes() {
        let (counts, findings) = check(&history(&[(1, 10), (2, 12)]), &state((1, 10)));
        assert_eq!(counts.lost, 1);
        assert!(!findings.is_empty());
    }

    #[test]
    fn a_missing_acknowledged_create_is_lost() {
        let mut h = history(&[]);
        h.created.push(("chaos-w-1".into(), 7));
        let (counts, findings) = check(&h, &FinalState::default());
        assert_eq!(counts.lost, 1);
        assert!(findings[0].contains("chaos-w-1"));
    }

    #[test]
    fn a_deployment_with_too_many_pods_is_a_violation() {
        let mut s = FinalState::default();
        s.deployments.insert("chaos-0".into(), 1);
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "u", "labels": {"app": "chaos-0"}},
            "spec": {"containers": []}
        }))
        .unwrap();
        s.pods = vec![pod.clone(), {
            let mut p = pod;
            p.metadata.name = "q".into();
            p.metadata.uid = "v".into();
            p
        }];
        let (_, findings) = check(&History::default(), &s);
        assert!(
            findings.iter().any(|f| f.contains("2 live pods")),
            "{findings:?}"
        );
    }
}
