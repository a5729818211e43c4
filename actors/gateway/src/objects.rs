//! Collections and items of bus-backed resources: list, get, create, replace, patch, delete,
//! and the `status`, `scale` and `eviction` subresources, each one bus request (a patch is a
//! get and a compare-and-swap update, retried on conflict).

use bus_schemas::api::{DeleteOptions, ListOptions, PatchRequest, Preconditions};
use bus_schemas::subjects::Verb;
use bus_schemas::{with_kind, Cause, Reason, Status};
use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use shoal_bus::client::warnings;
use shoal_bus::ApiError;

use crate::bus::{encode_object, Bus, FieldValidation};
use crate::field_manager::Writer;
use crate::http::{self, Request, Response};
use crate::resources::RestResource;
use crate::route::ObjectPath;
use crate::{strategic, table, watch};

/// How many times a patch re-reads and retries after losing a compare-and-swap race.
const PATCH_ATTEMPTS: usize = 5;

pub async fn handle(bus: &Bus, req: &Request, path: ObjectPath) -> Response {
    let r = path.resource;
    let ns = path.namespace.clone().unwrap_or_default();
    let method = req.method.clone();
    if let Some(sub) = path.subresource.as_deref() {
        if !r.subresources().iter().any(|s| s.name == sub) {
            return http::not_found(&req.path);
        }
    }
    match (&method, path.name.as_deref(), path.subresource.as_deref()) {
        (&Method::GET, None, None) if req.flag("watch") => {
            watch::serve(bus, req, &r, path.namespace.as_deref()).await
        }
        (&Method::GET, None, None) => list(bus, req, &r, &ns).await,
        (&Method::POST, None, None) => create(bus, req, &r, &ns).await,
        (&Method::GET, Some(name), None | Some("status")) => get(bus, req, &r, &ns, name).await,
        (&Method::PUT, Some(name), None) => replace(bus, req, &r, &ns, name, false).await,
        (&Method::PUT, Some(name), Some("status")) => replace(bus, req, &r, &ns, name, true).await,
        (&Method::PATCH, Some(name), None) => patch(bus, req, &r, &ns, name, false).await,
        (&Method::PATCH, Some(name), Some("status")) => patch(bus, req, &r, &ns, name, true).await,
        (&Method::DELETE, Some(name), None) => delete(bus, req, &r, &ns, name).await,
        (_, Some(name), Some("scale")) if crate::scale::serves(&r) => {
            crate::scale::handle(bus, req, &r, &ns, name).await
        }
        (&Method::GET, Some(name), Some("log")) if r.kind() == "Pod" => {
            crate::logs::serve(bus, req, &ns, name).await
        }
        (&Method::POST, Some(name), Some("eviction")) if r.kind() == "Pod" => {
            evict(bus, req, &r, &ns, name).await
        }
        _ => http::method_not_allowed(&method, &req.path),
    }
}

fn bad_request(field: &str, message: impl Into<String>) -> Status {
    let message = message.into();
    Status::new(Reason::BadRequest, message.clone()).with_details(
        "",
        "",
        vec![Cause::invalid(field, message)],
    )
}

/// Parses a request body (JSON, YAML or Kubernetes' protobuf, as the content type says). A
/// malformed body is a 400 naming where it broke.
pub fn parse_body(req: &Request) -> Result<Value, Status> {
    if req.body.is_empty() {
        return Err(bad_request("", "the request body is empty"));
    }
    if crate::protobuf::is_protobuf(req.content_type()) {
        return crate::protobuf::decode(&req.body);
    }
    if req.content_type().contains("yaml") {
        return serde_norway::from_slice(&req.body)
            .map_err(|e| bad_request("", format!("the request body is not valid YAML: {e}")));
    }
    let mut de = serde_json::Deserializer::from_slice(&req.body);
    let value: Result<Value, _> = serde_path_to_error::deserialize(&mut de);
    value.map_err(|e| {
        // The path up to where the text broke; a key that never finished parsing shows as `?`.
        let field = e.path().to_string();
        let field = field.trim_end_matches(".?").trim_end_matches('?');
        let field = if field == "." { "" } else { field };
        bad_request(
            field,
            format!("the request body is not valid JSON: {}", e.into_inner()),
        )
    })
}

/// Checks that a body is an object of the URL's kind, in the URL's namespace, and fills in
/// what it leaves out.
fn check_object(r: &RestResource, ns: &str, value: &mut Value) -> Result<(), Status> {
    let Some(map) = value.as_object_mut() else {
        return Err(bad_request("", "the request body must be a JSON object"));
    };
    let text = |map: &serde_json::Map<String, Value>, k: &str| {
        map.get(k).and_then(Value::as_str).unwrap_or("").to_string()
    };
    let api_version = text(map, "apiVersion");
    if !api_version.is_empty() && api_version != r.api_version() {
        return Err(bad_request(
            "apiVersion",
            format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                r.api_version()
            ),
        ));
    }
    let kind = text(map, "kind");
    if !kind.is_empty() && kind != r.kind() {
        return Err(bad_request(
            "kind",
            format!(
                "the kind in the data ({kind}) does not match the expected kind ({}) of {}",
                r.kind(),
                r.plural()
            ),
        ));
    }
    map.insert("apiVersion".into(), r.api_version().into());
    map.insert("kind".into(), r.kind().into());
    let meta = map
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| bad_request("metadata", "must be an object"))?;
    if r.namespaced() && !ns.is_empty() {
        let body_ns = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
        if body_ns.is_empty() {
            meta.insert("namespace".into(), ns.into());
        } else if body_ns != ns {
            return Err(bad_request(
                "metadata.namespace",
                format!("the namespace of the provided object ({body_ns}) does not match the namespace sent on the request ({ns})"),
            ));
        }
    }
    Ok(())
}

fn validation(req: &Request) -> FieldValidation {
    FieldValidation::from_query(req.param("fieldValidation"))
}

fn dry_run(req: &Request) -> bool {
    req.param("dryRun") == Some("All")
}

fn reply_object(req: &Request, r: &RestResource, obj: Value, code: StatusCode) -> Response {
    if req.wants_table() {
        let rv = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let body = table::table(r.kind(), std::slice::from_ref(&obj), &rv, "", true);
        return http::bytes_response(code, "application/json", body);
    }
    http::json_with(code, "application/json", &obj)
}

async fn list(bus: &Bus, req: &Request, r: &RestResource, ns: &str) -> Response {
    let options = ListOptions {
        namespace: ns.to_string(),
        label_selector: req.param("labelSelector").unwrap_or("").to_string(),
        field_selector: req.param("fieldSelector").unwrap_or("").to_string(),
        limit: req.param("limit").and_then(|l| l.parse().ok()).unwrap_or(0),
        continue_token: req.param("continue").unwrap_or("").to_string(),
    };
    if req.wants_table() {
        return match table_page(bus, r, &options).await {
            Ok(body) => http::bytes_response(StatusCode::OK, "application/json", body),
            Err(e) => http::api_error(&e),
        };
    }
    match bus.list(r, &options).await {
        // Serialised straight from the list: no Value tree of the whole page.
        Ok(list) => match serde_json::to_vec(&list) {
            Ok(body) => http::bytes_response(StatusCode::OK, "application/json", body),
            Err(e) => http::error(Reason::InternalError, format!("encoding the list: {e}")),
        },
        Err(e) => http::api_error(&e),
    }
}

/// One page as a Table (what kubectl lists with): the page decoded once as its kind and its
/// rows serialised from that. A page that does not decode as the kind (none should: the API
/// wrote every object as its type) is listed again as JSON and read object by object, so a
/// bad object costs its own row, not the page.
async fn table_page(
    bus: &Bus,
    r: &RestResource,
    options: &ListOptions,
) -> Result<Vec<u8>, ApiError> {
    let kind = r.kind();
    let now = chrono::Utc::now();
    let typed = with_kind!(kind, K => {
        match bus.list_of::<K>(r, options).await {
            Ok(page) => {
                let rows = table::typed_rows(&page.items, now);
                let meta = &page.metadata;
                Some(table::encode(kind, &rows, &meta.resource_version, &meta.continue_token, true))
            }
            Err(ApiError::Decode { detail, .. }) => {
                tracing::warn!(kind, %detail, "a list page does not decode as its kind; reading it as JSON");
                None
            }
            Err(e) => return Err(e),
        }
    }, _ => None);
    if let Some(body) = typed {
        return Ok(body);
    }
    let page = bus.list(r, options).await?;
    let rows = table::value_rows(kind, &page.items, now);
    let meta = &page.metadata;
    Ok(table::encode(
        kind,
        &rows,
        &meta.resource_version,
        &meta.continue_token,
        true,
    ))
}

async fn get(bus: &Bus, req: &Request, r: &RestResource, ns: &str, name: &str) -> Response {
    match bus.get(r, ns, name).await {
        Ok(obj) => reply_object(req, r, obj, StatusCode::OK),
        Err(e) => http::api_error(&e),
    }
}

async fn create(bus: &Bus, req: &Request, r: &RestResource, ns: &str) -> Response {
    let result = async {
        let writer = Writer::for_update(req)?;
        let mut value = parse_body(req)?;
        check_object(r, ns, &mut value)?;
        let body = encode_object(r, value.clone(), validation(req))?;
        if dry_run(req) {
            return Ok((value, Vec::new()));
        }
        let (obj, headers) = bus
            .call_raw_with(r, Verb::Create, body, writer.headers())
            .await
            .map_err(|e| http::status_of(&e))?;
        Ok::<_, Status>((obj, warnings(&headers)))
    }
    .await;
    match result {
        Ok((obj, warned)) => {
            http::with_warnings(reply_object(req, r, obj, StatusCode::CREATED), &warned)
        }
        Err(status) => http::status(&status),
    }
}

async fn replace(
    bus: &Bus,
    req: &Request,
    r: &RestResource,
    ns: &str,
    name: &str,
    status_only: bool,
) -> Response {
    let result = async {
        let writer = Writer::for_update(req)?;
        let mut value = parse_body(req)?;
        check_object(r, ns, &mut value)?;
        check_name(&value, name)?;
        let body = encode_object(r, value.clone(), validation(req))?;
        if dry_run(req) {
            return Ok((value, Vec::new()));
        }
        let verb = if status_only {
            Verb::UpdateStatus
        } else {
            Verb::Update
        };
        let (obj, headers) = bus
            .call_raw_with(r, verb, body, writer.headers())
            .await
            .map_err(|e| http::status_of(&e))?;
        Ok::<_, Status>((obj, warnings(&headers)))
    }
    .await;
    match result {
        Ok((obj, warned)) => {
            http::with_warnings(reply_object(req, r, obj, StatusCode::OK), &warned)
        }
        Err(status) => http::status(&status),
    }
}

fn check_name(value: &Value, name: &str) -> Result<(), Status> {
    let body_name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if body_name != name {
        return Err(bad_request(
            "metadata.name",
            format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            ),
        ));
    }
    Ok(())
}

/// The patch media types Kubernetes defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// Applies a patch of `kind` to a JSON document.
pub fn apply_patch(kind: PatchType, target: &mut Value, patch: &Value) -> Result<(), Status> {
    let invalid = |field: &str, message: String| {
        Status::new(Reason::Invalid, message.clone()).with_details(
            "",
            "",
            vec![Cause::invalid(field, message)],
        )
    };
    match kind {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| bad_request("", format!("invalid JSON patch: {e}")))?;
            json_patch::patch(target, &ops).map_err(|e| {
                let field = e.path.to_string().trim_start_matches('/').replace('/', ".");
                invalid(&field, format!("the JSON patch could not be applied: {e}"))
            })
        }
        PatchType::Merge => {
            json_patch::merge(target, patch);
            Ok(())
        }
        PatchType::Strategic => strategic::apply(target, patch).map_err(|e| {
            invalid(
                &e.field,
                format!("the strategic merge patch could not be applied: {e}"),
            )
        }),
        PatchType::Apply => Err(bad_request("", "apply patches are served by apply")),
    }
}

async fn patch(
    bus: &Bus,
    req: &Request,
    r: &RestResource,
    ns: &str,
    name: &str,
    status_only: bool,
) -> Response {
    let Some(kind) = PatchType::from_content_type(req.content_type()) else {
        return http::status(&Status::new(
            Reason::BadRequest,
            format!(
                "unsupported patch content type {:?}: use application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json or application/apply-patch+yaml",
                req.content_type()
            ),
        ));
    };
    if kind == PatchType::Apply {
        return server_side_apply(bus, req, r, ns, name).await;
    }
    let writer = match Writer::for_update(req) {
        Ok(w) => w,
        Err(s) => return http::status(&s),
    };
    let patch = match parse_body(req) {
        Ok(p) => p,
        Err(s) => return http::status(&s),
    };
    // A patch that names a resourceVersion is a precondition: its conflict is the client's.
    let precondition = patch.pointer("/metadata/resourceVersion").is_some();
    let mut last = None;
    for _ in 0..PATCH_ATTEMPTS {
        let current = match bus.get(r, ns, name).await {
            Ok(obj) => obj,
            Err(e) => return http::api_error(&e),
        };
        let mut updated = current.clone();
        if let Err(s) = apply_patch(kind, &mut updated, &patch) {
            return http::status(&s);
        }
        if let Err(s) = check_object(r, ns, &mut updated).and_then(|_| check_name(&updated, name)) {
            return http::status(&s);
        }
        if updated == current || dry_run(req) {
            return reply_object(req, r, updated, StatusCode::OK);
        }
        let body = match encode_object(r, updated, validation(req)) {
            Ok(b) => b,
            Err(s) => return http::status(&s),
        };
        let verb = if status_only {
            Verb::UpdateStatus
        } else {
            Verb::Update
        };
        match bus.call_raw_with(r, verb, body, writer.headers()).await {
            Ok((obj, headers)) => {
                let reply = reply_object(req, r, obj, StatusCode::OK);
                return http::with_warnings(reply, &warnings(&headers));
            }
            Err(e) if e.is_conflict() && !precondition => last = Some(e),
            Err(e) => return http::api_error(&e),
        }
    }
    match last {
        Some(e) => http::api_error(&e),
        None => http::error(Reason::InternalError, "patch retries exhausted"),
    }
}

/// `kubectl apply --server-side`: the bus' apply verb under the client's field manager, so
/// the API merges the manifest into the object and answers a field another manager owns
/// with a Conflict naming the fields and their owner (unless `force`).
async fn server_side_apply(
    bus: &Bus,
    req: &Request,
    r: &RestResource,
    ns: &str,
    name: &str,
) -> Response {
    let result = async {
        let writer = Writer::for_apply(req)?;
        let mut value: Value = serde_norway::from_slice(&req.body).map_err(|e| {
            bad_request(
                "",
                format!("the apply patch is not valid YAML or JSON: {e}"),
            )
        })?;
        check_object(r, ns, &mut value)?;
        check_name(&value, name)?;
        let body = encode_object(r, value.clone(), validation(req))?;
        if dry_run(req) {
            return Ok((value, StatusCode::OK, Vec::new()));
        }
        let (obj, headers) = bus
            .call_raw_with(r, Verb::Apply, body, writer.headers())
            .await
            .map_err(|e| http::status_of(&e))?;
        let created = headers
            .get(bus_schemas::api::HEADER_APPLY_RESULT)
            .is_some_and(|v| v.as_str() == "created");
        let code = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        Ok::<_, Status>((obj, code, warnings(&headers)))
    }
    .await;
    match result {
        Ok((obj, code, warned)) => http::with_warnings(reply_object(req, r, obj, code), &warned),
        Err(s) => http::status(&s),
    }
}

/// DeleteOptions from the body (kubectl sends one) and the query (the Python client may).
fn delete_options(req: &Request, ns: &str, name: &str) -> Result<DeleteOptions, Status> {
    let body = if req.body.is_empty() {
        json!({})
    } else {
        parse_body(req)?
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(String::from);
    let mut propagation = text(body.get("propagationPolicy"))
        .or_else(|| req.param("propagationPolicy").map(String::from));
    if propagation.is_none() && body.get("orphanDependents").and_then(Value::as_bool) == Some(true)
    {
        propagation = Some("Orphan".into());
    }
    let grace = body
        .get("gracePeriodSeconds")
        .and_then(Value::as_i64)
        .or_else(|| req.param("gracePeriodSeconds").and_then(|g| g.parse().ok()));
    let preconditions = body.get("preconditions").map(|p| Preconditions {
        uid: text(p.get("uid")),
        resource_version: text(p.get("resourceVersion")),
    });
    Ok(DeleteOptions {
        namespace: ns.to_string(),
        name: name.to_string(),
        propagation_policy: propagation,
        grace_period_seconds: grace,
        preconditions,
    })
}

async fn delete(bus: &Bus, req: &Request, r: &RestResource, ns: &str, name: &str) -> Response {
    let options = match delete_options(req, ns, name) {
        Ok(o) => o,
        Err(s) => return http::status(&s),
    };
    if dry_run(req) {
        return get(bus, req, r, ns, name).await;
    }
    match bus.call(r, Verb::Delete, &options).await {
        Ok((obj, _)) => http::json(&obj),
        Err(e) => http::api_error(&e),
    }
}

/// `POST pods/<name>/eviction` (kubectl drain): a graceful delete of the pod.
async fn evict(bus: &Bus, req: &Request, r: &RestResource, ns: &str, name: &str) -> Response {
    let body = match parse_body(req) {
        Ok(b) => b,
        Err(s) => return http::status(&s),
    };
    let opts = body.get("deleteOptions").cloned().unwrap_or(json!({}));
    let options = DeleteOptions {
        namespace: ns.to_string(),
        name: name.to_string(),
        propagation_policy: None,
        grace_period_seconds: opts.get("gracePeriodSeconds").and_then(Value::as_i64),
        preconditions: None,
    };
    match bus.call(r, Verb::Delete, &options).await {
        Ok(_) => http::success(StatusCode::CREATED, json!({"name": name, "kind": "pods"})),
        Err(e) => http::api_error(&e),
    }
}

/// A merge patch through the bus' patch verb (scale uses it: no read-modify-write needed).
pub async fn merge_patch(
    bus: &Bus,
    r: &RestResource,
    ns: &str,
    name: &str,
    patch: &Value,
) -> Result<Value, Status> {
    let request = PatchRequest {
        namespace: ns.to_string(),
        name: name.to_string(),
        patch: patch.to_string(),
        status: false,
    };
    bus.call(r, Verb::Patch, &request)
        .await
        .map(|(obj, _)| obj)
        .map_err(|e| http::status_of(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_types_follow_content_types() {
        assert_eq!(
            PatchType::from_content_type("application/strategic-merge-patch+json"),
            Some(PatchType::Strategic)
        );
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(PatchType::from_content_type("text/plain"), None);
    }

    #[test]
    fn json_patch_failures_name_the_path() {
        let mut doc = json!({"spec": {"replicas": 1}});
        let patch = json!([{"op": "replace", "path": "/spec/missing/x", "value": 2}]);
        let s = apply_patch(PatchType::Json, &mut doc, &patch).unwrap_err();
        assert_eq!(s.reason, Reason::Invalid);
        assert!(s.causes()[0].field.starts_with("spec.missing"), "{s:?}");
    }

    #[test]
    fn wrong_kind_and_api_version_name_their_field() {
        let r = crate::resources::find("apps", "v1", "deployments").unwrap();
        let mut v =
            json!({"apiVersion": "apps/v2", "kind": "Deployment", "metadata": {"name": "x"}});
        assert_eq!(
            check_object(&r, "d", &mut v).unwrap_err().causes()[0].field,
            "apiVersion"
        );
        let mut v = json!({"apiVersion": "apps/v1", "kind": "Widget", "metadata": {"name": "x"}});
        assert_eq!(
            check_object(&r, "d", &mut v).unwrap_err().causes()[0].field,
            "kind"
        );
        let mut v = json!({"metadata": {"name": "x", "namespace": "other"}});
        assert_eq!(
            check_object(&r, "d", &mut v).unwrap_err().causes()[0].field,
            "metadata.namespace"
        );
        let mut v = json!({"metadata": {"name": "x"}});
        check_object(&r, "d", &mut v).unwrap();
        assert_eq!(v["metadata"]["namespace"], "d");
        assert_eq!(v["kind"], "Deployment");
    }
}
