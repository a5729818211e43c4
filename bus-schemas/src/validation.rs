//! Validation of names, labels and metadata shared by every kind, with field paths.

use crate::meta::ObjectMeta;
use crate::resource::KindInfo;
use crate::status::Cause;

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const LABEL_VALUE_MAX: usize = 63;
const ANNOTATIONS_TOTAL_MAX: usize = 256 * 1024;

/// A DNS-1123 label: what namespaces, container names and port names must be.
pub fn dns1123_label(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.len() > DNS1123_LABEL_MAX {
        return Err(format!(
            "must be no more than {DNS1123_LABEL_MAX} characters"
        ));
    }
    let ok_chars = value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ok_ends = value.as_bytes()[0].is_ascii_alphanumeric()
        && value.as_bytes()[value.len() - 1].is_ascii_alphanumeric();
    if !(ok_chars && ok_ends) {
        return Err(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters \
                    or '-', and must start and end with an alphanumeric character"
                .into(),
        );
    }
    Ok(())
}

/// A DNS-1123 subdomain: what most object names must be.
pub fn dns1123_subdomain(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        return Err(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
        ));
    }
    for part in value.split('.') {
        if dns1123_label(part).is_err() || part.len() > DNS1123_LABEL_MAX {
            return Err(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                        characters, '-' or '.', and must start and end with an alphanumeric \
                        character"
                    .into(),
            );
        }
    }
    Ok(())
}

fn qualified_name_part(value: &str) -> bool {
    let b = value.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A label or annotation key: an optional DNS subdomain prefix and `/`, then a name.
pub fn label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        dns1123_subdomain(prefix).map_err(|e| format!("prefix part {e}"))?;
    }
    if !qualified_name_part(name) {
        return Err(
            "name part must consist of alphanumeric characters, '-', '_' or '.', must \
                    start and end with an alphanumeric character, and be at most 63 characters"
                .into(),
        );
    }
    Ok(())
}

/// A label value: empty, or up to 63 characters of the qualified-name alphabet.
pub fn label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || (value.len() <= LABEL_VALUE_MAX && qualified_name_part(value)) {
        Ok(())
    } else {
        Err(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', \
             '_' or '.', and must start and end with an alphanumeric character (at most 63)"
                .into(),
        )
    }
}

/// Validates metadata for a kind; `causes` gains one entry per problem.
pub fn validate_meta(info: &KindInfo, meta: &ObjectMeta) -> Vec<Cause> {
    let mut causes = Vec::new();
    if meta.name.is_empty() {
        causes.push(Cause::required("metadata.name"));
    } else if let Err(e) = dns1123_subdomain(&meta.name) {
        causes.push(Cause::invalid(
            "metadata.name",
            format!("Invalid value: {:?}: {e}", meta.name),
        ));
    }
    if info.namespaced {
        if let Err(e) = dns1123_label(&meta.namespace) {
            causes.push(Cause::invalid(
                "metadata.namespace",
                format!("Invalid value: {:?}: {e}", meta.namespace),
            ));
        }
    } else if !meta.namespace.is_empty() {
        causes.push(Cause::invalid(
            "metadata.namespace",
            format!("{} is cluster-scoped: namespace must be empty", info.kind),
        ));
    }
    for (key, value) in &meta.labels {
        if let Err(e) = label_key(key) {
            causes.push(Cause::invalid(format!("metadata.labels[{key}]"), e));
        }
        if let Err(e) = label_value(value) {
            causes.push(Cause::invalid(
                format!("metadata.labels[{key}]"),
                format!("Invalid value: {value:?}: {e}"),
            ));
        }
    }
    let mut total = 0;
    for (key, value) in &meta.annotations {
        total += key.len() + value.len();
        if let Err(e) = label_key(key) {
            causes.push(Cause::invalid(format!("metadata.annotations[{key}]"), e));
        }
    }
    if total > ANNOTATIONS_TOTAL_MAX {
        causes.push(Cause::new(
            "FieldValueTooLong",
            "metadata.annotations",
            format!("annotations total {total} bytes; the limit is {ANNOTATIONS_TOTAL_MAX}"),
        ));
    }
    for (i, owner) in meta.owner_references.iter().enumerate() {
        let at = format!("metadata.ownerReferences[{i}]");
        for (field, value) in [
            ("apiVersion", &owner.api_version),
            ("kind", &owner.kind),
            ("name", &owner.name),
            ("uid", &owner.uid),
        ] {
            if value.is_empty() {
                causes.push(Cause::required(format!("{at}.{field}")));
            }
        }
    }
    if meta
        .owner_references
        .iter()
        .filter(|r| r.controller == Some(true))
        .count()
        > 1
    {
        causes.push(Cause::invalid(
            "metadata.ownerReferences",
            "Only one reference can have Controller set to true",
        ));
    }
    for (i, finalizer) in meta.finalizers.iter().enumerate() {
        if let Err(e) = label_key(finalizer) {
            causes.push(Cause::invalid(format!("metadata.finalizers[{i}]"), e));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(dns1123_subdomain("web-1.example").is_ok());
        assert!(dns1123_subdomain("Web").is_err());
        assert!(dns1123_subdomain("-web").is_err());
        assert!(dns1123_subdomain("a..b").is_err());
        assert!(dns1123_label("a.b").is_err());
        assert!(dns1123_label(&"a".repeat(64)).is_err());
    }

    #[test]
    fn labels() {
        assert!(label_key("app").is_ok());
        assert!(label_key("example.com/app_name").is_ok());
        assert!(label_key("Example.com/app").is_err());
        assert!(label_key("/app").is_err());
        assert!(label_value("").is_ok());
        assert!(label_value("v1.2_x").is_ok());
        assert!(label_value("bad value").is_err());
        assert!(label_value(&"a".repeat(64)).is_err());
    }
}
