//! The `Resource` trait every kind implements, and the registry of kinds.

use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::meta::ObjectMeta;
use crate::status::Cause;

/// Static facts about a kind: how people name it and where it lives on the bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInfo {
    pub kind: &'static str,
    pub api_version: &'static str,
    /// Lowercase plural, as in `shoal get pods`.
    pub plural: &'static str,
    pub short_names: &'static [&'static str],
    pub namespaced: bool,
    /// Whether the kind has a status written through its own verb.
    pub has_status: bool,
}

impl KindInfo {
    /// The subject token: the lowercase kind (`pod`, `replicaset`).
    pub fn token(&self) -> String {
        self.kind.to_ascii_lowercase()
    }

    pub fn singular(&self) -> String {
        self.kind.to_ascii_lowercase()
    }

    /// Whether `name` (any case) names this kind: kind, singular, plural or a short name.
    pub fn answers_to(&self, name: &str) -> bool {
        let n = name.to_ascii_lowercase();
        n == self.singular() || n == self.plural || self.short_names.contains(&n.as_str())
    }
}

pub trait Resource:
    Serialize + DeserializeOwned + Clone + Debug + Default + PartialEq + Send + Sync + 'static
{
    const INFO: KindInfo;

    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;
    /// Sets `apiVersion` and `kind` to this kind's.
    fn set_type_meta(&mut self);
    /// Whether `apiVersion`/`kind` are this kind's (empty counts as this kind's).
    fn type_meta(&self) -> (&str, &str);

    /// Whether the desired state differs: a change bumps `metadata.generation`.
    fn spec_differs(&self, other: &Self) -> bool;
    /// Keeps `other`'s status in `self` (an update never writes status).
    fn keep_status_of(&mut self, other: &Self);
    /// Takes only the status from `reported` (an update-status writes nothing else).
    fn take_status_from(&mut self, reported: &Self);

    /// Kind-specific validation; metadata is validated by the caller.
    fn validate_kind(&self) -> Vec<Cause> {
        Vec::new()
    }
    /// Validation of an update against the stored object (immutable fields).
    fn validate_update(&self, _old: &Self) -> Vec<Cause> {
        Vec::new()
    }
    /// Kubernetes-style defaults for the spec.
    fn apply_defaults(&mut self) {}

    /// A field's value as text for field selectors (`metadata.name`, `spec.nodeName`,
    /// `status.phase`); None for fields the kind does not support selecting on.
    fn field_value(&self, field: &str) -> Option<String>;

    /// Whether the kind has values the API keeps encrypted at rest ([`Self::sealed_values_mut`]).
    const SEALED: bool = false;
    /// The values the API encrypts before they reach the state log (Secret's `data`).
    fn sealed_values_mut(&mut self) -> Option<&mut SealedValues> {
        None
    }
}

/// Values kept encrypted at rest, by key.
pub type SealedValues = std::collections::BTreeMap<String, crate::kinds::byte_string::ByteString>;

/// Implements [`Resource`] for a kind with `spec` and `status` fields. The kind defines the
/// inherent methods `validate_fields`, `validate_update_fields`, `default_fields` and
/// `kind_field_value` that the trait methods delegate to.
#[macro_export]
macro_rules! spec_status_resource {
    ($ty:ty, $info:expr) => {
        $crate::spec_status_resource!(@impl $ty, $info,
            fn spec_differs(&self, other: &Self) -> bool { self.spec != other.spec }
            fn keep_status_of(&mut self, other: &Self) { self.status = other.status.clone(); }
            fn take_status_from(&mut self, reported: &Self) { self.status = reported.status.clone(); }
        );
    };
    ($ty:ty, $info:expr, no_status) => {
        $crate::spec_status_resource!(@impl $ty, $info,
            fn spec_differs(&self, other: &Self) -> bool { self.spec != other.spec }
            fn keep_status_of(&mut self, _other: &Self) {}
            fn take_status_from(&mut self, _reported: &Self) {}
        );
    };
    (@impl $ty:ty, $info:expr, $($body:item)*) => {
        impl $crate::resource::Resource for $ty {
            const INFO: $crate::resource::KindInfo = $info;
            fn meta(&self) -> &$crate::meta::ObjectMeta { &self.metadata }
            fn meta_mut(&mut self) -> &mut $crate::meta::ObjectMeta { &mut self.metadata }
            fn set_type_meta(&mut self) {
                self.api_version = Self::INFO.api_version.to_string();
                self.kind = Self::INFO.kind.to_string();
            }
            fn type_meta(&self) -> (&str, &str) { (&self.api_version, &self.kind) }
            fn validate_kind(&self) -> Vec<$crate::status::Cause> { self.validate_fields() }
            fn validate_update(&self, old: &Self) -> Vec<$crate::status::Cause> {
                self.validate_update_fields(old)
            }
            fn apply_defaults(&mut self) { self.default_fields() }
            fn field_value(&self, field: &str) -> Option<String> {
                match field {
                    "metadata.name" => Some(self.metadata.name.clone()),
                    "metadata.namespace" => Some(self.metadata.namespace.clone()),
                    "metadata.uid" => Some(self.metadata.uid.clone()),
                    _ => self.kind_field_value(field),
                }
            }
            $($body)*
        }
    };
}

/// Implements [`Resource`] for a kind whose whole body is desired state (no spec/status split:
/// Endpoints, Event, Lease's holder fields, PriorityClass): any body change bumps generation.
#[macro_export]
macro_rules! body_resource {
    ($ty:ty, $info:expr) => {
        $crate::spec_status_resource!(@impl $ty, $info,
            fn spec_differs(&self, other: &Self) -> bool {
                let mut a = self.clone();
                a.metadata = Default::default();
                let mut b = other.clone();
                b.metadata = Default::default();
                a != b
            }
            fn keep_status_of(&mut self, _other: &Self) {}
            fn take_status_from(&mut self, _reported: &Self) {}
        );
    };
}
