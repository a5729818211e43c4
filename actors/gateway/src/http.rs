//! HTTP plumbing shared by every handler: the parsed request, response builders, content
//! negotiation, and Status errors as Kubernetes clients expect them.

use std::collections::HashMap;

use bus_schemas::{Reason, Status};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{HeaderMap, Method, StatusCode};
use serde_json::Value;
use shoal_bus::ApiError;

pub type Body = BoxBody<Bytes, std::io::Error>;
pub type Response = hyper::Response<Body>;

/// The largest request body accepted, as Kubernetes' API server limits it.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A request with its body read.
pub struct Request {
    pub method: Method,
    pub path: String,
    pub query: HashMap<String, String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Request {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// A boolean query parameter; the Python client sends `True`.
    pub fn flag(&self, name: &str) -> bool {
        self.param(name)
            .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
    }

    fn header(&self, name: hyper::header::HeaderName) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn user_agent(&self) -> &str {
        self.header(hyper::header::USER_AGENT)
    }

    pub fn content_type(&self) -> &str {
        self.header(CONTENT_TYPE)
    }

    fn accept(&self) -> &str {
        self.header(hyper::header::ACCEPT)
    }

    /// Whether the client asked for server-side printing (`as=Table;g=meta.k8s.io`).
    pub fn wants_table(&self) -> bool {
        self.accept()
            .split(',')
            .any(|a| a.contains("as=Table") && a.contains("g=meta.k8s.io"))
    }

    /// Whether the client takes aggregated discovery v2.
    pub fn wants_aggregated_discovery(&self) -> bool {
        self.accept().split(',').any(|a| {
            a.contains("as=APIGroupDiscoveryList") && a.split(';').any(|p| p.trim() == "v=v2")
        })
    }
}

pub fn parse_query(query: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

pub fn bytes_response(code: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response {
    let mut resp = hyper::Response::new(full(body));
    *resp.status_mut() = code;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(CONTENT_TYPE, v);
    }
    resp
}

pub fn json_with(code: StatusCode, content_type: &str, value: &Value) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    bytes_response(code, content_type, body)
}

/// Kubernetes' `Warning: 299 - "text"` response headers, one per warning the API gave:
/// kubectl prints each as `Warning: text`.
pub fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        let text = warning.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = hyper::header::HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            response.headers_mut().append(hyper::header::WARNING, value);
        }
    }
    response
}

pub fn json(value: &Value) -> Response {
    json_with(StatusCode::OK, "application/json", value)
}

pub fn created(value: &Value) -> Response {
    json_with(StatusCode::CREATED, "application/json", value)
}

/// A Status as JSON, with its code as the HTTP status.
pub fn status(status: &Status) -> Response {
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let value = serde_json::to_value(status).unwrap_or(Value::Null);
    json_with(code, "application/json", &value)
}

pub fn error(reason: Reason, message: impl Into<String>) -> Response {
    status(&Status::new(reason, message))
}

/// A bus failure as the Status Kubernetes clients understand: the bus' own Status when it
/// sent one, otherwise ServiceUnavailable (no API actor answered) or InternalError.
pub fn api_error(e: &ApiError) -> Response {
    status(&status_of(e))
}

pub fn status_of(e: &ApiError) -> Status {
    match e {
        ApiError::Status(s) => s.clone(),
        ApiError::Unavailable { .. } => Status::new(Reason::ServiceUnavailable, e.to_string()),
        ApiError::Decode { .. } => Status::internal(e.to_string()),
    }
}

/// Kubernetes' 401 (kubectl: "You must be logged in to the server (Unauthorized)"). Why the
/// credential was refused is logged, not told to whoever presented it.
pub fn unauthorized() -> Response {
    json_with(
        StatusCode::UNAUTHORIZED,
        "application/json",
        &serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": "Unauthorized",
                            "reason": "Unauthorized", "code": 401}),
    )
}

pub fn not_found(path: &str) -> Response {
    error(
        Reason::NotFound,
        format!("the server could not find the requested resource ({path})"),
    )
}

pub fn method_not_allowed(method: &Method, path: &str) -> Response {
    error(
        Reason::MethodNotAllowed,
        format!("the server does not allow the method {method} on {path}"),
    )
}

/// A success Status (what Kubernetes returns for deletes of collections and evictions).
pub fn success(code: StatusCode, details: Value) -> Response {
    json_with(
        code,
        "application/json",
        &serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Success", "code": code.as_u16(), "details": details}),
    )
}

/// A 200 response whose body is whatever arrives on `rx`, sent as it arrives (chunked);
/// it ends when every sender is gone. Dropping the response (the client left) closes `rx`,
/// which is how producers learn to stop.
pub fn streaming(rx: tokio::sync::mpsc::Receiver<Bytes>, content_type: &'static str) -> Response {
    use hyper::body::Frame;
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::io::Error>(Frame::data(b)), rx))
    });
    let mut resp = hyper::Response::new(BodyExt::boxed(http_body_util::StreamBody::new(frames)));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}
