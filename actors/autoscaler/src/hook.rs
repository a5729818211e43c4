//! Autoscaling hooks: an HPA annotated `autoscaling.shoal.io/hook: NAME` has its proposal
//! replaced by what `shoal.v1.hooks.autoscale.<NAME>` answers. A hook never stalls scaling:
//! no responder, a timeout or a reply that does not decode falls back to the built-in
//! proposal, and the caller says so with a warning Event and condition.

use std::time::Duration;

use bus_schemas::autoscaling::{decode_json_or_msgpack, HookReply, HookRequest};
use bus_schemas::subjects;

/// The annotation naming an HPA's hook.
pub const HOOK_ANNOTATION: &str = "autoscaling.shoal.io/hook";

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("no hook answers on {0}")]
    NoResponder(String),
    #[error("hook on {subject} did not answer within {timeout:?}")]
    Timeout { subject: String, timeout: Duration },
    #[error("hook on {subject} answered something that is not a HookReply: {detail}")]
    Malformed { subject: String, detail: String },
    #[error("hook on {subject} asked for {replicas} replicas: must be 0 or more")]
    Negative { subject: String, replicas: i32 },
    #[error("asking hook on {subject}: {detail}")]
    Request { subject: String, detail: String },
}

/// Asks the hook; its answer or why there is none.
pub async fn ask(
    nats: &async_nats::Client,
    hook: &str,
    request: &HookRequest,
    timeout: Duration,
) -> Result<HookReply, HookError> {
    let subject = subjects::autoscale_hook(hook);
    let body = serde_json::to_vec(request).map_err(|e| HookError::Request {
        subject: subject.clone(),
        detail: e.to_string(),
    })?;
    let asked = tokio::time::timeout(timeout, nats.request(subject.clone(), body.into())).await;
    let msg = match asked {
        Err(_) => return Err(HookError::Timeout { subject, timeout }),
        Ok(Err(e)) => {
            return Err(match e.kind() {
                async_nats::RequestErrorKind::NoResponders => HookError::NoResponder(subject),
                async_nats::RequestErrorKind::TimedOut => HookError::Timeout { subject, timeout },
                _ => HookError::Request {
                    subject,
                    detail: e.to_string(),
                },
            })
        }
        Ok(Ok(msg)) => msg,
    };
    let reply: HookReply =
        decode_json_or_msgpack(&msg.payload).map_err(|detail| HookError::Malformed {
            subject: subject.clone(),
            detail,
        })?;
    if reply.desired_replicas < 0 {
        return Err(HookError::Negative {
            subject,
            replicas: reply.desired_replicas,
        });
    }
    Ok(reply)
}
