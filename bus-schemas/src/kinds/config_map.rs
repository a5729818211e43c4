//! ConfigMap: configuration data pods read as environment variables or files. Also the key
//! and size rules ConfigMap and Secret share.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::byte_string::ByteString;
use super::common::invalid_value;
use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConfigMap {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Once true, data can no longer change (and the flag cannot be cleared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<bool>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, String>,
    /// Values that are not UTF-8 (base64 in JSON and YAML).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub binary_data: BTreeMap<String, ByteString>,
}

crate::body_resource!(
    ConfigMap,
    KindInfo {
        kind: "ConfigMap",
        api_version: "v1",
        plural: "configmaps",
        short_names: &["cm"],
        namespaced: true,
        has_status: false,
    }
);

/// Kubernetes' limit on the data of one ConfigMap or Secret.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;
const MAX_KEY_LENGTH: usize = 253;

/// A key of `data`: what becomes a file name in a volume, so `[-._a-zA-Z0-9]+`, at most 253
/// characters, and never `.`, `..` or starting with `..`.
pub fn config_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("a valid config key must be non-empty".into());
    }
    if key.len() > MAX_KEY_LENGTH {
        return Err(format!("must be no more than {MAX_KEY_LENGTH} characters"));
    }
    let ok = key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !ok {
        return Err(
            "a valid config key must consist of alphanumeric characters, '-', '_' or \
                    '.' (e.g. 'key.name', or 'KEY_NAME', or 'key-name', regex used for \
                    validation is '[-._a-zA-Z0-9]+')"
                .into(),
        );
    }
    if key == "." || key == ".." || key.starts_with("..") {
        return Err("must not be '.' or '..' and must not start with '..'".into());
    }
    Ok(())
}

/// Checks every key of `keys` at `path[key]`.
pub(crate) fn validate_keys<'a>(keys: impl Iterator<Item = &'a String>, path: &str) -> Vec<Cause> {
    keys.filter_map(|key| {
        config_key(key)
            .err()
            .map(|e| invalid_value(&format!("{path}[{key}]"), key, &e))
    })
    .collect()
}

/// The 1 MiB rule, over keys and values together as Kubernetes counts them.
pub(crate) fn validate_total_size(total: usize, path: &str) -> Option<Cause> {
    (total > MAX_DATA_BYTES).then(|| {
        Cause::new(
            "FieldValueTooLong",
            path,
            format!("Too long: must have at most {MAX_DATA_BYTES} bytes (has {total})"),
        )
    })
}

/// An immutable object's data may not change, and the flag may not be cleared.
pub(crate) fn validate_immutable_update(
    was_immutable: Option<bool>,
    now_immutable: Option<bool>,
    data_changed: bool,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    if was_immutable != Some(true) {
        return causes;
    }
    if now_immutable != Some(true) {
        causes.push(Cause::new(
            "FieldValueForbidden",
            "immutable",
            "field is immutable when `immutable` is set",
        ));
    }
    if data_changed {
        causes.push(Cause::new(
            "FieldValueForbidden",
            "data",
            "field is immutable when `immutable` is set",
        ));
    }
    causes
}

impl ConfigMap {
    fn validate_fields(&self) -> Vec<Cause> {
        let mut causes = validate_keys(self.data.keys(), "data");
        causes.extend(validate_keys(self.binary_data.keys(), "binaryData"));
        for key in self.binary_data.keys() {
            if self.data.contains_key(key) {
                causes.push(invalid_value(
                    &format!("binaryData[{key}]"),
                    key,
                    "duplicate of key present in data",
                ));
            }
        }
        let total: usize = self
            .data
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>()
            + self
                .binary_data
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>();
        causes.extend(validate_total_size(total, "data"));
        causes
    }

    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let changed = self.data != old.data || self.binary_data != old.binary_data;
        validate_immutable_update(old.immutable, self.immutable, changed)
    }

    fn default_fields(&mut self) {}

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Resource;

    fn cm(data: &[(&str, &str)]) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = "app-config".into();
        cm.data = data
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        cm
    }

    #[test]
    fn keys_follow_kubernetes_rule() {
        assert!(config_key("app.properties").is_ok());
        assert!(config_key("KEY_NAME-1").is_ok());
        for bad in ["", ".", "..", "..x", "a/b", "a b", &"k".repeat(254)] {
            assert!(config_key(bad).is_err(), "{bad:?}");
        }
        let causes = cm(&[("ok", "1"), ("bad/key", "2")]).validate_kind();
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "data[bad/key]");
    }

    #[test]
    fn more_than_a_mebibyte_is_refused_at_data() {
        let big = "x".repeat(MAX_DATA_BYTES);
        let causes = cm(&[("big", &big)]).validate_kind();
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "data");
        assert!(causes[0].message.contains("1048576"));
        assert!(cm(&[("big", &big[3..])]).validate_kind().is_empty());
    }

    #[test]
    fn immutable_data_cannot_change() {
        let mut old = cm(&[("a", "1")]);
        old.immutable = Some(true);
        let mut new = cm(&[("a", "2")]);
        new.immutable = Some(true);
        let causes = new.validate_update(&old);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "data");
        let mut relabelled = old.clone();
        relabelled.metadata.labels.insert("x".into(), "y".into());
        assert!(relabelled.validate_update(&old).is_empty());
        let mut cleared = old.clone();
        cleared.immutable = None;
        assert_eq!(cleared.validate_update(&old)[0].field, "immutable");
        // A mutable ConfigMap may change and become immutable.
        let mut sealed = cm(&[("a", "3")]);
        sealed.immutable = Some(true);
        assert!(sealed.validate_update(&cm(&[("a", "1")])).is_empty());
    }
}
