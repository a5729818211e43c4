//! Routes a request to its verb and kind, and answers node reports. Plain async code: the
//! actix actor only feeds it. The top of the request path: it calls the verbs, nothing calls it
//! but the actor.

use bus_schemas::api::DeleteOptions;
use bus_schemas::kinds::{self, Lease, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use bus_schemas::subjects::{self, NodeReport, NodeSubjectError, Verb};
use bus_schemas::wellknown::NODE_LEASE_NAMESPACE;
use bus_schemas::{codec, with_kind, Reason, Resource, Status};
use chrono::Utc;

use crate::reply::Reply;
use crate::request::Request;
use crate::state::{decode_object, ApiServer};

impl ApiServer {
    /// Answers one request; never fails: failures are Status replies.
    pub async fn handle(&self, mut req: Request<'_>) -> Reply {
        let result = if subjects::is_node_report(req.subject) {
            self.node_report(&mut req).await
        } else {
            self.api_request(&req).await
        };
        match result {
            Ok(reply) => reply,
            Err(status) => Reply::failure(&status),
        }
    }

    async fn api_request(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let Some((token, verb)) = subjects::parse_api(req.subject) else {
            return Err(Status::bad_request(format!(
                "{} is not an API subject",
                req.subject
            )));
        };
        let Some(info) = kinds::by_token(token) else {
            return Err(Status::new(
                Reason::NotFound,
                format!("the server doesn't have a resource type {token:?}"),
            ));
        };
        let Some(verb) = verb else {
            return Err(Status::new(
                Reason::MethodNotAllowed,
                format!("unknown verb in {}: use one of create, update, update-status, patch, delete, get, list, apply, get-scale, update-scale", req.subject),
            ));
        };
        with_kind!(info.kind, K => self.verb::<K>(verb, req).await, _ => unreachable!("by_token returned a known kind"))
    }

    // Every verb's future is boxed. Awaited in place, each request's task would carry the
    // state of the largest verb of the largest kind (tens of KB), allocated on fresh pages and
    // copied for every request, heartbeats included; boxed, a request pays for its own verb.
    async fn verb<K: Resource>(&self, verb: Verb, req: &Request<'_>) -> Result<Reply, Status> {
        match verb {
            Verb::Create => Box::pin(self.create::<K>(req)).await,
            Verb::Update => Box::pin(self.update::<K>(req, false)).await,
            Verb::UpdateStatus => {
                if !K::INFO.has_status {
                    return Err(Status::new(
                        Reason::MethodNotAllowed,
                        format!("{} has no status", K::INFO.kind),
                    ));
                }
                Box::pin(self.update::<K>(req, true)).await
            }
            Verb::Apply => Box::pin(self.apply::<K>(req)).await,
            Verb::Patch => Box::pin(self.patch::<K>(req)).await,
            Verb::Delete => Box::pin(self.delete::<K>(req)).await,
            Verb::Get => Box::pin(self.get::<K>(req)).await,
            Verb::List => Box::pin(self.list::<K>(req)).await,
            Verb::GetScale => Box::pin(self.scale_verb::<K>(req, false)).await,
            Verb::UpdateScale => Box::pin(self.scale_verb::<K>(req, true)).await,
        }
    }

    /// `shoal.v1.node.<node>.<what>`: a node's reports, accepted only for what is its own.
    async fn node_report(&self, req: &mut Request<'_>) -> Result<Reply, Status> {
        let (node, report) = subjects::parse_node_report(req.subject).map_err(|e| match e {
            NodeSubjectError::UnknownReport(_) => {
                Status::new(Reason::MethodNotAllowed, e.to_string())
            }
            _ => Status::bad_request(e.to_string()),
        })?;
        req.from_node = Some(node.clone());
        match report {
            NodeReport::PodStatus => Box::pin(self.update::<Pod>(req, true)).await,
            NodeReport::PodDelete => {
                let mut options: DeleteOptions = codec::from_msgpack_strict(req.payload)
                    .map_err(|causes| Status::invalid("DeleteOptions", "", causes))?;
                options.grace_period_seconds = Some(0);
                let pod = Box::pin(self.delete_object::<Pod>(req, &options)).await?;
                Reply::ok(&pod)
            }
            NodeReport::NodeStatus => Box::pin(self.node_status(req, &node)).await,
            NodeReport::Heartbeat => Box::pin(self.heartbeat(req, &node)).await,
            NodeReport::PodEvent => Box::pin(self.pod_event(req, &node)).await,
            NodeReport::Secret => Box::pin(self.secret_for_node(req, &node)).await,
            NodeReport::VolumeCreate => Box::pin(self.volume_create(req, &node)).await,
            NodeReport::VolumeDelete => Box::pin(self.volume_delete(req)).await,
            NodeReport::VolumeStatus => Box::pin(self.update::<PersistentVolume>(req, true)).await,
            NodeReport::ClaimUpdate => Box::pin(self.claim_update(req, &node)).await,
            NodeReport::ClaimStatus => {
                Box::pin(self.update::<PersistentVolumeClaim>(req, true)).await
            }
        }
    }

    /// Registers the node on first report, then writes its status.
    async fn node_status(&self, req: &Request<'_>, node: &str) -> Result<Reply, Status> {
        let reported: Node = decode_object(req.payload)?;
        if reported.metadata.name != node {
            return Err(Status::new(
                Reason::Forbidden,
                format!(
                    "node {node:?} may not report for node {:?}",
                    reported.metadata.name
                ),
            ));
        }
        let anonymous = Request {
            from_node: None,
            ..Request::new(req.subject, None, req.payload)
        };
        if self.cached_or_current::<Node>("", node).await?.is_none() {
            match self.create_object(&anonymous, reported.clone()).await {
                Ok(created) => return Reply::ok(&created),
                Err(s) if s.is(Reason::AlreadyExists) => {}
                Err(s) => return Err(s),
            }
        }
        let mut status_only = reported;
        status_only.metadata.resource_version.clear();
        let updated = self.update_object(req, status_only, true).await?;
        Reply::ok(&updated)
    }

    /// Renews the node's Lease (creating it, and its namespace, on first use).
    async fn heartbeat(&self, req: &Request<'_>, node: &str) -> Result<Reply, Status> {
        let anonymous = Request::new(req.subject, None, req.payload);
        if self
            .cached_or_current::<kinds::Namespace>("", NODE_LEASE_NAMESPACE)
            .await?
            .is_none()
        {
            let mut ns = kinds::Namespace::default();
            ns.metadata.name = NODE_LEASE_NAMESPACE.into();
            match self.create_object(&anonymous, ns).await {
                Ok(_) => {}
                Err(s) if s.is(Reason::AlreadyExists) => {}
                Err(s) => return Err(s),
            }
        }
        let now = Utc::now();
        for attempt in 0..8 {
            match self
                .base_for_write::<Lease>(NODE_LEASE_NAMESPACE, node, attempt, None)
                .await?
            {
                None => {
                    let mut lease = Lease::default();
                    lease.metadata.name = node.to_string();
                    lease.metadata.namespace = NODE_LEASE_NAMESPACE.into();
                    lease.spec.holder_identity = Some(node.to_string());
                    lease.spec.lease_duration_seconds = Some(40);
                    lease.spec.acquire_time = Some(now);
                    lease.spec.renew_time = Some(now);
                    match self.create_object(&anonymous, lease).await {
                        Ok(created) => return Reply::ok(&created),
                        Err(s) if s.is(Reason::AlreadyExists) => continue,
                        Err(s) => return Err(s),
                    }
                }
                Some((mut lease, _, _)) => {
                    lease.spec.renew_time = Some(now);
                    match self.update_object(&anonymous, lease, false).await {
                        Ok(updated) => return Reply::ok(&updated),
                        Err(s) if s.is(Reason::Conflict) => continue,
                        Err(s) => return Err(s),
                    }
                }
            }
        }
        Err(Status::conflict(
            "Lease",
            NODE_LEASE_NAMESPACE,
            node,
            "heartbeat raced too often",
        ))
    }
}
