//! Events a node agent reports about its pods (`shoal.v1.node.<node>.event`): accepted only
//! for a pod bound to that node, so a node credential cannot write events about others.

use bus_schemas::kinds::{Event, Pod};
use bus_schemas::{subjects, Reason, Status};
use shoal_bus::informer::INDEX_NODE;

use crate::reply::Reply;
use crate::request::Request;
use crate::state::{decode_object, ApiServer};

/// How long the pod cache may take to show a pod the node already sees.
const CACHE_CATCH_UP: std::time::Duration = std::time::Duration::from_secs(5);

impl ApiServer {
    pub(crate) async fn node_event(&self, req: &Request<'_>, node: &str) -> Result<Reply, Status> {
        let event: Event = decode_object(req.payload)?;
        let about = &event.involved_object;
        let own_pod = about.kind == "Pod"
            && about.namespace == event.metadata.namespace
            && self.bound_to(node, &about.namespace, &about.name).await?;
        if !own_pod {
            return Err(Status::new(
                Reason::Forbidden,
                format!(
                    "node {node:?} may report events only about its own pods, not {} {}/{}",
                    about.kind, about.namespace, about.name
                ),
            ));
        }
        let anonymous = Request::new(req.subject, None, req.payload);
        let created = self.create_object(&anonymous, event).await?;
        Reply::ok(&created)
    }

    /// Whether pod `namespace/name` is bound to `node`, by the pod cache brought up to the
    /// log when it does not show it yet (the node may have seen the pod first).
    pub(crate) async fn bound_to(
        &self,
        node: &str,
        namespace: &str,
        name: &str,
    ) -> Result<bool, Status> {
        self.node_has_pod(node, |pod| {
            pod.metadata.namespace == namespace && pod.metadata.name == name
        })
        .await
    }

    /// Whether a pod bound to `node` satisfies `test`, with the same catch-up.
    pub(crate) async fn node_has_pod(
        &self,
        node: &str,
        test: impl Fn(&Pod) -> bool,
    ) -> Result<bool, Status> {
        let pods = self.informers.get::<Pod>();
        let found = |pods: &shoal_bus::Informer<Pod>| {
            pods.by_index(INDEX_NODE, node).iter().any(|pod| test(pod))
        };
        if found(&pods) {
            return Ok(true);
        }
        let newest = self
            .store
            .last_revision_of(&subjects::objects_of("pod", None))
            .await
            .map_err(|e| Status::new(Reason::ServiceUnavailable, e.to_string()))?;
        let _ = tokio::time::timeout(CACHE_CATCH_UP, pods.wait_for_revision(newest)).await;
        Ok(found(&pods))
    }
}
