//! OpenAPI v3: the index (`/openapi/v3`) and one document per group-version.
//!
//! What kubectl reads from them:
//! - before `apply`, `create` and `replace` with the default `--validate=strict` it checks
//!   that each kind's PATCH operation declares the `fieldValidation` query parameter, and if
//!   so leaves validation to the server (which refuses unknown fields with their paths, see
//!   [`crate::bus::encode_object`]);
//! - `kubectl explain` finds a resource's kind through the `x-kubernetes-group-version-kind`
//!   of its path's operations, then the component schema carrying the same extension, and
//!   walks its properties (and `$ref`s) along the field path. The schemas are generated from
//!   the bus-schemas types ([`bus_schemas::openapi`]), so they say what the API accepts.
//!
//! The PATCH operations declare no request body on purpose: kubectl would then compute
//! strategic merge patches from these schemas, which carry no merge keys, instead of from
//! the Go types compiled into it.
//!
//! Older served versions (autoscaling/v1) get paths but no schemas: explain describes the
//! preferred version.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::resources::{self, RestResource};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The encoded documents by group-version path, and each one's content hash (what the
/// index's `?hash=` carries, so that clients' caches notice a changed document).
struct Documents {
    by_path: BTreeMap<String, (Bytes, String)>,
}

fn documents() -> &'static Documents {
    static DOCUMENTS: OnceLock<Documents> = OnceLock::new();
    DOCUMENTS.get_or_init(|| {
        let mut by_path = BTreeMap::new();
        for (group, version) in resources::group_versions() {
            let path = gv_path(group, version);
            if let Some(doc) = build(&path) {
                let bytes = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
                let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
                let hash: String = digest.as_ref()[..16]
                    .iter()
                    .map(|b| format!("{b:02X}"))
                    .collect();
                by_path.insert(path, (bytes, hash));
            }
        }
        Documents { by_path }
    })
}

pub fn index() -> Value {
    let paths: Map<String, Value> = documents()
        .by_path
        .iter()
        .map(|(path, (_, hash))| {
            (
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
            )
        })
        .collect();
    json!({"paths": paths})
}

/// The encoded document of one group-version path (`api/v1`, `apis/apps/v1`); None if not
/// served.
pub fn document(gv_path_requested: &str) -> Option<Bytes> {
    documents()
        .by_path
        .get(gv_path_requested)
        .map(|(bytes, _)| bytes.clone())
}

fn gvk(r: &RestResource) -> Value {
    json!({"group": r.group, "version": r.version, "kind": r.kind()})
}

fn operations(r: &RestResource) -> Value {
    let param = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string"}});
    let op = |action: &str| {
        json!({
            "operationId": format!("{action}{}", r.kind()),
            "parameters": [param("fieldValidation"), param("fieldManager"), param("dryRun")],
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk(r),
            "responses": {"200": {"description": "OK"}},
        })
    };
    json!({"patch": op("patch"), "put": op("put"), "get": op("get")})
}

fn build(gv_path_requested: &str) -> Option<Value> {
    let served: Vec<RestResource> = resources::all()
        .filter(|r| gv_path(r.group, r.version) == gv_path_requested)
        .collect();
    if served.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for r in &served {
        let prefix = format!("/{}", gv_path(r.group, r.version));
        let item = if r.namespaced() {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural())
        } else {
            format!("{prefix}/{}/{{name}}", r.plural())
        };
        paths.insert(item, operations(r));
    }
    let kinds: Vec<&'static str> = served
        .iter()
        .filter(|r| !r.is_converted())
        .map(|r| r.kind())
        .collect();
    let mut schemas = bus_schemas::openapi::schemas(&kinds);
    for (kind, name) in &schemas.kinds {
        let Some(r) = served.iter().find(|r| r.kind() == *kind) else {
            continue;
        };
        if let Some(schema) = schemas
            .definitions
            .get_mut(name)
            .and_then(Value::as_object_mut)
        {
            schema.insert("x-kubernetes-group-version-kind".into(), json!([gvk(r)]));
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Shoal", "version": crate::discovery::KUBERNETES_VERSION},
        "paths": paths,
        "components": {"schemas": schemas.definitions},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(path: &str) -> Value {
        serde_json::from_slice(&document(path).unwrap()).unwrap()
    }

    #[test]
    fn patch_of_every_kind_declares_field_validation() {
        for r in resources::all() {
            let doc = parsed(&gv_path(r.group, r.version));
            let found = doc["paths"].as_object().unwrap().values().any(|p| {
                p["patch"]["x-kubernetes-group-version-kind"]["kind"] == r.kind()
                    && p["patch"]["parameters"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|q| q["name"] == "fieldValidation" && q["in"] == "query")
            });
            assert!(found, "{}", r.kind());
        }
        assert!(index()["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .starts_with("/openapi/v3/apis/apps/v1?hash="));
    }

    #[test]
    fn every_kind_at_its_bus_version_has_a_schema_with_its_gvk() {
        for r in resources::all().filter(|r| !r.is_converted()) {
            let doc = parsed(&gv_path(r.group, r.version));
            let schemas = doc["components"]["schemas"].as_object().unwrap();
            let found = schemas.values().any(|s| {
                s["x-kubernetes-group-version-kind"]
                    .as_array()
                    .is_some_and(|l| l.contains(&gvk(&r)))
                    && s["properties"]["metadata"].is_object()
            });
            assert!(found, "{}", r.kind());
        }
    }

    #[test]
    fn deployment_replicas_are_described() {
        let doc = parsed("apis/apps/v1");
        let spec = &doc["components"]["schemas"]["DeploymentSpec"];
        let replicas = &spec["properties"]["replicas"];
        assert_eq!(replicas["type"], "integer");
        assert!(replicas["description"].as_str().unwrap().contains("pods"));
    }
}
