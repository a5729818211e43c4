//! Endpoints controller: for every Service with a selector, an Endpoints object of the same
//! name whose subsets list the selected pods' IPs — ready pods in `addresses`, the others in
//! `notReadyAddresses` — with the Service's ports resolved against each pod (a named
//! targetPort is looked up in the pod's containers). Pods resolving to the same ports share
//! a subset.
//!
//! A pod on a node whose Ready condition is not True (the node stopped heartbeating, or its
//! agent reports it unfit, e.g. its network is cut) is listed as not ready whatever its own
//! condition says: its agent may be unable to report the pod, and traffic must leave the
//! node at once rather than when the pod is evicted. Node changes therefore re-evaluate the
//! Services selecting that node's pods ([`feed`]).
//!
//! Services without a selector are left alone (their Endpoints are written by hand). When a
//! Service is gone, the Endpoints this controller wrote for it (labelled [`MANAGED_BY`]) are
//! deleted; like Kubernetes, no ownerReference is set.
//!
//! [`decide`] is pure; [`reconcile`] (per Service) and [`cleanup`] (per Endpoints) do the I/O.

use std::collections::BTreeMap;
use std::sync::Arc;

use bus_schemas::api::{DeleteOptions, Preconditions};
use bus_schemas::kinds::common::ObjectReference;
use bus_schemas::kinds::endpoints::{EndpointAddress, EndpointPort, EndpointSubset};
use bus_schemas::kinds::intstr::IntOrString;
use bus_schemas::kinds::{Endpoints, Node, Pod, Service};
use bus_schemas::meta::find_condition;
use bus_schemas::selector::Selector;
use bus_schemas::Resource;
use shoal_bus::controller::{self, Action};
use shoal_bus::informer::INDEX_NODE;
use shoal_bus::workqueue::WorkQueue;
use shoal_bus::ObjectKey;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::spawn;
use shoal_bus::shutdown::Shutdown;
use tokio::task::JoinHandle;

pub const NAME: &str = "endpoints";
pub const CLEANUP_NAME: &str = "endpoints-cleanup";
/// Label on the Endpoints this controller writes (and so may delete).
pub const MANAGED_BY: &str = "endpoints.shoal.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "endpoints-controller";

/// Whether a pod is listed at all: it has an IP, is not terminating and not finished.
fn listed(pod: &Pod) -> bool {
    !pod.status.pod_ip.is_empty() && !pod.metadata.is_deleting() && !pod.is_terminal()
}

/// The pod's port for a Service port; None when a named port is not declared by the pod.
fn resolve_port(pod: &Pod, target: &IntOrString, protocol: &str) -> Option<i32> {
    match target {
        IntOrString::Int(n) => Some(*n),
        IntOrString::String(name) => pod
            .spec
            .containers
            .iter()
            .flat_map(|c| c.ports.iter())
            .find(|p| {
                p.name == *name
                    && (p.protocol.is_empty() && protocol == "TCP" || p.protocol == protocol)
            })
            .map(|p| p.container_port),
    }
}

/// A pod's endpoint; it carries the pod's hostname when the pod names this Service as its
/// subdomain, which is what gives StatefulSet pods DNS names of their own
/// (`web-0.web.NS.svc.<domain>`), as Kubernetes' endpoints controller does.
fn address(pod: &Pod, svc: &Service) -> EndpointAddress {
    let own_name = !pod.spec.hostname.is_empty() && pod.spec.subdomain == svc.metadata.name;
    EndpointAddress {
        ip: pod.status.pod_ip.clone(),
        hostname: if own_name {
            pod.spec.hostname.clone()
        } else {
            String::new()
        },
        node_name: (!pod.spec.node_name.is_empty()).then(|| pod.spec.node_name.clone()),
        target_ref: Some(ObjectReference {
            kind: "Pod".into(),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        }),
    }
}

/// The subsets the Service's Endpoints should have, given the pods of its namespace, with
/// every node taken as ready.
pub fn decide(svc: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    decide_with_nodes(svc, pods, |_| true)
}

/// Whether a node can serve traffic: its Ready condition is True. A node missing from the
/// cache (or without a Ready condition yet) does not override its pods' readiness.
pub fn node_ready(node: Option<&Node>) -> bool {
    node.and_then(|n| find_condition(&n.status.conditions, "Ready"))
        .is_none_or(|c| c.status == "True")
}

/// The subsets the Service's Endpoints should have, given the pods of its namespace and
/// whether each pod's node is ready (by node name).
pub fn decide_with_nodes(
    svc: &Service,
    pods: &[Arc<Pod>],
    node_is_ready: impl Fn(&str) -> bool,
) -> Vec<EndpointSubset> {
    let mut by_ports: BTreeMap<Vec<(String, i32, String)>, EndpointSubset> = BTreeMap::new();
    for pod in pods {
        if !svc.selects(&pod.metadata.labels) || !listed(pod) {
            continue;
        }
        let mut ports = Vec::new();
        for sp in &svc.spec.ports {
            let protocol = if sp.protocol.is_empty() {
                "TCP"
            } else {
                sp.protocol.as_str()
            };
            let target = if sp.target_port.is_zero() {
                IntOrString::Int(sp.port)
            } else {
                sp.target_port.clone()
            };
            if let Some(port) = resolve_port(pod, &target, protocol) {
                ports.push(EndpointPort {
                    name: sp.name.clone(),
                    port,
                    protocol: protocol.to_string(),
                    app_protocol: sp.app_protocol.clone(),
                });
            }
        }
        // A Service with ports none of which this pod serves: nothing to route to it.
        if ports.is_empty() && !svc.spec.ports.is_empty() {
            continue;
        }
        let key = ports
            .iter()
            .map(|p| (p.name.clone(), p.port, p.protocol.clone()))
            .collect();
        let subset = by_ports.entry(key).or_insert_with(|| EndpointSubset {
            ports,
            ..Default::default()
        });
        let serving =
            pod.is_ready() && (pod.spec.node_name.is_empty() || node_is_ready(&pod.spec.node_name));
        if serving || svc.spec.publish_not_ready_addresses {
            subset.addresses.push(address(pod, svc));
        } else {
            subset.not_ready_addresses.push(address(pod, svc));
        }
    }
    let order = |a: &EndpointAddress| (a.ip.clone(), a.target_ref.as_ref().map(|r| r.name.clone()));
    by_ports
        .into_values()
        .map(|mut s| {
            s.addresses.sort_by_key(order);
            s.not_ready_addresses.sort_by_key(order);
            s
        })
        .collect()
}

fn is_managed(ep: &Endpoints) -> bool {
    ep.metadata.labels.get(MANAGED_BY).map(String::as_str) == Some(MANAGED_BY_VALUE)
}

/// Keys of the Services in the pod's namespace that select it.
pub fn services_selecting(
    services: &shoal_bus::Informer<Service>,
    pod: &Pod,
) -> Vec<shoal_bus::ObjectKey> {
    services
        .list(Some(&pod.metadata.namespace), &Selector::everything())
        .into_iter()
        .filter(|s| s.selects(&pod.metadata.labels))
        .map(|s| shoal_bus::ObjectKey::of(s.as_ref()))
        .collect()
}

/// Feeds the endpoints work queue: the Services whose selector matches a pod's old or new
/// labels, and, on a node's readiness change, the Services selecting that node's pods.
pub fn feed(ctx: &Arc<Ctx>, queue: Arc<WorkQueue<ObjectKey>>) {
    let services = ctx.services.clone();
    controller::feed_mapped(&ctx.pods, queue.clone(), move |_, pod: &Pod| {
        services_selecting(&services, pod)
    });
    let (services, pods) = (ctx.services.clone(), ctx.pods.clone());
    // The readiness last seen per node, with the revision it was seen at: node status is
    // rewritten on every agent report, and only a readiness flip changes any Endpoints. (The
    // feed also hands over each change's old version, which the revision tells apart.)
    let seen: std::sync::Mutex<std::collections::HashMap<String, (u64, bool)>> = Default::default();
    controller::feed_mapped(&ctx.nodes, queue, move |key, node: &Node| {
        let ready = node_ready(Some(node));
        let revision = node.metadata.resource_version.parse::<u64>().unwrap_or(0);
        {
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            match seen.get(&key.name) {
                Some(&(at, _)) if revision < at => return Vec::new(),
                Some(&(_, was)) if was == ready => {
                    seen.insert(key.name.clone(), (revision, ready));
                    return Vec::new();
                }
                _ => {
                    seen.insert(key.name.clone(), (revision, ready));
                }
            }
        }
        let mut keys: Vec<ObjectKey> = pods
            .by_index(INDEX_NODE, &key.name)
            .iter()
            .flat_map(|pod| services_selecting(&services, pod))
            .collect();
        keys.sort();
        keys.dedup();
        keys
    });
}

pub async fn reconcile(svc: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    if svc.spec.selector.is_empty() || svc.metadata.is_deleting() {
        return Ok(Action::AwaitChange);
    }
    let (ns, name) = (&svc.metadata.namespace, &svc.metadata.name);
    let pods = ctx.pods.list(Some(ns), &Selector::everything());
    let subsets = decide_with_nodes(&svc, &pods, |node| {
        node_ready(ctx.nodes.get("", node).as_deref())
    });
    let key = format!("{ns}/{name}");
    match ctx.endpoints.get(ns, name) {
        Some(current) if current.subsets == subsets && is_managed(&current) => {}
        Some(current) => {
            let mut next = (*current).clone();
            next.subsets = subsets;
            next.metadata
                .labels
                .insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
            ctx.api
                .update(&next)
                .await
                .map_err(|e| ReconcileError::api("update", "Endpoints", key, e))?;
        }
        None => {
            let mut ep = Endpoints::default();
            ep.metadata.name = name.clone();
            ep.metadata.namespace = ns.clone();
            ep.metadata
                .labels
                .insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
            ep.subsets = subsets;
            match ctx.api.create(&ep).await {
                Ok(_) => {}
                // Our cache is behind: retry once it has caught up.
                Err(e) => return Err(ReconcileError::api("create", "Endpoints", key, e)),
            }
        }
    }
    Ok(Action::AwaitChange)
}

/// Deletes Endpoints this controller wrote whose Service is gone.
pub async fn cleanup(ep: Arc<Endpoints>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    if !is_managed(&ep) || ep.metadata.is_deleting() {
        return Ok(Action::AwaitChange);
    }
    let (ns, name) = (&ep.metadata.namespace, &ep.metadata.name);
    if ctx.services.get(ns, name).is_some() {
        return Ok(Action::AwaitChange);
    }
    let key = format!("{ns}/{name}");
    // Confirm with a live read: never delete on a cache that is behind.
    match ctx.api.get::<Service>(ns, name).await {
        Ok(_) => return Ok(Action::AwaitChange),
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(ReconcileError::api("get", "Service", key, e)),
    }
    let options = DeleteOptions {
        namespace: ns.clone(),
        name: name.clone(),
        preconditions: Some(Preconditions {
            uid: Some(ep.metadata.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match ctx.api.delete::<Endpoints>(&options).await {
        Ok(_) => Ok(Action::AwaitChange),
        Err(e) if e.is_not_found() => Ok(Action::AwaitChange),
        Err(e) => Err(ReconcileError::api("delete", Endpoints::INFO.kind, key, e)),
    }
}

/// Triggers: the Services selecting a pod (old or new labels), and those selecting a node's
/// pods when the node's readiness flips.
pub fn start(ctx: &Arc<Ctx>, sd: &Shutdown) -> JoinHandle<()> {
    let queue = WorkQueue::new(Default::default());
    feed(ctx, queue.clone());
    spawn(NAME, ctx.services.clone(), queue, ctx, reconcile, sd)
}

/// Triggers: the Endpoints whose Service changed (or is gone).
pub fn start_cleanup(ctx: &Arc<Ctx>, sd: &Shutdown) -> JoinHandle<()> {
    let queue = WorkQueue::new(Default::default());
    controller::feed_mapped(&ctx.services, queue.clone(), |key, _svc: &Service| {
        vec![key.clone()]
    });
    spawn(CLEANUP_NAME, ctx.endpoints.clone(), queue, ctx, cleanup, sd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::meta::Condition;

    fn svc(ports: serde_json::Value) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": ports}
        }))
        .unwrap()
    }

    fn pod(name: &str, ip: &str, ready: bool, http_port: Option<i32>) -> Arc<Pod> {
        let ports = http_port
            .map(|p| serde_json::json!([{"name": "http", "containerPort": p}]))
            .unwrap_or(serde_json::json!([]));
        let mut p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                         "labels": {"app": "web"}},
            "spec": {"nodeName": "n1",
                     "containers": [{"name": "c", "image": "i", "ports": ports}]},
            "status": {"podIP": ip, "phase": "Running"}
        }))
        .unwrap();
        if ready {
            p.status.conditions.push(Condition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            });
        }
        Arc::new(p)
    }

    #[test]
    fn ready_and_not_ready_addresses_with_numeric_port() {
        let s = svc(serde_json::json!([{"port": 80, "targetPort": 8080}]));
        let pods = [
            pod("b", "10.0.0.2", true, None),
            pod("a", "10.0.0.1", false, None),
            pod("noip", "", true, None),
        ];
        let subsets = decide(&s, &pods);
        assert_eq!(subsets.len(), 1);
        assert_eq!(subsets[0].addresses.len(), 1);
        assert_eq!(subsets[0].addresses[0].ip, "10.0.0.2");
        assert_eq!(subsets[0].addresses[0].node_name.as_deref(), Some("n1"));
        let r = subsets[0].addresses[0].target_ref.as_ref().unwrap();
        assert_eq!((r.kind.as_str(), r.uid.as_str()), ("Pod", "uid-b"));
        assert_eq!(subsets[0].not_ready_addresses[0].ip, "10.0.0.1");
        assert_eq!(subsets[0].ports[0].port, 8080);
        assert_eq!(subsets[0].ports[0].protocol, "TCP");
    }

    #[test]
    fn named_target_ports_group_pods_by_resolved_ports() {
        let s = svc(serde_json::json!([{"port": 80, "targetPort": "http"}]));
        let pods = [
            pod("a", "10.0.0.1", true, Some(8080)),
            pod("b", "10.0.0.2", true, Some(9090)),
            pod("c", "10.0.0.3", true, Some(8080)),
            pod("none", "10.0.0.4", true, None),
        ];
        let subsets = decide(&s, &pods);
        assert_eq!(subsets.len(), 2);
        assert_eq!(subsets[0].ports[0].port, 8080);
        assert_eq!(subsets[0].addresses.len(), 2);
        assert_eq!(subsets[1].ports[0].port, 9090);
        assert_eq!(subsets[1].addresses[0].ip, "10.0.0.2");
    }

    #[test]
    fn pods_on_nodes_that_are_not_ready_are_not_ready() {
        let s = svc(serde_json::json!([{"port": 80}]));
        let mut elsewhere = (*pod("b", "10.0.0.2", true, None)).clone();
        elsewhere.spec.node_name = "n2".into();
        let pods = [pod("a", "10.0.0.1", true, None), Arc::new(elsewhere)];
        let subsets = decide_with_nodes(&s, &pods, |node| node != "n2");
        assert_eq!(subsets[0].addresses.len(), 1);
        assert_eq!(subsets[0].addresses[0].ip, "10.0.0.1");
        assert_eq!(subsets[0].not_ready_addresses[0].ip, "10.0.0.2");
        assert_eq!(decide(&s, &pods)[0].addresses.len(), 2);

        let mut node = Node::default();
        assert!(
            node_ready(None),
            "an unknown node does not override its pods"
        );
        assert!(
            node_ready(Some(&node)),
            "nor does one without a Ready condition"
        );
        for (status, ready) in [("True", true), ("False", false), ("Unknown", false)] {
            node.status.conditions = vec![Condition {
                type_: "Ready".into(),
                status: status.into(),
                ..Default::default()
            }];
            assert_eq!(node_ready(Some(&node)), ready, "{status}");
        }
    }

    #[test]
    fn terminating_and_unselected_pods_are_left_out() {
        let s = svc(serde_json::json!([{"port": 80}]));
        let mut going = (*pod("going", "10.0.0.1", true, None)).clone();
        going.metadata.deletion_timestamp = Some(crate::podutil::now());
        let mut other = (*pod("other", "10.0.0.2", true, None)).clone();
        other.metadata.labels.insert("app".into(), "db".into());
        assert!(decide(&s, &[Arc::new(going), Arc::new(other)]).is_empty());
    }
}
