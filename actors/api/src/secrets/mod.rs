//! Secrets at rest and in transit to nodes: the key ring that encrypts Secret values before
//! they reach the state log ([`keyring`]), the sealing of an object's values ([`seal`]), and
//! the node request that hands a Secret only to a node running a pod that uses it
//! ([`node_access`]), and re-sealing under a new key after a rotation ([`rotation`]).

pub mod keyring;
pub mod node_access;
pub mod rotation;
pub mod seal;

pub use keyring::{KeyRing, KeyRingError};
