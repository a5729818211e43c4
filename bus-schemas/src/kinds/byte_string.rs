//! Bytes as Kubernetes' `[]byte` fields carry them in JSON (Secret `data`, ConfigMap
//! `binaryData`): base64 text, on the bus too. Readers that turn any message into JSON (the
//! CLI, the gateway, clients in other languages) then see what kubectl shows, where msgpack
//! binary would have no JSON form. Binary is still accepted on input.

use std::fmt;

use base64::Engine;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteString(pub Vec<u8>);

impl ByteString {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&str> for ByteString {
    fn from(s: &str) -> Self {
        ByteString(s.as_bytes().to_vec())
    }
}

impl From<Vec<u8>> for ByteString {
    fn from(v: Vec<u8>) -> Self {
        ByteString(v)
    }
}

/// Never the value itself: Secret values must not reach logs through a `{:?}`.
impl fmt::Debug for ByteString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

impl Serialize for ByteString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

struct ByteStringVisitor;

impl<'de> Visitor<'de> for ByteStringVisitor {
    type Value = ByteString;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a base64-encoded string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteString, E> {
        base64::engine::general_purpose::STANDARD
            .decode(v)
            .map(ByteString)
            .map_err(|e| E::custom(format!("illegal base64 data: {e}")))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<ByteString, E> {
        Ok(ByteString(v.to_vec()))
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<ByteString, E> {
        Ok(ByteString(v))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<ByteString, A::Error> {
        let mut out = Vec::new();
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(ByteString(out))
    }
}

impl<'de> Deserialize<'de> for ByteString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ByteString, D::Error> {
        d.deserialize_any(ByteStringVisitor)
    }
}

/// In OpenAPI bytes are what kubectl shows: base64 text.
#[cfg(feature = "openapi")]
impl schemars::JsonSchema for ByteString {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteString".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "format": "byte",
            "description": "Bytes as base64 text.",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serializes as msgpack binary, as a client in another language may send bytes.
    fn serde_bytes_like(bytes: &'static [u8]) -> impl Serialize {
        struct Bin(&'static [u8]);
        impl Serialize for Bin {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(self.0)
            }
        }
        Bin(bytes)
    }

    #[test]
    fn base64_for_people_and_on_the_bus() {
        let v = ByteString::from("hunter2");
        assert_eq!(serde_json::to_string(&v).unwrap(), "\"aHVudGVyMg==\"");
        let back: ByteString = serde_json::from_str("\"aHVudGVyMg==\"").unwrap();
        assert_eq!(back, v);
        let packed = crate::codec::to_msgpack(&v).unwrap();
        assert!(packed.windows(12).any(|w| w == b"aHVudGVyMg=="));
        let unpacked: ByteString = crate::codec::from_msgpack(&packed).unwrap();
        assert_eq!(unpacked, v);
        // Any msgpack message reads as JSON, bytes included.
        let generic: serde_json::Value = crate::codec::from_msgpack(&packed).unwrap();
        assert_eq!(generic, "aHVudGVyMg==");
        // Binary from other writers is accepted.
        let bin = rmp_serde::to_vec(&serde_bytes_like(b"hunter2")).unwrap();
        assert_eq!(crate::codec::from_msgpack::<ByteString>(&bin).unwrap(), v);
        assert!(serde_json::from_str::<ByteString>("\"not base64!\"").is_err());
        assert_eq!(format!("{v:?}"), "<7 bytes>");
    }
}
