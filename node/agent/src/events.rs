//! Events the node records about its pods (a lifecycle hook failed, a ConfigMap or Secret is
//! missing, an env key was skipped), sent as the node's `pod-event` report: the API writes
//! them only for pods bound to this node.

use bus_schemas::kinds::event::EventSource;
use bus_schemas::kinds::{Event, ObjectReference, Pod};
use bus_schemas::subjects::NodeReport;
use bus_schemas::{codec, Resource};

use crate::agent::AgentCtx;

/// Kubernetes' component name for what the node reports.
const COMPONENT: &str = "kubelet";
/// Object names are DNS subdomains.
const MAX_NAME: usize = 253;

/// One name per pod and reason, so a repeated failure bumps the count of one Event.
fn event_name(pod: &Pod, reason: &str) -> String {
    let suffix = format!(".{}", reason.to_ascii_lowercase());
    let mut name = pod.metadata.name.clone();
    name.truncate(MAX_NAME - suffix.len());
    name + &suffix
}

pub fn pod_event(pod: &Pod, node: &str, type_: &str, reason: &str, message: &str) -> Event {
    let now = chrono::Utc::now();
    let mut event = Event {
        involved_object: ObjectReference {
            kind: "Pod".into(),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            api_version: "v1".into(),
            ..Default::default()
        },
        reason: reason.into(),
        message: message.into(),
        source: EventSource {
            component: COMPONENT.into(),
            host: node.into(),
        },
        first_timestamp: Some(now),
        last_timestamp: Some(now),
        count: 1,
        type_: type_.into(),
        reporting_component: COMPONENT.into(),
        reporting_instance: node.into(),
        ..Default::default()
    };
    event.set_type_meta();
    event.metadata.namespace = pod.metadata.namespace.clone();
    event.metadata.name = event_name(pod, reason);
    event
}

impl AgentCtx {
    /// Records an Event about `pod`; a failure is logged, never retried (an Event is a
    /// record for people, and the pod's status says the same).
    pub async fn pod_event(&self, pod: &Pod, type_: &str, reason: &str, message: &str) {
        let event = pod_event(pod, &self.config.node_name, type_, reason, message);
        let Ok(body) = codec::to_msgpack(&event) else {
            return;
        };
        if let Err(e) = self.report(NodeReport::PodEvent, body).await {
            tracing::warn!(pod = %pod.metadata.name, %reason, error = %e, "event not recorded");
        }
    }
}
