//! Secret: like a ConfigMap, for values that must stay private. The API keeps `data`
//! encrypted in the state log and hands it only to the nodes whose pods use it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::byte_string::ByteString;
use super::common::{immutable, invalid_value};
use super::config_map::{validate_immutable_update, validate_keys, validate_total_size};
use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<bool>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, ByteString>,
    /// Write-only convenience: folded into `data` by the API and never stored.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub string_data: BTreeMap<String, String>,
    /// `Opaque` by default; the `kubernetes.io/…` types require their keys.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
}

// As `body_resource!`, plus the values the API keeps encrypted.
crate::spec_status_resource!(@impl Secret,
    KindInfo {
        kind: "Secret",
        api_version: "v1",
        plural: "secrets",
        short_names: &[],
        namespaced: true,
        has_status: false,
    },
    fn spec_differs(&self, other: &Self) -> bool {
        let mut a = self.clone();
        a.metadata = Default::default();
        let mut b = other.clone();
        b.metadata = Default::default();
        a != b
    }
    fn keep_status_of(&mut self, _other: &Self) {}
    fn take_status_from(&mut self, _reported: &Self) {}
    const SEALED: bool = true;
    fn sealed_values_mut(&mut self) -> Option<&mut crate::resource::SealedValues> {
        Some(&mut self.data)
    }
);

pub const TYPE_OPAQUE: &str = "Opaque";
pub const TYPE_DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
pub const TYPE_TLS: &str = "kubernetes.io/tls";
pub const TLS_CERT_KEY: &str = "tls.crt";
pub const TLS_PRIVATE_KEY_KEY: &str = "tls.key";

impl Secret {
    fn validate_fields(&self) -> Vec<Cause> {
        let mut causes = validate_keys(self.data.keys(), "data");
        causes.extend(validate_keys(self.string_data.keys(), "stringData"));
        // Defaults fold every stringData entry that agrees with data (or is new); what is
        // left disagrees, and which of the two was meant cannot be guessed.
        for key in self.string_data.keys() {
            causes.push(invalid_value(
                &format!("stringData[{key}]"),
                key,
                "disagrees with data[key]: set the value in one of data or stringData",
            ));
        }
        let total: usize = self.data.iter().map(|(k, v)| k.len() + v.len()).sum();
        causes.extend(validate_total_size(total, "data"));
        match self.type_.as_str() {
            TYPE_DOCKER_CONFIG_JSON => {
                causes.extend(self.require_key(DOCKER_CONFIG_JSON_KEY));
                if let Some(config) = self.data.get(DOCKER_CONFIG_JSON_KEY) {
                    if serde_json::from_slice::<serde_json::Value>(&config.0).is_err() {
                        causes.push(Cause::invalid(
                            format!("data[{DOCKER_CONFIG_JSON_KEY}]"),
                            "must be valid JSON",
                        ));
                    }
                }
            }
            TYPE_TLS => {
                causes.extend(self.require_key(TLS_CERT_KEY));
                causes.extend(self.require_key(TLS_PRIVATE_KEY_KEY));
            }
            _ => {}
        }
        causes
    }

    fn require_key(&self, key: &str) -> Option<Cause> {
        (!self.data.contains_key(key)).then(|| Cause::required(format!("data[{key}]")))
    }

    fn validate_update_fields(&self, old: &Self) -> Vec<Cause> {
        let mut causes =
            validate_immutable_update(old.immutable, self.immutable, self.data != old.data);
        if self.type_ != old.type_ {
            causes.push(immutable("type", &self.type_));
        }
        causes
    }

    /// Folds `stringData` into `data` (where it agrees or adds a key) and names the type.
    fn default_fields(&mut self) {
        if self.type_.is_empty() {
            self.type_ = TYPE_OPAQUE.into();
        }
        let data = &mut self.data;
        self.string_data.retain(|key, value| match data.get(key) {
            Some(existing) if existing.0 != value.as_bytes() => true,
            _ => {
                data.insert(key.clone(), ByteString::from(value.as_str()));
                false
            }
        });
    }

    fn kind_field_value(&self, field: &str) -> Option<String> {
        (field == "type").then(|| self.type_.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Resource;

    fn secret(data: &[(&str, &str)], string_data: &[(&str, &str)]) -> Secret {
        let mut s = Secret::default();
        s.metadata.name = "db".into();
        s.data = data
            .iter()
            .map(|(k, v)| (k.to_string(), ByteString::from(*v)))
            .collect();
        s.string_data = string_data
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        s
    }

    #[test]
    fn string_data_folds_into_data_unless_it_disagrees() {
        let mut s = secret(&[("user", "admin")], &[("user", "admin"), ("pass", "pw")]);
        s.apply_defaults();
        assert!(s.string_data.is_empty());
        assert_eq!(s.data["pass"], ByteString::from("pw"));
        assert_eq!(s.type_, TYPE_OPAQUE);
        assert!(s.validate_kind().is_empty());

        let mut clash = secret(&[("user", "admin")], &[("user", "root")]);
        clash.apply_defaults();
        let causes = clash.validate_kind();
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "stringData[user]");
    }

    #[test]
    fn typed_secrets_need_their_keys() {
        let mut tls = secret(&[("tls.crt", "c")], &[]);
        tls.type_ = TYPE_TLS.into();
        let causes = tls.validate_kind();
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "data[tls.key]");
        let mut docker = secret(&[(".dockerconfigjson", "{not json")], &[]);
        docker.type_ = TYPE_DOCKER_CONFIG_JSON.into();
        assert_eq!(docker.validate_kind()[0].field, "data[.dockerconfigjson]");
        docker.data.insert(
            ".dockerconfigjson".into(),
            ByteString::from(r#"{"auths":{}}"#),
        );
        assert!(docker.validate_kind().is_empty());
    }

    #[test]
    fn type_and_immutable_data_are_fixed() {
        let mut old = secret(&[("a", "1")], &[]);
        old.apply_defaults();
        let mut retyped = old.clone();
        retyped.type_ = TYPE_TLS.into();
        assert_eq!(retyped.validate_update(&old)[0].field, "type");
        old.immutable = Some(true);
        let mut changed = old.clone();
        changed.data.insert("a".into(), ByteString::from("2"));
        assert_eq!(changed.validate_update(&old)[0].field, "data");
    }
}
