//! Lease: a named lock with a holder and an expiry, for leader election and node heartbeats.

use serde::{Deserialize, Serialize};

use super::common::{is_default, non_negative};
use crate::meta::{ObjectMeta, Time};
use crate::resource::KindInfo;
use crate::status::Cause;

/// A time-limited claim, used for leader election and node heartbeats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: LeaseSpec,
    /// Always empty: Kubernetes' Lease has no status. Kept so Lease fits the spec/status shape.
    #[serde(default, skip_serializing_if = "is_default")]
    pub status: LeaseStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LeaseSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_identity: Option<String>,
    /// How long after renewTime the lease may be taken by another candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquire_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_time: Option<Time>,
    /// Holder changes so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_transitions: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LeaseStatus {}

crate::spec_status_resource!(
    Lease,
    KindInfo {
        kind: "Lease",
        api_version: "coordination.k8s.io/v1",
        plural: "leases",
        short_names: &[],
        namespaced: true,
        has_status: false,
    }
);

impl Lease {
    /// When its holder last renewed it (renewTime, else acquireTime).
    pub fn last_renewed(&self) -> Option<Time> {
        self.spec.renew_time.or(self.spec.acquire_time)
    }

    /// When the lease lapses unless renewed: renewTime (or acquireTime) plus the duration.
    pub fn expires_at(&self) -> Option<Time> {
        let since = self.last_renewed()?;
        let duration = self.spec.lease_duration_seconds?;
        Some(since + chrono::Duration::seconds(i64::from(duration)))
    }

    /// Whether a candidate may take the lease at `now`: nobody holds it, or it lapsed.
    pub fn is_available(&self, now: Time) -> bool {
        let held = self
            .spec
            .holder_identity
            .as_deref()
            .is_some_and(|h| !h.is_empty());
        !held || self.expires_at().is_none_or(|t| t <= now)
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let Some(duration) = self.spec.lease_duration_seconds {
            if duration <= 0 {
                causes.push(super::common::invalid_value(
                    "spec.leaseDurationSeconds",
                    duration,
                    "must be greater than 0",
                ));
            }
        }
        if let Some(transitions) = self.spec.lease_transitions {
            causes.extend(non_negative(transitions, "spec.leaseTransitions"));
        }
        causes
    }

    fn validate_update_fields(&self, _old: &Self) -> Vec<Cause> {
        Vec::new()
    }

    fn default_fields(&mut self) {}

    fn kind_field_value(&self, field: &str) -> Option<String> {
        match field {
            "spec.holderIdentity" => Some(self.spec.holder_identity.clone().unwrap_or_default()),
            _ => None,
        }
    }
}
