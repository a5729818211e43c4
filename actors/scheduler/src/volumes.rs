//! Volume binding as the scheduler sees it: where a pod's PersistentVolumeClaims let it run.
//! A claim bound to a volume with node affinity pins the pod to those nodes; a claim of a
//! `WaitForFirstConsumer` class that is not bound yet goes wherever the pod goes, and the
//! chosen node is written on the claim (`volume.kubernetes.io/selected-node`) before the pod
//! is bound, so that node's provisioner makes the volume there. Such a claim of a class
//! without a provisioner here (local volumes made by hand) can only go where a volume that
//! fits it is: a node is feasible only if one such Available volume's node affinity admits
//! it; the binder then binds the claim to one of them on the chosen node. Pure: the caller
//! passes lookups into its caches, and pods without claims read nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use bus_schemas::kinds::affinity::NodeSelector;
use bus_schemas::kinds::storage_class::LOCAL_PATH_PROVISIONER;
use bus_schemas::kinds::volume_match;
use bus_schemas::kinds::{PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};

/// What a pod's claims require of a node, and which claims get the node written on them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VolumePlan {
    /// Every selector must match: the node affinity of each bound claim's volume.
    pub required: Vec<NodeSelector>,
    /// Nodes already chosen for unbound claims (a provisioner may be at work there).
    pub selected: Vec<String>,
    /// Unbound WaitForFirstConsumer claims without a chosen node.
    pub to_select: Vec<String>,
    /// For each such claim that only a volume made by hand can serve, the node affinity of
    /// every volume that fits it (None: reachable from any node). One must admit the node.
    pub static_volumes: Vec<Vec<Option<NodeSelector>>>,
}

/// Why a node cannot reach the pod's volumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    /// A bound volume, or a node chosen for a claim, is elsewhere.
    NodeAffinity,
    /// No volume that fits an unbound claim is reachable from the node.
    NoVolumeToBind,
}

impl VolumePlan {
    /// What keeps the node with these labels and name from reaching the pod's volumes.
    pub fn conflict(&self, labels: &BTreeMap<String, String>, node: &str) -> Option<Conflict> {
        if !(self.required.iter().all(|s| s.matches(labels, node))
            && self.selected.iter().all(|n| n == node))
        {
            return Some(Conflict::NodeAffinity);
        }
        let reachable = |choices: &Vec<Option<NodeSelector>>| {
            choices
                .iter()
                .any(|c| c.as_ref().is_none_or(|s| s.matches(labels, node)))
        };
        (!self.static_volumes.iter().all(reachable)).then_some(Conflict::NoVolumeToBind)
    }

    /// Whether the node with these labels and name can reach every volume of the pod.
    pub fn allows(&self, labels: &BTreeMap<String, String>, node: &str) -> bool {
        self.conflict(labels, node).is_none()
    }
}

/// The caches [`plan`] reads.
pub struct Lookups<'a> {
    pub claim: &'a dyn Fn(&str, &str) -> Option<Arc<PersistentVolumeClaim>>,
    pub volume: &'a dyn Fn(&str) -> Option<Arc<PersistentVolume>>,
    pub class: &'a dyn Fn(&str) -> Option<Arc<StorageClass>>,
    /// Every volume (read only for claims that need a volume made by hand).
    pub all_volumes: &'a dyn Fn() -> Vec<Arc<PersistentVolume>>,
}

/// The pod's volume plan; None for a pod without claims (nothing to check), Err with the
/// reason no node can take the pod now, worded as kube-scheduler words it.
pub fn plan(pod: &Pod, lookups: &Lookups<'_>) -> Result<Option<VolumePlan>, String> {
    let mut claims = pod.spec.claim_names().peekable();
    if claims.peek().is_none() {
        return Ok(None);
    }
    let namespace = &pod.metadata.namespace;
    let mut plan = VolumePlan::default();
    for name in claims {
        let claim = (lookups.claim)(namespace, name)
            .ok_or_else(|| format!("persistentvolumeclaim {name:?} not found"))?;
        if claim.metadata.is_deleting() {
            return Err(format!("persistentvolumeclaim {name:?} is being deleted"));
        }
        if !claim.spec.volume_name.is_empty() {
            let volume_name = &claim.spec.volume_name;
            let volume = (lookups.volume)(volume_name).ok_or_else(|| {
                format!("persistentvolume {volume_name:?} bound to claim {name:?} not found")
            })?;
            if let Some(nodes) = volume.required_nodes() {
                plan.required.push(nodes.clone());
            }
            continue;
        }
        let class_name = claim.class();
        let class = (!class_name.is_empty())
            .then(|| (lookups.class)(class_name))
            .flatten();
        match class {
            Some(class) if class.waits_for_first_consumer() => match claim.selected_node() {
                Some(node) => plan.selected.push(node.to_string()),
                None => {
                    plan.to_select.push(name.to_string());
                    if class.provisioner != LOCAL_PATH_PROVISIONER {
                        let fitting = (lookups.all_volumes)()
                            .iter()
                            .filter(|v| volume_match::check(v, &claim).is_ok())
                            .map(|v| v.required_nodes().cloned())
                            .collect();
                        plan.static_volumes.push(fitting);
                    }
                }
            },
            None if !class_name.is_empty() => {
                return Err(format!(
                    "storageclass.storage.k8s.io {class_name:?} not found"
                ))
            }
            _ => return Err("pod has unbound immediate PersistentVolumeClaims".into()),
        }
    }
    Ok(Some(plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::kinds::persistent_volume_claim::SELECTED_NODE_ANNOTATION;

    fn claim(name: &str, class: &str, volume: &str) -> Arc<PersistentVolumeClaim> {
        let mut c = PersistentVolumeClaim::default();
        c.metadata.name = name.into();
        c.metadata.namespace = "default".into();
        c.spec.storage_class_name = Some(class.into());
        c.spec.volume_name = volume.into();
        Arc::new(c)
    }

    fn pod(claims: &[&str]) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-0", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}],
                     "volumes": claims.iter().enumerate().map(|(i, c)| serde_json::json!(
                         {"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": c}})).collect::<Vec<_>>()}
        }))
        .expect("pod")
    }

    fn on_node(node: &str) -> Arc<PersistentVolume> {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv-1"},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}
        }))
        .map(Arc::new)
        .expect("pv")
    }

    fn run(pod: &Pod, claims: &[Arc<PersistentVolumeClaim>]) -> Result<Option<VolumePlan>, String> {
        let claim = |_: &str, name: &str| claims.iter().find(|c| c.metadata.name == name).cloned();
        let volume = |name: &str| (name == "pv-1").then(|| on_node("node-b"));
        let class = |name: &str| {
            let mut class = StorageClass::local_path();
            if name == "fast" {
                class.volume_binding_mode = Some("Immediate".into());
            }
            if name == "disks" {
                class.provisioner = "kubernetes.io/no-provisioner".into();
            }
            class.metadata.name = name.into();
            matches!(name, "local-path" | "fast" | "disks").then(|| Arc::new(class))
        };
        // Two disks made by hand: a small one on node-a, a big one on node-b.
        let all_volumes = || {
            [("node-a", "1Gi"), ("node-b", "10Gi")]
                .iter()
                .map(|(node, size)| {
                    let mut v = (*on_node(node)).clone();
                    v.metadata.name = format!("disk-{node}");
                    v.spec.storage_class_name = "disks".into();
                    v.spec.access_modes = vec!["ReadWriteOnce".into()];
                    v.spec.capacity = BTreeMap::from([(
                        "storage".to_string(),
                        bus_schemas::quantity::Quantity::parse(size).expect("size"),
                    )]);
                    v.status.phase = "Available".into();
                    Arc::new(v)
                })
                .collect()
        };
        plan(
            pod,
            &Lookups {
                claim: &claim,
                volume: &volume,
                class: &class,
                all_volumes: &all_volumes,
            },
        )
    }

    fn hostname(node: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("kubernetes.io/hostname".to_string(), node.to_string())])
    }

    #[test]
    fn a_bound_claim_pins_the_pod_to_its_volume_node() {
        let plan = run(&pod(&["data"]), &[claim("data", "local-path", "pv-1")])
            .expect("plan")
            .expect("claims");
        assert!(plan.allows(&hostname("node-b"), "node-b"));
        assert!(!plan.allows(&hostname("node-a"), "node-a"));
        assert!(plan.to_select.is_empty());
    }

    #[test]
    fn an_unbound_claim_waits_for_the_pod_and_then_stays_with_its_node() {
        let plan = run(&pod(&["data"]), &[claim("data", "local-path", "")])
            .expect("plan")
            .expect("claims");
        assert_eq!(plan.to_select, ["data"]);
        assert!(plan.allows(&hostname("node-a"), "node-a"));
        let mut chosen = (*claim("data", "local-path", "")).clone();
        chosen
            .metadata
            .annotations
            .insert(SELECTED_NODE_ANNOTATION.into(), "node-a".into());
        let plan = run(&pod(&["data"]), &[Arc::new(chosen)])
            .expect("plan")
            .expect("claims");
        assert!(plan.to_select.is_empty());
        assert!(!plan.allows(&hostname("node-b"), "node-b"));
    }

    #[test]
    fn a_claim_for_a_disk_made_by_hand_goes_where_a_disk_that_fits_is() {
        let mut wants = (*claim("data", "disks", "")).clone();
        wants.spec.access_modes = vec!["ReadWriteOnce".into()];
        wants.spec.resources.requests.insert(
            "storage".into(),
            bus_schemas::quantity::Quantity::parse("5Gi").expect("size"),
        );
        let plan = run(&pod(&["data"]), &[Arc::new(wants.clone())])
            .expect("plan")
            .expect("claims");
        assert_eq!(plan.to_select, ["data"]);
        assert_eq!(plan.conflict(&hostname("node-b"), "node-b"), None);
        assert_eq!(
            plan.conflict(&hostname("node-a"), "node-a"),
            Some(Conflict::NoVolumeToBind),
            "node-a's disk is too small"
        );
        wants.spec.resources.requests.insert(
            "storage".into(),
            bus_schemas::quantity::Quantity::parse("50Gi").expect("size"),
        );
        let plan = run(&pod(&["data"]), &[Arc::new(wants)])
            .expect("plan")
            .expect("claims");
        assert!(!plan.allows(&hostname("node-b"), "node-b"));
        // The local-path provisioner makes volumes anywhere: nothing to look for.
        let plan = run(&pod(&["data"]), &[claim("data", "local-path", "")])
            .expect("plan")
            .expect("claims");
        assert!(plan.static_volumes.is_empty());
    }

    #[test]
    fn what_no_node_can_fix_is_said_plainly() {
        assert_eq!(run(&pod(&[]), &[]), Ok(None));
        assert_eq!(
            run(&pod(&["data"]), &[]),
            Err("persistentvolumeclaim \"data\" not found".into())
        );
        assert_eq!(
            run(&pod(&["data"]), &[claim("data", "fast", "")]),
            Err("pod has unbound immediate PersistentVolumeClaims".into())
        );
        assert_eq!(
            run(&pod(&["data"]), &[claim("data", "gold", "")]),
            Err("storageclass.storage.k8s.io \"gold\" not found".into())
        );
    }
}
