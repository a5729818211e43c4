//! The crate's error type. Every variant carries the path or step it failed at,
//! and [`Error::k8s_reason`] maps it onto the Kubernetes waiting reasons the agent
//! reports (`CreateContainerConfigError`, `CreateContainerError`, `RunContainerError`, ...).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failure inside the shim or the container's init before the workload was
/// exec'd, sent back over a CLOEXEC pipe as JSON so it is never lost to a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepError {
    /// Which setup step failed, e.g. `user`, `exec`, `mount /proc`, `pivot_root`.
    pub step: String,
    /// The errno of the failing syscall, 0 when not a syscall failure.
    pub errno: i32,
    pub message: String,
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.step, self.message)?;
        if self.errno != 0 {
            write!(f, " ({})", nix::errno::Errno::from_raw(self.errno).desc())?;
        }
        Ok(())
    }
}

impl StepError {
    pub fn new(step: impl Into<String>, message: impl Into<String>) -> Self {
        StepError {
            step: step.into(),
            errno: 0,
            message: message.into(),
        }
    }

    pub fn sys(step: impl Into<String>, err: nix::Error, message: impl Into<String>) -> Self {
        StepError {
            step: step.into(),
            errno: err as i32,
            message: message.into(),
        }
    }

    pub fn io(step: impl Into<String>, err: &std::io::Error, message: impl Into<String>) -> Self {
        StepError {
            step: step.into(),
            errno: err.raw_os_error().unwrap_or(0),
            message: format!("{}: {err}", message.into()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {op}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {op}: {source}")]
    Sys {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: nix::Error,
    },
    #[error("{what}: invalid JSON: {source}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("digest mismatch for {what}: expected {expected}, got {actual}")]
    DigestMismatch {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("invalid image: {0}")]
    InvalidImage(String),
    #[error("image not found: {0}")]
    ImageNotFound(String),
    #[error("invalid image reference {0:?}")]
    InvalidReference(String),
    #[error("unsafe path in layer {layer}: {path:?}: {reason}")]
    UnsafePath {
        layer: String,
        path: String,
        reason: &'static str,
    },
    #[error("cgroup {path}: {message}")]
    Cgroup { path: String, message: String },
    #[error("network setup: {0}")]
    Network(String),
    #[error("IP pool {0} exhausted")]
    IpExhausted(String),
    #[error("{kind} {id} not found")]
    NotFound { kind: &'static str, id: String },
    #[error("{kind} {id} already exists")]
    AlreadyExists { kind: &'static str, id: String },
    /// The spec is unusable before any kernel work: CreateContainerConfigError.
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// A setup step in the shim/container init failed.
    #[error("container {id}: {error}")]
    Container { id: String, error: StepError },
    #[error("shim {mode}: {message}")]
    Shim { mode: &'static str, message: String },
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            op,
            source,
        }
    }

    pub(crate) fn sys(path: impl Into<PathBuf>, op: &'static str, source: nix::Error) -> Self {
        Error::Sys {
            path: path.into(),
            op,
            source,
        }
    }

    pub(crate) fn json(what: impl Into<String>, source: serde_json::Error) -> Self {
        Error::Json {
            what: what.into(),
            source,
        }
    }

    /// The Kubernetes container waiting reason for a failed container start.
    pub fn k8s_reason(&self) -> &'static str {
        match self {
            Error::InvalidSpec(_) => "CreateContainerConfigError",
            Error::ImageNotFound(_) | Error::InvalidReference(_) => "ErrImageNeverPull",
            Error::Container { error, .. } => match error.step.as_str() {
                "user" | "config" => "CreateContainerConfigError",
                "exec" => "RunContainerError",
                _ => "CreateContainerError",
            },
            _ => "CreateContainerError",
        }
    }

    /// True when the error says the object does not exist (useful for idempotency).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. } | Error::ImageNotFound(_))
    }
}

/// Attach a path and an operation name to io errors.
pub(crate) trait IoCtx<T> {
    fn ctx(self, path: impl Into<PathBuf>, op: &'static str) -> Result<T>;
}

impl<T> IoCtx<T> for std::io::Result<T> {
    fn ctx(self, path: impl Into<PathBuf>, op: &'static str) -> Result<T> {
        self.map_err(|e| Error::io(path, op, e))
    }
}

impl<T> IoCtx<T> for nix::Result<T> {
    fn ctx(self, path: impl Into<PathBuf>, op: &'static str) -> Result<T> {
        self.map_err(|e| Error::sys(path, op, e))
    }
}
