//! The typed API client: every write any actor or person makes goes through here to the API
//! actors (request/reply on `shoal.v1.api.<kind>.<verb>`).
//!
//! Node agents send their writes as node reports (`shoal.v1.node.<node>.<report>`) through
//! [`ApiClient::report`], with the same guarantees.
//!
//! Each logical request carries a `Shoal-Request-Id` that the API uses as the JetStream
//! message id, so a retry after a lost reply (an API replica died mid-request) is
//! de-duplicated by the state log instead of failing or writing twice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::{HeaderMap, RequestErrorKind};
use bus_schemas::api::{
    DeleteOptions, ListOptions, ObjectList, ObjectRef, PatchRequest, Scale, HEADER_APPLY_RESULT,
    HEADER_FIELD_MANAGER, HEADER_FORCE,
};
use bus_schemas::codec;
use bus_schemas::subjects::{self, NodeReport, Verb, HEADER_CODE, HEADER_WARNING};
use bus_schemas::{Reason, Resource, Status};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::backoff::Backoff;

/// Between attempts of one request: short, since an API actor restarting answers again soon.
const RETRY: Backoff = Backoff::new(Duration::from_millis(20), Duration::from_millis(500));

/// Header carrying the idempotency key of one logical request.
pub const HEADER_REQUEST_ID: &str = "Shoal-Request-Id";
/// How long the sender waits for this attempt (milliseconds): an API actor that could only
/// start on it later drops it, as the sender has moved on to a retry or given up.
pub const HEADER_TIMEOUT_MS: &str = "Shoal-Timeout-Ms";

#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    Status(Status),
    #[error("no API actor answered on {subject} within {waited:?}: is the cluster running? (`shoal up`, or check --nats / SHOAL_NATS) [{detail}]")]
    Unavailable {
        subject: String,
        waited: Duration,
        detail: String,
    },
    #[error("undecodable reply on {subject}: {detail}")]
    Decode { subject: String, detail: String },
}

impl ApiError {
    pub fn reason(&self) -> Option<Reason> {
        match self {
            ApiError::Status(s) => Some(s.reason),
            _ => None,
        }
    }
    pub fn is(&self, reason: Reason) -> bool {
        self.reason() == Some(reason)
    }
    pub fn is_conflict(&self) -> bool {
        self.is(Reason::Conflict)
    }
    pub fn is_not_found(&self) -> bool {
        self.is(Reason::NotFound)
    }
    pub fn is_already_exists(&self) -> bool {
        self.is(Reason::AlreadyExists)
    }
    /// Whether sending the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ApiError::Status(s) => s.reason.is_retryable(),
            ApiError::Unavailable { .. } => true,
            ApiError::Decode { .. } => false,
        }
    }
}

/// What `apply` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    Created,
    Configured,
    Unchanged,
}

impl ApplyOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ApplyOutcome::Created => "created",
            ApplyOutcome::Configured => "configured",
            ApplyOutcome::Unchanged => "unchanged",
        }
    }
    pub fn parse(s: &str) -> Option<ApplyOutcome> {
        match s {
            "created" => Some(ApplyOutcome::Created),
            "configured" => Some(ApplyOutcome::Configured),
            "unchanged" => Some(ApplyOutcome::Unchanged),
            _ => None,
        }
    }
}

/// A raw reply: the body and its headers.
pub struct RawReply {
    pub payload: Bytes,
    pub headers: HeaderMap,
}

#[derive(Clone)]
pub struct ApiClient {
    nats: async_nats::Client,
    /// The connection's inbox prefix, to tell its own refused publishes from others'.
    inbox: Arc<str>,
    attempt_timeout: Duration,
    deadline: Duration,
    traceparent: Option<String>,
    field_manager: Option<String>,
    on_warning: Option<WarningHandler>,
}

/// Called with each warning a reply carries (see [`ApiClient::with_warning_handler`]).
pub type WarningHandler = Arc<dyn Fn(&str) + Send + Sync>;

/// The warnings a successful reply carries (`Shoal-Warning`, once each), in order.
pub fn warnings(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(HEADER_WARNING)
        .map(|v| v.as_str().to_string())
        .collect()
}

/// The field manager `apply` uses when the client names none (what `shoal apply` uses).
pub const DEFAULT_APPLY_MANAGER: &str = "shoal";

impl ApiClient {
    pub fn new(nats: async_nats::Client) -> ApiClient {
        ApiClient {
            inbox: crate::violations::inbox_of(&nats).into(),
            nats,
            attempt_timeout: Duration::from_secs(3),
            deadline: Duration::from_secs(20),
            traceparent: None,
            field_manager: None,
            on_warning: None,
        }
    }

    /// Hands every warning a reply carries to `handler`: how a command line shows people what
    /// the API admitted with reservations (a pod security `warn` level, for example).
    pub fn with_warning_handler(
        mut self,
        handler: impl Fn(&str) + Send + Sync + 'static,
    ) -> ApiClient {
        self.on_warning = Some(Arc::new(handler));
        self
    }

    /// Names this writer in `metadata.managedFields` (Kubernetes' `fieldManager`): every
    /// write it sends records the fields it changed under this name.
    pub fn with_field_manager(mut self, manager: impl Into<String>) -> ApiClient {
        self.field_manager = Some(manager.into());
        self
    }

    pub fn field_manager(&self) -> Option<&str> {
        self.field_manager.as_deref()
    }

    /// Bounds how long one request may take in total, retries included.
    pub fn with_deadline(mut self, deadline: Duration) -> ApiClient {
        self.deadline = deadline;
        self
    }

    /// Sends this W3C trace context instead of the current span's (which is sent otherwise).
    pub fn with_traceparent(mut self, traceparent: Option<String>) -> ApiClient {
        self.traceparent = traceparent;
        self
    }

    pub fn nats(&self) -> &async_nats::Client {
        &self.nats
    }

    /// Sends one request, retrying with the same request id while no API actor answers.
    pub async fn request_raw(
        &self,
        kind_token: &str,
        verb: Verb,
        body: Vec<u8>,
    ) -> Result<RawReply, ApiError> {
        self.request_raw_with(kind_token, verb, body, HeaderMap::new())
            .await
    }

    /// As [`ApiClient::request_raw`], with headers of the caller's added.
    pub async fn request_raw_with(
        &self,
        kind_token: &str,
        verb: Verb,
        body: Vec<u8>,
        headers: HeaderMap,
    ) -> Result<RawReply, ApiError> {
        let subject = subjects::api(kind_token, verb);
        self.send(subject, body, headers).await
    }

    /// Sends one node report (`shoal.v1.node.<node>.<report>`) exactly as an API request:
    /// the same request id and retries, field manager and trace context, so a node writes
    /// through its own subject with the general verbs' guarantees.
    pub async fn report<T: Serialize, R: DeserializeOwned>(
        &self,
        node: &str,
        report: NodeReport,
        body: &T,
    ) -> Result<R, ApiError> {
        let subject = subjects::node_report(node, report);
        let reply = self
            .send(subject.clone(), Self::encode(body)?, HeaderMap::new())
            .await?;
        Ok(decode_reply(&subject, reply)?.0)
    }

    async fn send(
        &self,
        subject: String,
        body: Vec<u8>,
        mut headers: HeaderMap,
    ) -> Result<RawReply, ApiError> {
        if let Some(manager) = &self.field_manager {
            if headers.get(HEADER_FIELD_MANAGER).is_none() {
                headers.insert(HEADER_FIELD_MANAGER, manager.as_str());
            }
        }
        headers.insert(HEADER_REQUEST_ID, uuid::Uuid::new_v4().to_string().as_str());
        headers.insert(
            HEADER_TIMEOUT_MS,
            self.attempt_timeout.as_millis().to_string().as_str(),
        );
        if let Some(tp) = &self.traceparent {
            headers.insert(
                shoal_telemetry::propagation::TRACEPARENT_HEADER,
                tp.as_str(),
            );
        }
        let body = Bytes::from(body);
        // No client span: the API's own span of the request (a child of the caller's span,
        // through the traceparent) times it, and a second span per call was a fifth of what
        // tracing cost at a 1.0 ratio. Retries show as events on the caller's span.
        let reply = self.send_with_retries(subject, headers, body).await?;
        if let Some(handler) = &self.on_warning {
            for warning in warnings(&reply.headers) {
                handler(&warning);
            }
        }
        Ok(reply)
    }

    async fn send_with_retries(
        &self,
        subject: String,
        mut headers: HeaderMap,
        body: Bytes,
    ) -> Result<RawReply, ApiError> {
        if self.traceparent.is_none() {
            shoal_telemetry::propagation::inject_current(&mut headers);
        }
        let start = Instant::now();
        let mut delays = RETRY.delays();
        loop {
            let attempt =
                self.nats
                    .request_with_headers(subject.clone(), headers.clone(), body.clone());
            let attempt = tokio::time::timeout(self.attempt_timeout, attempt);
            // Refused by the server (the role may not publish there): no retry can succeed.
            let outcome = crate::violations::refused_or_in(&self.inbox, &subject, attempt)
                .await
                .map_err(|v| ApiError::Status(Status::new(Reason::Forbidden, v.to_string())))?;
            let detail = match outcome {
                Ok(Ok(msg)) => {
                    return Ok(RawReply {
                        payload: msg.payload,
                        headers: msg.headers.unwrap_or_default(),
                    })
                }
                Ok(Err(e)) if matches!(e.kind(), RequestErrorKind::NoResponders) => {
                    "no responders".to_string()
                }
                Ok(Err(e)) if matches!(e.kind(), RequestErrorKind::TimedOut) => {
                    "timed out".to_string()
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => "timed out".to_string(),
            };
            let backoff = delays.next().unwrap_or(RETRY.max);
            if start.elapsed() + backoff >= self.deadline {
                return Err(ApiError::Unavailable {
                    subject,
                    waited: start.elapsed(),
                    detail,
                });
            }
            tracing::info!(%subject, %detail, retry_in = ?backoff, "API request unanswered; retrying");
            tokio::time::sleep(backoff).await;
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        kind_token: &str,
        verb: Verb,
        body: Vec<u8>,
    ) -> Result<(T, HeaderMap), ApiError> {
        let reply = self.request_raw(kind_token, verb, body).await?;
        let subject = subjects::api(kind_token, verb);
        decode_reply(&subject, reply)
    }

    fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ApiError> {
        codec::to_msgpack(value).map_err(|e| {
            ApiError::Status(Status::bad_request(format!("cannot encode request: {e}")))
        })
    }

    pub async fn create<K: Resource>(&self, obj: &K) -> Result<K, ApiError> {
        let body = Self::encode(obj)?;
        Ok(self.call(&K::INFO.token(), Verb::Create, body).await?.0)
    }

    /// Replaces spec and metadata; fails with Conflict if `obj`'s resourceVersion is stale.
    pub async fn update<K: Resource>(&self, obj: &K) -> Result<K, ApiError> {
        let body = Self::encode(obj)?;
        Ok(self.call(&K::INFO.token(), Verb::Update, body).await?.0)
    }

    /// Writes only the status; never bumps generation.
    pub async fn update_status<K: Resource>(&self, obj: &K) -> Result<K, ApiError> {
        let body = Self::encode(obj)?;
        Ok(self
            .call(&K::INFO.token(), Verb::UpdateStatus, body)
            .await?
            .0)
    }

    /// Server-side apply under this client's field manager ([`DEFAULT_APPLY_MANAGER`] when
    /// it has none): creates the object, or merges the fields `obj` names into it, removing
    /// those this manager named last time and no longer does. Fields another manager owns
    /// and `obj` changes fail with Conflict unless `force` takes them over.
    pub async fn apply<K: Resource>(
        &self,
        obj: &K,
        force: bool,
    ) -> Result<(K, ApplyOutcome), ApiError> {
        let body = Self::encode(obj)?;
        let mut headers = HeaderMap::new();
        headers.insert(
            HEADER_FIELD_MANAGER,
            self.field_manager
                .as_deref()
                .unwrap_or(DEFAULT_APPLY_MANAGER),
        );
        if force {
            headers.insert(HEADER_FORCE, "true");
        }
        let subject = subjects::api(&K::INFO.token(), Verb::Apply);
        let reply = self
            .request_raw_with(&K::INFO.token(), Verb::Apply, body, headers)
            .await?;
        let (obj, headers): (K, HeaderMap) = decode_reply(&subject, reply)?;
        let outcome = headers
            .get(HEADER_APPLY_RESULT)
            .and_then(|v| ApplyOutcome::parse(v.as_str()))
            .unwrap_or(ApplyOutcome::Configured);
        Ok((obj, outcome))
    }

    pub async fn get<K: Resource>(&self, namespace: &str, name: &str) -> Result<K, ApiError> {
        let body = Self::encode(&ObjectRef {
            namespace: namespace.into(),
            name: name.into(),
        })?;
        Ok(self.call(&K::INFO.token(), Verb::Get, body).await?.0)
    }

    /// The scale subresource of a Deployment or ReplicaSet.
    pub async fn get_scale<K: Resource>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Scale, ApiError> {
        let body = Self::encode(&ObjectRef {
            namespace: namespace.into(),
            name: name.into(),
        })?;
        Ok(self.call(&K::INFO.token(), Verb::GetScale, body).await?.0)
    }

    /// Sets replicas through the scale subresource (a precondition when `scale` carries a
    /// resourceVersion).
    pub async fn update_scale<K: Resource>(&self, scale: &Scale) -> Result<Scale, ApiError> {
        let body = Self::encode(scale)?;
        Ok(self
            .call(&K::INFO.token(), Verb::UpdateScale, body)
            .await?
            .0)
    }

    /// Deletes (gracefully: the reply may still carry the object, with deletionTimestamp).
    pub async fn delete<K: Resource>(&self, options: &DeleteOptions) -> Result<K, ApiError> {
        let body = Self::encode(options)?;
        Ok(self.call(&K::INFO.token(), Verb::Delete, body).await?.0)
    }

    pub async fn patch<K: Resource>(&self, request: &PatchRequest) -> Result<K, ApiError> {
        let body = Self::encode(request)?;
        Ok(self.call(&K::INFO.token(), Verb::Patch, body).await?.0)
    }

    /// One page of a list.
    pub async fn list_page<K: Resource>(
        &self,
        options: &ListOptions,
    ) -> Result<ObjectList<K>, ApiError> {
        let body = Self::encode(options)?;
        Ok(self.call(&K::INFO.token(), Verb::List, body).await?.0)
    }

    /// Every page of a list, concatenated.
    pub async fn list<K: Resource>(
        &self,
        options: &ListOptions,
    ) -> Result<ObjectList<K>, ApiError> {
        let mut options = options.clone();
        let mut all: ObjectList<K> = self.list_page(&options).await?;
        while !all.metadata.continue_token.is_empty() {
            options.continue_token = std::mem::take(&mut all.metadata.continue_token);
            let page: ObjectList<K> = self.list_page(&options).await?;
            all.items.extend(page.items);
            all.metadata.continue_token = page.metadata.continue_token;
        }
        Ok(all)
    }
}

/// Decodes a reply: a Status when `Shoal-Code` says failure, otherwise `T`.
pub fn decode_reply<T: DeserializeOwned>(
    subject: &str,
    reply: RawReply,
) -> Result<(T, HeaderMap), ApiError> {
    let code: u16 = reply
        .headers
        .get(HEADER_CODE)
        .and_then(|v| v.as_str().parse().ok())
        .unwrap_or(200);
    if code >= 300 {
        let status: Status = codec::from_msgpack(&reply.payload).map_err(|e| ApiError::Decode {
            subject: subject.to_string(),
            detail: format!("status with code {code}: {e}"),
        })?;
        return Err(ApiError::Status(status));
    }
    let value = codec::from_msgpack(&reply.payload).map_err(|e| ApiError::Decode {
        subject: subject.to_string(),
        detail: e.to_string(),
    })?;
    Ok((value, reply.headers))
}
