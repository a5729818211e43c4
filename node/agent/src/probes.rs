//! Probes: startup, liveness and readiness state per container, and running one probe.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bus_schemas::kinds::container::Container;
use bus_schemas::kinds::intstr::IntOrString;
use bus_schemas::kinds::probe::Probe;
use shoal_node::runtime::ExecRequest;
use shoal_node::SandboxInfo;

use crate::agent::AgentCtx;
use crate::hostnet::HostNet;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    Startup,
    Liveness,
    Readiness,
}

struct ProbeState {
    probe: Probe,
    next: Option<Instant>,
    successes: i32,
    failures: i32,
}

impl ProbeState {
    fn new(probe: &Probe) -> ProbeState {
        ProbeState {
            probe: probe.clone(),
            next: None,
            successes: 0,
            failures: 0,
        }
    }
    fn period(&self) -> Duration {
        Duration::from_secs(self.probe.period_seconds.unwrap_or(10).max(1) as u64)
    }
    fn initial_delay(&self) -> Duration {
        Duration::from_secs(self.probe.initial_delay_seconds.unwrap_or(0).max(0) as u64)
    }
    fn arm(&mut self, now: Instant) {
        self.successes = 0;
        self.failures = 0;
        self.next = Some(now + self.initial_delay());
    }
}

/// What a probe result asks of the worker.
pub struct Verdict {
    pub restart: bool,
}

pub struct ProbeTracker {
    startup: Option<ProbeState>,
    liveness: Option<ProbeState>,
    readiness: Option<ProbeState>,
    started: bool,
    ready: bool,
}

impl ProbeTracker {
    pub fn new(container: &Container) -> ProbeTracker {
        ProbeTracker {
            startup: container.startup_probe.as_ref().map(ProbeState::new),
            liveness: container.liveness_probe.as_ref().map(ProbeState::new),
            readiness: container.readiness_probe.as_ref().map(ProbeState::new),
            started: false,
            ready: false,
        }
    }

    fn state(&mut self, kind: ProbeKind) -> Option<&mut ProbeState> {
        match kind {
            ProbeKind::Startup => self.startup.as_mut(),
            ProbeKind::Liveness => self.liveness.as_mut(),
            ProbeKind::Readiness => self.readiness.as_mut(),
        }
    }

    pub fn probe(&self, kind: ProbeKind) -> Option<&Probe> {
        match kind {
            ProbeKind::Startup => self.startup.as_ref(),
            ProbeKind::Liveness => self.liveness.as_ref(),
            ProbeKind::Readiness => self.readiness.as_ref(),
        }
        .map(|s| &s.probe)
    }

    /// A new container instance: startup probing first, the others once it has started.
    pub fn container_started(&mut self, now: Instant) {
        self.ready = false;
        match self.startup.as_mut() {
            Some(s) => {
                self.started = false;
                s.arm(now);
                for other in [self.liveness.as_mut(), self.readiness.as_mut()]
                    .into_iter()
                    .flatten()
                {
                    other.next = None;
                }
            }
            None => self.start_others(now),
        }
    }

    fn start_others(&mut self, now: Instant) {
        self.started = true;
        for s in [self.liveness.as_mut(), self.readiness.as_mut()]
            .into_iter()
            .flatten()
        {
            s.arm(now);
        }
    }

    pub fn container_stopped(&mut self) {
        self.ready = false;
        for s in [
            self.startup.as_mut(),
            self.liveness.as_mut(),
            self.readiness.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            s.next = None;
        }
    }

    pub fn next_due(&self) -> Option<Instant> {
        [&self.startup, &self.liveness, &self.readiness]
            .into_iter()
            .flatten()
            .filter_map(|s| s.next)
            .min()
    }

    pub fn due(&self, now: Instant) -> Option<ProbeKind> {
        let is_due =
            |s: &Option<ProbeState>| s.as_ref().and_then(|s| s.next).is_some_and(|n| n <= now);
        if is_due(&self.startup) {
            Some(ProbeKind::Startup)
        } else if is_due(&self.liveness) {
            Some(ProbeKind::Liveness)
        } else if is_due(&self.readiness) {
            Some(ProbeKind::Readiness)
        } else {
            None
        }
    }

    pub fn record(&mut self, kind: ProbeKind, ok: bool, now: Instant) -> Verdict {
        let Some(s) = self.state(kind) else {
            return Verdict { restart: false };
        };
        s.next = Some(now + s.period());
        if ok {
            s.successes += 1;
            s.failures = 0;
        } else {
            s.failures += 1;
            s.successes = 0;
        }
        let success_threshold = s.probe.success_threshold.unwrap_or(1).max(1);
        let failure_threshold = s.probe.failure_threshold.unwrap_or(3).max(1);
        let (succeeded, failed) = (
            s.successes >= success_threshold,
            s.failures >= failure_threshold,
        );
        match kind {
            ProbeKind::Startup => {
                if succeeded {
                    s.next = None;
                    self.start_others(now);
                }
                Verdict { restart: failed }
            }
            ProbeKind::Liveness => {
                if failed {
                    s.failures = 0;
                }
                Verdict { restart: failed }
            }
            ProbeKind::Readiness => {
                if succeeded {
                    self.ready = true;
                } else if failed {
                    self.ready = false;
                }
                Verdict { restart: false }
            }
        }
    }

    pub fn is_started(&self) -> bool {
        self.started
    }

    /// Ready: started, and the readiness probe (if any) passing.
    pub fn is_ready(&self) -> bool {
        self.started && (self.readiness.is_none() || self.ready)
    }
}

pub(crate) fn port_of(container: &Container, port: &IntOrString) -> Option<u16> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n).ok(),
        IntOrString::String(name) => container
            .ports
            .iter()
            .find(|p| &p.name == name)
            .and_then(|p| u16::try_from(p.container_port).ok())
            .or_else(|| name.parse().ok()),
    }
}

/// Runs a network probe from the node's network namespace, where pod IPs are reachable.
/// A probe that cannot even be attempted fails.
async fn in_node_network(net: HostNet, probe: impl FnOnce() -> bool + Send + 'static) -> bool {
    tokio::task::spawn_blocking(move || net.run(probe))
        .await
        .map(|r| {
            r.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "probe not run");
                false
            })
        })
        .unwrap_or(false)
}

/// Runs one probe; true on success.
pub async fn run(
    ctx: &Arc<AgentCtx>,
    sandbox: &SandboxInfo,
    container_id: &str,
    container: &Container,
    probe: &Probe,
) -> bool {
    if ctx.backend.is_hollow() {
        return true;
    }
    let timeout = Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64);
    if let Some(http) = &probe.http_get {
        let Some(port) = port_of(container, &http.port) else {
            return false;
        };
        let ip: IpAddr = http.host.parse().unwrap_or(IpAddr::V4(sandbox.ip));
        let path = if http.path.is_empty() {
            "/".to_string()
        } else {
            http.path.clone()
        };
        let net = ctx.hostnet.clone();
        return in_node_network(net, move || {
            shoal_node::probe::http_get(ip, port, &path, timeout).is_success()
        })
        .await;
    }
    if let Some(tcp) = &probe.tcp_socket {
        let Some(port) = port_of(container, &tcp.port) else {
            return false;
        };
        let ip: IpAddr = tcp.host.parse().unwrap_or(IpAddr::V4(sandbox.ip));
        let net = ctx.hostnet.clone();
        return in_node_network(net, move || {
            shoal_node::probe::tcp_socket(ip, port, timeout).is_success()
        })
        .await;
    }
    if let Some(exec) = &probe.exec {
        let request = ExecRequest::new(exec.command.clone(), timeout);
        let id = container_id.to_string();
        return ctx
            .call(move |rt| rt.exec(&id, &request))
            .await
            .map(|r| r.exit_code == 0 && !r.timed_out)
            .unwrap_or(false);
    }
    false
}
