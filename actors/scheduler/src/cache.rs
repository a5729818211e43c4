//! The scheduler's own accounting, updated incrementally from informer events: per node the
//! summed requests of non-terminal pods bound (or assumed) there, its pod count, its pods and
//! per-owner counts; per owner and zone the pod counts used for spreading. A decision reads
//! only the nodes it samples, never the whole pod list.
//!
//! One writer: the scheduler loop owns the cache, so there are no locks here.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bus_schemas::kinds::{Node, Pod};
use shoal_bus::ObjectKey;

use crate::ledger::{AllocationView, LedgerEntry, ENTRY_TTL_MS};
use crate::resources::Resources;

/// The label zone spreading reads.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A node as the scheduler sees it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub name: String,
    pub node: Arc<Node>,
    pub ready: bool,
    pub zone: Option<String>,
    pub allocatable: Resources,
    /// Summed requests of the non-terminal pods bound or assumed here.
    pub requested: Resources,
    /// The same with kube-scheduler's defaults for zero requests (scoring only).
    pub non_zero: (i64, i64),
    pub pods: HashSet<ObjectKey>,
    /// Pods here per controller uid (spreading).
    pub owners: HashMap<String, u32>,
    /// Pods nominated here by preemption, not bound yet: (priority, requests).
    pub nominated: HashMap<ObjectKey, (i32, Resources)>,
    /// The node's allocation record (see [`crate::ledger`]).
    pub alloc: AllocationView,
    /// Indexes of the ledger's pending entries whose pod is not counted in `pods`. Only these
    /// can reserve anything foreign; kept up to date on every change of `pods` or `alloc`, so
    /// filtering a node costs nothing when (as usual) every entry is already counted here.
    uncounted: Vec<usize>,
}

impl NodeInfo {
    fn new(node: Arc<Node>) -> NodeInfo {
        let mut info = NodeInfo {
            name: node.metadata.name.clone(),
            node: node.clone(),
            ready: false,
            zone: None,
            allocatable: Resources::default(),
            requested: Resources::default(),
            non_zero: (0, 0),
            pods: HashSet::new(),
            owners: HashMap::new(),
            nominated: HashMap::new(),
            alloc: AllocationView::default(),
            uncounted: Vec::new(),
        };
        info.set_node(node);
        info
    }

    fn set_node(&mut self, node: Arc<Node>) {
        self.ready = node.is_ready();
        self.zone = node.metadata.labels.get(ZONE_LABEL).cloned();
        self.allocatable = Resources::from_map(&node.status.allocatable);
        self.node = node;
    }

    pub fn labels(&self) -> &std::collections::BTreeMap<String, String> {
        &self.node.metadata.labels
    }

    fn set_alloc(&mut self, alloc: AllocationView) {
        self.alloc = alloc;
        self.refresh_uncounted();
    }

    fn refresh_uncounted(&mut self) {
        let pods = &self.pods;
        self.uncounted = self
            .alloc
            .ledger
            .pending
            .iter()
            .enumerate()
            .filter(|(_, entry)| !parse_key(&entry.pod).is_some_and(|k| pods.contains(&k)))
            .map(|(i, _)| i)
            .collect();
    }
}

/// A pod the cache knows, bound or not.
#[derive(Debug, Clone)]
pub struct PodEntry {
    pub pod: Arc<Pod>,
    pub requests: Resources,
    pub priority: i32,
    /// Where it counts: its nodeName, or where this scheduler assumed it; empty when pending.
    pub node: String,
    /// Placed by this scheduler, binding not yet seen in the informer.
    pub assumed: bool,
}

impl PodEntry {
    /// Whether it occupies resources on `node`: non-terminal pods count until removed,
    /// terminating ones included (their containers may still run).
    pub fn counts(&self) -> bool {
        !self.node.is_empty() && !self.pod.is_terminal()
    }

    pub fn has_required_anti_affinity(&self) -> bool {
        self.pod
            .spec
            .affinity
            .as_ref()
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .is_some_and(|a| {
                !a.required_during_scheduling_ignored_during_execution
                    .is_empty()
            })
    }
}

/// What changed for the scheduling queue after a pod event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PodDelta {
    /// Room was freed on some node (a pod gone or finished): retry unschedulable pods.
    pub freed: bool,
}

#[derive(Default)]
pub struct ClusterCache {
    nodes: Vec<NodeInfo>,
    node_index: HashMap<String, usize>,
    pods: HashMap<ObjectKey, PodEntry>,
    /// Counted pods with required anti-affinity (checked against every incoming pod).
    anti_affinity_pods: HashSet<ObjectKey>,
    /// Pods per (controller uid, zone).
    zone_counts: HashMap<(String, String), u32>,
    /// Where each nominated pod is filed.
    nominated_at: HashMap<ObjectKey, String>,
    /// Nominations this scheduler made (preemption) that pod statuses may not show yet.
    local_nominations: HashMap<ObjectKey, String>,
    /// Allocation records of nodes not (yet) in the cache.
    orphan_allocs: HashMap<String, AllocationView>,
    /// The last pod-log revision applied: the cache reflects the pod log exactly up to here.
    pub pod_revision: u64,
    /// This scheduler instance (ledger entries it wrote are judged by what it knows).
    pub identity: String,
}

impl ClusterCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_identity(identity: &str) -> Self {
        ClusterCache {
            identity: identity.to_string(),
            ..Default::default()
        }
    }

    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.node_index.get(name).map(|i| &self.nodes[*i])
    }

    pub fn node_position(&self, name: &str) -> Option<usize> {
        self.node_index.get(name).copied()
    }

    pub fn pod(&self, key: &ObjectKey) -> Option<&PodEntry> {
        self.pods.get(key)
    }

    pub fn pods(&self) -> impl Iterator<Item = (&ObjectKey, &PodEntry)> {
        self.pods.iter()
    }

    pub fn anti_affinity_pods(&self) -> impl Iterator<Item = &PodEntry> {
        self.anti_affinity_pods
            .iter()
            .filter_map(|k| self.pods.get(k))
    }

    pub fn zone_count(&self, owner: &str, zone: &str) -> u32 {
        self.zone_counts
            .get(&(owner.to_string(), zone.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Adds or replaces a node. Returns whether anything placement depends on changed (so
    /// status-only churn like heartbeat times does not flush the unschedulable queue).
    pub fn upsert_node(&mut self, node: Arc<Node>) -> bool {
        let name = node.metadata.name.clone();
        match self.node_index.get(&name) {
            Some(&i) => {
                let info = &mut self.nodes[i];
                let old = info.node.clone();
                let relevant = old.metadata.labels != node.metadata.labels
                    || old.spec.taints != node.spec.taints
                    || old.spec.unschedulable != node.spec.unschedulable
                    || old.status.allocatable != node.status.allocatable
                    || old.is_ready() != node.is_ready();
                let old_zone = info.zone.clone();
                info.set_node(node);
                if info.zone != old_zone {
                    self.rezone(i, old_zone);
                }
                relevant
            }
            None => {
                let mut info = NodeInfo::new(node);
                if let Some(alloc) = self.orphan_allocs.remove(&name) {
                    info.set_alloc(alloc);
                }
                self.node_index.insert(name.clone(), self.nodes.len());
                self.nodes.push(info);
                // Pods may name a node before it appears (bound by hand, or events reordered).
                let keys: Vec<ObjectKey> = self
                    .pods
                    .iter()
                    .filter(|(_, e)| e.node == name && e.counts())
                    .map(|(k, _)| k.clone())
                    .collect();
                for key in keys {
                    if let Some(entry) = self.pods.get(&key).cloned() {
                        self.account(&key, &entry, true);
                    }
                }
                true
            }
        }
    }

    pub fn remove_node(&mut self, name: &str) {
        let Some(i) = self.node_index.remove(name) else {
            return;
        };
        let info = self.nodes.swap_remove(i);
        if i < self.nodes.len() {
            let moved = self.nodes[i].name.clone();
            self.node_index.insert(moved, i);
        }
        if let Some(zone) = &info.zone {
            for (owner, n) in &info.owners {
                self.dec_zone(owner, zone, *n);
            }
        }
    }

    /// Keeps the owner/zone counts right when a node's zone label changes.
    fn rezone(&mut self, i: usize, old_zone: Option<String>) {
        let owners: Vec<(String, u32)> = self.nodes[i]
            .owners
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let new_zone = self.nodes[i].zone.clone();
        for (owner, n) in owners {
            if let Some(z) = &old_zone {
                self.dec_zone(&owner, z, n);
            }
            if let Some(z) = &new_zone {
                *self
                    .zone_counts
                    .entry((owner.clone(), z.clone()))
                    .or_default() += n;
            }
        }
    }

    fn dec_zone(&mut self, owner: &str, zone: &str, n: u32) {
        let key = (owner.to_string(), zone.to_string());
        if let Some(c) = self.zone_counts.get_mut(&key) {
            *c = c.saturating_sub(n);
            if *c == 0 {
                self.zone_counts.remove(&key);
            }
        }
    }

    /// Adds (`add`) or removes a counted pod's contribution to its node.
    fn account(&mut self, key: &ObjectKey, entry: &PodEntry, add: bool) {
        if !entry.counts() {
            return;
        }
        if entry.has_required_anti_affinity() {
            if add {
                self.anti_affinity_pods.insert(key.clone());
            } else {
                self.anti_affinity_pods.remove(key);
            }
        }
        let Some(&i) = self.node_index.get(&entry.node) else {
            return;
        };
        let owner = entry.pod.controller_uid().map(str::to_string);
        let info = &mut self.nodes[i];
        let (cpu, mem) = entry.requests.non_zero();
        if add {
            if !info.pods.insert(key.clone()) {
                return;
            }
            info.requested.add(&entry.requests);
            info.non_zero.0 += cpu;
            info.non_zero.1 += mem;
            if !info.uncounted.is_empty() {
                info.refresh_uncounted();
            }
        } else {
            if !info.pods.remove(key) {
                return;
            }
            info.requested.sub(&entry.requests);
            info.non_zero.0 -= cpu;
            info.non_zero.1 -= mem;
            if !info.alloc.ledger.pending.is_empty() {
                info.refresh_uncounted();
            }
        }
        let zone = info.zone.clone();
        if let Some(owner) = owner {
            if add {
                *info.owners.entry(owner.clone()).or_default() += 1;
                if let Some(z) = zone {
                    *self.zone_counts.entry((owner, z)).or_default() += 1;
                }
            } else {
                if let Some(c) = info.owners.get_mut(&owner) {
                    *c = c.saturating_sub(1);
                    if *c == 0 {
                        info.owners.remove(&owner);
                    }
                }
                if let Some(z) = zone {
                    self.dec_zone(&owner, &z, 1);
                }
            }
        }
    }

    /// Re-files a pod's nomination (from its status, or this scheduler's own preemption,
    /// which the informer may not show yet); `new` None drops it.
    fn set_nomination(&mut self, key: &ObjectKey, new: Option<&PodEntry>) {
        if let Some(node) = self.nominated_at.remove(key) {
            if let Some(&i) = self.node_index.get(&node) {
                self.nodes[i].nominated.remove(key);
            }
        }
        let Some(e) = new else {
            self.local_nominations.remove(key);
            return;
        };
        if !e.node.is_empty() {
            self.local_nominations.remove(key);
            return;
        }
        let node = match self.local_nominations.get(key) {
            Some(n) => n.clone(),
            None if !e.pod.status.nominated_node_name.is_empty() => {
                e.pod.status.nominated_node_name.clone()
            }
            None => return,
        };
        if let Some(&i) = self.node_index.get(&node) {
            self.nodes[i]
                .nominated
                .insert(key.clone(), (e.priority, e.requests.clone()));
        }
        self.nominated_at.insert(key.clone(), node);
    }

    /// Reserves room for a preemptor on `node` at once, so that no lower-priority pod takes
    /// the room its victims leave before its nomination is visible.
    pub fn nominate(&mut self, key: &ObjectKey, node: &str) {
        self.local_nominations.insert(key.clone(), node.to_string());
        if let Some(entry) = self.pods.get(key).cloned() {
            self.set_nomination(key, Some(&entry));
        }
    }

    /// Applies an added or modified pod from the informer.
    pub fn apply_pod(&mut self, pod: Arc<Pod>, revision: u64) -> PodDelta {
        self.pod_revision = self.pod_revision.max(revision);
        let key = ObjectKey::new(pod.metadata.namespace.clone(), pod.metadata.name.clone());
        // Events buffered before a resync may be older than what the resync read.
        if let Some(have) = self.pods.get(&key) {
            if have.pod.metadata.revision() > pod.metadata.revision() {
                return PodDelta::default();
            }
        }
        let old = self.pods.remove(&key);
        let mut delta = PodDelta::default();
        let mut new = PodEntry {
            requests: Resources::of_pod(&pod),
            priority: pod.spec.priority.unwrap_or(0),
            node: pod.spec.node_name.clone(),
            assumed: false,
            pod,
        };
        if let Some(old) = &old {
            // Still pending in the log but assumed here: keep the assumption (the bind is in
            // flight). A recreated pod (new uid) drops it.
            if old.assumed && new.node.is_empty() && old.pod.metadata.uid == new.pod.metadata.uid {
                new.node = old.node.clone();
                new.assumed = true;
                new.requests = old.requests.clone();
            }
            self.account(&key, old, false);
            delta.freed = old.counts() && (!new.counts() || new.node != old.node);
        }
        self.account(&key, &new, true);
        self.set_nomination(&key, Some(&new));
        self.pods.insert(key, new);
        delta
    }

    pub fn delete_pod(&mut self, key: &ObjectKey, revision: u64) -> PodDelta {
        self.pod_revision = self.pod_revision.max(revision);
        let Some(old) = self.pods.remove(key) else {
            return PodDelta::default();
        };
        self.account(key, &old, false);
        self.set_nomination(key, None);
        PodDelta {
            freed: old.counts(),
        }
    }

    /// Counts a pod on `node` before its bind is visible (kube-scheduler's "assume").
    pub fn assume(&mut self, key: &ObjectKey, node: &str) -> bool {
        let Some(mut entry) = self.pods.remove(key) else {
            return false;
        };
        if !entry.node.is_empty() {
            self.pods.insert(key.clone(), entry);
            return false;
        }
        entry.node = node.to_string();
        entry.assumed = true;
        self.set_nomination(key, Some(&entry));
        self.account(key, &entry, true);
        self.pods.insert(key.clone(), entry);
        true
    }

    /// Undoes [`assume`](Self::assume) after a failed bind (no-op once the bind is visible).
    pub fn forget(&mut self, key: &ObjectKey) {
        let Some(entry) = self.pods.get(key) else {
            return;
        };
        if !entry.assumed {
            return;
        }
        let mut entry = self.pods.remove(key).expect("present");
        self.account(key, &entry, false);
        entry.node.clear();
        entry.assumed = false;
        self.set_nomination(key, Some(&entry));
        self.pods.insert(key.clone(), entry);
    }

    /// Forgets a node's allocation record (it was deleted: the next bind recreates it).
    pub fn reset_alloc(&mut self, node: &str) {
        if let Some(&i) = self.node_index.get(node) {
            self.nodes[i].set_alloc(AllocationView::default());
        }
        self.orphan_allocs.remove(node);
    }

    /// Installs a node's allocation record unless we already hold a newer one.
    pub fn set_alloc(&mut self, node: &str, view: AllocationView) {
        match self.node_index.get(node) {
            Some(&i) => {
                let info = &mut self.nodes[i];
                if view.revision >= info.alloc.revision {
                    info.set_alloc(view);
                }
            }
            None => {
                let slot = self.orphan_allocs.entry(node.to_string()).or_default();
                if view.revision >= slot.revision {
                    *slot = view;
                }
            }
        }
    }

    /// What other schedulers admitted to node `i` that this cache does not show there yet:
    /// the ledger entries that are neither counted here nor provably over (see
    /// [`ClusterCache::ledger_entry_over`]).
    pub fn foreign_pending(&self, i: usize) -> Resources {
        let info = &self.nodes[i];
        let mut sum = Resources::default();
        for &j in &info.uncounted {
            let (Some(entry), Some(req)) =
                (info.alloc.ledger.pending.get(j), info.alloc.pending.get(j))
            else {
                continue;
            };
            if !self.ledger_entry_over(entry, &info.name) {
                sum.add(req);
            }
        }
        sum
    }

    /// Whether a ledger entry no longer reserves anything: in a cache at or past the entry's
    /// `seenAt`, its pod is gone (or replaced), visibly bound (then it counts where it is
    /// bound), or finished; or the pod is still unbound and the entry is ours (our bind is not
    /// in flight, or the pod would be assumed here) or older than the TTL. Used both to
    /// ignore and to prune entries.
    pub fn ledger_entry_over(&self, entry: &LedgerEntry, node: &str) -> bool {
        if entry.seen_at > self.pod_revision {
            return false;
        }
        let Some(key) = parse_key(&entry.pod) else {
            return true;
        };
        match self.pods.get(&key) {
            None => true,
            Some(p) => {
                (!entry.uid.is_empty() && p.pod.metadata.uid != entry.uid)
                    || (!p.node.is_empty() && !p.assumed)
                    || p.pod.is_terminal()
                    || (entry.writer == self.identity && !(p.assumed && p.node == node))
                    || (entry.writer != self.identity
                        && chrono::Utc::now()
                            .timestamp_millis()
                            .saturating_sub(entry.at_ms)
                            > ENTRY_TTL_MS)
            }
        }
    }

    /// Whether node `i`'s record pruned binds this cache has not caught up with yet.
    pub fn alloc_ahead(&self, i: usize) -> bool {
        self.nodes[i].alloc.ledger.pods_revision > self.pod_revision
    }

    /// Drops everything (before a full resync from the informers), keeping assumed pods and
    /// allocation records.
    pub fn reset_keep_assumed(&mut self) -> Vec<(ObjectKey, PodEntry)> {
        let assumed: Vec<(ObjectKey, PodEntry)> = self
            .pods
            .iter()
            .filter(|(_, e)| e.assumed)
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect();
        let allocs: Vec<(String, AllocationView)> = self
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.alloc.clone()))
            .chain(self.orphan_allocs.drain())
            .collect();
        let local_nominations = std::mem::take(&mut self.local_nominations);
        let identity = std::mem::take(&mut self.identity);
        *self = ClusterCache::with_identity(&identity);
        self.orphan_allocs = allocs.into_iter().collect();
        self.local_nominations = local_nominations;
        assumed
    }
}

/// Parses `namespace/name`.
pub fn parse_key(s: &str) -> Option<ObjectKey> {
    let (ns, name) = s.split_once('/')?;
    Some(ObjectKey::new(ns, name))
}

pub fn key_string(key: &ObjectKey) -> String {
    format!("{}/{}", key.namespace, key.name)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bus_schemas::kinds::container::Container;
    use bus_schemas::meta::Condition;
    use bus_schemas::quantity::Quantity;
    use bus_schemas::OwnerReference;

    pub fn node(name: &str, cpu: &str, mem: &str, pods: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = name.into();
        for (k, v) in [("cpu", cpu), ("memory", mem), ("pods", pods)] {
            n.status
                .allocatable
                .insert(k.into(), Quantity::parse(v).unwrap());
        }
        n.status.conditions.push(Condition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        });
        n
    }

    pub fn pod(name: &str, cpu: &str, mem: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = "default".into();
        p.metadata.name = name.into();
        p.metadata.uid = format!("uid-{name}");
        let mut c = Container {
            name: "c".into(),
            image: "x".into(),
            ..Default::default()
        };
        if !cpu.is_empty() {
            c.resources
                .requests
                .insert("cpu".into(), Quantity::parse(cpu).unwrap());
        }
        if !mem.is_empty() {
            c.resources
                .requests
                .insert("memory".into(), Quantity::parse(mem).unwrap());
        }
        p.spec.containers.push(c);
        p.spec.scheduler_name = "default-scheduler".into();
        p.status.phase = "Pending".into();
        p
    }

    pub fn owned(mut p: Pod, uid: &str) -> Pod {
        p.metadata.owner_references.push(OwnerReference {
            kind: "ReplicaSet".into(),
            uid: uid.into(),
            controller: Some(true),
            ..Default::default()
        });
        p
    }

    pub fn bound(mut p: Pod, node: &str) -> Pod {
        p.spec.node_name = node.into();
        p
    }

    #[test]
    fn accounting_follows_pod_lifecycle() {
        let mut cache = ClusterCache::new();
        cache.upsert_node(Arc::new(node("n1", "4", "8Gi", "10")));
        let p = bound(owned(pod("a", "1", "1Gi"), "rs1"), "n1");
        cache.apply_pod(Arc::new(p.clone()), 1);
        let n = cache.node("n1").unwrap();
        assert_eq!(n.requested.milli_cpu, 1000);
        assert_eq!(n.requested.pods, 1);
        assert_eq!(n.owners.get("rs1"), Some(&1));

        // Finishing frees the room.
        let mut done = p.clone();
        done.status.phase = "Succeeded".into();
        assert!(cache.apply_pod(Arc::new(done), 2).freed);
        assert_eq!(cache.node("n1").unwrap().requested.milli_cpu, 0);

        // Assume, then the informer confirms; forget afterwards is a no-op.
        let q = pod("b", "500m", "");
        cache.apply_pod(Arc::new(q.clone()), 3);
        let key = ObjectKey::new("default", "b");
        assert!(cache.assume(&key, "n1"));
        assert_eq!(cache.node("n1").unwrap().requested.milli_cpu, 500);
        cache.apply_pod(Arc::new(q.clone()), 4); // an unrelated update keeps the assumption
        assert_eq!(cache.node("n1").unwrap().requested.milli_cpu, 500);
        cache.apply_pod(Arc::new(bound(q.clone(), "n1")), 5);
        cache.forget(&key);
        assert_eq!(cache.node("n1").unwrap().requested.milli_cpu, 500);
        assert!(cache.delete_pod(&key, 6).freed);
        assert_eq!(cache.node("n1").unwrap().requested, Resources::default());
        assert_eq!(cache.pod_revision, 6);

        // Assume and fail: the room comes back.
        let r = pod("c", "1", "");
        cache.apply_pod(Arc::new(r), 7);
        let key = ObjectKey::new("default", "c");
        cache.assume(&key, "n1");
        cache.forget(&key);
        assert_eq!(cache.node("n1").unwrap().requested.milli_cpu, 0);
    }

    #[test]
    fn zone_counts_follow_node_labels() {
        let mut cache = ClusterCache::new();
        let mut n = node("n1", "4", "8Gi", "10");
        n.metadata.labels.insert(ZONE_LABEL.into(), "a".into());
        cache.upsert_node(Arc::new(n.clone()));
        cache.apply_pod(Arc::new(bound(owned(pod("a", "1", ""), "rs"), "n1")), 1);
        assert_eq!(cache.zone_count("rs", "a"), 1);
        n.metadata.labels.insert(ZONE_LABEL.into(), "b".into());
        cache.upsert_node(Arc::new(n));
        assert_eq!(cache.zone_count("rs", "a"), 0);
        assert_eq!(cache.zone_count("rs", "b"), 1);
        cache.remove_node("n1");
        assert_eq!(cache.zone_count("rs", "b"), 0);
    }
}
