//! Who may do what on the bus: each identity is one role, and a role is nothing but the
//! subjects its connection may publish to and subscribe on. The NATS server enforces these
//! lists (see `docs/architecture.md`, "Identities on the bus"), so a subject a connection
//! could publish on is a fact about its credential: `shoal.v1.node.n1.pod-status` can only
//! come from `node:n1`.
//!
//! The lists are data an operator can read (`shoal creds describe ROLE`), and this module is
//! their single source: the server configuration is rendered from it.

use std::fmt;

use crate::subjects::{self, encode_token, OBJECTS_STREAM};

/// One identity's job.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// The API actors: the only writers of the state log.
    Api,
    /// A node agent, confined to its own node's subjects.
    Node(String),
    Controllers,
    Scheduler,
    Naming,
    Autoscaler,
    /// The Kubernetes-compatible HTTP front door: connects with admin rights, and serves each
    /// HTTP caller (an identity, by bearer token) only what that caller's own role allows.
    Gateway,
    /// A person operating the cluster: every API verb, exec, logs, images.
    Admin,
    /// Read-only: get, list and watch (Secrets' contents excluded), events, logs, metrics.
    Viewer,
    /// A viewer that may also publish external metrics and serve autoscaling hooks.
    Integration,
    /// An application using the cluster's NATS for its own messages: subjects
    /// `apps.<name>.>` and JetStream streams named `APP_<name>` (a work queue whose consumer
    /// lag the autoscaler can scale on), and nothing of Shoal's.
    App(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    #[error("unknown role {0:?}: use api, node:NAME, controllers, scheduler, naming, autoscaler, gateway, admin, viewer or integration")]
    Unknown(String),
    #[error("role node needs the node's name: node:NAME")]
    NodeWithoutName,
    #[error(
        "role app needs the application's name: app:NAME (lowercase letters, digits, '-', '_')"
    )]
    AppWithoutName,
}

/// What one connection may do, in NATS' own terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permissions {
    pub publish_allow: Vec<String>,
    pub publish_deny: Vec<String>,
    pub subscribe_allow: Vec<String>,
    pub subscribe_deny: Vec<String>,
    /// May answer requests it received (to their reply subjects) without any other publish
    /// right on them: how a service replies without being able to publish into others' inboxes.
    pub allow_responses: bool,
}

/// Every role's kind, as [`Role::kind`] names it (and `shoal creds describe` takes it).
pub const KINDS: [&str; 11] = [
    "api",
    "node",
    "controllers",
    "scheduler",
    "naming",
    "autoscaler",
    "gateway",
    "admin",
    "viewer",
    "integration",
    "app",
];

/// The roles `shoal creds create` issues to people and integrations; the others are the
/// cluster's own actors, provisioned by `shoal up`.
pub const ISSUABLE: [&str; 5] = ["viewer", "integration", "admin", "node", "app"];

impl Role {
    pub fn parse(s: &str) -> Result<Role, RoleError> {
        Ok(match s {
            "api" => Role::Api,
            "controllers" => Role::Controllers,
            "scheduler" => Role::Scheduler,
            "naming" => Role::Naming,
            "autoscaler" => Role::Autoscaler,
            "gateway" => Role::Gateway,
            "admin" => Role::Admin,
            "viewer" => Role::Viewer,
            "integration" => Role::Integration,
            "node" => return Err(RoleError::NodeWithoutName),
            "app" => return Err(RoleError::AppWithoutName),
            other if other.starts_with("app:") => {
                let name = &other["app:".len()..];
                if !valid_app_name(name) {
                    return Err(RoleError::AppWithoutName);
                }
                Role::App(name.to_string())
            }
            other => match other.strip_prefix("node:") {
                Some("") => return Err(RoleError::NodeWithoutName),
                Some(node) => Role::Node(node.to_string()),
                None => return Err(RoleError::Unknown(other.to_string())),
            },
        })
    }

    /// The role's kind without a node name: what `shoal creds describe` takes.
    pub fn kind(&self) -> &'static str {
        match self {
            Role::Api => "api",
            Role::Node(_) => "node",
            Role::Controllers => "controllers",
            Role::Scheduler => "scheduler",
            Role::Naming => "naming",
            Role::Autoscaler => "autoscaler",
            Role::Gateway => "gateway",
            Role::Admin => "admin",
            Role::Viewer => "viewer",
            Role::Integration => "integration",
            Role::App(_) => "app",
        }
    }

    /// The subjects this role may use. `inbox` is the connection's own inbox prefix
    /// ([`inbox_prefix`]): replies come back there and nobody else may listen on it.
    pub fn permissions(&self, inbox: &str) -> Permissions {
        let mut p = Permissions {
            subscribe_allow: vec![format!("{inbox}.>"), subjects::TEST_CLOCK.to_string()],
            ..Permissions::default()
        };
        // Every actor exports its spans to the traces stream and looks it up first.
        let common = strings(&["$JS.API.INFO", "$JS.API.STREAM.INFO.SHOAL_TRACES"]);
        match self {
            Role::Api => {
                p.publish_allow = strings(&[
                    subjects::OBJECTS_ALL,
                    "$JS.API.>",
                    TRACES,
                    subjects::BENCH_ALL,
                ]);
                // Its informers watch the object log; it may manage every stream, so it may
                // answer what any stream's consumer delivers.
                p.publish_allow.extend(deliveries("*"));
                p.subscribe_allow
                    .extend(strings(&[subjects::API_ALL, subjects::NODE_ALL]));
                p.allow_responses = true;
            }
            Role::Node(node) => {
                let node = encode_token(node);
                p.publish_allow = vec![
                    format!("shoal.v1.node.{node}.>"),
                    format!("shoal.v1.logs.{node}.>"),
                    format!("shoal.v1.metrics.{node}.>"),
                    format!("shoal.v1.agent.{node}.>"),
                    // A node process publishes its spans on `shoal.v1.traces.node.<node>`, but
                    // a hollow fleet's one exporter speaks for all its nodes: spans are
                    // observations, not state, so any traces subject is allowed.
                    TRACES.to_string(),
                ];
                p.publish_allow.extend(read_stream(OBJECTS_STREAM));
                p.publish_allow.extend(read_stream(IMAGES_STREAM));
                p.subscribe_allow.push(format!("shoal.v1.agent.{node}.>"));
                p.allow_responses = true;
            }
            Role::Controllers => {
                p.publish_allow = strings(&[subjects::API_ALL, TRACES]);
                p.publish_allow.extend(read_stream(OBJECTS_STREAM));
                // They answer the test clock's requests (`SHOAL_TEST_CLOCK=bus`).
                p.allow_responses = true;
            }
            Role::Scheduler => {
                p.publish_allow = strings(&[
                    "shoal.v1.api.pod.>",
                    // Its allocation ledger's namespace, made on first start.
                    "shoal.v1.api.namespace.create",
                    "shoal.v1.api.event.>",
                    "shoal.v1.api.lease.>",
                    "shoal.v1.api.persistentvolumeclaim.>",
                    "shoal.v1.api.*.get",
                    "shoal.v1.api.*.list",
                    TRACES,
                ]);
                p.publish_allow.extend(read_stream(OBJECTS_STREAM));
            }
            Role::Naming => {
                p.publish_allow = strings(&[
                    "shoal.v1.api.*.get",
                    "shoal.v1.api.*.list",
                    "shoal.v1.api.event.>",
                    TRACES,
                ]);
                p.publish_allow.extend(read_stream(OBJECTS_STREAM));
                p.subscribe_allow.push(subjects::DNS_QUERY.to_string());
                p.allow_responses = true;
            }
            Role::Autoscaler => {
                p.publish_allow = strings(&[
                    "shoal.v1.api.horizontalpodautoscaler.>",
                    // Recommendations are written to VPA status; Recreate evicts pods (in
                    // Shoal an eviction is a graceful delete: there is no eviction
                    // subresource), never more than its availability check allows.
                    "shoal.v1.api.verticalpodautoscaler.>",
                    "shoal.v1.api.pod.delete",
                    "shoal.v1.api.*.get-scale",
                    "shoal.v1.api.*.update-scale",
                    "shoal.v1.api.*.get",
                    "shoal.v1.api.*.list",
                    // A repeated event is updated (its count), not created again.
                    "shoal.v1.api.event.>",
                    "shoal.v1.api.lease.>",
                    "shoal.v1.hooks.autoscale.>",
                    "shoal.v1.autoscaler.decisions.>",
                    // Lag of any stream's consumer is a scaling signal (KEDA's JetStream scaler).
                    "$JS.API.STREAM.INFO.*",
                    "$JS.API.CONSUMER.INFO.*.*",
                    TRACES,
                ]);
                p.publish_allow.extend(read_stream(OBJECTS_STREAM));
                p.publish_allow
                    .extend(read_stream(subjects::METRICS_STREAM));
                // The metric store is fed live from every node's and integration's samples.
                p.subscribe_allow.push(subjects::METRICS_ALL.to_string());
                // An application's message to its work-queue stream wakes a workload scaled
                // to zero at once (`apps.<name>.>`, the only streams applications may keep).
                p.subscribe_allow.push("apps.>".to_string());
            }
            Role::Gateway | Role::Admin => {
                p.publish_allow = strings(&[
                    subjects::API_ALL,
                    "shoal.v1.agent.*.exec",
                    "shoal.v1.agent.*.exec.*.in",
                    // Read-only views: a node's real containers, every process's caches.
                    "shoal.v1.agent.*.containers",
                    subjects::INSPECT_CACHES,
                    subjects::EXTERNAL_METRICS_ALL,
                    subjects::TEST_CLOCK,
                    // The naming actor's answers for clients that do not speak DNS.
                    subjects::DNS_QUERY,
                    TRACES,
                ]);
                p.publish_allow.extend(read_all_streams());
                p.publish_allow.extend(write_images());
                p.subscribe_allow.extend(strings(&[
                    "shoal.v1.agent.*.exec.*.out",
                    "shoal.v1.autoscaler.decisions.>",
                    subjects::OBJECTS_ALL,
                ]));
                p.subscribe_deny = strings(&[SECRET_EVENTS]);
            }
            Role::App(name) => {
                let stream = app_stream(name);
                p.publish_allow = vec![format!("apps.{name}.>")];
                p.publish_allow.extend(
                    [
                        "$JS.API.STREAM.CREATE.{s}",
                        "$JS.API.STREAM.UPDATE.{s}",
                        "$JS.API.STREAM.DELETE.{s}",
                        "$JS.API.STREAM.PURGE.{s}",
                        "$JS.API.CONSUMER.DURABLE.CREATE.{s}.>",
                    ]
                    .iter()
                    .map(|t| t.replace("{s}", &stream)),
                );
                p.publish_allow.extend(read_stream(&stream));
                p.subscribe_allow.push(format!("apps.{name}.>"));
                p.allow_responses = true;
            }
            Role::Viewer | Role::Integration => {
                // DNS answers tell no more than listing Services, Endpoints and pods does.
                p.publish_allow = strings(&[
                    "shoal.v1.api.*.get",
                    "shoal.v1.api.*.list",
                    subjects::DNS_QUERY,
                ]);
                p.publish_allow.extend(read_all_streams());
                // A Secret's contents are not for viewers, as with Kubernetes' `view` role.
                p.publish_deny = strings(&["shoal.v1.api.secret.>"]);
                p.subscribe_allow.extend(strings(&[
                    "shoal.v1.autoscaler.decisions.>",
                    subjects::OBJECTS_ALL,
                ]));
                p.subscribe_deny = strings(&[SECRET_EVENTS]);
                if *self == Role::Integration {
                    p.publish_allow
                        .push(subjects::EXTERNAL_METRICS_ALL.to_string());
                    p.subscribe_allow
                        .push("shoal.v1.hooks.autoscale.>".to_string());
                    p.allow_responses = true;
                }
            }
        }
        for s in common {
            if !p.publish_allow.contains(&s) {
                p.publish_allow.push(s);
            }
        }
        if self.hosts_caches() {
            // Any process hosting actors summarises its caches for an operator's (or the
            // chaos checker's) comparison with a fresh list.
            p.subscribe_allow.push(subjects::INSPECT_CACHES.to_string());
            p.allow_responses = true;
        }
        p
    }

    /// The cluster's own actors, which keep informer caches.
    fn hosts_caches(&self) -> bool {
        matches!(
            self,
            Role::Api
                | Role::Node(_)
                | Role::Controllers
                | Role::Scheduler
                | Role::Naming
                | Role::Autoscaler
                | Role::Gateway
        )
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Node(node) => write!(f, "node:{node}"),
            Role::App(name) => write!(f, "app:{name}"),
            other => f.write_str(other.kind()),
        }
    }
}

/// The inbox prefix of the identity with this public key: replies to its requests arrive
/// under it, and only that identity may subscribe there, so no one reads another's replies
/// (an API `get` of a Secret among them). Any NATS client sets it (nats-py: `inbox_prefix`).
pub fn inbox_prefix(public_key: &str) -> String {
    format!("_INBOX.{public_key}")
}

/// The only JetStream stream name an `app:<name>` identity may make and use.
pub fn app_stream(name: &str) -> String {
    format!("APP_{name}")
}

fn valid_app_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 48
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// The stream of the image object store (`shoal image import`, read by nodes).
pub const IMAGES_STREAM: &str = "OBJ_shoal-images";
const TRACES: &str = "shoal.v1.traces.>";
const SECRET_EVENTS: &str = "shoal.v1.obj.secret.>";

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// What reading one stream takes through JetStream's API: its info, ordered consumers of
/// one's own (create, fetch, delete) and direct gets. No publish into it, no purge.
fn read_stream(stream: &str) -> Vec<String> {
    let mut subjects = strings(&["$JS.API.INFO"]);
    subjects.extend(
        [
            "$JS.API.STREAM.INFO.{s}",
            "$JS.API.STREAM.MSG.GET.{s}",
            "$JS.API.DIRECT.GET.{s}",
            "$JS.API.DIRECT.GET.{s}.>",
            "$JS.API.CONSUMER.CREATE.{s}",
            "$JS.API.CONSUMER.CREATE.{s}.>",
            "$JS.API.CONSUMER.INFO.{s}.*",
            "$JS.API.CONSUMER.DELETE.{s}.*",
            "$JS.API.CONSUMER.MSG.NEXT.{s}.*",
        ]
        .iter()
        .map(|t| t.replace("{s}", stream)),
    );
    subjects.extend(deliveries(stream));
    subjects
}

/// The reply subjects of what a consumer of `stream` delivers: flow control, and the acks
/// of one's own durable consumer (a work queue).
///
/// NOTE: why every watcher may publish them, acking or not. nats-server keeps a reply
/// permission, for two minutes, for every message delivered with a reply subject that an
/// `allow_responses` connection may not already publish to, and walks them all every 4,096
/// deliveries or every second. Every event a watch delivers names an ack subject: the API's
/// pod informer, once without these, left one entry per event, and the walk grew with the
/// run until it was a tenth of the server's time.
fn deliveries(stream: &str) -> [String; 2] {
    [format!("$JS.FC.{stream}.>"), format!("$JS.ACK.{stream}.>")]
}

fn read_all_streams() -> Vec<String> {
    let mut all = Vec::new();
    for stream in [
        OBJECTS_STREAM,
        subjects::LOGS_STREAM,
        subjects::METRICS_STREAM,
        subjects::TRACES_STREAM,
        IMAGES_STREAM,
    ] {
        for s in read_stream(stream) {
            if !all.contains(&s) {
                all.push(s);
            }
        }
    }
    all
}

/// Importing an image: the object store's chunks and metadata, and the stream calls a put
/// makes (creating the store on first use, purging a replaced object's old chunks).
fn write_images() -> Vec<String> {
    vec![
        format!("$O.{}.>", subjects::IMAGE_STORE),
        format!("$JS.API.STREAM.CREATE.{IMAGES_STREAM}"),
        format!("$JS.API.STREAM.PURGE.{IMAGES_STREAM}"),
        format!("$JS.API.STREAM.MSG.DELETE.{IMAGES_STREAM}"),
        format!("$JS.API.STREAM.NAMES"),
    ]
}

/// Whether `subject` matches the NATS subject pattern `pattern` (`*` one token, `>` the
/// rest): how a role's lists read, for `shoal creds describe` and for tests of the lists.
pub fn subject_matches(pattern: &str, subject: &str) -> bool {
    let mut pattern = pattern.split('.');
    let mut subject = subject.split('.');
    loop {
        match (pattern.next(), subject.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(p), Some(s)) if p == s => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

impl Permissions {
    pub fn may_publish(&self, subject: &str) -> bool {
        self.publish_allow
            .iter()
            .any(|p| subject_matches(p, subject))
            && !self
                .publish_deny
                .iter()
                .any(|p| subject_matches(p, subject))
    }

    pub fn may_subscribe(&self, subject: &str) -> bool {
        self.subscribe_allow
            .iter()
            .any(|p| subject_matches(p, subject))
            && !self
                .subscribe_deny
                .iter()
                .any(|p| subject_matches(p, subject))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subjects::{NodeReport, Verb};

    const INBOX: &str = "_INBOX.UME";

    #[test]
    fn roles_parse_back_from_their_names() {
        for role in [
            Role::Api,
            Role::Node("n-1".into()),
            Role::Controllers,
            Role::Scheduler,
            Role::Naming,
            Role::Autoscaler,
            Role::Gateway,
            Role::Admin,
            Role::Viewer,
            Role::Integration,
        ] {
            assert_eq!(Role::parse(&role.to_string()).unwrap(), role);
        }
        assert_eq!(Role::parse("node"), Err(RoleError::NodeWithoutName));
        assert!(matches!(Role::parse("root"), Err(RoleError::Unknown(_))));
    }

    #[test]
    fn only_the_api_writes_the_state_log() {
        let object = subjects::object("pod", "default", "forged");
        for role in [
            Role::Node("n1".into()),
            Role::Controllers,
            Role::Scheduler,
            Role::Naming,
            Role::Autoscaler,
            Role::Gateway,
            Role::Admin,
            Role::Viewer,
            Role::Integration,
        ] {
            let p = role.permissions(INBOX);
            assert!(!p.may_publish(&object), "{role} may publish {object}");
            assert!(
                !p.may_publish("$JS.API.STREAM.PURGE.SHOAL_OBJECTS"),
                "{role}"
            );
            assert!(
                !p.may_publish("$JS.API.STREAM.MSG.DELETE.SHOAL_OBJECTS"),
                "{role}"
            );
            assert!(
                !p.may_publish("$JS.API.STREAM.DELETE.SHOAL_OBJECTS"),
                "{role}"
            );
        }
        assert!(Role::Api.permissions(INBOX).may_publish(&object));
    }

    /// The roles of processes that host actors: each keeps informers and answers requests.
    fn actor_roles() -> [Role; 6] {
        [
            Role::Api,
            Role::Node("n1".into()),
            Role::Controllers,
            Role::Scheduler,
            Role::Naming,
            Role::Autoscaler,
        ]
    }

    #[test]
    fn a_watcher_that_answers_requests_may_ack_what_its_watches_deliver() {
        // The reply subjects of an ordered consumer's delivery and flow control, as
        // nats-server sends them.
        let delivery = format!("$JS.ACK.{OBJECTS_STREAM}.OBC2kx.1.4711.4711.1764980000000000000.0");
        let flow_control = format!("$JS.FC.{OBJECTS_STREAM}.OBC2kx.3Gx1");
        for role in actor_roles() {
            let p = role.permissions(INBOX);
            assert!(p.allow_responses, "{role}");
            assert!(p.may_publish(&delivery), "{role}");
            assert!(p.may_publish(&flow_control), "{role}");
        }
    }

    #[test]
    fn a_node_is_confined_to_its_own_subjects() {
        let p = Role::Node("n1".into()).permissions(INBOX);
        assert!(p.may_publish(&subjects::node_report("n1", NodeReport::PodStatus)));
        assert!(!p.may_publish(&subjects::node_report("n2", NodeReport::PodStatus)));
        assert!(p.may_subscribe(&subjects::agent_request("n1", "exec")));
        assert!(!p.may_subscribe(&subjects::agent_request("n2", "exec")));
        assert!(!p.may_publish(&subjects::api("pod", Verb::Create)));
        assert!(!p.may_publish(&subjects::metrics("n2", "default", "web")));
        assert!(p.may_publish(&subjects::metrics("n1", "default", "web")));
        assert!(p.may_publish(&subjects::logs("n1", "default", "web", "c")));
        assert!(!p.may_publish(&subjects::logs("n2", "default", "web", "c")));
        assert!(!p.may_publish(&subjects::api("persistentvolume", Verb::Create)));
        assert!(p.may_publish(&subjects::node_report("n1", NodeReport::VolumeCreate)));
        assert!(p.may_publish("$JS.API.CONSUMER.CREATE.SHOAL_OBJECTS"));
    }

    #[test]
    fn every_actor_answers_cache_inspection_and_only_operators_ask() {
        for role in actor_roles() {
            let p = role.permissions(INBOX);
            assert!(p.may_subscribe(subjects::INSPECT_CACHES), "{role}");
            assert!(p.allow_responses, "{role}");
            assert!(!p.may_publish(subjects::INSPECT_CACHES), "{role}");
        }
        let admin = Role::Admin.permissions(INBOX);
        assert!(admin.may_publish(subjects::INSPECT_CACHES));
        assert!(admin.may_publish(&subjects::agent_request("n1", "containers")));
        let viewer = Role::Viewer.permissions(INBOX);
        assert!(!viewer.may_publish(&subjects::agent_request("n1", "containers")));
        // A node answers for its own containers only.
        let node = Role::Node("n1".into()).permissions(INBOX);
        assert!(node.may_subscribe(&subjects::agent_request("n1", "containers")));
        assert!(!node.may_subscribe(&subjects::agent_request("n2", "containers")));
    }

    #[test]
    fn a_viewer_reads_but_neither_writes_nor_execs_nor_reads_secrets() {
        let p = Role::Viewer.permissions(INBOX);
        assert!(p.may_publish(&subjects::api("pod", Verb::List)));
        assert!(!p.may_publish(&subjects::api("pod", Verb::Create)));
        assert!(!p.may_publish(&subjects::api("secret", Verb::Get)));
        assert!(!p.may_publish(&subjects::agent_request("n1", "exec")));
        assert!(!p.may_subscribe("shoal.v1.obj.secret.default.db"));
        assert!(p.may_subscribe("shoal.v1.obj.pod.default.web"));
        assert!(!p.may_subscribe("_INBOX.UOTHER.abc"));
        assert!(!p.may_publish(&subjects::external_metric("default", "queue")));
        assert!(p.may_publish(subjects::DNS_QUERY));
    }

    #[test]
    fn people_and_the_gateway_may_ask_the_naming_actor_over_the_bus() {
        for role in [Role::Admin, Role::Gateway, Role::Viewer, Role::Integration] {
            assert!(
                role.permissions(INBOX).may_publish(subjects::DNS_QUERY),
                "{role}"
            );
        }
        assert!(!Role::Node("n1".into())
            .permissions(INBOX)
            .may_publish(subjects::DNS_QUERY));
    }

    #[test]
    fn an_integration_publishes_metrics_and_serves_hooks() {
        let p = Role::Integration.permissions(INBOX);
        assert!(p.may_publish(&subjects::external_metric("default", "queue")));
        assert!(p.may_subscribe(&subjects::autoscale_hook("queue-depth")));
        assert!(p.allow_responses);
        assert!(!p.may_publish(&subjects::api("deployment", Verb::UpdateScale)));
    }

    #[test]
    fn the_scheduler_binds_and_makes_its_allocation_namespace_but_edits_no_workload() {
        let p = Role::Scheduler.permissions(INBOX);
        assert!(p.may_publish(&subjects::api("pod", Verb::Update)));
        assert!(p.may_publish(&subjects::api("namespace", Verb::Create)));
        assert!(!p.may_publish(&subjects::api("namespace", Verb::Delete)));
        assert!(!p.may_publish(&subjects::api("deployment", Verb::Update)));
    }

    #[test]
    fn controllers_write_through_the_api_and_answer_the_test_clock() {
        let p = Role::Controllers.permissions(INBOX);
        assert!(p.may_publish(&subjects::api("deployment", Verb::Update)));
        assert!(p.may_subscribe(subjects::TEST_CLOCK));
        assert!(p.allow_responses, "the clock's setter waits for an answer");
        assert!(!p.may_publish("_INBOX.UOTHER.abc"));
    }

    #[test]
    fn the_autoscaler_hears_every_metric_sample_and_calls_hooks() {
        let p = Role::Autoscaler.permissions(INBOX);
        assert!(p.may_subscribe(&subjects::metrics("n1", "default", "web")));
        assert!(p.may_subscribe(&subjects::external_metric("default", "queue")));
        assert!(p.may_publish(&subjects::autoscale_hook("queue-depth")));
        assert!(!p.may_subscribe("shoal.v1.obj.secret.default.db"));
        assert!(!p.may_publish(&subjects::metrics("n1", "default", "web")));
    }

    #[test]
    fn an_application_keeps_to_its_own_subjects_and_stream() {
        let p = Role::parse("app:jobs").unwrap().permissions(INBOX);
        assert!(p.may_publish("apps.jobs.resize"));
        assert!(!p.may_publish("apps.other.resize"));
        assert!(p.may_publish("$JS.API.STREAM.CREATE.APP_jobs"));
        assert!(!p.may_publish("$JS.API.STREAM.CREATE.SHOAL_OBJECTS"));
        assert!(!p.may_publish("$JS.API.STREAM.PURGE.SHOAL_OBJECTS"));
        assert!(!p.may_publish(&subjects::api("pod", Verb::List)));
        assert!(!p.may_subscribe("shoal.v1.obj.pod.default.web"));
        assert!(Role::Autoscaler
            .permissions(INBOX)
            .may_subscribe("apps.jobs.resize"));
        assert_eq!(Role::parse("app:Jobs!"), Err(RoleError::AppWithoutName));
    }

    #[test]
    fn patterns_match_as_nats_does() {
        assert!(subject_matches("a.*.c", "a.b.c"));
        assert!(!subject_matches("a.*.c", "a.b.d"));
        assert!(subject_matches("a.>", "a.b.c"));
        assert!(!subject_matches("a.>", "a"));
        assert!(!subject_matches("a.b", "a.b.c"));
    }
}
