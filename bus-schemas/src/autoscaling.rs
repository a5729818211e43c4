//! What the autoscaler exchanges on the bus besides objects: external metric samples, the
//! hook request and reply, and the decision record every pass publishes.
//!
//! External samples and hook replies may be JSON or msgpack (JSON when the body starts with
//! `{`), so a publisher or hook needs nothing beyond a NATS client in any language.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::kinds::hpa::{HorizontalPodAutoscaler, MetricStatus};
use crate::{codec, Time};

/// One sample on `shoal.v1.metrics.external.<ns>.<name>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSample {
    pub value: f64,
    /// When the value was observed; absent means on arrival.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Time>,
    /// Matched by an HPA metric's `selector`; each distinct label set is its own series,
    /// and an HPA sums the latest value of every series its selector matches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// The target as the hook sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookTarget {
    pub kind: String,
    pub name: String,
    /// spec.replicas of the target.
    pub spec_replicas: i32,
    /// The pod selector in label-selector syntax.
    #[serde(default)]
    pub selector: String,
}

/// The request on `shoal.v1.hooks.autoscale.<name>` (always JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRequest {
    pub hpa: HorizontalPodAutoscaler,
    pub target: HookTarget,
    pub current_replicas: i32,
    /// Every metric's current value, in the order of `spec.metrics` (one without a value
    /// could not be read).
    pub metrics: Vec<MetricStatus>,
    /// What the built-in algorithm proposes before stabilization and rate limits.
    pub proposal: i32,
}

/// The hook's answer: the replicas it wants (still clamped by min/max and `behavior`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookReply {
    pub desired_replicas: i32,
    /// Shown in the rescale Event.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// Published on `shoal.v1.autoscaler.decisions.<ns>.<hpa>` after every pass that decided.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub namespace: String,
    pub hpa: String,
    pub target: HookTarget,
    pub current_replicas: i32,
    /// The built-in proposal.
    pub proposal: i32,
    /// The hook's answer, when a hook was asked and answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_replicas: Option<i32>,
    pub desired_replicas: i32,
    pub rescaled: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    pub time: Time,
}

/// JSON when the body starts with `{` (after whitespace), msgpack otherwise.
pub fn decode_json_or_msgpack<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        serde_json::from_slice(body).map_err(|e| e.to_string())
    } else {
        codec::from_msgpack(body).map_err(|e| e.to_string())
    }
}
