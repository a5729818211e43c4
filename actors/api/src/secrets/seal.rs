//! Sealing an object's secret values before it is written and opening them after it is
//! read: every path between the API and the state log goes through these two.

use bus_schemas::{Resource, Status};

use super::keyring::KeyRing;

/// Where a value lives, bound into its ciphertext.
fn context(namespace: &str, name: &str, key: &str) -> String {
    format!("{namespace}/{name}/{key}")
}

/// Encrypts the kind's sealed values in place. Without a key ring a Secret is refused:
/// storing it in clear would break the promise silently.
pub fn seal<K: Resource>(keys: Option<&KeyRing>, obj: &mut K) -> Result<(), Status> {
    if !K::SEALED {
        return Ok(());
    }
    let (namespace, name) = (obj.meta().namespace.clone(), obj.meta().name.clone());
    let Some(values) = obj.sealed_values_mut() else {
        return Ok(());
    };
    let keys = keys.ok_or_else(no_keys)?;
    for (key, value) in values.iter_mut() {
        value.0 = keys.seal(&value.0, &context(&namespace, &name, key));
    }
    Ok(())
}

/// Decrypts the kind's sealed values in place.
pub fn open<K: Resource>(keys: Option<&KeyRing>, obj: &mut K) -> Result<(), Status> {
    if !K::SEALED {
        return Ok(());
    }
    let (namespace, name) = (obj.meta().namespace.clone(), obj.meta().name.clone());
    let Some(values) = obj.sealed_values_mut() else {
        return Ok(());
    };
    let keys = keys.ok_or_else(no_keys)?;
    for (key, value) in values.iter_mut() {
        value.0 = keys
            .open(&value.0, &context(&namespace, &name, key))
            .map_err(|e| {
                Status::internal(format!(
                    "{} {namespace}/{name} data[{key}]: {e}",
                    K::INFO.kind
                ))
            })?;
    }
    Ok(())
}

/// Whether any of the object's values is sealed with a key other than the primary one.
pub fn needs_reseal<K: Resource>(keys: &KeyRing, obj: &mut K) -> bool {
    obj.sealed_values_mut().is_some_and(|values| {
        values
            .values()
            .any(|v| KeyRing::key_of(&v.0).is_ok_and(|name| name != keys.primary()))
    })
}

fn no_keys() -> Status {
    Status::new(
        bus_schemas::Reason::ServiceUnavailable,
        "this API actor has no Secret encryption key (ApiConfig::secret_key_file, \
         `shoal up --secret-key-file`); Secrets are never stored in clear",
    )
}
