//! What the API knows about one incoming request.

use async_nats::HeaderMap;
use bus_schemas::subjects::HEADER_TRACEPARENT;
use shoal_bus::client::HEADER_REQUEST_ID;
use shoal_bus::WriteMeta;

pub struct Request<'a> {
    pub subject: &'a str,
    pub payload: &'a [u8],
    pub request_id: Option<String>,
    pub traceparent: Option<String>,
    /// Set for reports arriving on `shoal.v1.node.<node>.…`: the node that sent it.
    pub from_node: Option<String>,
}

impl<'a> Request<'a> {
    pub fn new(subject: &'a str, headers: Option<&HeaderMap>, payload: &'a [u8]) -> Self {
        let header = |name: &str| headers.and_then(|h| h.get(name)).map(|v| v.to_string());
        Request {
            subject,
            payload,
            request_id: header(HEADER_REQUEST_ID),
            traceparent: header(HEADER_TRACEPARENT),
            from_node: None,
        }
    }

    pub fn write_meta(&self) -> WriteMeta<'_> {
        WriteMeta {
            request_id: self.request_id.as_deref(),
            traceparent: self.traceparent.as_deref(),
        }
    }
}
