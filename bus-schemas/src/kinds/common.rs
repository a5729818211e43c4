//! Small pieces shared by the kinds: references, serde predicates and validation helpers that
//! phrase causes the way `kubectl` users know them.

use std::collections::BTreeMap;
use std::fmt::Debug;

use serde::{Deserialize, Serialize};

use crate::status::Cause;
use crate::validation::{label_key, label_value};

/// A reference to any object (Event's involvedObject, an endpoint's targetRef).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// Which part of the object, e.g. `spec.containers{web}`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field_path: String,
}

/// A name in the same namespace (imagePullSecrets).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectReference {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

// serde `skip_serializing_if` predicates: zero values are left out so encodings stay compact.

pub(crate) fn is_false(v: &bool) -> bool {
    !*v
}

pub(crate) fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

pub(crate) fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

pub(crate) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

// Cause constructors for the reasons `Cause` has no shorthand for. Messages follow Kubernetes'
// field.Error rendering, so `kubectl`-trained eyes parse them at once.

pub(crate) fn invalid_value(path: &str, value: impl Debug, detail: &str) -> Cause {
    Cause::invalid(path, format!("Invalid value: {value:?}: {detail}"))
}

pub(crate) fn forbidden(path: &str, detail: &str) -> Cause {
    Cause::new("FieldValueForbidden", path, format!("Forbidden: {detail}"))
}

pub(crate) fn not_found(path: &str, value: &str) -> Cause {
    Cause::new("FieldValueNotFound", path, format!("Not found: {value:?}"))
}

/// The value is rendered as JSON, which reads naturally for strings, numbers and selectors.
pub(crate) fn immutable(path: &str, value: &impl Serialize) -> Cause {
    let rendered = serde_json::to_string(value).unwrap_or_default();
    Cause::invalid(
        path,
        format!("Invalid value: {rendered}: field is immutable"),
    )
}

pub(crate) fn required_msg(path: &str, detail: &str) -> Cause {
    Cause::new(
        "FieldValueRequired",
        path,
        format!("Required value: {detail}"),
    )
}

pub(crate) fn not_supported(path: &str, value: &str, supported: &[&str]) -> Option<Cause> {
    (!supported.contains(&value)).then(|| Cause::not_supported(path, value, supported))
}

pub(crate) fn non_negative<T: PartialOrd + Default + Debug>(v: T, path: &str) -> Option<Cause> {
    (v < T::default()).then(|| invalid_value(path, v, "must be greater than or equal to 0"))
}

pub(crate) fn at_least<T: PartialOrd + Debug>(v: T, min: T, path: &str) -> Option<Cause> {
    (v < min).then(|| {
        let detail = format!("must be greater than or equal to {min:?}");
        invalid_value(path, v, &detail)
    })
}

pub(crate) fn in_range<T: PartialOrd + Debug>(v: T, min: T, max: T, path: &str) -> Option<Cause> {
    (v < min || v > max).then(|| {
        let detail = format!("must be between {min:?} and {max:?}, inclusive");
        invalid_value(path, v, &detail)
    })
}

pub(crate) fn validate_port_number(port: i32, path: &str) -> Option<Cause> {
    in_range(port, 1, 65535, path)
}

/// An IANA service name (RFC 6335): what named ports must be, so `targetPort: http` resolves.
pub fn iana_svc_name(value: &str) -> Result<(), String> {
    const MAX: usize = 15;
    if value.len() > MAX {
        return Err(format!("must be no more than {MAX} characters"));
    }
    if value.is_empty()
        || !value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(
            "must contain only lowercase alphanumeric characters or '-' (e.g. 'http')".into(),
        );
    }
    if value.starts_with('-') || value.ends_with('-') {
        return Err("must not begin or end with a hyphen".into());
    }
    if value.contains("--") {
        return Err("must not contain consecutive hyphens".into());
    }
    if !value.bytes().any(|b| b.is_ascii_lowercase()) {
        return Err("must contain at least one letter (a-z)".into());
    }
    Ok(())
}

/// An environment variable name: `[-._a-zA-Z][-._a-zA-Z0-9]*`, as Kubernetes accepts.
pub fn env_var_name(value: &str) -> Result<(), String> {
    let bytes = value.as_bytes();
    let first_ok = bytes
        .first()
        .is_some_and(|b| b.is_ascii_alphabetic() || matches!(b, b'-' | b'.' | b'_'));
    let rest_ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !(first_ok && rest_ok) {
        return Err(
            "a valid environment variable name must consist of alphabetic characters, \
                    digits, '_', '-', or '.', and must not start with a digit"
                .into(),
        );
    }
    if value == "." || value == ".." || value.starts_with("..") {
        return Err("must not be '.' or '..' and must not start with '..'".into());
    }
    Ok(())
}

/// Validates a label map (node selectors, service selectors, template labels) with paths
/// `path[key]`, the form metadata validation uses.
pub(crate) fn validate_label_map(map: &BTreeMap<String, String>, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (key, value) in map {
        let at = format!("{path}[{key}]");
        if let Err(e) = label_key(key) {
            causes.push(invalid_value(&at, key, &e));
        }
        if let Err(e) = label_value(value) {
            causes.push(invalid_value(&at, value, &e));
        }
    }
    causes
}

/// Renders labels as Kubernetes prints them in messages: `map[app:web tier:front]`.
pub(crate) fn render_labels(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", pairs.join(" "))
}

/// Adds `value` to `names`, or returns a Duplicate cause when it is already there.
pub(crate) fn check_unique<'a>(
    names: &mut std::collections::BTreeSet<&'a str>,
    value: &'a str,
    path: &str,
) -> Option<Cause> {
    (!names.insert(value)).then(|| Cause::duplicate(path, value))
}

/// One named port of a Service or of an Endpoints subset at `at`: the name is required when
/// the list has several ports, must be a unique DNS label; number and protocol must be valid.
pub(crate) fn validate_named_port<'a>(
    at: &str,
    name: &'a str,
    port: i32,
    protocol: &str,
    several: bool,
    names: &mut std::collections::BTreeSet<&'a str>,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name_at = format!("{at}.name");
    if name.is_empty() {
        if several {
            causes.push(required_msg(
                &name_at,
                "must be specified when there is more than one port",
            ));
        }
    } else if let Err(e) = crate::validation::dns1123_label(name) {
        causes.push(invalid_value(&name_at, name, &e));
    } else {
        causes.extend(check_unique(names, name, &name_at));
    }
    causes.extend(validate_port_number(port, &format!("{at}.port")));
    if protocol.is_empty() {
        causes.push(Cause::required(format!("{at}.protocol")));
    } else {
        causes.extend(not_supported(
            &format!("{at}.protocol"),
            protocol,
            super::container::PROTOCOLS,
        ));
    }
    causes
}

/// Parses `a.b.c.d/n` or an IPv6 CIDR; the prefix length must fit the address family.
pub(crate) fn parse_cidr(value: &str) -> Result<(std::net::IpAddr, u8), String> {
    let (addr, prefix) = value
        .split_once('/')
        .ok_or_else(|| "must be a valid CIDR (e.g. 10.0.0.0/24)".to_string())?;
    let addr: std::net::IpAddr = addr
        .parse()
        .map_err(|_| format!("{addr:?} is not an IP address"))?;
    let prefix: u8 = prefix
        .parse()
        .map_err(|_| format!("{prefix:?} is not a prefix length"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Err(format!("prefix length must be at most {max}"));
    }
    Ok((addr, prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_names() {
        assert!(iana_svc_name("http").is_ok());
        assert!(iana_svc_name("http-2").is_ok());
        assert!(iana_svc_name("8080").is_err());
        assert!(iana_svc_name("web--a").is_err());
        assert!(iana_svc_name("-web").is_err());
        assert!(iana_svc_name("Http").is_err());
        assert!(iana_svc_name("a-very-long-port-name").is_err());
    }

    #[test]
    fn env_names() {
        assert!(env_var_name("HOME").is_ok());
        assert!(env_var_name("my.var-1_x").is_ok());
        assert!(env_var_name("1ABC").is_err());
        assert!(env_var_name("A B").is_err());
        assert!(env_var_name("..x").is_err());
        assert!(env_var_name("").is_err());
    }

    #[test]
    fn cidrs() {
        assert!(parse_cidr("10.244.1.0/24").is_ok());
        assert!(parse_cidr("fd00::/64").is_ok());
        assert!(parse_cidr("10.244.1.0/33").is_err());
        assert!(parse_cidr("10.244.1.0").is_err());
    }
}
