//! The volume reports of a node's local provisioner (`volume-create`, `volume-delete`,
//! `volume-status`, `claim-update`, `claim-status`): the same writes as the general verbs,
//! through the node's own subject, so a node credential needs no PersistentVolume or claim
//! verbs and can touch only what is its own. A volume is a node's when its node affinity
//! pins it there ([`PersistentVolume::pinned_node`]); a claim, when the scheduler selected
//! the node for it. Everything past the ownership check (defaults, validation, versions,
//! optimistic concurrency, field manager, request ids) is the general verb's.

use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::{PersistentVolume, PersistentVolumeClaim};
use bus_schemas::{codec, Reason, Status};

use crate::reply::Reply;
use crate::request::Request;
use crate::state::{decode_object, ApiServer};

impl ApiServer {
    /// `volume-create`: refused before anything is written unless the new volume is pinned
    /// to the reporting node.
    pub(crate) async fn volume_create(
        &self,
        req: &Request<'_>,
        node: &str,
    ) -> Result<Reply, Status> {
        let volume: PersistentVolume = decode_object(req.payload)?;
        if volume.pinned_node() != Some(node) {
            return Err(Status::new(
                Reason::Forbidden,
                format!(
                    "node {node:?} may not create PersistentVolume {:?}: spec.nodeAffinity.required must be exactly kubernetes.io/hostname In [{node:?}]",
                    volume.metadata.name
                ),
            ));
        }
        let created = self.create_object(req, volume).await?;
        Reply::ok(&created)
    }

    /// `volume-delete`: the stored volume must be pinned to the node (checked by the delete
    /// itself, against each version it tries to change).
    pub(crate) async fn volume_delete(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let options: DeleteOptions = codec::from_msgpack_strict(req.payload)
            .map_err(|causes| Status::invalid("DeleteOptions", "", causes))?;
        let deleted = self
            .delete_object::<PersistentVolume>(req, &options)
            .await?;
        Reply::ok(&deleted)
    }

    /// `claim-update`: the stored claim must be selected for the node (checked by the update);
    /// the new version must stay so, and a volume it newly names must be the node's own.
    pub(crate) async fn claim_update(
        &self,
        req: &Request<'_>,
        node: &str,
    ) -> Result<Reply, Status> {
        let claim: PersistentVolumeClaim = decode_object(req.payload)?;
        let refuse = |why: String| {
            Err(Status::new(
                Reason::Forbidden,
                format!(
                    "node {node:?} may not update PersistentVolumeClaim {}/{}: {why}",
                    claim.metadata.namespace, claim.metadata.name
                ),
            ))
        };
        if claim.selected_node() != Some(node) {
            return refuse(
                "the update must keep volume.kubernetes.io/selected-node naming the node".into(),
            );
        }
        let volume_name = claim.spec.volume_name.as_str();
        if !volume_name.is_empty() {
            let volume = self
                .cached_or_current::<PersistentVolume>("", volume_name)
                .await?;
            if volume.as_ref().and_then(PersistentVolume::pinned_node) != Some(node) {
                return refuse(format!(
                    "spec.volumeName {volume_name:?} is not a volume pinned to the node"
                ));
            }
        }
        let updated = self.update_object(req, claim, false).await?;
        Reply::ok(&updated)
    }
}
