//! `/metrics` over HTTP, and the NATS health gauges the page carries.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::metrics::metrics;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = if request.uri().path() == "/metrics" {
        Response::builder()
            .header("content-type", OPENMETRICS)
            .body(Full::new(Bytes::from(metrics().encode())))
    } else {
        Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Full::new(Bytes::from_static(b"metrics are on /metrics\n")))
    };
    Ok(response.unwrap_or_else(|_| Response::new(Full::new(Bytes::new()))))
}

/// Binds `addr` and serves `/metrics` until the task is dropped or aborted.
pub async fn serve_metrics(
    addr: SocketAddr,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(answer);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((bound, task))
}

/// Keeps the NATS gauges current: the connection's state, and whether JetStream answers an
/// account-info request (the server is up and its JetStream works).
pub async fn watch_nats(nats: async_nats::Client) {
    let js = async_nats::jetstream::new(nats.clone());
    let process = &metrics().process;
    loop {
        let connected = nats.connection_state() == async_nats::connection::State::Connected;
        process.nats_connected.set(i64::from(connected));
        let healthy = connected
            && tokio::time::timeout(Duration::from_secs(2), js.query_account())
                .await
                .is_ok_and(|r| r.is_ok());
        process.nats_server_healthy.set(i64::from(healthy));
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}
