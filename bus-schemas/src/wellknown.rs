//! Names of the contract that are not subjects: finalizers, reserved namespaces, labels and
//! annotations more than one actor reads or writes. Defined once here, so that the actor that
//! writes a name and the actor that reads it can never drift apart.

/// Finalizer the API adds for a delete with propagationPolicy Orphan: garbage collection
/// strips the dependents' owner references, then removes the finalizer.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// Finalizer the API adds for a delete with propagationPolicy Foreground: garbage collection
/// removes it once every blocking dependent is gone.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// The namespace that holds one heartbeat Lease per node, named after the node.
pub const NODE_LEASE_NAMESPACE: &str = "shoal-node-lease";

/// The namespace of the scheduler's allocation ledger: one Lease per node, named after it.
pub const ALLOCATION_NAMESPACE: &str = "shoal-node-allocation";

/// The namespace that holds one Lease per allocated Service ClusterIP (named after the IP,
/// dots replaced by dashes): creating it is the atomic reservation.
pub const SERVICE_IP_NAMESPACE: &str = "shoal-service-ips";
/// Label on a ClusterIP reservation Lease: the uid of the Service holding the IP.
pub const SERVICE_UID_LABEL: &str = "shoal.io/service-uid";

/// Label on a Deployment's ReplicaSets and their pods: the hash of the pod template.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// Annotation on a Deployment and its ReplicaSets: the rollout revision.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
