//! Where a container's configuration comes from besides its own spec: ConfigMap and Secret
//! keys, the downward API (the pod's own fields and resources), as environment variables
//! (`valueFrom`, `envFrom`) and as volumes (`configMap`, `secret`, `downwardAPI`,
//! `projected`).

use serde::{Deserialize, Serialize};

use super::common::{env_var_name, forbidden, invalid_value};
use super::config_map::config_key;
use crate::quantity::Quantity;
use crate::status::Cause;
use crate::validation::{dns1123_subdomain, label_key};

/// `valueFrom.configMapKeyRef`: one key of a ConfigMap in the pod's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKeySelector {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub key: String,
    /// A missing object or key is then no error: the variable is left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// `valueFrom.secretKeyRef`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SecretKeySelector {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// `resourceFieldRef`: a container's request or limit, divided by `divisor` and rounded up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourceFieldSelector {
    /// Required in volumes; in env it defaults to the container itself.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_name: String,
    #[serde(default)]
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divisor: Option<Quantity>,
}

/// One `envFrom` entry: every key of a ConfigMap or Secret as a variable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EnvFromSource {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<ObjectEnvSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<ObjectEnvSource>,
}

/// `envFrom[].configMapRef` / `secretRef`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ObjectEnvSource {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// A key of a ConfigMap or Secret projected to a file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct KeyToPath {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapVolumeSource {
    #[serde(default)]
    pub name: String,
    /// Only these keys, at these paths; every key at its own name when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SecretVolumeSource {
    #[serde(default)]
    pub secret_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// One file of a downwardAPI volume.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DownwardApiVolumeFile {
    #[serde(default)]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<super::container::ObjectFieldSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_field_ref: Option<ResourceFieldSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DownwardApiVolumeSource {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<DownwardApiVolumeFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<i32>,
}

/// Several sources in one directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProjectedVolumeSource {
    #[serde(default)]
    pub sources: Vec<VolumeProjection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct VolumeProjection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ObjectProjection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectProjection>,
    #[serde(
        default,
        rename = "downwardAPI",
        skip_serializing_if = "Option::is_none"
    )]
    pub downward_api: Option<DownwardApiProjection>,
}

/// `projected.sources[].configMap` / `secret`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ObjectProjection {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DownwardApiProjection {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<DownwardApiVolumeFile>,
}

/// Kubernetes' default file mode for these volumes (0644).
pub const DEFAULT_MODE: i32 = 0o644;
/// The resources `resourceFieldRef` reads.
pub const RESOURCE_FIELDS: &[&str] = &[
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
];
/// The downward-API fields a volume file may hold (labels and annotations whole, too).
const VOLUME_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.labels",
    "metadata.annotations",
];

fn validate_object_name(name: &str, path: &str) -> Vec<Cause> {
    if name.is_empty() {
        return vec![Cause::required(path)];
    }
    dns1123_subdomain(name)
        .err()
        .map(|e| invalid_value(path, name, &e))
        .into_iter()
        .collect()
}

fn validate_key(key: &str, path: &str) -> Vec<Cause> {
    if key.is_empty() {
        return vec![Cause::required(path)];
    }
    config_key(key)
        .err()
        .map(|e| invalid_value(path, key, &e))
        .into_iter()
        .collect()
}

impl ConfigMapKeySelector {
    pub(crate) fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = validate_object_name(&self.name, &format!("{path}.name"));
        causes.extend(validate_key(&self.key, &format!("{path}.key")));
        causes
    }
}

impl SecretKeySelector {
    pub(crate) fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = validate_object_name(&self.name, &format!("{path}.name"));
        causes.extend(validate_key(&self.key, &format!("{path}.key")));
        causes
    }
}

impl ResourceFieldSelector {
    /// `needs_container`: volume files must name the container (env defaults to its own).
    pub(crate) fn validate(&self, path: &str, needs_container: bool) -> Vec<Cause> {
        let mut causes = Vec::new();
        if needs_container && self.container_name.is_empty() {
            causes.push(Cause::required(format!("{path}.containerName")));
        }
        let at = format!("{path}.resource");
        if self.resource.is_empty() {
            causes.push(Cause::required(at));
        } else if !RESOURCE_FIELDS.contains(&self.resource.as_str()) {
            causes.push(Cause::not_supported(at, &self.resource, RESOURCE_FIELDS));
        }
        if let Some(divisor) = &self.divisor {
            if divisor.milli_value() <= 0 {
                let detail = "must be greater than 0";
                causes.push(invalid_value(
                    &format!("{path}.divisor"),
                    divisor.to_string(),
                    detail,
                ));
            }
        }
        causes
    }
}

impl EnvFromSource {
    pub(crate) fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        if !self.prefix.is_empty() {
            if let Err(e) = env_var_name(&self.prefix) {
                causes.push(invalid_value(&format!("{path}.prefix"), &self.prefix, &e));
            }
        }
        match (&self.config_map_ref, &self.secret_ref) {
            (Some(cm), None) => causes.extend(validate_object_name(
                &cm.name,
                &format!("{path}.configMapRef.name"),
            )),
            (None, Some(secret)) => causes.extend(validate_object_name(
                &secret.name,
                &format!("{path}.secretRef.name"),
            )),
            (Some(_), Some(_)) => causes.push(forbidden(
                path,
                "may not have more than one field specified at a time",
            )),
            (None, None) => causes.push(Cause::invalid(
                path,
                "must specify one of: `configMapRef` or `secretRef`",
            )),
        }
        causes
    }
}

/// A file mode: 0 to 0777.
fn validate_mode(mode: Option<i32>, path: &str) -> Option<Cause> {
    mode.filter(|m| !(0..=0o777).contains(m)).map(|m| {
        invalid_value(
            path,
            m,
            "must be a number between 0 and 0777 (octal), both inclusive",
        )
    })
}

/// A path inside a volume: relative, without `..` elements, not starting with `..`.
fn validate_volume_path(p: &str, path: &str) -> Vec<Cause> {
    if p.is_empty() {
        return vec![Cause::required(path)];
    }
    let escapes = p.starts_with('/') || p.split('/').any(|part| part == "..");
    if escapes || p.starts_with("..") {
        let detail = "must be a relative path without '..' that does not start with '..'";
        return vec![invalid_value(path, p, detail)];
    }
    Vec::new()
}

fn validate_items(items: &[KeyToPath], path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        causes.extend(validate_key(&item.key, &format!("{at}.key")));
        causes.extend(validate_volume_path(&item.path, &format!("{at}.path")));
        causes.extend(validate_mode(item.mode, &format!("{at}.mode")));
    }
    causes
}

fn validate_downward_files(items: &[DownwardApiVolumeFile], path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        causes.extend(validate_volume_path(&item.path, &format!("{at}.path")));
        causes.extend(validate_mode(item.mode, &format!("{at}.mode")));
        match (&item.field_ref, &item.resource_field_ref) {
            (Some(field), None) => {
                let fat = format!("{at}.fieldRef.fieldPath");
                let p = field.field_path.as_str();
                let subscripted =
                    ["metadata.labels", "metadata.annotations"]
                        .iter()
                        .find_map(|prefix| {
                            p.strip_prefix(prefix)?
                                .strip_prefix("['")?
                                .strip_suffix("']")
                        });
                match subscripted {
                    Some(key) => {
                        if let Err(e) = label_key(key) {
                            causes.push(invalid_value(&fat, p, &e));
                        }
                    }
                    None if VOLUME_FIELD_PATHS.contains(&p) => {}
                    None => causes.push(Cause::not_supported(fat, p, VOLUME_FIELD_PATHS)),
                }
            }
            (None, Some(resource)) => {
                causes.extend(resource.validate(&format!("{at}.resourceFieldRef"), true))
            }
            (Some(_), Some(_)) => causes.push(forbidden(
                &at,
                "fieldRef and resourceFieldRef can not be specified simultaneously",
            )),
            (None, None) => causes.push(Cause::required(format!("{at}.fieldRef"))),
        }
    }
    causes
}

impl ConfigMapVolumeSource {
    pub(crate) fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = validate_object_name(&self.name, &format!("{path}.name"));
        causes.extend(validate_items(&self.items, &format!("{path}.items")));
        causes.extend(validate_mode(
            self.default_mode,
            &format!("{path}.defaultMode"),
        ));
        causes
    }
}

impl SecretVolumeSource {
    pub(crate) fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = validate_object_name(&self.secret_name, &format!("{path}.secretName"));
        causes.extend(validate_items(&self.items, &format!("{path}.items")));
        causes.extend(validate_mode(
            self.default_mode,
            &format!("{path}.defaultMode"),
        ));
        causes
    }
}

impl DownwardApiVolumeSource {
    pub(crate) fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = validate_downward_files(&self.items, &format!("{path}.items"));
        causes.extend(validate_mode(
            self.default_mode,
            &format!("{path}.defaultMode"),
        ));
        causes
    }
}

impl ProjectedVolumeSource {
    pub(crate) fn validate(&self, path: &str) -> Vec<Cause> {
        let mut causes = validate_mode(self.default_mode, &format!("{path}.defaultMode"))
            .into_iter()
            .collect::<Vec<_>>();
        for (i, source) in self.sources.iter().enumerate() {
            let at = format!("{path}.sources[{i}]");
            let mut set = 0;
            if let Some(cm) = &source.config_map {
                set += 1;
                causes.extend(validate_object_name(
                    &cm.name,
                    &format!("{at}.configMap.name"),
                ));
                causes.extend(validate_items(&cm.items, &format!("{at}.configMap.items")));
            }
            if let Some(secret) = &source.secret {
                set += 1;
                causes.extend(validate_object_name(
                    &secret.name,
                    &format!("{at}.secret.name"),
                ));
                causes.extend(validate_items(&secret.items, &format!("{at}.secret.items")));
            }
            if let Some(downward) = &source.downward_api {
                set += 1;
                causes.extend(validate_downward_files(
                    &downward.items,
                    &format!("{at}.downwardAPI.items"),
                ));
            }
            if set != 1 {
                causes.push(forbidden(&at, "must specify exactly one projection source"));
            }
        }
        causes
    }
}

/// The ConfigMaps and Secrets (in the pod's namespace) a pod spec reads, through its
/// volumes, its containers' env and envFrom, and its image pull secrets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    pub config_maps: std::collections::BTreeSet<String>,
    pub secrets: std::collections::BTreeSet<String>,
}

impl References {
    pub fn of(spec: &super::pod_spec::PodSpec) -> References {
        let mut refs = References::default();
        for volume in &spec.volumes {
            if let Some(cm) = &volume.config_map {
                refs.config_maps.insert(cm.name.clone());
            }
            if let Some(secret) = &volume.secret {
                refs.secrets.insert(secret.secret_name.clone());
            }
            for source in volume.projected.iter().flat_map(|p| &p.sources) {
                if let Some(cm) = &source.config_map {
                    refs.config_maps.insert(cm.name.clone());
                }
                if let Some(secret) = &source.secret {
                    refs.secrets.insert(secret.name.clone());
                }
            }
        }
        for container in spec.init_containers.iter().chain(&spec.containers) {
            for from in container.env.iter().filter_map(|e| e.value_from.as_ref()) {
                if let Some(key) = &from.config_map_key_ref {
                    refs.config_maps.insert(key.name.clone());
                }
                if let Some(key) = &from.secret_key_ref {
                    refs.secrets.insert(key.name.clone());
                }
            }
            for from in &container.env_from {
                if let Some(cm) = &from.config_map_ref {
                    refs.config_maps.insert(cm.name.clone());
                }
                if let Some(secret) = &from.secret_ref {
                    refs.secrets.insert(secret.name.clone());
                }
            }
        }
        for pull in &spec.image_pull_secrets {
            refs.secrets.insert(pull.name.clone());
        }
        refs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::container::ObjectFieldSelector;

    #[test]
    fn key_selectors_need_a_valid_key() {
        let sel = ConfigMapKeySelector {
            name: "app-config".into(),
            key: "bad key".into(),
            optional: None,
        };
        assert_eq!(
            sel.validate("env[0].valueFrom.configMapKeyRef")[0].field,
            "env[0].valueFrom.configMapKeyRef.key"
        );
    }

    #[test]
    fn resource_fields_and_divisors() {
        let ok = ResourceFieldSelector {
            container_name: String::new(),
            resource: "limits.memory".into(),
            divisor: Some(Quantity::parse("1Mi").unwrap()),
        };
        assert!(ok.validate("r", false).is_empty());
        assert_eq!(ok.validate("r", true)[0].field, "r.containerName");
        let bad = ResourceFieldSelector {
            resource: "limits.gpu".into(),
            divisor: Some(Quantity::zero()),
            ..ok
        };
        let fields: Vec<_> = bad
            .validate("r", false)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["r.resource", "r.divisor"]);
    }

    #[test]
    fn volume_items_stay_inside_the_volume() {
        let source = ConfigMapVolumeSource {
            name: "app-config".into(),
            items: vec![KeyToPath {
                key: "a".into(),
                path: "../etc/passwd".into(),
                mode: Some(0o1777),
            }],
            default_mode: None,
            optional: None,
        };
        let fields: Vec<_> = source.validate("v").into_iter().map(|c| c.field).collect();
        assert_eq!(fields, ["v.items[0].path", "v.items[0].mode"]);
    }

    #[test]
    fn downward_files_take_one_source() {
        let files = vec![
            DownwardApiVolumeFile {
                path: "labels".into(),
                field_ref: Some(ObjectFieldSelector {
                    api_version: "v1".into(),
                    field_path: "metadata.labels".into(),
                }),
                ..Default::default()
            },
            DownwardApiVolumeFile {
                path: "ip".into(),
                field_ref: Some(ObjectFieldSelector {
                    api_version: "v1".into(),
                    field_path: "status.podIP".into(),
                }),
                ..Default::default()
            },
        ];
        let causes = validate_downward_files(&files, "d");
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "d[1].fieldRef.fieldPath");
    }
}
