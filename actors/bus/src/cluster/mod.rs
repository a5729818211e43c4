//! Several nats-servers as one NATS cluster: the `cluster {}` block each server's
//! configuration carries ([`config`]), and what a client can learn of the cluster's health
//! without the system account ([`health`]). [`testing`] (feature `test-support`): three
//! real servers in the network namespaces of a test fabric.

pub mod config;
pub mod health;
#[cfg(feature = "test-support")]
pub mod testing;

pub use config::{ClusterConfig, ClusterConfigError};
pub use health::{ClusterHealth, StreamHealth};
