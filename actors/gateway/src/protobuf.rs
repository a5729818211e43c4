//! Kubernetes' protobuf encoding, for the few bodies stock clients send only that way.
//!
//! kubectl's generated typed clients "prefer protobuf": with no content type configured
//! (kubectl configures none) they encode request bodies as protobuf. Of the kubectl
//! commands the gateway serves, `kubectl autoscale` writes through such a client (an
//! autoscaling/v1 HorizontalPodAutoscaler), and `kubectl auth can-i` and `whoami` send their
//! reviews so; only those messages are decoded, into the JSON the rest of the gateway
//! handles; any other protobuf body is refused with a 400 that says to send JSON.
//!
//! The envelope: the magic `k8s\0`, then a `runtime.Unknown` whose `raw` holds the message.
//! The message types below keep only the fields a client may set; protobuf skips the others.

use std::collections::BTreeMap;

use bus_schemas::Status;
use prost::Message;
use serde_json::{json, Map, Value};

pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", optional, tag = "2")]
    raw: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, optional, tag = "1")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    kind: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    generate_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
    #[prost(btree_map = "string, string", tag = "11")]
    labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    annotations: BTreeMap<String, String>,
}

/// autoscaling/v1 HorizontalPodAutoscaler (its status is the controller's, never sent).
#[derive(Clone, PartialEq, Message)]
struct HorizontalPodAutoscalerV1 {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<HorizontalPodAutoscalerSpecV1>,
}

#[derive(Clone, PartialEq, Message)]
struct HorizontalPodAutoscalerSpecV1 {
    #[prost(message, optional, tag = "1")]
    scale_target_ref: Option<CrossVersionObjectReference>,
    #[prost(int32, optional, tag = "2")]
    min_replicas: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    max_replicas: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    target_cpu_utilization_percentage: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct CrossVersionObjectReference {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "2")]
    name: Option<String>,
    #[prost(string, optional, tag = "3")]
    api_version: Option<String>,
}

/// authorization.k8s.io/v1 SelfSubjectAccessReview and SelfSubjectRulesReview (their status
/// is the server's answer, never sent), and authentication.k8s.io/v1 SelfSubjectReview
/// (which has nothing but metadata to send).
#[derive(Clone, PartialEq, Message)]
struct Review {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(bytes = "vec", optional, tag = "2")]
    spec: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct AccessReviewSpec {
    #[prost(message, optional, tag = "1")]
    resource_attributes: Option<ResourceAttributes>,
    #[prost(message, optional, tag = "2")]
    non_resource_attributes: Option<NonResourceAttributes>,
}

#[derive(Clone, PartialEq, Message)]
struct ResourceAttributes {
    #[prost(string, optional, tag = "1")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "2")]
    verb: Option<String>,
    #[prost(string, optional, tag = "3")]
    group: Option<String>,
    #[prost(string, optional, tag = "4")]
    version: Option<String>,
    #[prost(string, optional, tag = "5")]
    resource: Option<String>,
    #[prost(string, optional, tag = "6")]
    subresource: Option<String>,
    #[prost(string, optional, tag = "7")]
    name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct NonResourceAttributes {
    #[prost(string, optional, tag = "1")]
    path: Option<String>,
    #[prost(string, optional, tag = "2")]
    verb: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct RulesReviewSpec {
    #[prost(string, optional, tag = "1")]
    namespace: Option<String>,
}

fn review_json(raw: &[u8], api_version: &str, kind: &str) -> Result<Value, Status> {
    let malformed = |e: prost::DecodeError| {
        Status::bad_request(format!("the protobuf {kind} is malformed: {e}"))
    };
    let review = Review::decode(raw).map_err(malformed)?;
    let spec_bytes = review.spec.unwrap_or_default();
    let spec = match kind {
        "SelfSubjectAccessReview" => {
            let spec = AccessReviewSpec::decode(spec_bytes.as_slice()).map_err(malformed)?;
            let mut out = json!({});
            if let Some(ra) = spec.resource_attributes {
                out["resourceAttributes"] = json!({
                    "namespace": ra.namespace.unwrap_or_default(),
                    "verb": ra.verb.unwrap_or_default(),
                    "group": ra.group.unwrap_or_default(),
                    "version": ra.version.unwrap_or_default(),
                    "resource": ra.resource.unwrap_or_default(),
                    "subresource": ra.subresource.unwrap_or_default(),
                    "name": ra.name.unwrap_or_default(),
                });
            }
            if let Some(nra) = spec.non_resource_attributes {
                out["nonResourceAttributes"] = json!({
                    "path": nra.path.unwrap_or_default(),
                    "verb": nra.verb.unwrap_or_default(),
                });
            }
            out
        }
        "SelfSubjectRulesReview" => {
            let spec = RulesReviewSpec::decode(spec_bytes.as_slice()).map_err(malformed)?;
            json!({"namespace": spec.namespace.unwrap_or_default()})
        }
        _ => json!({}),
    };
    Ok(json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": meta_json(review.metadata.unwrap_or_default()),
        "spec": spec,
    }))
}

/// Whether a request's content type is Kubernetes' protobuf.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type.split(';').next().unwrap_or("").trim() == CONTENT_TYPE
}

/// Decodes a protobuf body into the JSON object it encodes.
pub fn decode(body: &[u8]) -> Result<Value, Status> {
    let envelope = body.strip_prefix(MAGIC).ok_or_else(|| {
        Status::bad_request("the protobuf body does not start with Kubernetes' `k8s\\0` magic")
    })?;
    let unknown = Unknown::decode(envelope)
        .map_err(|e| Status::bad_request(format!("the protobuf envelope is malformed: {e}")))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let raw = unknown.raw.unwrap_or_default();
    match (api_version.as_str(), kind.as_str()) {
        ("autoscaling/v1", "HorizontalPodAutoscaler") => {
            let hpa = HorizontalPodAutoscalerV1::decode(raw.as_slice()).map_err(|e| {
                Status::bad_request(format!(
                    "the protobuf HorizontalPodAutoscaler is malformed: {e}"
                ))
            })?;
            Ok(hpa_json(hpa, &api_version, &kind))
        }
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview" | "SelfSubjectRulesReview")
        | ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            review_json(&raw, &api_version, &kind)
        }
        _ => Err(Status::bad_request(format!(
            "protobuf bodies of {kind:?} in {api_version:?} are not served; send application/json"
        ))),
    }
}

fn meta_json(meta: ObjectMeta) -> Value {
    let mut out = Map::new();
    let mut text = |key: &str, value: Option<String>| {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            out.insert(key.into(), v.into());
        }
    };
    text("name", meta.name);
    text("generateName", meta.generate_name);
    text("namespace", meta.namespace);
    text("resourceVersion", meta.resource_version);
    if !meta.labels.is_empty() {
        out.insert("labels".into(), json!(meta.labels));
    }
    if !meta.annotations.is_empty() {
        out.insert("annotations".into(), json!(meta.annotations));
    }
    Value::Object(out)
}

fn hpa_json(hpa: HorizontalPodAutoscalerV1, api_version: &str, kind: &str) -> Value {
    let spec = hpa.spec.unwrap_or_default();
    let target = spec.scale_target_ref.unwrap_or_default();
    let mut spec_json = json!({
        "scaleTargetRef": {
            "apiVersion": target.api_version.unwrap_or_default(),
            "kind": target.kind.unwrap_or_default(),
            "name": target.name.unwrap_or_default(),
        },
        "maxReplicas": spec.max_replicas.unwrap_or_default(),
    });
    if let Some(min) = spec.min_replicas {
        spec_json["minReplicas"] = min.into();
    }
    if let Some(cpu) = spec.target_cpu_utilization_percentage {
        spec_json["targetCPUUtilizationPercentage"] = cpu.into();
    }
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": meta_json(hpa.metadata.unwrap_or_default()),
        "spec": spec_json,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::Reason;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
        };
        let mut body = MAGIC.to_vec();
        body.extend(unknown.encode_to_vec());
        body
    }

    #[test]
    fn an_autoscale_body_decodes_to_v1_json() {
        let hpa = HorizontalPodAutoscalerV1 {
            metadata: Some(ObjectMeta {
                name: Some("web".into()),
                annotations: [("note".to_string(), "x".to_string())].into(),
                ..Default::default()
            }),
            spec: Some(HorizontalPodAutoscalerSpecV1 {
                scale_target_ref: Some(CrossVersionObjectReference {
                    kind: Some("Deployment".into()),
                    name: Some("web".into()),
                    api_version: Some("apps/v1".into()),
                }),
                min_replicas: Some(2),
                max_replicas: Some(5),
                target_cpu_utilization_percentage: Some(60),
            }),
        };
        let body = envelope(
            "autoscaling/v1",
            "HorizontalPodAutoscaler",
            hpa.encode_to_vec(),
        );
        let value = decode(&body).unwrap();
        assert_eq!(
            value["metadata"],
            json!({"name": "web", "annotations": {"note": "x"}})
        );
        assert_eq!(value["spec"]["scaleTargetRef"]["kind"], "Deployment");
        assert_eq!(value["spec"]["minReplicas"], 2);
        assert_eq!(value["spec"]["maxReplicas"], 5);
        assert_eq!(value["spec"]["targetCPUUtilizationPercentage"], 60);
    }

    #[test]
    fn kubectl_auth_can_i_body_decodes_to_its_attributes() {
        // What kubectl 1.32 sent for `auth can-i create pods` (its `-v=8` request body).
        let hex = "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c\
                   665375626a656374416363657373526576696577123f0a100a0012001a0022002a003200\
                   3800420012210a1f0a0764656661756c7412066372656174651a0022002a04706f647332\
                   003a001a08080012001a0020001a002200";
        let body: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let value = decode(&body).unwrap();
        assert_eq!(value["kind"], "SelfSubjectAccessReview");
        let ra = &value["spec"]["resourceAttributes"];
        assert_eq!(
            (
                ra["verb"].as_str(),
                ra["resource"].as_str(),
                ra["namespace"].as_str()
            ),
            (Some("create"), Some("pods"), Some("default"))
        );
    }

    #[test]
    fn other_messages_and_bad_bytes_are_refused() {
        let status = decode(&envelope("v1", "Pod", vec![])).unwrap_err();
        assert_eq!(status.reason, Reason::BadRequest);
        assert!(
            status.message.contains("application/json"),
            "{}",
            status.message
        );
        assert!(status.message.contains("\"Pod\""), "{}", status.message);
        let status = decode(b"{\"kind\":\"Pod\"}").unwrap_err();
        assert_eq!(status.reason, Reason::BadRequest);
        let mut truncated = envelope(
            "autoscaling/v1",
            "HorizontalPodAutoscaler",
            vec![0x0a, 0x10],
        );
        truncated.truncate(truncated.len() - 1);
        assert!(decode(&truncated).is_err());
        assert!(is_protobuf(
            "application/vnd.kubernetes.protobuf; charset=x"
        ));
        assert!(!is_protobuf("application/json"));
    }
}
