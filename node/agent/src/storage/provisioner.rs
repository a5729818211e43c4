//! The local-path provisioner: every node runs one for the claims the scheduler placed on it
//! (`volume.kubernetes.io/selected-node`) whose class names `shoal.io/local-path`.
//!
//! Level-triggered: each pass compares what the claims and volumes say with what they should
//! say and takes the next step, so a crash between two steps is finished by the next pass
//! (after a restart too). Steps, each a write with optimistic concurrency:
//! 1. the directory `<state dir>/volumes/pvc-<claim uid>`, then the PersistentVolume of that
//!    name (node affinity = this node, claimRef = the claim, capacity = the request, reclaim
//!    policy from the class) — the name follows from the claim, so a repeated create finds
//!    its own volume;
//! 2. the volume's status Bound;
//! 3. the claim's `spec.volumeName`;
//! 4. the claim's status Bound, with the volume's capacity and access modes.
//!
//! Reclaim: a volume provisioned here whose claim is gone (or is a new claim of the same
//! name) is released. `Delete` removes the directory and then the volume; `Retain` marks it
//! `Released` and keeps the data. A claim still mounted by a pod on this node is not
//! reclaimed until that pod is gone, since a directory removed under a running container
//! loses its writes.
//!
//! Every write is a node report on the node's own subject (`volume-create`, `volume-status`,
//! `volume-delete`, `claim-update`, `claim-status`, and `pod-event` for the quota Event),
//! never a general API verb: the API admits only volumes pinned to this node and claims
//! selected for it, so a node's credential needs no PersistentVolume or claim verbs. Reads
//! are the informers' (JetStream).
//!
//! Sizes: the directory is made with a quota of the request where the state dir's
//! filesystem has one ([`super::quota`]). Where it has none, the volume is made all the
//! same, and that its size is not enforced is said on the volume (`shoal.io/quota`), in an
//! Event on the claim and in the log: a cluster whose nodes lack quotas should know it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bus_schemas::api::{DeleteOptions, Preconditions};
use bus_schemas::kinds::affinity::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use bus_schemas::kinds::common::ObjectReference;
use bus_schemas::kinds::event::EventSource;
use bus_schemas::kinds::persistent_volume::{LocalVolumeSource, VolumeNodeAffinity};
use bus_schemas::kinds::storage_class::LOCAL_PATH_PROVISIONER;
use bus_schemas::kinds::{Event, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use bus_schemas::subjects::NodeReport;
use bus_schemas::Resource;
use shoal_bus::{ApiClient, Informer, InformerFactory};

use super::quota::{self, Limit, PROJECT_ID_ANNOTATION, QUOTA_ANNOTATION};

/// The provisioner's name in `metadata.managedFields`.
pub const FIELD_MANAGER: &str = "shoal-local-path-provisioner";
/// Kubernetes' annotation naming who made a volume.
pub const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";
/// The node whose provisioner made (and reclaims) a volume.
pub const PROVISIONED_ON_ANNOTATION: &str = "shoal.io/local-path-node";
/// Set by the binder once a claim names its volume, as Kubernetes does.
pub const BIND_COMPLETED_ANNOTATION: &str = "pv.kubernetes.io/bind-completed";
/// How often a pass runs without any change (a safety net for a missed event).
const RESYNC: Duration = Duration::from_secs(10);

/// The next write that brings a claim and its volume together.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Not this node's business, or nothing left to do.
    Nothing,
    CreateVolume,
    MarkVolumeBound,
    SetVolumeName,
    MarkClaimBound,
}

/// What a volume provisioned here needs now that its claim may be gone.
#[derive(Debug, Clone, PartialEq)]
pub enum Reclaim {
    Nothing,
    MarkReleased,
    Delete,
}

/// The volume name of a claim: Kubernetes' `pvc-<uid>`.
pub fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid)
}

/// Whether `claim` is one this node's provisioner makes a volume for.
pub fn is_ours(claim: &PersistentVolumeClaim, class: Option<&StorageClass>, node: &str) -> bool {
    class.is_some_and(|c| c.provisioner == LOCAL_PATH_PROVISIONER)
        && claim.selected_node() == Some(node)
        && !claim.metadata.is_deleting()
}

/// The first thing missing between `claim` and its volume (`volume`, if it exists).
pub fn next_step(claim: &PersistentVolumeClaim, volume: Option<&PersistentVolume>) -> Step {
    let name = volume_name(claim);
    if !claim.spec.volume_name.is_empty() && claim.spec.volume_name != name {
        // Bound to some other volume (by hand): not ours to touch.
        return Step::Nothing;
    }
    let Some(volume) = volume else {
        return if claim.is_bound() {
            // Its volume was deleted under it: Kubernetes calls this Lost; nothing to remake.
            Step::Nothing
        } else {
            Step::CreateVolume
        };
    };
    if !volume.claimed_by(
        &claim.metadata.namespace,
        &claim.metadata.name,
        &claim.metadata.uid,
    ) {
        return Step::Nothing;
    }
    if volume.status.phase != "Bound" {
        Step::MarkVolumeBound
    } else if claim.spec.volume_name.is_empty() {
        Step::SetVolumeName
    } else if !claim.is_bound() {
        Step::MarkClaimBound
    } else {
        Step::Nothing
    }
}

/// What to do with a volume made on `node`, given its claim as the cache has it now and
/// whether a pod of this node still mounts that claim.
pub fn reclaim(
    volume: &PersistentVolume,
    claim: Option<&PersistentVolumeClaim>,
    node: &str,
    still_mounted: bool,
) -> Reclaim {
    let annotations = &volume.metadata.annotations;
    let ours = annotations
        .get(PROVISIONED_BY_ANNOTATION)
        .map(String::as_str)
        == Some(LOCAL_PATH_PROVISIONER)
        && annotations
            .get(PROVISIONED_ON_ANNOTATION)
            .map(String::as_str)
            == Some(node);
    let Some(reference) = volume.spec.claim_ref.as_ref() else {
        return Reclaim::Nothing;
    };
    let claim_exists =
        claim.is_some_and(|c| reference.uid.is_empty() || c.metadata.uid == reference.uid);
    if !ours || claim_exists || still_mounted {
        return Reclaim::Nothing;
    }
    match volume.spec.persistent_volume_reclaim_policy.as_str() {
        "Delete" => Reclaim::Delete,
        _ if volume.status.phase != "Released" => Reclaim::MarkReleased,
        _ => Reclaim::Nothing,
    }
}

/// The PersistentVolume the provisioner makes for `claim` in `dir` on `node`.
pub fn new_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: &str,
    dir: &Path,
) -> PersistentVolume {
    let mut pv = PersistentVolume::default();
    pv.set_type_meta();
    pv.metadata.name = volume_name(claim);
    let annotations = &mut pv.metadata.annotations;
    annotations.insert(
        PROVISIONED_BY_ANNOTATION.into(),
        LOCAL_PATH_PROVISIONER.into(),
    );
    annotations.insert(PROVISIONED_ON_ANNOTATION.into(), node.into());
    let spec = &mut pv.spec;
    spec.capacity = claim
        .request()
        .map(|q| BTreeMap::from([("storage".to_string(), *q)]))
        .unwrap_or_default();
    spec.access_modes = claim.spec.access_modes.clone();
    spec.persistent_volume_reclaim_policy = class.reclaim_policy().to_string();
    spec.storage_class_name = class.metadata.name.clone();
    spec.local = Some(LocalVolumeSource {
        path: dir.display().to_string(),
        fs_type: None,
    });
    spec.node_affinity = Some(VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: vec![NodeSelectorRequirement {
                    key: "kubernetes.io/hostname".into(),
                    operator: "In".into(),
                    values: vec![node.to_string()],
                }],
                match_fields: Vec::new(),
            }],
        }),
    });
    spec.claim_ref = Some(ObjectReference {
        kind: "PersistentVolumeClaim".into(),
        api_version: "v1".into(),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        ..Default::default()
    });
    pv
}

/// The bytes a claim requests, if it names a size.
pub fn requested_bytes(claim: &PersistentVolumeClaim) -> Option<u64> {
    claim.request().and_then(|q| u64::try_from(q.value()).ok())
}

/// Records on the volume how its size is held: the project id (for reclaim, after a
/// restart too) and whether the size is enforced.
pub fn record_limit(pv: &mut PersistentVolume, limit: &Limit, bytes: Option<u64>) {
    let annotations = &mut pv.metadata.annotations;
    if let Limit::Project(id) = limit {
        annotations.insert(PROJECT_ID_ANNOTATION.into(), id.to_string());
    }
    annotations.insert(QUOTA_ANNOTATION.into(), limit.annotation(bytes));
}

/// The project whose limit to lift once the volume is deleted.
pub fn recorded_project(pv: &PersistentVolume) -> Option<u32> {
    pv.metadata
        .annotations
        .get(PROJECT_ID_ANNOTATION)
        .and_then(|id| id.parse().ok())
        .filter(|id| *id != 0)
}

/// A Warning on the claim that its volume has no size limit on this node.
pub fn quota_event(claim: &PersistentVolumeClaim, node: &str, reason: &str) -> Event {
    let now = chrono::Utc::now();
    let mut event = Event {
        involved_object: ObjectReference {
            kind: "PersistentVolumeClaim".into(),
            namespace: claim.metadata.namespace.clone(),
            name: claim.metadata.name.clone(),
            uid: claim.metadata.uid.clone(),
            api_version: "v1".into(),
            ..Default::default()
        },
        reason: "VolumeSizeNotEnforced".into(),
        message: format!(
            "volume {} on node {node} is a plain directory: its size is not enforced: {reason}",
            volume_name(claim)
        ),
        source: EventSource {
            component: FIELD_MANAGER.into(),
            host: node.into(),
        },
        first_timestamp: Some(now),
        last_timestamp: Some(now),
        count: 1,
        type_: "Warning".into(),
        reporting_component: FIELD_MANAGER.into(),
        reporting_instance: node.into(),
        ..Default::default()
    };
    event.set_type_meta();
    event.metadata.namespace = claim.metadata.namespace.clone();
    // One per claim: a provisioning step redone after a crash finds it made.
    event.metadata.name = format!("{}.{}.quota", claim.metadata.name, claim.metadata.uid);
    event
}

pub struct Provisioner {
    api: ApiClient,
    node: String,
    /// `<state dir>/volumes`: every directory made or removed lies directly under it.
    root: PathBuf,
    claims: Informer<PersistentVolumeClaim>,
    volumes: Informer<PersistentVolume>,
    classes: Informer<StorageClass>,
    pods: Informer<Pod>,
}

impl Provisioner {
    pub fn new(
        nats: async_nats::Client,
        informers: &InformerFactory,
        node: &str,
        state_dir: &Path,
    ) -> Provisioner {
        Provisioner {
            api: ApiClient::new(nats).with_field_manager(FIELD_MANAGER),
            node: node.to_string(),
            root: state_dir.join("volumes"),
            claims: informers.get(),
            volumes: informers.get(),
            classes: informers.get(),
            pods: informers.get(),
        }
    }

    /// Runs passes until the task is aborted: after each change of a claim or volume, and
    /// every [`RESYNC`].
    pub async fn run(self) {
        let mut claim_rx = self.claims.subscribe();
        let mut volume_rx = self.volumes.subscribe();
        for synced in [
            self.claims.wait_synced().await,
            self.volumes.wait_synced().await,
            self.classes.wait_synced().await,
            self.pods.wait_synced().await,
        ] {
            if let Err(e) = synced {
                tracing::error!(error = %e, "local-path provisioner: caches did not load");
                return;
            }
        }
        loop {
            self.pass().await;
            tokio::select! {
                _ = claim_rx.recv() => {}
                _ = volume_rx.recv() => {}
                _ = tokio::time::sleep(RESYNC) => {}
            }
            // Take what else arrived meanwhile: one pass covers it.
            while claim_rx.try_recv().is_ok() || volume_rx.try_recv().is_ok() {}
        }
    }

    /// One look at every claim and volume; a failed step is logged and retried next pass.
    pub async fn pass(&self) {
        let everything = Default::default();
        for claim in self.claims.list(None, &everything) {
            let class = self.classes.get("", claim.class());
            if !is_ours(&claim, class.as_deref(), &self.node) {
                continue;
            }
            let Some(class) = class else { continue };
            if let Err(e) = self.provision((*claim).clone(), &class).await {
                tracing::warn!(claim = %format!("{}/{}", claim.metadata.namespace, claim.metadata.name),
                    error = %e, "provisioning not finished; retrying");
            }
        }
        for volume in self.volumes.list(None, &everything) {
            if let Err(e) = self.reclaim(&volume).await {
                tracing::warn!(volume = %volume.metadata.name, error = %e, "reclaim not finished; retrying");
            }
        }
    }

    async fn provision(
        &self,
        mut claim: PersistentVolumeClaim,
        class: &StorageClass,
    ) -> Result<(), String> {
        let name = volume_name(&claim);
        let mut volume = self.volumes.get("", &name).map(|v| (*v).clone());
        // Each write returns the object as stored: the next step starts from it, so one pass
        // takes a claim all the way unless something races it.
        for _ in 0..4 {
            match next_step(&claim, volume.as_ref()) {
                Step::Nothing => return Ok(()),
                Step::CreateVolume => {
                    let dir = self.root.join(&name);
                    let bytes = requested_bytes(&claim);
                    let limit =
                        make_dir(&dir, bytes, quota::project_id(&claim.metadata.uid)).await?;
                    let mut pv = new_volume(&claim, class, &self.node, &dir);
                    record_limit(&mut pv, &limit, bytes);
                    if let Limit::NotEnforced(reason) = &limit {
                        self.warn_unlimited(&claim, reason).await;
                    }
                    volume = Some(match self.report(NodeReport::VolumeCreate, &pv).await {
                        Ok(created) => created,
                        // Made by an earlier pass whose reply was lost: its event brings it
                        // to the cache and another pass.
                        Err(e) if e.is_already_exists() => self
                            .volumes
                            .get("", &name)
                            .map(|v| (*v).clone())
                            .ok_or_else(|| format!("volume {name} exists but is not cached yet"))?,
                        Err(e) => return Err(format!("creating volume {name}: {e}")),
                    });
                }
                Step::MarkVolumeBound => {
                    let mut next = volume.take().unwrap_or_default();
                    next.status.phase = "Bound".into();
                    next.status.last_phase_transition_time = Some(chrono::Utc::now());
                    volume = Some(
                        self.report(NodeReport::VolumeStatus, &next)
                            .await
                            .map_err(|e| format!("marking volume {name} bound: {e}"))?,
                    );
                }
                Step::SetVolumeName => {
                    claim.spec.volume_name = name.clone();
                    claim
                        .metadata
                        .annotations
                        .insert(BIND_COMPLETED_ANNOTATION.into(), "yes".into());
                    claim = self
                        .report(NodeReport::ClaimUpdate, &claim)
                        .await
                        .map_err(|e| format!("binding claim to {name}: {e}"))?;
                }
                Step::MarkClaimBound => {
                    let pv = volume.as_ref().ok_or("volume vanished")?;
                    claim.status.phase = "Bound".into();
                    claim.status.capacity = pv.spec.capacity.clone();
                    claim.status.access_modes = pv.spec.access_modes.clone();
                    claim = self
                        .report(NodeReport::ClaimStatus, &claim)
                        .await
                        .map_err(|e| format!("marking claim bound: {e}"))?;
                    tracing::info!(claim = %claim.metadata.name, volume = %name, "claim bound");
                }
            }
        }
        Ok(())
    }

    /// Says that the claim's volume has no size limit: in the log, and in an Event (best
    /// effort: the volume's annotation says it too).
    async fn warn_unlimited(&self, claim: &PersistentVolumeClaim, reason: &str) {
        tracing::warn!(claim = %format!("{}/{}", claim.metadata.namespace, claim.metadata.name),
            %reason, "volume size not enforced");
        let event = quota_event(claim, &self.node, reason);
        match self.report::<_, Event>(NodeReport::PodEvent, &event).await {
            Err(e) if !e.is_already_exists() => {
                tracing::warn!(error = %e, "recording the volume-size Event")
            }
            _ => {}
        }
    }

    /// One write through this node's own report subject.
    async fn report<T: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        report: NodeReport,
        body: &T,
    ) -> Result<R, shoal_bus::ApiError> {
        self.api.report(&self.node, report, body).await
    }

    fn still_mounted(&self, namespace: &str, claim: &str) -> bool {
        self.pods
            .list(Some(namespace), &Default::default())
            .iter()
            .any(|p| p.spec.node_name == self.node && p.spec.claim_names().any(|c| c == claim))
    }

    async fn reclaim(&self, volume: &PersistentVolume) -> Result<(), String> {
        let Some(reference) = &volume.spec.claim_ref else {
            return Ok(());
        };
        let claim = self.claims.get(&reference.namespace, &reference.name);
        let mounted = self.still_mounted(&reference.namespace, &reference.name);
        match reclaim(volume, claim.as_deref(), &self.node, mounted) {
            Reclaim::Nothing => Ok(()),
            Reclaim::MarkReleased => {
                let mut next = volume.clone();
                next.status.phase = "Released".into();
                next.status.last_phase_transition_time = Some(chrono::Utc::now());
                self.report::<_, PersistentVolume>(NodeReport::VolumeStatus, &next)
                    .await
                    .map(|_| tracing::info!(volume = %volume.metadata.name, "volume released; data kept"))
                    .map_err(|e| format!("marking volume released: {e}"))
            }
            Reclaim::Delete => {
                if let Some(path) = volume.path() {
                    remove_dir(&self.root, Path::new(path)).await?;
                }
                if let Some(project) = recorded_project(volume) {
                    let root = self.root.clone();
                    tokio::task::spawn_blocking(move || quota::clear(&root, project))
                        .await
                        .map_err(|e| e.to_string())?
                        .map_err(|e| format!("lifting the quota of project {project}: {e}"))?;
                }
                let options = DeleteOptions {
                    name: volume.metadata.name.clone(),
                    preconditions: Some(Preconditions {
                        uid: Some(volume.metadata.uid.clone()),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                match self
                    .report::<_, PersistentVolume>(NodeReport::VolumeDelete, &options)
                    .await
                {
                    Ok(_) => {
                        tracing::info!(volume = %volume.metadata.name, "volume deleted with its claim");
                        Ok(())
                    }
                    Err(e) if e.is_not_found() => Ok(()),
                    Err(e) => Err(format!("deleting volume: {e}")),
                }
            }
        }
    }
}

/// Makes the volume's directory with its size limit where the filesystem has quotas.
async fn make_dir(dir: &Path, bytes: Option<u64>, project: u32) -> Result<Limit, String> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || quota::make_dir(&dir, bytes, project))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("making the volume directory: {e}"))
}

/// Removes a volume's directory, refusing any path that is not directly under `root`: the
/// path comes from an object anyone with API access can write.
async fn remove_dir(root: &Path, dir: &Path) -> Result<(), String> {
    if dir.parent() != Some(root) || dir.file_name().is_none_or(|n| n == "..") {
        return Err(format!(
            "volume path {} is not under {}: not removed",
            dir.display(),
            root.display()
        ));
    }
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("removing the volume directory: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::kinds::persistent_volume_claim::SELECTED_NODE_ANNOTATION;

    fn claim() -> PersistentVolumeClaim {
        let mut claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data-web-1", "namespace": "default", "uid": "u1",
                         "annotations": {SELECTED_NODE_ANNOTATION: "node-a"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
                     "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"}
        }))
        .expect("claim");
        claim.apply_defaults();
        claim
    }

    #[test]
    fn steps_follow_each_other_until_both_are_bound() {
        let class = StorageClass::local_path();
        let mut claim = claim();
        assert!(is_ours(&claim, Some(&class), "node-a"));
        assert!(!is_ours(&claim, Some(&class), "node-b"));
        assert_eq!(next_step(&claim, None), Step::CreateVolume);
        let mut pv = new_volume(&claim, &class, "node-a", Path::new("/state/volumes/pvc-u1"));
        pv.apply_defaults();
        assert!(pv.validate_kind().is_empty(), "{:?}", pv.validate_kind());
        assert_eq!(pv.metadata.name, "pvc-u1");
        assert_eq!(pv.spec.persistent_volume_reclaim_policy, "Delete");
        assert_eq!(next_step(&claim, Some(&pv)), Step::MarkVolumeBound);
        pv.status.phase = "Bound".into();
        assert_eq!(next_step(&claim, Some(&pv)), Step::SetVolumeName);
        claim.spec.volume_name = "pvc-u1".into();
        assert_eq!(next_step(&claim, Some(&pv)), Step::MarkClaimBound);
        claim.status.phase = "Bound".into();
        assert_eq!(next_step(&claim, Some(&pv)), Step::Nothing);
        // A claim of the same name made again is a different claim.
        let mut other = pv.clone();
        other.spec.claim_ref.as_mut().expect("ref").uid = "u0".into();
        claim.spec.volume_name.clear();
        claim.status.phase = "Pending".into();
        assert_eq!(next_step(&claim, Some(&other)), Step::Nothing);
    }

    #[test]
    fn a_gone_claim_releases_its_volume_by_policy() {
        let class = StorageClass::local_path();
        let claim = claim();
        let mut pv = new_volume(&claim, &class, "node-a", Path::new("/state/volumes/pvc-u1"));
        pv.status.phase = "Bound".into();
        assert_eq!(
            reclaim(&pv, Some(&claim), "node-a", false),
            Reclaim::Nothing
        );
        assert_eq!(reclaim(&pv, None, "node-a", true), Reclaim::Nothing);
        assert_eq!(reclaim(&pv, None, "node-b", false), Reclaim::Nothing);
        assert_eq!(reclaim(&pv, None, "node-a", false), Reclaim::Delete);
        let mut renewed = claim.clone();
        renewed.metadata.uid = "u2".into();
        assert_eq!(
            reclaim(&pv, Some(&renewed), "node-a", false),
            Reclaim::Delete
        );
        pv.spec.persistent_volume_reclaim_policy = "Retain".into();
        assert_eq!(reclaim(&pv, None, "node-a", false), Reclaim::MarkReleased);
        pv.status.phase = "Released".into();
        assert_eq!(reclaim(&pv, None, "node-a", false), Reclaim::Nothing);
    }

    #[tokio::test]
    async fn only_directories_under_the_root_are_removed() {
        let root = tempfile::tempdir().expect("tempdir");
        let volumes = root.path().join("volumes");
        let dir = volumes.join("pvc-u1");
        make_dir(&dir, None, 1).await.expect("make");
        assert!(remove_dir(&volumes, Path::new("/etc")).await.is_err());
        assert!(remove_dir(&volumes, &volumes.join("pvc-u1/../.."))
            .await
            .is_err());
        remove_dir(&volumes, &dir).await.expect("remove");
        assert!(!dir.exists());
        remove_dir(&volumes, &dir)
            .await
            .expect("already gone is fine");
    }
}
