//! The scale subresource (`get-scale`, `update-scale`) of Deployments and ReplicaSets, as
//! Kubernetes' `/scale`: an autoscaler reads and sets replicas without holding the whole
//! spec, so it can never overwrite a concurrent change to the template.

use bus_schemas::api::{ObjectRef, Scale, ScaleSpec, ScaleStatus};
use bus_schemas::kinds::{Deployment, ReplicaSet};
use bus_schemas::selector::LabelSelector;
use bus_schemas::{codec, Cause, ObjectMeta, Reason, Resource, Status};

use crate::reply::Reply;
use crate::request::Request;
use crate::state::default_namespace;
use crate::state::ApiServer;

/// Attempts of an unconditional update-scale that keeps meeting concurrent writers.
const MAX_SCALE_ATTEMPTS: usize = 8;

/// A kind with a scale subresource.
pub(crate) trait Scalable: Resource {
    fn spec_replicas(&self) -> i32;
    fn set_spec_replicas(&mut self, replicas: i32);
    fn status_replicas(&self) -> i32;
    fn selector(&self) -> Option<&LabelSelector>;
}

impl Scalable for Deployment {
    fn spec_replicas(&self) -> i32 {
        self.replicas()
    }
    fn set_spec_replicas(&mut self, replicas: i32) {
        self.spec.replicas = Some(replicas);
    }
    fn status_replicas(&self) -> i32 {
        self.status.replicas
    }
    fn selector(&self) -> Option<&LabelSelector> {
        self.spec.selector.as_ref()
    }
}

impl Scalable for ReplicaSet {
    fn spec_replicas(&self) -> i32 {
        self.replicas()
    }
    fn set_spec_replicas(&mut self, replicas: i32) {
        self.spec.replicas = Some(replicas);
    }
    fn status_replicas(&self) -> i32 {
        self.status.replicas
    }
    fn selector(&self) -> Option<&LabelSelector> {
        self.spec.selector.as_ref()
    }
}

fn scale_of<K: Scalable>(obj: &K) -> Scale {
    let meta = obj.meta();
    let selector = obj
        .selector()
        .and_then(|s| s.to_selector().ok())
        .map(|s| s.to_string())
        .unwrap_or_default();
    Scale {
        api_version: "autoscaling/v1".into(),
        kind: "Scale".into(),
        metadata: ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            creation_timestamp: meta.creation_timestamp,
            ..ObjectMeta::default()
        },
        spec: ScaleSpec {
            replicas: obj.spec_replicas(),
        },
        status: ScaleStatus {
            replicas: obj.status_replicas(),
            selector,
        },
    }
}

impl ApiServer {
    /// Routes a scale verb to the kinds that have the subresource.
    pub(crate) async fn scale_verb<K: Resource>(
        &self,
        req: &Request<'_>,
        update: bool,
    ) -> Result<Reply, Status> {
        match (K::INFO.kind, update) {
            ("Deployment", false) => self.get_scale::<Deployment>(req).await,
            ("Deployment", true) => self.update_scale::<Deployment>(req).await,
            ("ReplicaSet", false) => self.get_scale::<ReplicaSet>(req).await,
            ("ReplicaSet", true) => self.update_scale::<ReplicaSet>(req).await,
            (kind, _) => Err(Status::new(
                Reason::MethodNotAllowed,
                format!("{kind} has no scale subresource (Deployment and ReplicaSet have)"),
            )),
        }
    }

    async fn get_scale<K: Scalable>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let r: ObjectRef = codec::from_msgpack_strict(req.payload)
            .map_err(|causes| Status::invalid("ObjectRef", "", causes))?;
        let ns = default_namespace::<K>(&r.namespace);
        match self.current::<K>(&ns, &r.name).await? {
            Some((obj, _)) => Reply::ok(&scale_of(&obj)),
            None => Err(Status::not_found(K::INFO.kind, &ns, &r.name)),
        }
    }

    async fn update_scale<K: Scalable>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let scale: Scale = codec::from_msgpack_strict(req.payload)
            .map_err(|causes| Status::invalid("Scale", "", causes))?;
        let ns = default_namespace::<K>(&scale.metadata.namespace);
        let name = scale.metadata.name.clone();
        if scale.spec.replicas < 0 {
            return Err(Status::invalid(
                "Scale",
                &name,
                vec![Cause::invalid(
                    "spec.replicas",
                    format!(
                        "Invalid value: {}: must be greater than or equal to 0",
                        scale.spec.replicas
                    ),
                )],
            ));
        }
        let precondition = (!scale.metadata.resource_version.is_empty())
            .then(|| scale.metadata.resource_version.clone());
        for _ in 0..MAX_SCALE_ATTEMPTS {
            let Some((mut obj, _)) = self.current::<K>(&ns, &name).await? else {
                return Err(Status::not_found(K::INFO.kind, &ns, &name));
            };
            if let Some(wanted) = &precondition {
                // The caller's view of the object: a Conflict if it moved on since.
                obj.meta_mut().resource_version = wanted.clone();
            }
            obj.set_spec_replicas(scale.spec.replicas);
            match self.update_object(req, obj, false).await {
                Ok(stored) => return Reply::ok(&scale_of(&stored)),
                // Re-read and set replicas again: only this one field is ours to write.
                Err(s) if s.is(Reason::Conflict) && precondition.is_none() => continue,
                Err(s) => return Err(s),
            }
        }
        Err(Status::conflict(
            K::INFO.kind,
            &ns,
            &name,
            "too many concurrent writers",
        ))
    }
}
