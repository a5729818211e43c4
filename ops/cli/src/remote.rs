//! Untyped access to the API: objects as JSON values, for commands that treat every kind
//! alike (get, describe, delete, label).

use anyhow::Result;
use bus_schemas::api::{ListOptions, ObjectList, ObjectRef};
use bus_schemas::subjects::Verb;
use bus_schemas::{codec, KindInfo};
use serde::Serialize;
use serde_json::Value;
use shoal_bus::auth::ClientAuth;
use shoal_bus::client::decode_reply;
use shoal_bus::violations::{self, ViolationKind};
use shoal_bus::{ApiClient, ApiError};

pub struct Session {
    pub nats: async_nats::Client,
    pub api: ApiClient,
    pub url: String,
}

impl Session {
    pub async fn connect(url: &str, auth: &ClientAuth) -> Result<Session> {
        let nats = shoal_bus::connect(url, "shoal-cli", auth)
            .await
            .map_err(|e| anyhow::anyhow!(crate::creds::connect_error(&e, auth, url)))?;
        end_when_refused(&nats);
        Ok(Session {
            // As kubectl shows a server's `Warning:` headers.
            api: ApiClient::new(nats.clone())
                .with_warning_handler(|warning| eprintln!("Warning: {warning}")),
            nats,
            url: url.to_string(),
        })
    }

    /// Names the command's writes in `metadata.managedFields` (`shoal-label`, `shoal-scale`…).
    pub fn with_field_manager(mut self, manager: &str) -> Session {
        self.api = self.api.with_field_manager(manager);
        self
    }

    pub async fn call<B: Serialize>(
        &self,
        info: &KindInfo,
        verb: Verb,
        body: &B,
    ) -> Result<Value, ApiError> {
        let body = codec::to_msgpack(body).map_err(|e| ApiError::Decode {
            subject: String::new(),
            detail: e.to_string(),
        })?;
        let reply = self.api.request_raw(&info.token(), verb, body).await?;
        let subject = bus_schemas::subjects::api(&info.token(), verb);
        Ok(decode_reply::<Value>(&subject, reply)?.0)
    }

    pub async fn get(
        &self,
        info: &KindInfo,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.call(
            info,
            Verb::Get,
            &ObjectRef {
                namespace: namespace.into(),
                name: name.into(),
            },
        )
        .await
    }

    /// Every page of a list.
    pub async fn list(
        &self,
        info: &KindInfo,
        options: &ListOptions,
    ) -> Result<(Vec<Value>, String), ApiError> {
        let mut options = options.clone();
        let mut items = Vec::new();
        loop {
            let page = self.call(info, Verb::List, &options).await?;
            let page: ObjectList<Value> =
                serde_json::from_value(page).map_err(|e| ApiError::Decode {
                    subject: "list".into(),
                    detail: e.to_string(),
                })?;
            items.extend(page.items);
            if page.metadata.continue_token.is_empty() {
                return Ok((items, page.metadata.resource_version));
            }
            options.continue_token = page.metadata.continue_token;
        }
    }
}

/// A command whose credential the bus stops accepting (revoked while it runs: a watch, a
/// log follow) ends with that message instead of retrying forever.
fn end_when_refused(nats: &async_nats::Client) {
    let inbox = violations::inbox_of(nats);
    let mut feed = violations::subscribe();
    tokio::spawn(async move {
        loop {
            match feed.recv().await {
                Ok(v) if v.inbox == inbox && v.kind == ViolationKind::Credential => {
                    eprintln!("error: {v}");
                    std::process::exit(1);
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                _ => {}
            }
        }
    });
}

pub async fn version(session: &Session) -> Result<i32> {
    println!("Client Version: shoal {}", env!("CARGO_PKG_VERSION"));
    let info = session.nats.server_info();
    println!(
        "NATS Server: {} (nats-server {}, at {})",
        info.server_name, info.version, session.url
    );
    let ns = bus_schemas::kinds::lookup("ns").expect("namespaces are a kind");
    match session.list(ns, &ListOptions::default()).await {
        Ok((_, rv)) => println!("Cluster: API reachable, state log at revision {rv}"),
        Err(e) => println!("Cluster: API not reachable: {e}"),
    }
    crate::cluster::print_health(&session.nats, &session.url).await;
    Ok(0)
}
