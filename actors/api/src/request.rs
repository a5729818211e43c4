//! What the API knows about one incoming request.

use async_nats::header::IntoHeaderName;
use async_nats::HeaderMap;
use bus_schemas::api::{HEADER_FIELD_MANAGER, HEADER_FORCE};
use shoal_bus::client::HEADER_REQUEST_ID;
use shoal_bus::WriteMeta;
use shoal_telemetry::propagation::TRACEPARENT_HEADER;

pub struct Request<'a> {
    pub subject: &'a str,
    pub payload: &'a [u8],
    pub request_id: Option<String>,
    pub traceparent: Option<String>,
    /// The writer's name for `metadata.managedFields` (Kubernetes' `fieldManager`).
    pub field_manager: Option<String>,
    /// On apply: take over fields other managers own instead of failing with Conflict.
    pub force: bool,
    /// Set for reports arriving on `shoal.v1.node.<node>.…`: the node that sent it.
    pub from_node: Option<String>,
}

fn header(headers: Option<&HeaderMap>, name: impl IntoHeaderName) -> Option<String> {
    headers.and_then(|h| h.get(name)).map(|v| v.to_string())
}

impl<'a> Request<'a> {
    pub fn new(subject: &'a str, headers: Option<&HeaderMap>, payload: &'a [u8]) -> Self {
        Request {
            subject,
            payload,
            request_id: header(headers, HEADER_REQUEST_ID),
            traceparent: header(headers, TRACEPARENT_HEADER),
            field_manager: header(headers, HEADER_FIELD_MANAGER).filter(|m| !m.is_empty()),
            force: header(headers, HEADER_FORCE).is_some_and(|v| v.eq_ignore_ascii_case("true")),
            from_node: None,
        }
    }

    /// Whether this is a server-side apply (its creates record an `Apply` manager).
    pub fn is_apply(&self) -> bool {
        self.subject.ends_with(".apply")
    }

    pub fn write_meta(&self) -> WriteMeta<'_> {
        WriteMeta {
            request_id: self.request_id.as_deref(),
            traceparent: self.traceparent.as_deref(),
        }
    }
}
