//! `kubectl exec` over WebSocket (the `v5.channel.k8s.io` remote-command protocol kubectl
//! 1.32 uses by default, and v4): the command runs through the node agent's bus exec, and
//! its output comes back on the stdout and stderr channels, then its outcome as a Status on
//! the error channel.
//!
//! NOTE: the bus exec has no stdin and no TTY yet, so `-i` and `-t` are answered with a
//! Status saying so; interactive sessions need the agent's exec extended first.

use std::time::Duration;

use base64::Engine;
use bus_schemas::api::{ExecReply, ExecRequest};
use bus_schemas::{codec, subjects, Reason};
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL,
    UPGRADE,
};
use hyper::StatusCode;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::bus::Bus;
use crate::http::{self, Response};

/// The subprotocols served, most preferred first.
const PROTOCOLS: &[&str] = &["v5.channel.k8s.io", "v4.channel.k8s.io"];
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
/// How long a command may run.
const EXEC_TIMEOUT_SECONDS: u32 = 300;

/// Whether a request asks to upgrade `pods/<name>/exec` to a WebSocket.
pub fn is_exec_upgrade(req: &hyper::Request<Incoming>) -> bool {
    req.uri().path().ends_with("/exec")
        && req
            .headers()
            .get(UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// `Sec-WebSocket-Accept` for a client's key (RFC 6455 §4.2.2).
fn accept_key(key: &str) -> String {
    const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{GUID}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// One unmasked binary frame (servers never mask), or a close frame.
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= u16::MAX as usize => {
            out.push(126);
            out.extend((n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend((n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

fn channel(id: u8, data: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(data.len() + 1);
    payload.push(id);
    payload.extend_from_slice(data);
    frame(0x2, &payload)
}

fn outcome(reply: &Result<ExecReply, String>) -> Value {
    match reply {
        Ok(r) if r.error.is_empty() && r.exit_code == 0 => {
            json!({"metadata": {}, "status": "Success"})
        }
        Ok(r) if r.error.is_empty() => json!({
            "metadata": {}, "status": "Failure",
            "message": format!("command terminated with non-zero exit code: {}", r.exit_code),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": r.exit_code.to_string()}]},
        }),
        Ok(r) => {
            json!({"metadata": {}, "status": "Failure", "message": r.error, "reason": "InternalError"})
        }
        Err(e) => {
            json!({"metadata": {}, "status": "Failure", "message": e, "reason": "InternalError"})
        }
    }
}

pub async fn serve(bus: Bus, mut req: hyper::Request<Incoming>) -> Response {
    let query = http::parse_query(req.uri().query());
    let commands: Vec<String> = form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.into_owned())
        .collect();
    let segments: Vec<&str> = req
        .uri()
        .path()
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (namespace, pod) = match segments.as_slice() {
        ["api", "v1", "namespaces", ns, "pods", pod, "exec"] => (ns.to_string(), pod.to_string()),
        _ => return http::not_found(req.uri().path()),
    };
    let Some(key) = req
        .headers()
        .get(SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
    else {
        return http::error(
            Reason::BadRequest,
            "a WebSocket upgrade needs Sec-WebSocket-Key",
        );
    };
    let offered = req
        .headers()
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
        .collect::<Vec<_>>();
    let Some(protocol) = PROTOCOLS.iter().find(|p| offered.iter().any(|o| o == *p)) else {
        return http::error(
            Reason::BadRequest,
            format!(
                "none of the offered subprotocols {offered:?} is served; supported: {PROTOCOLS:?}"
            ),
        );
    };
    let flag = |k: &str| {
        query
            .get(k)
            .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
    };
    let interactive = flag("stdin") || flag("tty");
    let accept = accept_key(key);
    let request = ExecRequest {
        namespace: namespace.clone(),
        pod: pod.clone(),
        container: query.get("container").cloned().unwrap_or_default(),
        command: commands,
        timeout_seconds: EXEC_TIMEOUT_SECONDS,
    };
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else { return };
        let mut io = TokioIo::new(upgraded);
        let reply = if interactive {
            Err("stdin and TTY are not supported by this cluster's exec yet: run the command without -i/-t".to_string())
        } else {
            run(&bus, &request).await
        };
        if let Ok(r) = &reply {
            if !r.stdout.is_empty() {
                let _ = io.write_all(&channel(STDOUT, &r.stdout)).await;
            }
            if !r.stderr.is_empty() {
                let _ = io.write_all(&channel(STDERR, &r.stderr)).await;
            }
        }
        let status = serde_json::to_vec(&outcome(&reply)).unwrap_or_default();
        let _ = io.write_all(&channel(ERROR, &status)).await;
        let _ = io.write_all(&frame(0x8, &1000u16.to_be_bytes())).await;
        let _ = io.flush().await;
        let _ = io.shutdown().await;
    });
    let mut resp = hyper::Response::new(http::full(bytes::Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = resp.headers_mut();
    headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        headers.insert(SEC_WEBSOCKET_ACCEPT, v);
    }
    headers.insert(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(protocol));
    resp
}

/// Runs the command through the pod's node agent.
async fn run(bus: &Bus, request: &ExecRequest) -> Result<ExecReply, String> {
    let pods = crate::resources::of_kind("Pod").expect("pods are served");
    let pod = bus
        .get(&pods, &request.namespace, &request.pod)
        .await
        .map_err(|e| e.to_string())?;
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        return Err(format!(
            "pod {:?} is not scheduled to a node yet: nothing runs to exec into",
            request.pod
        ));
    }
    let body = codec::to_msgpack(request).map_err(|e| e.to_string())?;
    let subject = subjects::agent_request(node, "exec");
    let wait = Duration::from_secs(u64::from(EXEC_TIMEOUT_SECONDS) + 10);
    let reply = tokio::time::timeout(wait, bus.nats.request(subject, body.into()))
        .await
        .map_err(|_| format!("node {node:?} did not answer in time"))?
        .map_err(|e| format!("node {node:?} did not answer: is its agent running? ({e})"))?;
    codec::from_msgpack(&reply.payload).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_follows_rfc6455() {
        // The example handshake of RFC 6455 §1.3.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn frames_carry_their_length() {
        assert_eq!(frame(0x2, b"ab"), vec![0x82, 2, b'a', b'b']);
        let long = frame(0x2, &[0; 300]);
        assert_eq!(&long[..4], &[0x82, 126, 1, 44]);
        assert_eq!(channel(STDOUT, b"x"), vec![0x82, 2, 1, b'x']);
    }
}
