//! Lifecycle hooks: postStart right after a container starts, preStop before it is asked to
//! stop. Handlers run like probes do: `exec` inside the container through the runtime,
//! `httpGet` from the node's network (where pod IPs are reachable), `sleep` on the agent.
//! A hook's failure is a message for the Event; what it means (kill the container, or go on
//! terminating) is the caller's decision.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bus_schemas::kinds::container::Container;
use bus_schemas::kinds::lifecycle::LifecycleHandler;
use bus_schemas::kinds::probe::HttpGetAction;
use bus_schemas::kinds::Pod;
use shoal_node::runtime::ExecRequest;
use shoal_node::SandboxInfo;

use crate::agent::AgentCtx;

/// A postStart hook that never returns would hold its pod's worker (as it holds the
/// kubelet's pod sync); past this it counts as failed and the container is killed.
pub const POST_START_TIMEOUT: Duration = Duration::from_secs(120);
/// Kubernetes' floor for the SIGTERM-to-SIGKILL window left after a preStop hook.
const MIN_GRACE_AFTER_PRE_STOP: Duration = Duration::from_secs(2);
/// HTTP handlers get this long to answer, like the kubelet's hook client.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs one handler for the container `container_id`, bounded by `timeout`.
pub async fn run(
    ctx: &Arc<AgentCtx>,
    sandbox: &SandboxInfo,
    container_id: &str,
    container: &Container,
    handler: &LifecycleHandler,
    timeout: Duration,
) -> Result<(), String> {
    if ctx.backend.is_hollow() {
        return Ok(());
    }
    let work = async {
        if let Some(exec) = &handler.exec {
            let request = ExecRequest::new(exec.command.clone(), timeout);
            let id = container_id.to_string();
            let done = ctx
                .call(move |rt| rt.exec(&id, &request))
                .await
                .map_err(|e| format!("exec {:?}: {e}", exec.command))?;
            if done.timed_out {
                return Err(format!("exec {:?}: timed out", exec.command));
            }
            if done.exit_code != 0 {
                let output = String::from_utf8_lossy(&done.stdout).trim().to_string();
                return Err(format!(
                    "exec {:?} exited with {}: {output}",
                    exec.command, done.exit_code
                ));
            }
            return Ok(());
        }
        if let Some(get) = &handler.http_get {
            let target = http_target(get, container, sandbox)?;
            let net = ctx.hostnet.clone();
            let get = get.clone();
            return tokio::task::spawn_blocking(move || {
                net.run(move || http_get(&get, &target, HTTP_TIMEOUT.min(timeout)))
                    .map_err(|e| e.to_string())?
            })
            .await
            .map_err(|e| format!("http-get: {e}"))?;
        }
        if let Some(sleep) = &handler.sleep {
            tokio::time::sleep(Duration::from_secs(sleep.seconds.max(0) as u64)).await;
            return Ok(());
        }
        Err("no handler".into())
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "{} did not finish within {timeout:?}",
                handler.describe()
            ))
        })
}

/// Runs the container's preStop hook (if it has one and is running), then stops it with what
/// is left of `grace` (at least two seconds, as Kubernetes leaves). A failed hook is reported
/// as a `FailedPreStopHook` Event and termination goes on.
pub async fn stop(
    ctx: &Arc<AgentCtx>,
    pod: Option<&Pod>,
    sandbox: Option<&SandboxInfo>,
    container_id: &str,
    container: &Container,
    grace: Duration,
) {
    let began = Instant::now();
    let pre_stop = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref());
    let mut grace_left = grace;
    if let (Some(handler), Some(sandbox)) = (pre_stop, sandbox) {
        let id = container_id.to_string();
        let running = ctx
            .call(move |rt| rt.container_state(&id))
            .await
            .is_ok_and(|s| s.is_running());
        if running {
            let outcome = run(ctx, sandbox, container_id, container, handler, grace).await;
            if let Err(message) = outcome {
                tracing::info!(container = %container.name, %message, "preStop hook failed");
                if let Some(pod) = pod {
                    let message = format!(
                        "PreStopHook failed for container {:?}: {message}",
                        container.name
                    );
                    ctx.pod_event(pod, "Warning", "FailedPreStopHook", &message)
                        .await;
                }
            }
            grace_left = grace
                .saturating_sub(began.elapsed())
                .max(MIN_GRACE_AFTER_PRE_STOP);
        }
    }
    let id = container_id.to_string();
    match ctx.call(move |rt| rt.stop_container(&id, grace_left)).await {
        Ok(_) => {}
        // Already removed (its sandbox went first, as a zero-grace delete allows): stopped.
        Err(e) if e.is_not_found() => {
            tracing::debug!(container = %container.name, "container already gone when stopped");
        }
        Err(e) => {
            tracing::warn!(container = %container.name, error = %e, "stopping container failed");
        }
    }
}

/// Where an httpGet handler connects: its host (the pod IP when empty) and its port, by
/// number or by the name of one of the container's ports.
fn http_target(
    get: &HttpGetAction,
    container: &Container,
    sandbox: &SandboxInfo,
) -> Result<Target, String> {
    let port = crate::probes::port_of(container, &get.port)
        .ok_or_else(|| format!("http-get: port {} is not a port of the container", get.port))?;
    if !get.scheme.is_empty() && !get.scheme.eq_ignore_ascii_case("HTTP") {
        return Err(format!(
            "http-get: scheme {} is not supported by this node yet (HTTP only)",
            get.scheme
        ));
    }
    let host = if get.host.is_empty() {
        IpAddr::V4(sandbox.ip).to_string()
    } else {
        get.host.clone()
    };
    Ok(Target { host, port })
}

struct Target {
    host: String,
    port: u16,
}

/// One GET with the handler's headers; success on 2xx and 3xx, as the kubelet's hook client.
fn http_get(get: &HttpGetAction, target: &Target, timeout: Duration) -> Result<(), String> {
    let addr: SocketAddr = match target.host.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, target.port),
        Err(_) => (target.host.as_str(), target.port)
            .to_socket_addrs()
            .map_err(|e| format!("http-get: resolving {}: {e}", target.host))?
            .next()
            .ok_or_else(|| format!("http-get: {} has no address", target.host))?,
    };
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("http-get: connect {addr}: {e}"))?;
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let path = if get.path.starts_with('/') {
        get.path.clone()
    } else {
        format!("/{}", get.path)
    };
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    let has_host = get
        .http_headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("host"));
    if !has_host {
        request.push_str(&format!("Host: {}:{}\r\n", target.host, target.port));
    }
    for header in &get.http_headers {
        request.push_str(&format!("{}: {}\r\n", header.name, header.value));
    }
    request.push_str("User-Agent: shoal-lifecycle-hook/1.0\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("http-get: sending to {addr}: {e}"))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(2).any(|w| w == b"\r\n") && head.len() < 8192 {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("http-get: reading from {addr}: {e}")),
        }
    }
    let code = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().nth(1).map(str::to_string))
        .and_then(|c| c.parse::<u16>().ok());
    match code {
        Some(c) if (200..400).contains(&c) => Ok(()),
        Some(c) => Err(format!("http-get http://{addr}{path}: status {c}")),
        None => Err(format!("http-get http://{addr}{path}: malformed response")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::kinds::probe::HttpHeader;
    use std::net::TcpListener;

    #[test]
    fn http_handlers_send_their_headers_and_judge_the_status() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for answer in ["200 OK", "500 Oops"] {
                let (mut conn, _) = listener.accept().unwrap();
                let mut request = vec![0u8; 4096];
                let n = conn.read(&mut request).unwrap();
                seen.push(String::from_utf8_lossy(&request[..n]).into_owned());
                conn.write_all(format!("HTTP/1.1 {answer}\r\n\r\n").as_bytes())
                    .unwrap();
            }
            seen
        });
        let get = HttpGetAction {
            path: "quit".into(),
            http_headers: vec![HttpHeader {
                name: "X-Reason".into(),
                value: "shutdown".into(),
            }],
            ..Default::default()
        };
        let target = Target {
            host: "127.0.0.1".into(),
            port,
        };
        assert_eq!(http_get(&get, &target, Duration::from_secs(5)), Ok(()));
        let failed = http_get(&get, &target, Duration::from_secs(5)).unwrap_err();
        assert!(failed.contains("status 500"), "{failed}");
        let seen = server.join().unwrap();
        assert!(seen[0].starts_with("GET /quit HTTP/1.1\r\n"), "{}", seen[0]);
        assert!(
            seen[0].contains("\r\nX-Reason: shutdown\r\n"),
            "{}",
            seen[0]
        );
    }
}
