//! A small event recorder: `Event` objects about what controllers did, as `describe` shows.
//!
//! Recording never fails a reconcile: it runs in the background and only logs errors.
//! Repeats of the same (object, reason, message) bump `count` and `lastTimestamp` on the
//! event already written instead of creating another.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bus_schemas::kinds::event::EventSource;
use bus_schemas::kinds::{Event, ObjectReference};
use bus_schemas::meta::Time;
use bus_schemas::Resource;
use shoal_bus::ApiClient;

pub const NORMAL: &str = "Normal";
pub const WARNING: &str = "Warning";

/// How many distinct events are remembered for de-duplication.
const DEDUPE_CAPACITY: usize = 4096;

type DedupeKey = (String, String, String);

#[derive(Clone)]
pub struct EventRecorder {
    api: ApiClient,
    component: String,
    seen: Arc<Mutex<HashMap<DedupeKey, (String, String)>>>,
}

pub fn reference<K: Resource>(obj: &K) -> ObjectReference {
    let meta = obj.meta();
    ObjectReference {
        kind: K::INFO.kind.to_string(),
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: meta.uid.clone(),
        api_version: K::INFO.api_version.to_string(),
        resource_version: meta.resource_version.clone(),
        field_path: String::new(),
    }
}

impl EventRecorder {
    pub fn new(api: ApiClient, component: impl Into<String>) -> Self {
        EventRecorder {
            api,
            component: component.into(),
            seen: Default::default(),
        }
    }

    /// Records an event about `obj` in the background.
    pub fn record<K: Resource>(
        &self,
        obj: &K,
        type_: &str,
        reason: &str,
        message: impl Into<String>,
    ) {
        let involved = reference(obj);
        let (type_, reason, message) = (type_.to_string(), reason.to_string(), message.into());
        tracing::debug!(object = %involved.name, kind = %involved.kind, %reason, %message, "event");
        let me = self.clone();
        // In the trace of the work that records it, as the write would be if awaited.
        let trace = shoal_telemetry::work::Traced::handed_off();
        tokio::spawn(trace.run(async move { me.write(involved, type_, reason, message).await }));
    }

    async fn write(
        &self,
        involved: ObjectReference,
        type_: String,
        reason: String,
        message: String,
    ) {
        let now = Time::from(SystemTime::now());
        let key = (involved.uid.clone(), reason.clone(), message.clone());
        let known = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        if let Some((ns, name)) = known {
            if let Ok(mut existing) = self.api.get::<Event>(&ns, &name).await {
                existing.count = existing.count.max(1) + 1;
                existing.last_timestamp = Some(now);
                if self.api.update(&existing).await.is_ok() {
                    return;
                }
            }
        }
        let namespace = if involved.namespace.is_empty() {
            "default".to_string()
        } else {
            involved.namespace.clone()
        };
        let mut event = Event::default();
        event.metadata.namespace = namespace.clone();
        event.metadata.generate_name = format!("{}.", involved.name);
        event.involved_object = involved;
        event.reason = reason;
        event.message = message;
        event.type_ = type_;
        event.source = EventSource {
            component: self.component.clone(),
            host: String::new(),
        };
        event.reporting_component = self.component.clone();
        event.first_timestamp = Some(now);
        event.last_timestamp = Some(now);
        event.count = 1;
        match self.api.create(&event).await {
            Ok(created) => {
                let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
                if seen.len() >= DEDUPE_CAPACITY {
                    seen.clear();
                }
                seen.insert(key, (namespace, created.metadata.name));
            }
            Err(e) => tracing::debug!(error = %e, "cannot record event"),
        }
    }
}

/// How many pod names one "created" event lists before it only counts.
const NAMES_LISTED: usize = 5;

/// The message of one event for pods created together. A ReplicaSet scaling to 1,000 would
/// otherwise write 1,000 events, one more durable write per pod on the hottest path; one per
/// batch says the same to whoever reads `describe`.
pub fn created_pods_message(names: &[String]) -> String {
    let listed = names
        .iter()
        .take(NAMES_LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let more = names.len().saturating_sub(NAMES_LISTED);
    match (names.len(), more) {
        (1, _) => format!("Created pod: {listed}"),
        (n, 0) => format!("Created {n} pods: {listed}"),
        (n, more) => format!("Created {n} pods: {listed} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::created_pods_message;

    #[test]
    fn one_event_names_a_batch_of_created_pods_and_counts_the_rest() {
        let names: Vec<String> = (0..7).map(|i| format!("web-{i}")).collect();
        assert_eq!(created_pods_message(&names[..1]), "Created pod: web-0");
        assert_eq!(
            created_pods_message(&names[..2]),
            "Created 2 pods: web-0, web-1"
        );
        assert_eq!(
            created_pods_message(&names),
            "Created 7 pods: web-0, web-1, web-2, web-3, web-4 and 2 more"
        );
    }
}
