//! Listening sockets, optionally inside another network namespace.
//!
//! A socket stays in the namespace it was created in, whatever thread later uses it. So the
//! sockets are created on a short-lived thread that first joins the namespace (`setns`); the
//! rest of the process never leaves its own. IP_FREEBIND lets a node-local replica bind the
//! node's bridge-gateway address before the bridge (and so the address) exists.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::Path;

use socket2::{Domain, Protocol, Socket, Type};

/// A UDP socket and a TCP listener on the same address.
#[derive(Debug)]
pub struct Bound {
    pub udp: UdpSocket,
    pub tcp: TcpListener,
}

impl Bound {
    /// The bound address (with the actual port when 0 was asked for).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.udp.local_addr()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("network namespace: {0}")]
    Netns(String),
    #[error("binding {what} {addr}: {source}")]
    Socket {
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the thread binding the sockets died")]
    ThreadDied,
}

/// Binds UDP and TCP on `addr`, inside the network namespace at `netns` when given (a path
/// such as `/var/run/netns/NAME` or `/proc/PID/ns/net`). Port 0 picks one port for both.
pub fn bind(addr: SocketAddr, netns: Option<&Path>) -> Result<Bound, BindError> {
    match netns {
        None => bind_here(addr),
        Some(path) => shoal_netns::in_netns(path, move || bind_here(addr))
            .map_err(|e| BindError::Netns(e.to_string()))?,
    }
}

fn bind_here(addr: SocketAddr) -> Result<Bound, BindError> {
    // With port 0, the UDP port picked may be taken for TCP: retry a few times.
    let attempts = if addr.port() == 0 { 16 } else { 1 };
    let mut last = None;
    for _ in 0..attempts {
        let udp = socket(addr, Type::DGRAM, Protocol::UDP)?;
        let udp_addr = udp
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .unwrap_or(addr);
        match socket(udp_addr, Type::STREAM, Protocol::TCP) {
            Ok(tcp) => {
                return Ok(Bound {
                    udp: udp.into(),
                    tcp: tcp.into(),
                })
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(BindError::ThreadDied))
}

fn socket(addr: SocketAddr, ty: Type, protocol: Protocol) -> Result<Socket, BindError> {
    let what = if ty == Type::DGRAM { "UDP" } else { "TCP" };
    let err = |source| BindError::Socket { what, addr, source };
    let socket = Socket::new(Domain::for_address(addr), ty, Some(protocol)).map_err(err)?;
    match addr {
        SocketAddr::V4(_) => socket.set_freebind_v4(true).map_err(err)?,
        SocketAddr::V6(_) => {
            socket.set_freebind_v6(true).map_err(err)?;
            socket.set_only_v6(true).map_err(err)?;
        }
    }
    if ty == Type::STREAM {
        socket.set_reuse_address(true).map_err(err)?;
    } else {
        // Bursts of queries queue here while the serving threads catch up.
        let _ = socket.set_recv_buffer_size(4 << 20);
    }
    socket.bind(&addr.into()).map_err(err)?;
    if ty == Type::STREAM {
        socket.listen(1024).map_err(err)?;
    }
    Ok(socket)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_zero_gives_one_port_for_both() {
        let b = bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
        let udp = b.udp.local_addr().unwrap();
        assert_ne!(udp.port(), 0);
        assert_eq!(b.tcp.local_addr().unwrap(), udp);
    }

    #[test]
    fn freebind_allows_an_address_this_host_lacks() {
        // TEST-NET-3: never assigned to this machine.
        let b = bind("203.0.113.77:0".parse().unwrap(), None).expect("freebind");
        assert_eq!(b.local_addr().unwrap().ip().to_string(), "203.0.113.77");
    }

    #[test]
    fn a_missing_namespace_is_a_clear_error() {
        let e = bind(
            "127.0.0.1:0".parse().unwrap(),
            Some(Path::new("/nonexistent/netns")),
        )
        .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/netns"), "{e}");
    }
}
