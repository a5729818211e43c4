//! Encoding replies: the object (and any `Shoal-Warning`s) on success; a Status with
//! `Shoal-Code` on failure.

use async_nats::HeaderMap;
use bus_schemas::subjects::{HEADER_CODE, HEADER_WARNING};
use bus_schemas::{codec, Status};
use bytes::Bytes;
use serde::Serialize;

pub struct Reply {
    pub headers: HeaderMap,
    pub payload: Bytes,
}

impl Reply {
    pub fn ok<T: Serialize>(value: &T) -> Result<Reply, Status> {
        let payload = codec::to_msgpack(value)
            .map_err(|e| Status::internal(format!("encoding reply: {e}")))?;
        Ok(Reply {
            headers: HeaderMap::new(),
            payload: Bytes::from(payload),
        })
    }

    /// A reply whose msgpack body is already encoded.
    pub fn raw(payload: Vec<u8>) -> Reply {
        Reply {
            headers: HeaderMap::new(),
            payload: Bytes::from(payload),
        }
    }

    pub fn with_header(mut self, name: &'static str, value: &str) -> Reply {
        self.headers.insert(name, value);
        self
    }

    /// One `Shoal-Warning` header per warning.
    pub fn with_warnings(mut self, warnings: &[String]) -> Reply {
        for warning in warnings {
            self.headers.append(HEADER_WARNING, warning.as_str());
        }
        self
    }

    pub fn failure(status: &Status) -> Reply {
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_CODE, status.code.to_string().as_str());
        // A Status always encodes; if it somehow did not, the header alone still tells.
        let payload = codec::to_msgpack(status).unwrap_or_default();
        Reply {
            headers,
            payload: Bytes::from(payload),
        }
    }
}
