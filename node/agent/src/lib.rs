//! The node agent: turns each Pod bound to its node into running containers and reports what
//! it sees. The same code drives real containers and hollow (simulated) ones.
//!
//! # Layout
//! - [`agent`]: configuration, node registration and heartbeats, the pod manager that keeps
//!   one worker per pod bound here (re-adopting what the runtime already runs).
//! - [`worker`]: one pod's loop: sandbox, images, init containers, app containers, restarts
//!   with back-off, probes, status reports, graceful termination.
//! - [`spec`]: Pod → runtime sandbox and container specs.
//! - [`config`]: ConfigMaps, Secrets and the downward API as env and as volumes that follow
//!   their sources (Kubernetes' atomic `..data` swap).
//! - [`status`]: observed state → PodStatus (phase, conditions, container statuses).
//! - [`probes`]: startup/liveness/readiness state machines and probe execution.
//! - [`registry`]: the cluster image registry (JetStream object store) — push and pull.
//! - [`telemetry`]: log shipping, usage samples, exec requests.
//! - [`traces`]: the spans of a pod's start and the node's Prometheus metrics.
//! - [`backend`]: the runtime seam (Linux or hollow). [`machine`]: this machine's facts.
//! - [`hostnet`]: the network namespace holding the node's network (commands, sockets and
//!   link checks inside it); [`netsetup`]: forwarding and the Service route in it.
//! - [`proxy`]: the service proxy (ClusterIP → ready endpoints, nftables DNAT).

pub mod agent;
pub mod backend;
pub mod config;
pub mod hostnet;
pub mod machine;
pub mod netsetup;
pub mod probes;
pub mod proxy;
pub mod registry;
pub mod spec;
pub mod status;
pub mod telemetry;
pub mod traces;
pub mod worker;

pub use agent::{run, AgentConfig, AgentError};
pub use backend::Backend;
