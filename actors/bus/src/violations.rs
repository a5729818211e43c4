//! The server's refusals of what a connection's role does not allow.
//!
//! A forbidden publish is not answered on its request: the server drops the message and
//! tells the connection (`-ERR 'Permissions Violation for Publish to "…"'`), which async-nats
//! hands to the connection's event callback while the request waits out its timeout. Every
//! connection made by [`crate::connect`] reports those here, so a request refused this way
//! fails at once with a message saying so ([`refused_or`]) instead of "no API actor answered".

use std::future::Future;
use std::sync::LazyLock;

use tokio::sync::broadcast;

/// One refusal, of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The connection's inbox prefix: private per identity, so it tells connections apart.
    pub inbox: String,
    /// Who the connection is, as people know it (`identity viewer1 (role viewer)`).
    pub identity: String,
    pub kind: ViolationKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViolationKind {
    Publish(String),
    Subscribe(String),
    /// The server refused the credential itself: revoked, or never issued there.
    Credential,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            ViolationKind::Publish(s) => {
                write!(
                    f,
                    "permission denied: {} may not publish {s}",
                    self.identity
                )
            }
            ViolationKind::Subscribe(s) => {
                write!(
                    f,
                    "permission denied: {} may not subscribe to {s}",
                    self.identity
                )
            }
            ViolationKind::Credential => write!(
                f,
                "the bus refused the credential of {} (revoked, or not issued by this cluster)",
                self.identity
            ),
        }
    }
}

static FEED: LazyLock<broadcast::Sender<Violation>> = LazyLock::new(|| broadcast::channel(256).0);

/// Every refusal reported from now on, of every connection of this process.
pub fn subscribe() -> broadcast::Receiver<Violation> {
    FEED.subscribe()
}

/// Records a connection event, when it is a refusal: the server's error about a publish or
/// subscription, or its refusal of the credential (said on a live connection, or found by
/// the client when reconnecting after the server dropped a revoked identity silently).
pub(crate) fn report(inbox: &str, identity: &str, event: &async_nats::Event) {
    use async_nats::{ClientError, Event, ServerError};
    let kind = match event {
        Event::ServerError(ServerError::AuthorizationViolation) => ViolationKind::Credential,
        Event::ServerError(ServerError::Other(text)) => match parse(text) {
            Some(kind) => kind,
            None => return,
        },
        Event::ClientError(ClientError::Other(text))
            if text.to_lowercase().contains("authorization violation") =>
        {
            ViolationKind::Credential
        }
        _ => return,
    };
    let _ = FEED.send(Violation {
        inbox: inbox.to_string(),
        identity: identity.to_string(),
        kind,
    });
}

/// `Permissions Violation for Publish to "x"` / `… for Subscription to "x"` (the server may
/// add ` using queue "q"`).
fn parse(text: &str) -> Option<ViolationKind> {
    let rest = text.strip_prefix("Permissions Violation for ")?;
    let (op, rest) = rest.split_once(" to ")?;
    let subject = rest.trim_start_matches('"').split('"').next()?.to_string();
    match op {
        "Publish" => Some(ViolationKind::Publish(subject)),
        "Subscription" => Some(ViolationKind::Subscribe(subject)),
        _ => None,
    }
}

/// The inbox prefix of `client`'s connection: its inboxes minus their last token.
pub fn inbox_of(client: &async_nats::Client) -> String {
    let inbox = client.new_inbox();
    match inbox.rsplit_once('.') {
        Some((prefix, _)) => prefix.to_string(),
        None => inbox,
    }
}

/// Runs `work` (a request on `subject` by `client`) unless the server refuses `client` that
/// publish, or its credential, first.
pub async fn refused_or<T>(
    client: &async_nats::Client,
    subject: &str,
    work: impl Future<Output = T>,
) -> Result<T, Violation> {
    refused_or_in(&inbox_of(client), subject, work).await
}

/// [`refused_or`] for a connection whose inbox prefix ([`inbox_of`]) the caller keeps: an
/// API client makes many requests on one connection.
pub async fn refused_or_in<T>(
    inbox: &str,
    subject: &str,
    work: impl Future<Output = T>,
) -> Result<T, Violation> {
    let mut feed = subscribe();
    let refused = async {
        loop {
            match feed.recv().await {
                Ok(v) if v.inbox == inbox && v.kind == ViolationKind::Credential => return v,
                Ok(v) if v.inbox == inbox => {
                    if let ViolationKind::Publish(s) = &v.kind {
                        if s == subject {
                            return v;
                        }
                    }
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            }
        }
    };
    tokio::select! {
        biased;
        v = refused => Err(v),
        done = work => Ok(done),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_refusals_parse() {
        assert_eq!(
            parse(r#"Permissions Violation for Publish to "shoal.v1.api.pod.create""#),
            Some(ViolationKind::Publish("shoal.v1.api.pod.create".into()))
        );
        assert_eq!(
            parse(r#"Permissions Violation for Subscription to "a.>" using queue "q""#),
            Some(ViolationKind::Subscribe("a.>".into()))
        );
        assert_eq!(parse("Slow Consumer"), None);
    }
}
