//! The node's network namespace ("host"): where the pod bridge, the host veths, the routes
//! and the service proxy's rules live. Usually the agent's own namespace; with
//! `AgentConfig::host_netns` another one, while the agent's NATS connection stays where the
//! process is. That is how several nodes share one machine (tests, benchmarks), and how a
//! node whose link is cut keeps talking to the control plane to say so.
//!
//! Everything here blocks (it spawns threads and processes): call it off the async runtime.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use nix::net::if_::InterfaceFlags;

#[derive(Debug, thiserror::Error)]
pub enum HostNetError {
    #[error("entering network namespace {0}: {1}")]
    Enter(PathBuf, String),
    #[error("{program}: {error}")]
    Spawn {
        program: String,
        error: std::io::Error,
    },
    #[error("listing interfaces: {0}")]
    Interfaces(nix::Error),
}

/// The namespace holding the node's network, or the agent's own one.
#[derive(Debug, Clone, Default)]
pub struct HostNet {
    netns: Option<PathBuf>,
}

/// What the uplink check saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkState {
    Up,
    /// Down, without carrier, or missing: why, for the node condition's message.
    Down(String),
}

impl HostNet {
    pub fn new(netns: Option<PathBuf>) -> HostNet {
        HostNet { netns }
    }

    pub fn netns(&self) -> Option<&Path> {
        self.netns.as_deref()
    }

    /// Runs `f` inside the namespace: on a thread that joined it (setns affects only the
    /// calling thread, so the agent's other threads and its NATS sockets stay put). Sockets
    /// `f` opens and processes it spawns belong to the namespace.
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, HostNetError> {
        match &self.netns {
            None => Ok(f()),
            Some(path) => shoal_netns::in_netns(path, f)
                .map_err(|e| HostNetError::Enter(path.clone(), e.to_string())),
        }
    }

    /// Runs `program args…` inside the namespace, feeding it `stdin`.
    pub fn command(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<String>,
    ) -> Result<Output, HostNetError> {
        let program = program.to_string();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let name = program.clone();
        self.run(move || {
            let mut child = Command::new(&program)
                .args(&args)
                .stdin(if stdin.is_some() {
                    Stdio::piped()
                } else {
                    Stdio::null()
                })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
                use std::io::Write;
                // A failed write shows as the program's own error (it read a short input).
                let _ = pipe.write_all(text.as_bytes());
            }
            child.wait_with_output()
        })?
        .map_err(|error| HostNetError::Spawn {
            program: name,
            error,
        })
    }

    /// Whether interface `name` is administratively up and has carrier (IFF_RUNNING).
    pub fn link_state(&self, name: &str) -> Result<LinkState, HostNetError> {
        let name = name.to_string();
        self.run(move || {
            // getifaddrs(3) asks the kernel over a netlink socket opened by this thread, so it
            // sees the namespace this thread joined (unlike /sys/class/net, which shows the
            // namespace sysfs was mounted from).
            let addrs = nix::ifaddrs::getifaddrs().map_err(HostNetError::Interfaces)?;
            let mut flags = None;
            for a in addrs.filter(|a| a.interface_name == name) {
                flags = Some(flags.unwrap_or(InterfaceFlags::empty()) | a.flags);
            }
            Ok(match flags {
                None => LinkState::Down(format!("interface {name} does not exist")),
                Some(f) if !f.contains(InterfaceFlags::IFF_UP) => {
                    LinkState::Down(format!("interface {name} is down"))
                }
                Some(f) if !f.contains(InterfaceFlags::IFF_RUNNING) => {
                    LinkState::Down(format!("interface {name} has no carrier"))
                }
                Some(_) => LinkState::Up,
            })
        })?
    }

    /// The first IPv4 address of interface `name`.
    pub fn ipv4_of(&self, name: &str) -> Result<Option<Ipv4Addr>, HostNetError> {
        let name = name.to_string();
        self.run(move || {
            let addrs = nix::ifaddrs::getifaddrs().map_err(HostNetError::Interfaces)?;
            Ok(addrs
                .filter(|a| a.interface_name == name)
                .find_map(|a| a.address?.as_sockaddr_in().map(|s| s.ip())))
        })?
    }
}
