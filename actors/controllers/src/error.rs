//! The crate's errors: what a reconcile can fail with, and what stops [`crate::run`].

use shoal_bus::{ApiError, StoreError};

/// A reconcile failure. Every variant is retried by the work queue with per-key backoff;
/// the message names the object so logs say what failed.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("{verb} {kind} {object}: {source}")]
    Api {
        verb: &'static str,
        kind: &'static str,
        object: String,
        source: ApiError,
    },
}

impl ReconcileError {
    pub fn api(
        verb: &'static str,
        kind: &'static str,
        object: impl Into<String>,
        source: ApiError,
    ) -> Self {
        ReconcileError::Api {
            verb,
            kind,
            object: object.into(),
            source,
        }
    }

    pub fn is_conflict(&self) -> bool {
        matches!(self, ReconcileError::Api { source, .. } if source.is_conflict())
    }
}

/// Why [`crate::run`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllersError {
    #[error("opening the state log: {0}")]
    Store(#[from] StoreError),
}
