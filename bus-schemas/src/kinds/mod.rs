//! One module per kind. Each defines its types with Kubernetes' field names, its defaults
//! (`default_fields`) and its validation (`validate_fields`, `validate_update_fields`), and
//! implements [`crate::Resource`] through `spec_status_resource!` or `body_resource!`.

pub mod config_map;
pub mod controllerrevision;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod endpoints;
pub mod event;
pub mod hpa;
pub mod job;
pub mod lease;
pub mod namespace;
pub mod node;
pub mod persistent_volume;
pub mod persistent_volume_claim;
pub mod pod;
pub mod priorityclass;
pub mod replicaset;
pub mod secret;
pub mod service;
pub mod statefulset;
pub mod storage_class;
pub mod vpa;

// Types shared by several kinds.
pub mod affinity;
pub mod byte_string;
pub mod common;
pub mod config_sources;
pub mod container;
pub mod intstr;
pub mod lifecycle;
pub mod pod_spec;
pub mod probe;
pub mod template;
pub mod volume_match;

pub use config_map::ConfigMap;
pub use controllerrevision::ControllerRevision;
pub use cronjob::CronJob;
pub use daemonset::DaemonSet;
pub use deployment::Deployment;
pub use endpoints::Endpoints;
pub use event::Event;
pub use hpa::HorizontalPodAutoscaler;
pub use job::Job;
pub use lease::Lease;
pub use namespace::Namespace;
pub use node::Node;
pub use persistent_volume::PersistentVolume;
pub use persistent_volume_claim::PersistentVolumeClaim;
pub use pod::Pod;
pub use priorityclass::PriorityClass;
pub use replicaset::ReplicaSet;
pub use secret::Secret;
pub use service::Service;
pub use statefulset::StatefulSet;
pub use storage_class::StorageClass;
pub use vpa::VerticalPodAutoscaler;

pub use affinity::{Affinity, Toleration};
pub use common::ObjectReference;
pub use container::{Container, ResourceRequirements};
pub use intstr::IntOrString;
pub use pod_spec::PodSpec;
pub use probe::Probe;
pub use template::PodTemplateSpec;

use crate::resource::{KindInfo, Resource};

/// Every kind Shoal serves.
pub const KINDS: &[KindInfo] = &[
    Namespace::INFO,
    Node::INFO,
    Pod::INFO,
    ReplicaSet::INFO,
    Deployment::INFO,
    DaemonSet::INFO,
    StatefulSet::INFO,
    ControllerRevision::INFO,
    Job::INFO,
    CronJob::INFO,
    Service::INFO,
    Endpoints::INFO,
    Event::INFO,
    HorizontalPodAutoscaler::INFO,
    VerticalPodAutoscaler::INFO,
    Lease::INFO,
    PriorityClass::INFO,
    ConfigMap::INFO,
    Secret::INFO,
    PersistentVolume::INFO,
    PersistentVolumeClaim::INFO,
    StorageClass::INFO,
];

/// Finds a kind by any name people use for it: `Pod`, `pod`, `pods`, `po`.
pub fn lookup(name: &str) -> Option<&'static KindInfo> {
    KINDS.iter().find(|k| k.kind == name || k.answers_to(name))
}

/// Finds a kind by its subject token (`pod`, `replicaset`).
pub fn by_token(token: &str) -> Option<&'static KindInfo> {
    KINDS.iter().find(|k| k.kind.eq_ignore_ascii_case(token))
}

/// Runs `$body` with `$K` bound to the type of the kind named `$kind` (its `kind` string),
/// or evaluates `$otherwise` for an unknown kind.
#[macro_export]
macro_rules! with_kind {
    ($kind:expr, $K:ident => $body:expr, _ => $otherwise:expr) => {{
        use $crate::kinds as __k;
        match $kind {
            "Namespace" => {
                type $K = __k::Namespace;
                $body
            }
            "Node" => {
                type $K = __k::Node;
                $body
            }
            "Pod" => {
                type $K = __k::Pod;
                $body
            }
            "ReplicaSet" => {
                type $K = __k::ReplicaSet;
                $body
            }
            "Deployment" => {
                type $K = __k::Deployment;
                $body
            }
            "DaemonSet" => {
                type $K = __k::DaemonSet;
                $body
            }
            "StatefulSet" => {
                type $K = __k::StatefulSet;
                $body
            }
            "ControllerRevision" => {
                type $K = __k::ControllerRevision;
                $body
            }
            "Job" => {
                type $K = __k::Job;
                $body
            }
            "CronJob" => {
                type $K = __k::CronJob;
                $body
            }
            "Service" => {
                type $K = __k::Service;
                $body
            }
            "Endpoints" => {
                type $K = __k::Endpoints;
                $body
            }
            "Event" => {
                type $K = __k::Event;
                $body
            }
            "HorizontalPodAutoscaler" => {
                type $K = __k::HorizontalPodAutoscaler;
                $body
            }
            "VerticalPodAutoscaler" => {
                type $K = __k::VerticalPodAutoscaler;
                $body
            }
            "Lease" => {
                type $K = __k::Lease;
                $body
            }
            "PriorityClass" => {
                type $K = __k::PriorityClass;
                $body
            }
            "ConfigMap" => {
                type $K = __k::ConfigMap;
                $body
            }
            "Secret" => {
                type $K = __k::Secret;
                $body
            }
            "PersistentVolume" => {
                type $K = __k::PersistentVolume;
                $body
            }
            "PersistentVolumeClaim" => {
                type $K = __k::PersistentVolumeClaim;
                $body
            }
            "StorageClass" => {
                type $K = __k::StorageClass;
                $body
            }
            _ => $otherwise,
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_dispatches_to_itself() {
        for info in KINDS {
            let found =
                with_kind!(info.kind, K => K::INFO, _ => panic!("{} not dispatched", info.kind));
            assert_eq!(&found, info);
            assert_eq!(by_token(&info.token()), Some(info));
        }
    }

    #[test]
    fn kubectl_names_resolve() {
        for (name, kind) in [
            ("po", "Pod"),
            ("pods", "Pod"),
            ("Pod", "Pod"),
            ("deploy", "Deployment"),
            ("rs", "ReplicaSet"),
            ("ds", "DaemonSet"),
            ("svc", "Service"),
            ("ns", "Namespace"),
            ("no", "Node"),
            ("ep", "Endpoints"),
            ("hpa", "HorizontalPodAutoscaler"),
            ("vpa", "VerticalPodAutoscaler"),
            ("verticalpodautoscalers", "VerticalPodAutoscaler"),
            ("ev", "Event"),
            ("pc", "PriorityClass"),
            ("jobs", "Job"),
            ("cj", "CronJob"),
            ("sts", "StatefulSet"),
            ("leases", "Lease"),
            ("cm", "ConfigMap"),
            ("secrets", "Secret"),
            ("pv", "PersistentVolume"),
            ("pvc", "PersistentVolumeClaim"),
            ("persistentvolumeclaims", "PersistentVolumeClaim"),
            ("sc", "StorageClass"),
        ] {
            assert_eq!(lookup(name).map(|k| k.kind), Some(kind), "{name}");
        }
        assert!(lookup("widgets").is_none());
    }
}
