//! Every NATS subject Shoal uses is built here and nowhere else.
//!
//! Object names, namespaces and node names become subject tokens. They are escaped reversibly
//! (`%XX` for `.`, `*`, `>`, `%`, `_`, whitespace and anything outside printable ASCII) so
//! a name with dots cannot split into extra tokens. `_` alone stands for "no namespace".

/// The stream that holds the cluster's state log.
pub const OBJECTS_STREAM: &str = "SHOAL_OBJECTS";
/// Every object event: `shoal.v1.obj.<kind>.<namespace>.<name>`.
pub const OBJECTS_ALL: &str = "shoal.v1.obj.>";
/// The queue group API actors share.
pub const API_QUEUE_GROUP: &str = "shoal-api";
/// Every API request subject.
pub const API_ALL: &str = "shoal.v1.api.>";
/// Every node report.
pub const NODE_ALL: &str = "shoal.v1.node.>";
/// The stream of log lines and its subjects.
pub const LOGS_STREAM: &str = "SHOAL_LOGS";
pub const LOGS_ALL: &str = "shoal.v1.logs.>";
/// The stream of usage samples (latest per pod kept) and its subjects.
pub const METRICS_STREAM: &str = "SHOAL_METRICS";
pub const METRICS_ALL: &str = "shoal.v1.metrics.>";
/// The stream of finished trace spans (OTLP protobuf, bounded) and its subjects.
pub const TRACES_STREAM: &str = "SHOAL_TRACES";
pub const TRACES_ALL: &str = "shoal.v1.traces.>";
/// Header on log messages: the container instance that wrote the line.
pub const HEADER_CONTAINER_ID: &str = "Shoal-Container-Id";
/// Header on log messages: stdout or stderr.
pub const HEADER_LOG_STREAM: &str = "Shoal-Log-Stream";
/// DNS questions over request/reply, answered by the naming actors (see [`crate::dns`]).
pub const DNS_QUERY: &str = "shoal.v1.dns.query";
/// The queue group naming actors share, so each question is answered once.
pub const DNS_QUEUE_GROUP: &str = "shoal-naming";
/// The object store that is the cluster's image registry.
pub const IMAGE_STORE: &str = "shoal-images";

/// The token that stands for an empty namespace (cluster-scoped kinds).
pub const CLUSTER_SCOPE_TOKEN: &str = "_";

/// Sets the controllers' clock when `shoal up` runs with `SHOAL_TEST_CLOCK=bus` (tests only):
/// request payload an RFC 3339 time, reply `ok`.
pub const TEST_CLOCK: &str = "shoal.v1.test.clock";
/// The chaos suite's JetStream write baseline (R3 against R1) publishes here, into streams of
/// its own that it makes and drops; no actor reads it. Only the API identity, which may
/// manage streams anyway, may publish.
pub const BENCH_ALL: &str = "shoal.v1.bench.>";
/// Every process hosting informer caches answers a request here with
/// [`crate::inspect::ProcessCaches`]: one request, as many replies as processes (gather them
/// until a quiet period).
pub const INSPECT_CACHES: &str = "shoal.v1.inspect.caches";

/// Header naming the event type on object subjects: ADDED, MODIFIED or DELETED.
pub const HEADER_EVENT: &str = "Shoal-Event";
/// Header carrying the HTTP-style result code on API replies (absent or 2xx means success).
pub const HEADER_CODE: &str = "Shoal-Code";
/// Header on a successful write's reply, once per warning (Kubernetes' `Warning:` response
/// headers): what the namespace's pod security `warn` level found, for example. Clients
/// show them to people; the write itself succeeded.
pub const HEADER_WARNING: &str = "Shoal-Warning";
/// W3C trace context, propagated from request to object event.
pub const HEADER_TRACEPARENT: &str = "traceparent";

pub fn encode_token(raw: &str) -> String {
    if raw.is_empty() {
        return CLUSTER_SCOPE_TOKEN.to_string();
    }
    let mut out = String::with_capacity(raw.len());
    for byte in raw.bytes() {
        let plain = byte.is_ascii_graphic() && !matches!(byte, b'.' | b'*' | b'>' | b'%' | b'_');
        if plain {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("subject token {token:?} is not a valid Shoal token: {why}")]
pub struct TokenError {
    pub token: String,
    pub why: &'static str,
}

pub fn decode_token(token: &str) -> Result<String, TokenError> {
    if token == CLUSTER_SCOPE_TOKEN {
        return Ok(String::new());
    }
    let err = |why| TokenError {
        token: token.to_string(),
        why,
    };
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = token
                .get(i + 1..i + 3)
                .ok_or_else(|| err("truncated escape"))?;
            let value = u8::from_str_radix(hex, 16).map_err(|_| err("bad escape"))?;
            out.push(value);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| err("escape decodes to invalid UTF-8"))
}

/// `shoal.v1.obj.<kind>.<ns>.<name>`: where one object's versions live.
pub fn object(kind_token: &str, namespace: &str, name: &str) -> String {
    format!(
        "shoal.v1.obj.{kind_token}.{}.{}",
        encode_token(namespace),
        encode_token(name)
    )
}

/// The state log's compaction record (`state_log::CompactionRecord`): the highest revision
/// whose deleted objects were purged, and which API replica compacts. In the object stream
/// so it is replicated and read like the state it describes; its kind token is no kind's, so
/// no informer or kind watch ever sees it.
pub const COMPACTION_RECORD: &str = "shoal.v1.obj.compaction._.record";

/// Every object of one kind, optionally within one namespace.
pub fn objects_of(kind_token: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("shoal.v1.obj.{kind_token}.{}.*", encode_token(ns)),
        None => format!("shoal.v1.obj.{kind_token}.>"),
    }
}

/// The parts of an object subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKey {
    pub kind_token: String,
    pub namespace: String,
    pub name: String,
}

pub fn parse_object(subject: &str) -> Option<ObjectKey> {
    let rest = subject.strip_prefix("shoal.v1.obj.")?;
    let mut parts = rest.split('.');
    let kind_token = parts.next()?.to_string();
    let namespace = decode_token(parts.next()?).ok()?;
    let name = decode_token(parts.next()?).ok()?;
    if parts.next().is_some() || name.is_empty() {
        return None;
    }
    Some(ObjectKey {
        kind_token,
        namespace,
        name,
    })
}

/// `shoal.v1.api.<kind>.<verb>`: request/reply with the API actors.
pub fn api(kind_token: &str, verb: Verb) -> String {
    format!("shoal.v1.api.{kind_token}.{}", verb.as_str())
}

/// Splits an API subject into kind token and verb.
pub fn parse_api(subject: &str) -> Option<(&str, Option<Verb>)> {
    let rest = subject.strip_prefix("shoal.v1.api.")?;
    let (kind, verb) = rest.split_once('.')?;
    Some((kind, Verb::parse(verb)))
}

/// What an API request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    Create,
    Update,
    UpdateStatus,
    Patch,
    Delete,
    Get,
    List,
    /// Create if absent, otherwise update (what `shoal apply` uses).
    Apply,
    /// The scale subresource: read replicas and selector (Deployment, ReplicaSet).
    GetScale,
    /// The scale subresource: set replicas.
    UpdateScale,
}

impl Verb {
    pub const ALL: [Verb; 10] = [
        Verb::Create,
        Verb::Update,
        Verb::UpdateStatus,
        Verb::Patch,
        Verb::Delete,
        Verb::Get,
        Verb::List,
        Verb::Apply,
        Verb::GetScale,
        Verb::UpdateScale,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::UpdateStatus => "update-status",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Apply => "apply",
            Verb::GetScale => "get-scale",
            Verb::UpdateScale => "update-scale",
        }
    }

    pub fn parse(s: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

const NODE_PREFIX: &str = "shoal.v1.node.";

/// `shoal.v1.node.<node>.<report>`: one report from a node agent.
pub fn node_report(node: &str, report: NodeReport) -> String {
    format!("{NODE_PREFIX}{}.{}", encode_token(node), report.as_str())
}

/// Whether `subject` is addressed to the node-report side of the API (well formed or not):
/// routing must send a malformed report to the report parser, which says what is wrong.
pub fn is_node_report(subject: &str) -> bool {
    subject.starts_with(NODE_PREFIX)
}

/// Splits a node report subject into the reporting node's name and the report.
pub fn parse_node_report(subject: &str) -> Result<(String, NodeReport), NodeSubjectError> {
    let rest = subject
        .strip_prefix(NODE_PREFIX)
        .ok_or_else(|| NodeSubjectError::NotNodeReport(subject.to_string()))?;
    let Some((node_token, report)) = rest.split_once('.') else {
        return Err(NodeSubjectError::Malformed(subject.to_string()));
    };
    let node = decode_token(node_token)?;
    let report = NodeReport::parse(report)
        .ok_or_else(|| NodeSubjectError::UnknownReport(report.to_string()))?;
    Ok((node, report))
}

/// What a node agent reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeReport {
    /// A Pod carrying the status to write.
    PodStatus,
    /// DeleteOptions: the pod's containers are gone, so the pod may be removed.
    PodDelete,
    /// The Node (registers it on first report).
    NodeStatus,
    /// Empty: renews the node's Lease.
    Heartbeat,
    /// An Event about a pod bound to the node (a lifecycle hook failed, a ConfigMap or Secret
    /// is missing, an env key was skipped).
    PodEvent,
    /// An ObjectRef: a Secret a pod bound to this node uses, answered decrypted.
    Secret,
    /// A PersistentVolume the node's local provisioner made, pinned to the node by its
    /// `spec.nodeAffinity`: created as the `create` verb would.
    VolumeCreate,
    /// DeleteOptions naming a PersistentVolume pinned to the node: deleted as the `delete`
    /// verb would.
    VolumeDelete,
    /// A PersistentVolume pinned to the node, carrying the status to write (`update-status`).
    VolumeStatus,
    /// A PersistentVolumeClaim selected for the node (`volume.kubernetes.io/selected-node`):
    /// updated as the `update` verb would (the provisioner sets `spec.volumeName`).
    ClaimUpdate,
    /// A PersistentVolumeClaim selected for the node, carrying the status to write.
    ClaimStatus,
}

impl NodeReport {
    pub const ALL: [NodeReport; 11] = [
        NodeReport::PodStatus,
        NodeReport::PodDelete,
        NodeReport::NodeStatus,
        NodeReport::Heartbeat,
        NodeReport::PodEvent,
        NodeReport::Secret,
        NodeReport::VolumeCreate,
        NodeReport::VolumeDelete,
        NodeReport::VolumeStatus,
        NodeReport::ClaimUpdate,
        NodeReport::ClaimStatus,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NodeReport::PodStatus => "pod-status",
            NodeReport::PodDelete => "pod-delete",
            NodeReport::NodeStatus => "node-status",
            NodeReport::Heartbeat => "heartbeat",
            NodeReport::PodEvent => "pod-event",
            NodeReport::Secret => "secret",
            NodeReport::VolumeCreate => "volume-create",
            NodeReport::VolumeDelete => "volume-delete",
            NodeReport::VolumeStatus => "volume-status",
            NodeReport::ClaimUpdate => "claim-update",
            NodeReport::ClaimStatus => "claim-status",
        }
    }

    pub fn parse(s: &str) -> Option<NodeReport> {
        NodeReport::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// Why a subject is not a node report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeSubjectError {
    #[error("{0} is not a node report subject")]
    NotNodeReport(String),
    #[error("malformed node subject {0}")]
    Malformed(String),
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("unknown node report {0:?}: use pod-status, pod-delete, node-status, heartbeat, pod-event, secret, volume-create, volume-delete, volume-status, claim-update or claim-status")]
    UnknownReport(String),
}

const TRACES_PREFIX: &str = "shoal.v1.traces.";

/// `shoal.v1.traces.<actor>`: spans the actor finished, as an OTLP ExportTraceServiceRequest.
pub fn traces(actor: &str) -> String {
    format!("{TRACES_PREFIX}{}", encode_token(actor))
}

/// The actor whose spans node agents publish: node agents export under
/// [`node_traces`] instead of [`traces`].
pub const NODE_ACTOR: &str = "node";

/// `shoal.v1.traces.node.<node>`: the spans one node agent finished. The node's name is a
/// token of its own so a node's credential can be allowed exactly its own subject.
pub fn node_traces(node: &str) -> String {
    format!("{TRACES_PREFIX}{NODE_ACTOR}.{}", encode_token(node))
}

/// The actor a traces subject was published for: its first token after the prefix
/// (`node` for `shoal.v1.traces.node.<node>`), decoded.
pub fn traces_actor(subject: &str) -> Option<String> {
    let rest = subject.strip_prefix(TRACES_PREFIX)?;
    let actor = rest.split('.').next()?;
    decode_token(actor).ok()
}

/// `shoal.v1.logs.<node>.<ns>.<pod>.<container>`: published by the node running the pod.
/// The node's name leads so a node's credential can be allowed exactly
/// `shoal.v1.logs.<node>.>`.
pub fn logs(node: &str, namespace: &str, pod: &str, container: &str) -> String {
    format!(
        "shoal.v1.logs.{}.{}.{}.{}",
        encode_token(node),
        encode_token(namespace),
        encode_token(pod),
        encode_token(container)
    )
}

/// The filter for one container's log lines whichever node wrote them:
/// `shoal.v1.logs.*.<ns>.<pod>.<container>` (a pod of the same name may have run elsewhere
/// before; its lines carry their instance in `Shoal-Container-Id`).
pub fn logs_of(namespace: &str, pod: &str, container: &str) -> String {
    format!(
        "shoal.v1.logs.*.{}.{}.{}",
        encode_token(namespace),
        encode_token(pod),
        encode_token(container)
    )
}

/// `shoal.v1.metrics.<node>.<ns>.<pod>`.
pub fn metrics(node: &str, namespace: &str, pod: &str) -> String {
    format!(
        "shoal.v1.metrics.{}.{}.{}",
        encode_token(node),
        encode_token(namespace),
        encode_token(pod)
    )
}

/// External metric samples any publisher posts: `shoal.v1.metrics.external.<ns>.<name>`.
/// (`external` is therefore not a usable node name.)
pub const EXTERNAL_METRICS_ALL: &str = "shoal.v1.metrics.external.>";

/// `shoal.v1.metrics.external.<ns>.<name>`.
pub fn external_metric(namespace: &str, name: &str) -> String {
    format!(
        "shoal.v1.metrics.external.{}.{}",
        encode_token(namespace),
        encode_token(name)
    )
}

/// `shoal.v1.autoscaler.decisions.<ns>.<hpa>`: every decision the autoscaler makes.
pub fn autoscaler_decision(namespace: &str, hpa: &str) -> String {
    format!(
        "shoal.v1.autoscaler.decisions.{}.{}",
        encode_token(namespace),
        encode_token(hpa)
    )
}

/// `shoal.v1.agent.<node>.<what>`: requests to one node agent (exec).
pub fn agent_request(node: &str, what: &str) -> String {
    format!("shoal.v1.agent.{}.{what}", encode_token(node))
}

/// `shoal.v1.agent.<node>.exec.<session>.out`: a streaming exec session's output.
pub fn exec_session_out(node: &str, session: &str) -> String {
    format!(
        "{}.{}.out",
        agent_request(node, "exec"),
        encode_token(session)
    )
}

/// `shoal.v1.agent.<node>.exec.<session>.in`: a streaming exec session's input.
pub fn exec_session_in(node: &str, session: &str) -> String {
    format!(
        "{}.{}.in",
        agent_request(node, "exec"),
        encode_token(session)
    )
}

/// Whether `id` can name an exec session: one plain subject token, short enough to log.
pub fn valid_exec_session(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `shoal.v1.hooks.autoscale.<name>`.
pub fn autoscale_hook(name: &str) -> String {
    format!("shoal.v1.hooks.autoscale.{}", encode_token(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_for_awkward_names() {
        for raw in [
            "web-1", "a.b.c", "x*y>z", "100%", "_", "__", "sp ace", "ünï", "tab\t", "",
        ] {
            let token = encode_token(raw);
            assert!(!token.contains('.'), "{raw:?} -> {token:?}");
            assert!(!token.contains(' '));
            assert_eq!(decode_token(&token).unwrap(), raw, "round trip of {raw:?}");
        }
    }

    #[test]
    fn object_subject_parses_back() {
        let s = object("pod", "default", "web.v1.example");
        assert_eq!(s, "shoal.v1.obj.pod.default.web%2Ev1%2Eexample");
        let key = parse_object(&s).unwrap();
        assert_eq!(key.namespace, "default");
        assert_eq!(key.name, "web.v1.example");
        let cluster = object("node", "", "n1");
        assert_eq!(cluster, "shoal.v1.obj.node._.n1");
        assert_eq!(parse_object(&cluster).unwrap().namespace, "");
    }

    #[test]
    fn bad_tokens_are_rejected() {
        assert!(decode_token("%4").is_err());
        assert!(decode_token("%zz").is_err());
        assert!(decode_token("%FF").is_err());
        assert!(parse_object("shoal.v1.obj.pod.default").is_none());
    }

    #[test]
    fn node_reports_round_trip_for_awkward_node_names() {
        for node in ["n1", "node.example.com", "a_b", "x%y"] {
            for report in NodeReport::ALL {
                let s = node_report(node, report);
                assert!(is_node_report(&s));
                assert_eq!(s.split('.').count(), 5, "{s}");
                assert_eq!(parse_node_report(&s), Ok((node.to_string(), report)));
            }
        }
        assert_eq!(
            node_report("node.example.com", NodeReport::PodStatus),
            "shoal.v1.node.node%2Eexample%2Ecom.pod-status"
        );
    }

    #[test]
    fn bad_node_report_subjects_say_what_is_wrong() {
        assert!(matches!(
            parse_node_report("shoal.v1.api.pod.get"),
            Err(NodeSubjectError::NotNodeReport(_))
        ));
        assert!(matches!(
            parse_node_report("shoal.v1.node.n1"),
            Err(NodeSubjectError::Malformed(_))
        ));
        assert!(matches!(
            parse_node_report("shoal.v1.node.%zz.heartbeat"),
            Err(NodeSubjectError::Token(_))
        ));
        assert_eq!(
            parse_node_report("shoal.v1.node.n1.reboot"),
            Err(NodeSubjectError::UnknownReport("reboot".into()))
        );
        assert!(!is_node_report("shoal.v1.api.pod.get"));
    }

    #[test]
    fn logs_and_traces_subjects_lead_with_the_node() {
        let s = logs("node.a", "default", "web_1", "main");
        assert_eq!(s, "shoal.v1.logs.node%2Ea.default.web%5F1.main");
        assert_eq!(
            logs_of("default", "web_1", "main"),
            "shoal.v1.logs.*.default.web%5F1.main"
        );
        assert_eq!(node_traces("node.a"), "shoal.v1.traces.node.node%2Ea");
        assert_eq!(
            traces_actor(&node_traces("node.a")).as_deref(),
            Some("node")
        );
        assert_eq!(traces_actor(&traces("api")).as_deref(), Some("api"));
        assert_eq!(traces_actor("shoal.v1.logs.x"), None);
    }

    #[test]
    fn verbs_round_trip() {
        for v in Verb::ALL {
            assert_eq!(Verb::parse(v.as_str()), Some(v));
            let s = api("pod", v);
            assert_eq!(parse_api(&s), Some(("pod", Some(v))));
        }
    }
}
