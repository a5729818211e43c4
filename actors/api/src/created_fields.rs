//! The managed fields a create gives its field manager, remembered by what was asked for.
//!
//! A controller scaling a ReplicaSet sends the same pod thousands of times: the template,
//! the owner reference, `generateName`. The name the API generates is not a managed field,
//! so every one of those creates owns exactly the same fields. Working them out means
//! turning the whole object into a JSON tree and walking it; at 1,000 pods/s that was a
//! twentieth of the API's time. Keyed by the request's own encoding (name left out), a
//! repeat costs one msgpack encoding and a lookup, and a key can never match an object
//! whose fields differ.

use std::collections::HashMap;
use std::sync::Mutex;

use bus_schemas::{codec, ManagedFieldsEntry, Resource, Status, Time};

use crate::field_manager;

/// Distinct creates remembered; past it the memory starts over (a miss costs one
/// computation, never a wrong answer).
const CAPACITY: usize = 256;

#[derive(Default)]
pub(crate) struct CreatedFields {
    by_request: Mutex<HashMap<Vec<u8>, Vec<ManagedFieldsEntry>>>,
}

impl CreatedFields {
    /// The managed fields of `obj` created by `manager` with `operation`, stamped `now`.
    pub(crate) fn record<K: Resource>(
        &self,
        obj: &mut K,
        manager: &str,
        operation: &str,
        now: Time,
    ) -> Result<Vec<ManagedFieldsEntry>, Status> {
        let key = key_of(obj, manager, operation)?;
        if let Some(entries) = self.lookup(&key) {
            return Ok(stamped(entries, now));
        }
        let requested = serde_json::to_value(&*obj)
            .map_err(|e| Status::internal(format!("encoding for create: {e}")))?;
        let entries =
            field_manager::record_create(&requested, manager, operation, K::INFO.api_version, now);
        self.remember(key, entries.clone());
        Ok(entries)
    }

    fn lookup(&self, key: &[u8]) -> Option<Vec<ManagedFieldsEntry>> {
        let remembered = self.by_request.lock().unwrap_or_else(|p| p.into_inner());
        remembered.get(key).cloned()
    }

    fn remember(&self, key: Vec<u8>, entries: Vec<ManagedFieldsEntry>) {
        let mut remembered = self.by_request.lock().unwrap_or_else(|p| p.into_inner());
        if remembered.len() >= CAPACITY {
            remembered.clear();
        }
        remembered.insert(key, entries);
    }
}

/// Kind, manager, operation and the object's encoding without its name (which no manager
/// owns, and which differs between the pods of one template).
fn key_of<K: Resource>(obj: &mut K, manager: &str, operation: &str) -> Result<Vec<u8>, Status> {
    let name = std::mem::take(&mut obj.meta_mut().name);
    let encoded = codec::to_msgpack(&*obj);
    obj.meta_mut().name = name;
    let encoded = encoded.map_err(|e| Status::internal(format!("encoding for create: {e}")))?;
    let mut key = Vec::with_capacity(encoded.len() + 64);
    for part in [K::INFO.kind, manager, operation] {
        key.extend_from_slice(part.as_bytes());
        key.push(0);
    }
    key.extend_from_slice(&encoded);
    Ok(key)
}

fn stamped(mut entries: Vec<ManagedFieldsEntry>, now: Time) -> Vec<ManagedFieldsEntry> {
    for entry in &mut entries {
        entry.time = Some(now);
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::kinds::Pod;

    fn now() -> Time {
        chrono::DateTime::parse_from_rfc3339("2026-12-02T04:00:00Z")
            .unwrap()
            .into()
    }

    fn templated(name: &str, image: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = name.into();
        pod.metadata.generate_name = "web-".into();
        pod.metadata.labels.insert("app".into(), "web".into());
        pod.spec.containers.push(Default::default());
        pod.spec.containers[0].name = "main".into();
        pod.spec.containers[0].image = image.into();
        pod
    }

    fn computed(pod: &Pod, manager: &str) -> Vec<ManagedFieldsEntry> {
        let value = serde_json::to_value(pod).unwrap();
        field_manager::record_create(&value, manager, "Update", "v1", now())
    }

    #[test]
    fn pods_of_one_template_share_their_fields_and_others_get_their_own() {
        let remembered = CreatedFields::default();
        let mut first = templated("web-aaaaa", "web:1");
        let mut second = templated("web-bbbbb", "web:1");
        let got = remembered
            .record(&mut first, "ctl", "Update", now())
            .unwrap();
        assert_eq!(got, computed(&first, "ctl"));
        assert_eq!(first.metadata.name, "web-aaaaa", "the name is put back");
        let later: Time = chrono::DateTime::parse_from_rfc3339("2026-12-02T04:00:01Z")
            .unwrap()
            .into();
        let again = remembered
            .record(&mut second, "ctl", "Update", later)
            .unwrap();
        assert_eq!(
            again[0].time,
            Some(later),
            "a remembered entry carries this create's time"
        );
        assert_eq!(again[0].fields_v1, got[0].fields_v1);

        // A different shape (a second label) and a different manager are not matched.
        let mut labelled = templated("web-ccccc", "web:1");
        labelled.metadata.labels.insert("tier".into(), "x".into());
        let own = remembered
            .record(&mut labelled, "ctl", "Update", now())
            .unwrap();
        assert_eq!(own, computed(&labelled, "ctl"));
        assert_ne!(own[0].fields_v1, got[0].fields_v1);
        let other = remembered
            .record(
                &mut templated("web-ddddd", "web:1"),
                "someone",
                "Update",
                now(),
            )
            .unwrap();
        assert_eq!(other[0].manager, "someone");
    }

    #[test]
    fn past_its_capacity_it_starts_over_and_still_answers_right() {
        let remembered = CreatedFields::default();
        for i in 0..CAPACITY + 10 {
            let mut pod = templated("p", "web:1");
            pod.metadata.labels.insert(format!("k{i}"), "v".into());
            let got = remembered.record(&mut pod, "ctl", "Update", now()).unwrap();
            assert_eq!(got, computed(&pod, "ctl"));
        }
        assert!(remembered.by_request.lock().unwrap().len() <= CAPACITY);
    }
}
