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
//! - [`hooks`]: postStart and preStop handlers (exec, httpGet, sleep), and stopping a
//!   container with its preStop hook inside the grace period.
//! - [`sidecars`]: the rules of restartable init containers (start order, readiness, stop
//!   after the main containers).
//! - [`storage`]: PersistentVolumeClaims: the directories pods mount, and the local-path
//!   provisioner (volumes for claims placed here, their size quota, binding and reclaim;
//!   volumes made by hand are bound by the controllers).
//! - [`termination`]: a container's termination message (its file, or its log's tail).
//! - [`events`]: Events about this node's pods, sent as `pod-event` reports.
//! - [`registry`]: the cluster image registry (JetStream object store) — push and pull.
//! - [`telemetry`]: log shipping, usage samples, exec requests.
//! - [`inspect`]: the runtime's own list of sandboxes and containers, on request.
//! - [`exec_session`]: interactive exec sessions (pty or pipes) streamed over the bus, with
//!   heartbeats, flow control and no process left behind.
//! - [`scrape`]: pods' own Prometheus endpoints (`prometheus.io/scrape`), read from the
//!   node's network and published with the pod's usage sample.
//! - [`traces`]: the spans of a pod's start and the node's Prometheus metrics.
//! - [`hollow_usage`]: the usage a hollow node reports for a pod, set by the pod's
//!   annotations (scale tests of the autoscalers).
//! - [`backend`]: the runtime seam (Linux or hollow). [`machine`]: this machine's facts.
//! - [`hostnet`]: the network namespace holding the node's network (commands, sockets and
//!   link checks inside it); [`netsetup`]: forwarding and the Service route in it.
//! - [`proxy`]: the service proxy (ClusterIP → ready endpoints, nftables DNAT).

pub mod agent;
pub mod backend;
pub mod config;
pub mod events;
pub mod exec_session;
pub mod hollow_usage;
pub mod hooks;
pub mod hostnet;
pub mod inspect;
pub mod machine;
pub mod netsetup;
pub mod probes;
pub mod proxy;
pub mod registry;
pub mod scrape;
pub mod sidecars;
pub mod spec;
pub mod status;
pub mod storage;
pub mod telemetry;
pub mod termination;
pub mod traces;
pub mod worker;

pub use agent::{run, AgentConfig, AgentError};
pub use backend::Backend;
