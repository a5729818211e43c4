//! Shoal's public contract: everything that travels on the bus, and nothing that moves it.
//!
//! # Layout
//! - [`meta`]: ObjectMeta, OwnerReference, conditions: the shape every object shares;
//!   [`fields_v1`]: managed fields as JSON text on the bus, the tree for people.
//! - [`resource`]: the [`resource::Resource`] trait and [`resource::KindInfo`].
//! - [`kinds`]: one module per kind (Pod, Node, ReplicaSet, …) with its defaults and validation;
//!   [`kinds::KINDS`] lists them and [`with_kind!`] dispatches from a kind name to its type.
//!   [`kinds::volume_match`]: which PersistentVolume a claim may bind to.
//! - [`api`]: request and reply bodies of the API verbs.
//! - [`dns`]: the request and reply of DNS queries over the bus.
//! - [`inspect`]: what a process holds: informer cache summaries, a node's real containers.
//! - [`autoscaling`]: external metric samples, autoscaling hook request/reply, decisions.
//! - [`subjects`]: the only place a subject string is built or parsed.
//! - [`state_log`]: the state log's own record of what compaction removed.
//! - [`wellknown`]: the other names of the contract: finalizers, reserved namespaces, shared
//!   labels and annotations.
//! - [`codec`]: msgpack (named fields) for the bus; strict decoding with field paths for input.
//! - [`manifest`]: YAML/JSON multi-document manifests as people write them.
//! - [`selector`]: label and field selectors (the full Kubernetes grammar).
//! - [`quantity`]: resource quantities (`100m`, `128Mi`), exact.
//! - [`validation`]: names, labels and metadata rules shared by all kinds.
//! - [`status`]: the Status error object with field-path causes.
//! - [`pod_security`]: the Pod Security Standards levels, their namespace labels and the check
//!   of a pod spec against a level.
//! - `openapi` (feature `openapi`): OpenAPI v3 schemas of the kinds, from these types and their
//!   doc comments.
//!
//! No NATS, actix or tokio type appears here: the contract never pins a client version.

pub mod api;
pub mod autoscaling;
pub mod codec;
pub mod dns;
pub mod fields_v1;
pub mod inspect;
pub mod kinds;
pub mod manifest;
pub mod meta;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod pod_security;
pub mod quantity;
pub mod resource;
pub mod roles;
pub mod selector;
pub mod state_log;
pub mod status;
pub mod subjects;
pub mod validation;
pub mod wellknown;

pub use meta::{Condition, ManagedFieldsEntry, ObjectMeta, OwnerReference, Time, TypeMeta};
pub use resource::{KindInfo, Resource};
pub use status::{Cause, Reason, Status};
