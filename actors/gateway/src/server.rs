//! The HTTP(S) server: accepts connections (TLS when configured, HTTP/2 or HTTP/1.1),
//! authenticates and authorizes each request before anything else is done for it, reads its
//! body under the size limit, and routes it.

use std::net::SocketAddr;
use std::sync::Arc;

use bus_schemas::Reason;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::StatusCode;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::rustls;

use crate::authn::{Authenticator, Caller};
use crate::bus::Bus;
use crate::http::{self, Request, Response, MAX_BODY_BYTES};
use crate::route::{self, Route};
use crate::{authz, discovery, metrics, objects, openapi, reviews};

/// Serves connections from `listener` until `shutdown` resolves; then drops every open
/// connection (clients of a watch re-watch from their last resourceVersion elsewhere).
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    bus: Bus,
    callers: Authenticator,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    continue;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let bus = bus.clone();
        let callers = callers.clone();
        let acceptor = acceptor.clone();
        connections.spawn(async move {
            match acceptor {
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(tls) => serve_connection(TokioIo::new(tls), bus, callers, peer).await,
                    Err(e) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                },
                None => serve_connection(TokioIo::new(stream), bus, callers, peer).await,
            }
        });
    }
    connections.shutdown().await;
}

async fn serve_connection<IO>(io: TokioIo<IO>, bus: Bus, callers: Authenticator, peer: SocketAddr)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req: hyper::Request<Incoming>| {
        let bus = bus.clone();
        let callers = callers.clone();
        async move { Ok::<_, std::convert::Infallible>(handle(bus, &callers, req, peer).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    if let Err(e) = builder.serve_connection_with_upgrades(io, service).await {
        tracing::debug!(%peer, error = %e, "connection ended");
    }
}

async fn handle(
    bus: Bus,
    callers: &Authenticator,
    req: hyper::Request<Incoming>,
    peer: SocketAddr,
) -> Response {
    let route = route::parse(req.uri().path());
    // None: anonymous, which reaches only the public paths.
    let caller = match callers.authenticate(req.headers()) {
        Ok(Some(caller)) => Some(caller),
        Ok(None) if authz::public(&route) => None,
        Ok(None) => return http::unauthorized(),
        Err(refusal) => {
            tracing::info!(%peer, path = %req.uri().path(), ?refusal, "credential refused");
            return http::unauthorized();
        }
    };
    if crate::exec::is_exec_upgrade(&req) {
        let query = http::parse_query(req.uri().query());
        if let Err(refused) = authorize(
            caller.as_ref(),
            req.method(),
            req.uri().path(),
            &query,
            &route,
        ) {
            return refused;
        }
        return crate::exec::serve(bus, req).await;
    }
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return http::error(
                Reason::RequestEntityTooLarge,
                format!("the request body is larger than the limit of {MAX_BODY_BYTES} bytes (3 MiB); nothing was written"),
            );
        }
        Err(e) => {
            return http::error(Reason::BadRequest, format!("reading the request body: {e}"));
        }
    };
    let request = Request {
        method: parts.method,
        path: parts.uri.path().to_string(),
        query: http::parse_query(parts.uri.query()),
        headers: parts.headers,
        body,
    };
    let response = match authorize(
        caller.as_ref(),
        &request.method,
        &request.path,
        &request.query,
        &route,
    ) {
        Ok(()) => dispatch(&bus, &request, caller.as_ref(), route).await,
        Err(refused) => refused,
    };
    let user = caller
        .as_ref()
        .map_or("system:anonymous", |c| c.name.as_str());
    tracing::debug!(method = %request.method, path = %request.path, %user, status = %response.status(), "request");
    response
}

/// Refuses, with Kubernetes' 403, what the caller's role may not do on the bus; nothing of
/// the request has been done yet.
fn authorize(
    caller: Option<&Caller>,
    method: &hyper::Method,
    path: &str,
    query: &std::collections::HashMap<String, String>,
    route: &Route,
) -> Result<(), Response> {
    if authz::public(route) {
        return Ok(());
    }
    let Some(caller) = caller else {
        return Err(http::unauthorized());
    };
    let Some(attributes) = authz::of_request(method, query, route) else {
        // Discovery, OpenAPI and the reviews of oneself: every authenticated caller's.
        return Ok(());
    };
    if authz::bus_uses(&attributes).is_none() {
        // Nothing served matches: Kubernetes' 404 for an unknown subresource, 405 for a
        // method the resource does not take, whoever asks; nothing is touched.
        return Err(if authz::known_subresource(&attributes) {
            http::method_not_allowed(method, path)
        } else {
            http::not_found(path)
        });
    }
    authz::decide(&caller.permissions, &attributes).map_err(|why| {
        tracing::info!(user = %caller.name, role = %caller.role, verb = %attributes.verb, resource = %attributes.resource, %why, "forbidden");
        http::status(&authz::forbidden(caller, &attributes))
    })
}

async fn dispatch(bus: &Bus, req: &Request, caller: Option<&Caller>, route: Route) -> Response {
    let aggregated = |core: bool| {
        if req.wants_aggregated_discovery() {
            http::json_with(
                StatusCode::OK,
                discovery::AGGREGATED_CONTENT_TYPE,
                &discovery::aggregated(core),
            )
        } else if core {
            http::json(&discovery::api_versions())
        } else {
            http::json(&discovery::api_group_list())
        }
    };
    match route {
        Route::Version => http::json(&discovery::version()),
        Route::Health => http::bytes_response(StatusCode::OK, "text/plain", "ok"),
        Route::CoreGroup => aggregated(true),
        Route::Groups => aggregated(false),
        Route::GroupVersion { group, version } => {
            match discovery::resource_list(&group, &version) {
                Some(list) => http::json(&list),
                None => http::not_found(&req.path),
            }
        }
        Route::OpenApi(None) => http::json(&openapi::index()),
        Route::OpenApi(Some(path)) => match openapi::document(&path) {
            Some(doc) => http::bytes_response(StatusCode::OK, "application/json", doc),
            None => http::not_found(&req.path),
        },
        Route::Object(path) => objects::handle(bus, req, path).await,
        Route::Metrics {
            plural,
            namespace,
            name,
        } => metrics::serve(bus, req, &plural, namespace.as_deref(), name.as_deref()).await,
        Route::Review(kind) => match caller {
            Some(caller) => reviews::serve(req, caller, kind),
            None => http::unauthorized(),
        },
        Route::Unknown => http::not_found(&req.path),
    }
}
