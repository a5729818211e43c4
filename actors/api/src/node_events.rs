//! `pod-event` node reports: a node agent records an Event about a pod bound to it (a
//! lifecycle hook that failed, a missing ConfigMap or Secret, a skipped env key), or about a
//! claim the scheduler selected it for (its local provisioner's warnings). Through the
//! node's own subject rather than the Event verbs, so a node credential can speak only about
//! its own pods and claims: the API checks the binding to the reporting node before writing
//! anything.

use bus_schemas::kinds::{Event, PersistentVolumeClaim, Pod};
use bus_schemas::{subjects, Reason, Status};
use shoal_bus::informer::INDEX_NODE;

use crate::reply::Reply;
use crate::request::Request;
use crate::state::{decode_object, ApiServer};

/// How long the pod cache may take to show a pod the node already sees.
const CACHE_CATCH_UP: std::time::Duration = std::time::Duration::from_secs(5);

/// Concurrent reports of the same event each bump its count; this many lost races in a row
/// give up (the event is a record, not state anything acts on).
const BUMP_ATTEMPTS: usize = 3;

impl ApiServer {
    pub(crate) async fn pod_event(&self, req: &Request<'_>, node: &str) -> Result<Reply, Status> {
        let event: Event = decode_object(req.payload)?;
        let involved = &event.involved_object;
        let about_claim = involved.kind == "PersistentVolumeClaim";
        if !(involved.kind == "Pod" || about_claim)
            || involved.namespace != event.metadata.namespace
        {
            return Err(Status::new(
                Reason::Forbidden,
                format!("node {node:?} may only report events about pods and claims, in their namespace"),
            ));
        }
        let (ns, name) = (involved.namespace.as_str(), involved.name.as_str());
        if about_claim {
            self.check_claim_selected(node, ns, name, &involved.uid)
                .await?;
            return self.record_event(req, event).await;
        }
        let bound_here = |pod: &Pod| pod.spec.node_name == node && pod.metadata.uid == involved.uid;
        let cached = self.cached_or_current::<Pod>(ns, name).await?;
        let pod = match cached {
            Some(pod) if bound_here(&pod) => pod,
            // The cache may not show the bind yet: ask the log before refusing.
            _ => self
                .current::<Pod>(ns, name)
                .await?
                .map(|(pod, _)| pod)
                .ok_or_else(|| Status::not_found("Pod", ns, name))?,
        };
        if !bound_here(&pod) {
            return Err(Status::new(
                Reason::Forbidden,
                format!("node {node:?} may not report events about pod {ns}/{name}: it is not bound there"),
            ));
        }
        self.record_event(req, event).await
    }

    /// Refuses unless the claim `ns/name` with `uid` is selected for `node`.
    async fn check_claim_selected(
        &self,
        node: &str,
        ns: &str,
        name: &str,
        uid: &str,
    ) -> Result<(), Status> {
        let selected_here = |claim: &PersistentVolumeClaim| {
            claim.selected_node() == Some(node) && claim.metadata.uid == uid
        };
        let claim = match self
            .cached_or_current::<PersistentVolumeClaim>(ns, name)
            .await?
        {
            Some(claim) if selected_here(&claim) => claim,
            // The cache may not show the selection yet: ask the log before refusing.
            _ => self
                .current::<PersistentVolumeClaim>(ns, name)
                .await?
                .map(|(claim, _)| claim)
                .ok_or_else(|| Status::not_found("PersistentVolumeClaim", ns, name))?,
        };
        if selected_here(&claim) {
            Ok(())
        } else {
            Err(Status::new(
                Reason::Forbidden,
                format!("node {node:?} may not report events about claim {ns}/{name}: it is not selected for that node"),
            ))
        }
    }

    /// Creates the event, or bumps the count of the one of that name.
    async fn record_event(&self, req: &Request<'_>, event: Event) -> Result<Reply, Status> {
        let ns = event.involved_object.namespace.as_str();
        // Written as the server's own bookkeeping, not as the node: node ownership rules are
        // about the pod or claim, which was checked before.
        let write = Request::new(req.subject, None, req.payload);
        match self.create_object(&write, event.clone()).await {
            Ok(created) => return Reply::ok(&created),
            Err(s) if s.is(Reason::AlreadyExists) => {}
            Err(s) => return Err(s),
        }
        let event_name = event.metadata.name.as_str();
        for _ in 0..BUMP_ATTEMPTS {
            let Some((mut existing, _)) = self.current::<Event>(ns, event_name).await? else {
                continue;
            };
            if existing.involved_object.uid != event.involved_object.uid {
                // The same name for a recreated pod: start counting afresh.
                existing.involved_object = event.involved_object.clone();
                existing.count = 0;
                existing.first_timestamp = event.first_timestamp;
            }
            existing.count = existing.count.saturating_add(1);
            existing.message.clone_from(&event.message);
            existing.type_.clone_from(&event.type_);
            existing.last_timestamp = event.last_timestamp;
            match self.update_object(&write, existing, false).await {
                Ok(updated) => return Reply::ok(&updated),
                Err(s) if s.is(Reason::Conflict) => continue,
                Err(s) => return Err(s),
            }
        }
        Err(Status::new(
            Reason::Conflict,
            format!("event {ns}/{event_name}: too many concurrent writers"),
        ))
    }

    /// Whether a pod bound to `node` satisfies `test`, by the pod cache brought up to the log
    /// when it does not show one yet (the node may have seen the pod first). Node-scoped
    /// reads (a Secret) are answered only when this holds.
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
