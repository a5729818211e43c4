//! Encodings: msgpack with named fields on the bus, JSON and YAML for people.
//!
//! Readers decode tolerantly (unknown fields are ignored, so fields can be added without
//! breaking old readers). The API decodes strictly: an unknown field or a wrong type is an error
//! naming its field path, because a typo in a manifest must not be silently dropped.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::status::Cause;

/// The largest object the API accepts, encoded: 1.5 MiB, etcd's request limit, so that a
/// ConfigMap or Secret holding Kubernetes' full 1 MiB of data still fits with its metadata
/// and its own validation can name the field that is too long.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("msgpack encode: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
    #[error("msgpack decode: {0}")]
    Decode(#[from] rmp_serde::decode::Error),
}

/// Encodes as msgpack maps keyed by field name, so readers can skip fields they do not know.
pub fn to_msgpack<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CodecError> {
    Ok(rmp_serde::to_vec_named(value)?)
}

/// Tolerant decode for readers of the bus.
pub fn from_msgpack<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    Ok(rmp_serde::from_slice(bytes)?)
}

/// Strictly decodes msgpack: unknown fields and mistyped values become causes with field paths.
pub fn from_msgpack_strict<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Vec<Cause>> {
    if bytes.len() > MAX_OBJECT_BYTES {
        return Err(vec![too_large(bytes.len())]);
    }
    let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
    strict(&mut de)
}

/// Strictly decodes an already-parsed JSON value (YAML documents are converted to it first).
pub fn from_json_value_strict<T: DeserializeOwned>(
    value: serde_json::Value,
) -> Result<T, Vec<Cause>> {
    strict(value)
}

pub fn too_large(len: usize) -> Cause {
    Cause::new(
        "FieldValueTooLong",
        "",
        format!("object is {len} bytes encoded; the limit is {MAX_OBJECT_BYTES} bytes"),
    )
}

fn strict<'de, D, T>(de: D) -> Result<T, Vec<Cause>>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    let mut unknown = Vec::new();
    let mut on_unknown = |path: serde_ignored::Path<'_>| unknown.push(render_path(&path));
    let tracked = serde_ignored::Deserializer::new(de, &mut on_unknown);
    let result: Result<T, _> = serde_path_to_error::deserialize(tracked);
    match result {
        Ok(value) if unknown.is_empty() => Ok(value),
        Ok(_) => Err(unknown.into_iter().map(Cause::unknown_field).collect()),
        Err(err) => {
            let field = err.path().to_string();
            let field = if field == "." { String::new() } else { field };
            let message = err.into_inner().to_string();
            Err(vec![Cause::new("FieldValueTypeInvalid", field, message)])
        }
    }
}

/// Renders a serde_ignored path as `spec.containers[0].foo`, matching serde_path_to_error.
fn render_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", render_path(parent)),
        Path::Map { parent, key } => {
            let head = render_path(parent);
            if head.is_empty() {
                key.to_string()
            } else {
                format!("{head}.{key}")
            }
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => render_path(parent),
    }
}
