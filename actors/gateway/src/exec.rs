//! `kubectl exec` over WebSocket (the `v5.channel.k8s.io` remote-command protocol kubectl
//! 1.32 uses by default, and v4). Without `-i`/`-t` the command runs through the node agent's
//! one-shot bus exec and its buffered output comes back on the stdout and stderr channels.
//! With `-i` or `-t` it runs as a streaming session ([`shoal_bus::exec`]): stdin (channel 0),
//! terminal resizes (channel 4) and v5's stream close (channel 255) go to the agent as they
//! arrive, output comes back on channels 1 and 2 (one stream with a TTY) as it is printed,
//! and the outcome ends the stream as a Status on the error channel (3), as the kubelet
//! sends it.

use std::time::Duration;

use bus_schemas::api::{ExecExit, ExecReply, ExecRequest};
use bus_schemas::{codec, subjects, Reason};
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL,
    UPGRADE,
};
use hyper::StatusCode;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use shoal_bus::exec::{ExecEvent, ExecInputs, ExecOutputs};
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::bus::Bus;
use crate::http::{self, Response};
use crate::websocket::{self, close_frame, frame, Message, OP_BINARY, OP_PONG};

/// The subprotocols served, most preferred first.
const PROTOCOLS: &[&str] = &["v5.channel.k8s.io", "v4.channel.k8s.io"];
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
/// v5: "no more data on the stream named in the payload" (kubectl sends it at stdin's EOF).
const CLOSE: u8 = 255;
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

fn channel(id: u8, data: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(data.len() + 1);
    payload.push(id);
    payload.extend_from_slice(data);
    frame(OP_BINARY, &payload)
}

/// The Status of a session's end, as for a one-shot reply.
fn session_outcome(exit: &ExecExit) -> Value {
    let reply = ExecReply {
        exit_code: exit.exit_code,
        error: exit.error.clone(),
        ..Default::default()
    };
    outcome(&Ok(reply))
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
    let tty = flag("tty");
    let interactive = flag("stdin") || tty;
    let accept = websocket::accept_key(key);
    let request = ExecRequest {
        namespace: namespace.clone(),
        pod: pod.clone(),
        container: query.get("container").cloned().unwrap_or_default(),
        command: commands,
        timeout_seconds: if interactive { 0 } else { EXEC_TIMEOUT_SECONDS },
        stdin: flag("stdin"),
        tty,
        ..Default::default()
    };
    let v5 = *protocol == PROTOCOLS[0];
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else { return };
        let mut io = TokioIo::new(upgraded);
        if interactive {
            let (read, mut write) = tokio::io::split(io);
            match start_session(&bus, request).await {
                Ok((inputs, outputs)) => {
                    session(read, &mut write, inputs, outputs, v5, tty).await;
                }
                Err(e) => {
                    let status = serde_json::to_vec(&outcome(&Err(e))).unwrap_or_default();
                    let _ = write.write_all(&channel(ERROR, &status)).await;
                    let _ = write.write_all(&close_frame(1000)).await;
                }
            }
            let _ = write.flush().await;
            let _ = write.shutdown().await;
            return;
        }
        let reply = run(&bus, &request).await;
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
        let _ = io.write_all(&close_frame(1000)).await;
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

/// The node the pod runs on.
async fn node_of(bus: &Bus, namespace: &str, name: &str) -> Result<String, String> {
    let pods = crate::resources::of_kind("Pod").expect("pods are served");
    let pod = bus
        .get(&pods, namespace, name)
        .await
        .map_err(|e| e.to_string())?;
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        return Err(format!(
            "pod {name:?} is not scheduled to a node yet: nothing runs to exec into"
        ));
    }
    Ok(node.to_string())
}

/// Runs the command through the pod's node agent.
async fn run(bus: &Bus, request: &ExecRequest) -> Result<ExecReply, String> {
    let node = node_of(bus, &request.namespace, &request.pod).await?;
    let body = codec::to_msgpack(request).map_err(|e| e.to_string())?;
    let subject = subjects::agent_request(&node, "exec");
    let wait = Duration::from_secs(u64::from(EXEC_TIMEOUT_SECONDS) + 10);
    let reply = tokio::time::timeout(wait, bus.nats.request(subject, body.into()))
        .await
        .map_err(|_| format!("node {node:?} did not answer in time"))?
        .map_err(|e| format!("node {node:?} did not answer: is its agent running? ({e})"))?;
    codec::from_msgpack(&reply.payload).map_err(|e| e.to_string())
}

async fn start_session(
    bus: &Bus,
    request: ExecRequest,
) -> Result<(ExecInputs, ExecOutputs), String> {
    let node = node_of(bus, &request.namespace, &request.pod).await?;
    shoal_bus::exec::start(&bus.nats, &node, request)
        .await
        .map_err(|e| e.to_string())
}

/// kubectl's resize message (Kubernetes' `TerminalSize`, Go field names).
#[derive(serde::Deserialize)]
struct Resize {
    #[serde(rename = "Width")]
    width: u16,
    #[serde(rename = "Height")]
    height: u16,
}

/// Relays one interactive session until the command ends or the client leaves; the client
/// leaving (or its connection failing) cancels the command.
async fn session<R, W>(
    read: R,
    write: &mut W,
    inputs: ExecInputs,
    outputs: ExecOutputs,
    v5: bool,
    tty: bool,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin,
{
    // One writer (this task) for the output and the pongs, fed by both directions.
    let (frames_tx, mut frames) = mpsc::channel::<Vec<u8>>(64);
    let client = tokio::spawn(from_client(read, inputs.clone(), frames_tx.clone(), v5));
    let output = tokio::spawn(to_client(outputs, frames_tx, tty));
    while let Some(bytes) = frames.recv().await {
        if write.write_all(&bytes).await.is_err() {
            break;
        }
        if bytes.first() == Some(&(0x80 | websocket::OP_CLOSE)) {
            break;
        }
    }
    client.abort();
    if !output.is_finished() {
        output.abort();
        inputs.cancel().await;
    }
}

/// Client frames into session input: stdin, resizes, stdin's close; pings answered.
async fn from_client<R: AsyncRead + Unpin>(
    read: R,
    inputs: ExecInputs,
    frames: mpsc::Sender<Vec<u8>>,
    v5: bool,
) {
    let mut reader = websocket::Reader::new(read);
    loop {
        let message = match reader.next().await {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!(error = %e, "exec client gone");
                break;
            }
        };
        match message {
            Message::Ping(payload) => {
                let _ = frames.send(frame(OP_PONG, &payload)).await;
            }
            Message::Pong => {}
            Message::Close => {
                let _ = frames.send(close_frame(1000)).await;
                break;
            }
            Message::Data(data) => match data.split_first() {
                Some((&STDIN, rest)) if !rest.is_empty() => inputs.stdin(rest.to_vec()).await,
                Some((&RESIZE, rest)) => match serde_json::from_slice::<Resize>(rest) {
                    Ok(r) => inputs.resize(r.width, r.height).await,
                    Err(e) => {
                        tracing::debug!(error = %e, "exec: a resize message that is not {{Width, Height}} ignored")
                    }
                },
                Some((&CLOSE, [stream, ..])) if v5 && *stream == STDIN => {
                    inputs.close_stdin().await
                }
                _ => {}
            },
        }
    }
    inputs.cancel().await;
}

/// Session output into channel frames, then the Status and the close.
async fn to_client(mut outputs: ExecOutputs, frames: mpsc::Sender<Vec<u8>>, tty: bool) {
    let status = loop {
        match outputs.next().await {
            Ok(ExecEvent::Stdout(d)) => {
                if frames.send(channel(STDOUT, &d)).await.is_err() {
                    return;
                }
            }
            Ok(ExecEvent::Stderr(d)) => {
                let id = if tty { STDOUT } else { STDERR };
                if frames.send(channel(id, &d)).await.is_err() {
                    return;
                }
            }
            Ok(ExecEvent::Exit(exit)) => break session_outcome(&exit),
            Err(e) => break outcome(&Err(e.to_string())),
        }
    };
    let status = serde_json::to_vec(&status).unwrap_or_default();
    let _ = frames.send(channel(ERROR, &status)).await;
    let _ = frames.send(close_frame(1000)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_prefix_their_id() {
        assert_eq!(channel(STDOUT, b"x"), vec![0x82, 2, 1, b'x']);
    }

    #[test]
    fn a_session_exit_is_the_status_kubelet_sends() {
        let ok = session_outcome(&ExecExit::default());
        assert_eq!(ok["status"], "Success");
        let five = session_outcome(&ExecExit {
            exit_code: 5,
            ..Default::default()
        });
        assert_eq!(five["reason"], "NonZeroExitCode");
        assert_eq!(five["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(five["details"]["causes"][0]["message"], "5");
    }
}
