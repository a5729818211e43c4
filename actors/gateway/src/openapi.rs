//! OpenAPI v3: the index (`/openapi/v3`) and one document per group-version.
//!
//! What kubectl reads from them: before `apply`, `create` and `replace` with the default
//! `--validate=strict` it checks that each kind's PATCH operation declares the
//! `fieldValidation` query parameter, and if so leaves validation to the server (which
//! refuses unknown fields with their paths, see [`crate::bus::encode_object`]).
//!
//! NOTE: the documents carry operations, not field schemas yet, so `kubectl explain` has
//! nothing to describe; generating schemas from the bus-schemas types is future work.

use serde_json::{json, Map, Value};

use crate::resources::{self, RestResource};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

pub fn index() -> Value {
    let mut paths = Map::new();
    let mut gvs = vec![("", "v1")];
    gvs.extend(resources::groups());
    for (group, version) in gvs {
        let path = gv_path(group, version);
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", env!("CARGO_PKG_VERSION"))}),
        );
    }
    json!({"paths": paths})
}

fn operations(r: &RestResource) -> Value {
    let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind()});
    let param = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string"}});
    let op = |action: &str| {
        json!({
            "operationId": format!("{action}{}", r.kind()),
            "parameters": [param("fieldValidation"), param("fieldManager"), param("dryRun")],
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
            "responses": {"200": {"description": "OK"}},
        })
    };
    json!({"patch": op("patch"), "put": op("put"), "get": op("get")})
}

/// The document of one group-version path (`api/v1`, `apis/apps/v1`); None if not served.
pub fn document(gv_path_requested: &str) -> Option<Value> {
    let mut paths = Map::new();
    for r in resources::all() {
        if gv_path(r.group, r.version) != gv_path_requested {
            continue;
        }
        let prefix = format!("/{}", gv_path(r.group, r.version));
        let item = if r.namespaced() {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural())
        } else {
            format!("{prefix}/{}/{{name}}", r.plural())
        };
        paths.insert(item, operations(&r));
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Shoal", "version": crate::discovery::KUBERNETES_VERSION},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_of_every_kind_declares_field_validation() {
        for r in resources::all() {
            let doc = document(&gv_path(r.group, r.version)).unwrap();
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
            .starts_with("/openapi/v3/apis/apps/v1"));
    }
}
