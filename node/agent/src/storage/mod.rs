//! Persistent volumes on this node.
//!
//! - [`claims`]: which directory each PersistentVolumeClaim volume of a pod mounts; a pod
//!   whose claims are not all bound yet waits (its containers do not start).
//! - [`provisioner`]: the local-path provisioner: for claims the scheduler placed here, a
//!   directory under the node's state dir, its PersistentVolume and the binding; and the
//!   reclaim of volumes whose claim is gone.
//! - [`quota`]: a volume directory's size limit (a project quota, or a btrfs qgroup), or the
//!   reason the filesystem cannot hold one.

pub mod claims;
pub mod provisioner;
pub mod quota;

pub use claims::Claims;
