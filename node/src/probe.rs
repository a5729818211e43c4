//! Liveness/readiness/startup probe primitives. Scheduling (periods,
//! thresholds) is the agent's job; these only perform one check.
//!
//! Pod IPs live on the node bridge; when that bridge is in another network
//! namespace (tests, or a node netns), wrap a probe in [`in_netns`].

use crate::error::{Error, Result};
use crate::runtime::{ExecRequest, Runtime};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeResult {
    Success,
    Failure(String),
}

impl ProbeResult {
    pub fn is_success(&self) -> bool {
        matches!(self, ProbeResult::Success)
    }
}

/// HTTP GET; success on a 200..=399 status.
pub fn http_get(ip: IpAddr, port: u16, path: &str, timeout: Duration) -> ProbeResult {
    let mut s = match send_get(ip, port, path, timeout, "HTTP/1.1") {
        Ok(s) => s,
        Err(e) => return ProbeResult::Failure(e),
    };
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(2).any(|w| w == b"\r\n") && head.len() < 8192 {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return ProbeResult::Failure(format!("read response: {e}")),
        }
    }
    match status_code(&head) {
        Some(c) if (200..400).contains(&c) => ProbeResult::Success,
        Some(c) => ProbeResult::Failure(format!("HTTP probe failed with statuscode: {c}")),
        None => ProbeResult::Failure("malformed HTTP response".into()),
    }
}

/// HTTP GET of a whole body of at most `limit` bytes (a metrics scrape). HTTP/1.0, so the
/// server answers with a plain body rather than chunks.
pub fn http_fetch(
    ip: IpAddr,
    port: u16,
    path: &str,
    timeout: Duration,
    limit: usize,
) -> std::result::Result<String, String> {
    let s = send_get(ip, port, path, timeout, "HTTP/1.0")?;
    let mut response = Vec::new();
    s.take(limit as u64 + 16 * 1024)
        .read_to_end(&mut response)
        .map_err(|e| format!("read response: {e}"))?;
    let code = status_code(&response).ok_or("malformed HTTP response")?;
    if !(200..300).contains(&code) {
        return Err(format!("HTTP status {code}"));
    }
    let start = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("malformed HTTP response: no end of headers")?
        + 4;
    if response.len() - start > limit {
        return Err(format!("response larger than {limit} bytes"));
    }
    String::from_utf8(response[start..].to_vec()).map_err(|_| "response is not UTF-8".into())
}

/// Connects and sends a GET, with `timeout` covering both.
fn send_get(
    ip: IpAddr,
    port: u16,
    path: &str,
    timeout: Duration,
    version: &str,
) -> std::result::Result<TcpStream, String> {
    let deadline = Instant::now() + timeout;
    let addr = SocketAddr::new(ip, port);
    let mut s =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let _ = s.set_read_timeout(Some(left));
    let _ = s.set_write_timeout(Some(left));
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let req = format!(
        "GET {path} {version}\r\nHost: {addr}\r\nUser-Agent: shoal-probe/1.0\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("send request: {e}"))?;
    Ok(s)
}

fn status_code(head: &[u8]) -> Option<u16> {
    let line = String::from_utf8_lossy(&head[..head.len().min(256)]);
    line.lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
}

/// TCP connect; success if the connection is accepted.
pub fn tcp_socket(ip: IpAddr, port: u16, timeout: Duration) -> ProbeResult {
    let addr = SocketAddr::new(ip, port);
    match TcpStream::connect_timeout(&addr, timeout) {
        Ok(_) => ProbeResult::Success,
        Err(e) => ProbeResult::Failure(format!("dial tcp {addr}: {e}")),
    }
}

/// Exec probe: success iff the command exits 0 within `timeout`.
pub fn exec(
    rt: &dyn Runtime,
    container_id: &str,
    argv: &[String],
    timeout: Duration,
) -> ProbeResult {
    match rt.exec(
        container_id,
        &ExecRequest::new(argv.iter().cloned(), timeout),
    ) {
        Ok(r) if r.timed_out => {
            ProbeResult::Failure(format!("command timed out after {timeout:?}"))
        }
        Ok(r) if r.exit_code == 0 => ProbeResult::Success,
        Ok(r) => ProbeResult::Failure(format!(
            "command exited with {}: {}",
            r.exit_code,
            String::from_utf8_lossy(&r.stdout).trim()
        )),
        Err(e) => ProbeResult::Failure(e.to_string()),
    }
}

/// Run `f` on a thread inside the network namespace at `netns` (see [`shoal_netns::in_netns`]).
pub fn in_netns<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    use shoal_netns::NetnsError;
    shoal_netns::in_netns(netns, f).map_err(|e| match e {
        NetnsError::Open { path, source } => Error::io(path, "open netns", source),
        NetnsError::Enter { path, source } => Error::sys(path, "setns", source),
        NetnsError::ThreadPanicked { .. } => Error::Network("probe thread panicked".into()),
    })
}
