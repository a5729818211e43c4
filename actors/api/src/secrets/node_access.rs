//! A node reads a Secret only for a pod bound to it that uses the Secret. The node is the
//! one in the request subject (`shoal.v1.node.<node>.secret`); with bus identities, only that
//! node's credential may publish there, so the check holds per node credential.

use bus_schemas::api::ObjectRef;
use bus_schemas::kinds::config_sources::References;
use bus_schemas::kinds::Secret;
use bus_schemas::{codec, Reason, Status};

use crate::reply::Reply;
use crate::request::Request;
use crate::state::ApiServer;

impl ApiServer {
    /// Answers `shoal.v1.node.<node>.secret`: the decrypted Secret, or 403 when no pod bound
    /// to `node` uses it.
    pub(crate) async fn secret_for_node(
        &self,
        req: &Request<'_>,
        node: &str,
    ) -> Result<Reply, Status> {
        let wanted: ObjectRef = codec::from_msgpack_strict(req.payload)
            .map_err(|causes| Status::invalid("ObjectRef", "", causes))?;
        if !self.node_uses_secret(node, &wanted).await? {
            return Err(Status::new(
                Reason::Forbidden,
                format!(
                    "node {node:?} runs no pod that uses secret {}/{}",
                    wanted.namespace, wanted.name
                ),
            ));
        }
        match self
            .current::<Secret>(&wanted.namespace, &wanted.name)
            .await?
        {
            Some((secret, _)) => Reply::ok(&secret),
            None => Err(Status::not_found("Secret", &wanted.namespace, &wanted.name)),
        }
    }

    async fn node_uses_secret(&self, node: &str, wanted: &ObjectRef) -> Result<bool, Status> {
        self.node_has_pod(node, |pod| {
            pod.metadata.namespace == wanted.namespace
                && References::of(&pod.spec).secrets.contains(&wanted.name)
        })
        .await
    }
}
