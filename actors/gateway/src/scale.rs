//! The `scale` subresource of Deployments and ReplicaSets (`autoscaling/v1` Scale), which
//! `kubectl scale` reads and patches.

use bus_schemas::{Cause, Reason, Status};
use hyper::{Method, StatusCode};
use serde_json::{json, Value};

use crate::bus::Bus;
use crate::http::{self, Request, Response};
use crate::objects::{apply_patch, merge_patch, parse_body, PatchType};
use crate::resources::RestResource;

/// A label selector (`matchLabels` + `matchExpressions`) in the selector grammar, as Scale's
/// `status.selector` carries it.
fn selector_text(sel: Option<&Value>) -> String {
    let Some(sel) = sel else {
        return String::new();
    };
    let mut parts = Vec::new();
    let labels = label_map_text(sel.get("matchLabels"));
    if !labels.is_empty() {
        parts.push(labels);
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let field = |name: &str| e.get(name).and_then(Value::as_str).unwrap_or("");
        let key = field("key");
        parts.push(match field("operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            op => format!("{key} {op} ({})", values.join(",")),
        });
    }
    parts.join(",")
}

fn label_map_text(map: Option<&Value>) -> String {
    map.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

pub fn serves(r: &RestResource) -> bool {
    matches!(r.kind(), "Deployment" | "ReplicaSet")
}

/// The Scale view of a workload.
pub fn scale_of(obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let pick = |k: &str| meta.get(k).cloned().unwrap_or(Value::Null);
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": pick("name"), "namespace": pick("namespace"), "uid": pick("uid"),
            "resourceVersion": pick("resourceVersion"), "creationTimestamp": pick("creationTimestamp"),
        },
        "spec": {"replicas": obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)},
        "status": {
            "replicas": obj.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
            "selector": selector_text(obj.pointer("/spec/selector")),
        },
    })
}

pub async fn handle(bus: &Bus, req: &Request, r: &RestResource, ns: &str, name: &str) -> Response {
    let current = match bus.get(r, ns, name).await {
        Ok(obj) => obj,
        Err(e) => return http::api_error(&e),
    };
    let mut scale = scale_of(&current);
    match req.method {
        Method::GET => return http::json(&scale),
        Method::PUT => match parse_body(req) {
            Ok(body) => scale = body,
            Err(s) => return http::status(&s),
        },
        Method::PATCH => {
            let kind = PatchType::from_content_type(req.content_type()).unwrap_or(PatchType::Merge);
            let patch = match parse_body(req) {
                Ok(p) => p,
                Err(s) => return http::status(&s),
            };
            let kind = if kind == PatchType::Apply {
                PatchType::Merge
            } else {
                kind
            };
            if let Err(s) = apply_patch(kind, &mut scale, &patch) {
                return http::status(&s);
            }
        }
        _ => return http::method_not_allowed(&req.method, &req.path),
    }
    let Some(replicas) = scale.pointer("/spec/replicas").and_then(Value::as_i64) else {
        return http::status(
            &Status::new(Reason::Invalid, "spec.replicas: Required value").with_details(
                "Scale",
                name,
                vec![Cause::required("spec.replicas")],
            ),
        );
    };
    // A Scale that names a resourceVersion is a precondition on the workload.
    let mut patch = json!({"spec": {"replicas": replicas}});
    if let Some(rv) = scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        if req.method == Method::PUT && !rv.is_empty() {
            patch["metadata"] = json!({"resourceVersion": rv});
        }
    }
    match merge_patch(bus, r, ns, name, &patch).await {
        Ok(obj) => http::json_with(StatusCode::OK, "application/json", &scale_of(&obj)),
        Err(s) => http::status(&s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_print_in_kubectl_syntax() {
        let sel = json!({"matchLabels": {"app": "web"},
                         "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]});
        assert_eq!(selector_text(Some(&sel)), "app=web,tier in (a,b)");
    }
}
