//! Errors as data: the Status object every API failure returns, with field-path causes.

use serde::{Deserialize, Serialize};

/// Why a request failed, as a machine-readable word (Kubernetes' StatusReason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reason {
    BadRequest,
    NotFound,
    AlreadyExists,
    Conflict,
    Invalid,
    Forbidden,
    RequestEntityTooLarge,
    Gone,
    ServiceUnavailable,
    Timeout,
    InternalError,
    MethodNotAllowed,
}

impl Reason {
    /// The HTTP-style code Kubernetes pairs with the reason.
    pub fn code(self) -> u16 {
        match self {
            Reason::BadRequest => 400,
            Reason::Forbidden => 403,
            Reason::NotFound => 404,
            Reason::MethodNotAllowed => 405,
            Reason::AlreadyExists | Reason::Conflict => 409,
            Reason::Gone => 410,
            Reason::RequestEntityTooLarge => 413,
            Reason::Invalid => 422,
            Reason::InternalError => 500,
            Reason::ServiceUnavailable => 503,
            Reason::Timeout => 504,
        }
    }

    /// Whether the same request may succeed if sent again unchanged.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Reason::ServiceUnavailable | Reason::Timeout | Reason::InternalError
        )
    }
}

/// One thing wrong with a request, located by a field path such as `spec.containers[0].image`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cause {
    /// FieldValueRequired, FieldValueInvalid, FieldValueNotSupported, FieldValueDuplicate,
    /// FieldValueTooLong, FieldValueUnknown (an unknown field), FieldValueTypeInvalid.
    pub reason: String,
    pub message: String,
    pub field: String,
}

impl Cause {
    pub fn new(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Cause {
            reason: reason.to_string(),
            message: message.into(),
            field: field.into(),
        }
    }
    pub fn required(field: impl Into<String>) -> Self {
        Cause::new("FieldValueRequired", field, "Required value")
    }
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Cause::new("FieldValueInvalid", field, message)
    }
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        Cause::new(
            "FieldValueNotSupported",
            field,
            format!(
                "Unsupported value: {value:?}: supported values: {}",
                supported.join(", ")
            ),
        )
    }
    pub fn duplicate(field: impl Into<String>, value: &str) -> Self {
        Cause::new(
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: {value:?}"),
        )
    }
    pub fn unknown_field(field: impl Into<String>) -> Self {
        Cause::new("FieldValueUnknown", field, "unknown field")
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
}

/// The failure half of every API reply (`kind: Status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("{message}")]
pub struct Status {
    pub api_version: String,
    pub kind: String,
    /// Always "Failure": successes return the object itself.
    pub status: String,
    pub message: String,
    pub reason: Reason,
    pub code: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
}

impl Status {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Status {
            api_version: "v1".into(),
            kind: "Status".into(),
            status: "Failure".into(),
            message: message.into(),
            reason,
            code: reason.code(),
            details: None,
        }
    }

    pub fn with_details(mut self, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        self.details = Some(StatusDetails {
            name: name.to_string(),
            kind: kind.to_string(),
            causes,
        });
        self
    }

    pub fn not_found(kind: &str, namespace: &str, name: &str) -> Self {
        Status::new(
            Reason::NotFound,
            format!("{} {:?} not found", kind, qualified(namespace, name)),
        )
        .with_details(kind, name, vec![])
    }

    pub fn already_exists(kind: &str, namespace: &str, name: &str) -> Self {
        Status::new(
            Reason::AlreadyExists,
            format!("{} {:?} already exists", kind, qualified(namespace, name)),
        )
        .with_details(kind, name, vec![])
    }

    pub fn conflict(kind: &str, namespace: &str, name: &str, detail: &str) -> Self {
        Status::new(
            Reason::Conflict,
            format!(
                "Operation cannot be fulfilled on {} {:?}: {detail}",
                kind,
                qualified(namespace, name)
            ),
        )
        .with_details(kind, name, vec![])
    }

    /// A validation failure listing every cause, as `kubectl` prints it.
    pub fn invalid(kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let list: Vec<String> = causes.iter().map(|c| c.to_string()).collect();
        Status::new(
            Reason::Invalid,
            format!("{} {:?} is invalid: {}", kind, name, list.join(", ")),
        )
        .with_details(kind, name, causes)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Status::new(Reason::BadRequest, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Status::new(Reason::InternalError, message)
    }

    pub fn causes(&self) -> &[Cause] {
        self.details
            .as_ref()
            .map(|d| d.causes.as_slice())
            .unwrap_or(&[])
    }

    pub fn is(&self, reason: Reason) -> bool {
        self.reason == reason
    }
}

fn qualified(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}
