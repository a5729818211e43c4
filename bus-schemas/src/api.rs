//! Bodies of API requests and replies that are not objects themselves.
//!
//! create, update, update-status and apply carry the object itself (msgpack, named fields).
//! get and delete carry [`ObjectRef`] / [`DeleteOptions`]; list carries [`ListOptions`];
//! patch carries [`PatchRequest`]. A success reply is the object (or [`ObjectList`]); a failure
//! reply is a [`crate::Status`] and has the `Shoal-Code` header set to its code.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Header on apply replies: `created`, `configured` or `unchanged`.
pub const HEADER_APPLY_RESULT: &str = "Shoal-Apply";
/// Request header naming the writer (Kubernetes' `fieldManager`): required on apply, and
/// recorded in `metadata.managedFields` on every write that carries it.
pub const HEADER_FIELD_MANAGER: &str = "Shoal-Field-Manager";
/// Request header on apply: `true` takes over fields other managers own instead of failing
/// with Conflict (Kubernetes' `force`).
pub const HEADER_FORCE: &str = "Shoal-Force";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// `Background` (default), `Foreground` or `Orphan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Preconditions>,
}

/// What a delete refused with 409 because its [`Preconditions`] name another object (another
/// uid, or an older resourceVersion) says: the object the caller meant is gone or changed, so
/// there is nothing to retry. A 409 without it is a lost race, worth retrying.
pub const DELETE_PRECONDITIONS_FAILED: &str =
    "the delete preconditions (uid, resourceVersion) do not match";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListOptions {
    /// Empty lists every namespace.
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub label_selector: String,
    #[serde(default)]
    pub field_selector: String,
    /// Page size; 0 lets the server choose one that fits a NATS message.
    #[serde(default)]
    pub limit: u32,
    /// The `continue` token of the previous page.
    #[serde(default, rename = "continue")]
    pub continue_token: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    /// The state-log sequence the list reflects: watch from the next one to miss nothing.
    #[serde(default)]
    pub resource_version: String,
    #[serde(default, rename = "continue", skip_serializing_if = "String::is_empty")]
    pub continue_token: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "T: Deserialize<'de>"))]
pub struct ObjectList<T> {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
    #[serde(default)]
    pub items: Vec<T>,
}

/// The msgpack of an [`ObjectList`] whose items are already encoded (each with
/// [`crate::codec::to_msgpack`]): the same bytes `to_msgpack(&ObjectList { items, .. })`
/// gives, without encoding the items a second time. A list page is sized item by item, so
/// every item is encoded once for its size anyway.
pub fn encode_list_of_encoded(
    api_version: &str,
    kind: &str,
    metadata: &ListMeta,
    items: &[Vec<u8>],
) -> Result<Vec<u8>, crate::codec::CodecError> {
    let envelope = ObjectList::<()> {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        metadata: metadata.clone(),
        items: Vec::new(),
    };
    let mut out = crate::codec::to_msgpack(&envelope)?;
    // `items` is the last field, so the envelope ends with its empty array (0x90); the
    // array's real header and the items take its place.
    debug_assert_eq!(out.last(), Some(&0x90));
    out.pop();
    let n = items.len();
    if n < 16 {
        out.push(0x90 | n as u8);
    } else if let Ok(n) = u16::try_from(n) {
        out.push(0xdc);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        out.push(0xdd);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.reserve(items.iter().map(Vec::len).sum());
    for item in items {
        out.extend_from_slice(item);
    }
    Ok(out)
}

/// A JSON merge patch (RFC 7386) to one object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchRequest {
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// The patch document as JSON text.
    pub patch: String,
    /// Apply the patch to status (through update-status) instead of the object.
    #[serde(default)]
    pub status: bool,
}

/// `shoal.v1.agent.<node>.exec`: run a command in a running container.
///
/// Without `session` the command runs to completion and the reply carries its buffered
/// output (probes, hooks, non-interactive `exec`). With `session` set the agent answers at
/// once ([`ExecReply::started`], or an error), then streams [`ExecOutput`] on
/// [`crate::subjects::exec_session_out`] and takes [`ExecInput`] on
/// [`crate::subjects::exec_session_in`] until the command exits (bus-schemas README, *Exec
/// sessions*).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecRequest {
    pub namespace: String,
    pub pod: String,
    /// Empty: the pod's first container.
    #[serde(default)]
    pub container: String,
    pub command: Vec<String>,
    /// One-shot only: seconds before the command is killed (0: 60). A session has no deadline;
    /// it lives while its client keeps talking.
    #[serde(default)]
    pub timeout_seconds: u32,
    /// A streaming session's id: one subject token of `[A-Za-z0-9_-]`, at most 64 characters,
    /// chosen unguessable by the client. Empty: one-shot.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session: String,
    /// Session: the command reads what the client sends as stdin (otherwise /dev/null).
    #[serde(default)]
    pub stdin: bool,
    /// Session: the command runs on a pseudo-terminal (its controlling terminal); stdout and
    /// stderr are then one stream, sent as stdout.
    #[serde(default)]
    pub tty: bool,
    /// Session with a TTY: the terminal's size at start (later sizes come as resizes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_size: Option<TerminalSize>,
    /// Session: seconds without any message from the client after which the agent kills the
    /// command and ends the session (0: 15). Clients send a heartbeat every few seconds.
    #[serde(default)]
    pub idle_timeout_seconds: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecReply {
    pub exit_code: i32,
    #[serde(with = "serde_bytes_compat")]
    pub stdout: Vec<u8>,
    #[serde(with = "serde_bytes_compat")]
    pub stderr: Vec<u8>,
    #[serde(default)]
    pub error: String,
    /// Session: the command started and its output follows on the session's `out` subject.
    /// An agent that predates sessions never sets it (it would have run the command one-shot).
    #[serde(default)]
    pub started: bool,
}

/// A terminal's size in character cells (Kubernetes' `TerminalSize`: Width, Height).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalSize {
    pub width: u16,
    pub height: u16,
}

/// One message on `shoal.v1.agent.<node>.exec.<session>.out`, from the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecOutput {
    /// 1, 2, 3… over the session: a client that sees a gap lost output and must end the
    /// session rather than show a corrupted stream.
    pub seq: u64,
    pub event: ExecOutputEvent,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ExecOutputEvent {
    /// Output of the command (a TTY's whole output), at most 32 KiB a message.
    Stdout(#[serde(with = "serde_bytes_compat")] Vec<u8>),
    Stderr(#[serde(with = "serde_bytes_compat")] Vec<u8>),
    /// Sent every couple of seconds: the agent and the command are still there.
    Heartbeat,
    /// The last message of a session.
    Exit(ExecExit),
}

/// How a session ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecExit {
    /// The command's exit code; 128+n when signal n killed it; -1 when it never ran.
    pub exit_code: i32,
    /// The signal that killed it (`SIGKILL`), empty when it exited.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signal: String,
    /// Why the agent ended the session, when it did (client silent, input lost, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// One message on `shoal.v1.agent.<node>.exec.<session>.in`, from the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecInput {
    /// 1, 2, 3… over the session: the agent ends a session whose input has a gap (a stdin
    /// chunk may be missing).
    pub seq: u64,
    /// The highest output `seq` the client has consumed: the agent keeps at most
    /// [`EXEC_OUTPUT_WINDOW`] messages in flight past it, and stops reading the command's
    /// output meanwhile (the command then blocks on a full pipe, as on a slow terminal).
    #[serde(default)]
    pub ack: u64,
    pub event: ExecInputEvent,
}

/// Output messages the agent sends past the client's last `ack`.
pub const EXEC_OUTPUT_WINDOW: u64 = 64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ExecInputEvent {
    Stdin(#[serde(with = "serde_bytes_compat")] Vec<u8>),
    Resize(TerminalSize),
    /// End of stdin: the command reads EOF once what was sent before is written.
    CloseStdin,
    /// Nothing to say but "still here" (and the `ack`).
    Heartbeat,
    /// The client left: kill the command now.
    Cancel,
}

/// One usage sample of a pod, published by its node every few seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMetrics {
    pub namespace: String,
    pub pod: String,
    pub node: String,
    pub timestamp: crate::Time,
    /// CPU in millicores averaged since the previous sample.
    pub cpu_millicores: u64,
    pub memory_working_set_bytes: u64,
    #[serde(default)]
    pub containers: Vec<ContainerMetrics>,
    /// Application metrics scraped from the pod by its node (annotation
    /// `prometheus.io/scrape: "true"`), one per series; they back `Pods` metrics in HPAs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub app: Vec<AppMetric>,
}

/// One series of a pod's own metrics, as its Prometheus endpoint exposed it (counters and
/// gauges; a histogram or summary contributes its `_sum` and `_count`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AppMetric {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerMetrics {
    pub name: String,
    pub cpu_millicores: u64,
    pub memory_working_set_bytes: u64,
}

/// Byte strings as msgpack `bin`; also accepts arrays of numbers and text (JSON clients).
mod serde_bytes_compat {
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct Bytes;
        impl<'de> serde::de::Visitor<'de> for Bytes {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes, text or an array of byte values")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_str<E>(self, v: &str) -> Result<Vec<u8>, E> {
                Ok(v.as_bytes().to_vec())
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Vec<u8>, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(out)
            }
        }
        d.deserialize_any(Bytes)
    }
}

/// The scale subresource of a Deployment or ReplicaSet (autoscaling/v1 `Scale`): what an
/// autoscaler needs to read and set, without the workload's whole spec. Answered by the
/// `get-scale` verb (body [`ObjectRef`]) and `update-scale` (body a `Scale`: only
/// `spec.replicas` is taken; `metadata.resourceVersion`, when set, is a precondition).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scale {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: crate::ObjectMeta,
    #[serde(default)]
    pub spec: ScaleSpec,
    #[serde(default)]
    pub status: ScaleStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleSpec {
    #[serde(default)]
    pub replicas: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleStatus {
    /// Pods the workload has now (its status.replicas).
    #[serde(default)]
    pub replicas: i32,
    /// The workload's pod selector in label-selector syntax (`app=web,tier in (a,b)`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_list_of_encoded_items_is_the_list_encoded_whole() {
        use crate::codec::to_msgpack;
        for n in [0usize, 1, 15, 16, 300, 70_000] {
            let items: Vec<BTreeMap<String, String>> = (0..n)
                .map(|i| BTreeMap::from([("name".to_string(), format!("p{i}"))]))
                .collect();
            let metadata = super::ListMeta {
                resource_version: "42".into(),
                continue_token: if n > 1 { "ns/p1".into() } else { String::new() },
            };
            let whole = to_msgpack(&super::ObjectList {
                api_version: "v1".into(),
                kind: "PodList".into(),
                metadata: metadata.clone(),
                items: items.clone(),
            })
            .unwrap();
            let encoded: Vec<Vec<u8>> = items.iter().map(|i| to_msgpack(i).unwrap()).collect();
            let assembled =
                super::encode_list_of_encoded("v1", "PodList", &metadata, &encoded).unwrap();
            assert_eq!(assembled, whole, "{n} items");
        }
    }

    use super::*;
    use crate::codec;

    #[test]
    fn exec_session_messages_round_trip_through_msgpack() {
        let out = ExecOutput {
            seq: 7,
            event: ExecOutputEvent::Stdout(b"42\r\n".to_vec()),
        };
        let back: ExecOutput = codec::from_msgpack(&codec::to_msgpack(&out).unwrap()).unwrap();
        assert_eq!(back, out);
        let exit = ExecOutput {
            seq: 8,
            event: ExecOutputEvent::Exit(ExecExit {
                exit_code: 137,
                signal: "SIGKILL".into(),
                error: String::new(),
            }),
        };
        let back: ExecOutput = codec::from_msgpack(&codec::to_msgpack(&exit).unwrap()).unwrap();
        assert_eq!(back, exit);
        for event in [
            ExecInputEvent::Stdin(vec![0, 255, 3]),
            ExecInputEvent::Resize(TerminalSize {
                width: 100,
                height: 40,
            }),
            ExecInputEvent::CloseStdin,
            ExecInputEvent::Heartbeat,
        ] {
            let input = ExecInput {
                seq: 1,
                ack: 3,
                event,
            };
            let back: ExecInput = codec::from_msgpack(&codec::to_msgpack(&input).unwrap()).unwrap();
            assert_eq!(back, input);
        }
    }

    #[test]
    fn a_one_shot_request_from_an_older_client_decodes_without_session_fields() {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Old {
            namespace: &'static str,
            pod: &'static str,
            command: Vec<&'static str>,
        }
        let body = codec::to_msgpack(&Old {
            namespace: "default",
            pod: "web",
            command: vec!["true"],
        })
        .unwrap();
        let req: ExecRequest = codec::from_msgpack(&body).unwrap();
        assert!(req.session.is_empty() && !req.stdin && !req.tty);
    }
}
