//! What the node's network namespace needs besides the bridge (which the runtime creates
//! with the first pod): IPv4 forwarding, so pods reach pods on other nodes through it, and a
//! route covering the Service range, so connections the host itself opens to a ClusterIP get
//! as far as the proxy's output hook.

use shoal_node::net::Ipv4Cidr;

use crate::hostnet::HostNet;

/// The link the Service range is routed to when nothing else routes it: a bridge with no
/// ports, which drops whatever reaches it. (A dummy link would do the same, but not every
/// kernel has the dummy driver; every node has bridges.)
pub const SERVICE_LINK: &str = "shoal-svc";

#[derive(Debug, thiserror::Error)]
#[error("preparing the node network: {0}")]
pub struct SetupError(String);

/// Makes the node's namespace route pod traffic. Idempotent.
pub fn prepare(net: &HostNet, service_cidr: Ipv4Cidr) -> Result<(), SetupError> {
    enable_forwarding(net)?;
    ensure_service_route(net, service_cidr)
}

const FORWARDING: &str = "/proc/sys/net/ipv4/ip_forward";

fn enable_forwarding(net: &HostNet) -> Result<(), SetupError> {
    // Pods reach Services (DNAT back onto the bridge) and other nodes' pods through this
    // host, so a node cannot work without forwarding. Docker, flannel and kube-proxy turn it
    // on in the machine's own namespace as well; say so when we do. A new namespace starts
    // with it off, and /proc/sys/net shows the namespace of the thread that opens it, hence
    // the write from a thread inside the namespace.
    let was_off = net
        .run(|| std::fs::read_to_string(FORWARDING).is_ok_and(|v| v.trim() == "0"))
        .map_err(|e| SetupError(e.to_string()))?;
    if !was_off {
        return Ok(());
    }
    net.run(|| std::fs::write(FORWARDING, "1"))
        .map_err(|e| SetupError(e.to_string()))?
        .map_err(|e| SetupError(format!("enabling IPv4 forwarding ({FORWARDING}): {e}")))?;
    if net.netns().is_none() {
        tracing::info!("enabled net.ipv4.ip_forward: pods reach Services and other nodes' pods through this host");
    }
    Ok(())
}

/// Without a route covering the Service range (a namespace with no default route), a
/// connection from the host to a ClusterIP fails in connect(2) before the output hook could
/// rewrite it. [`SERVICE_LINK`] only makes the route exist: DNATed packets are routed again
/// after the rewrite, and whatever is not rewritten is dropped there instead of leaking.
fn ensure_service_route(net: &HostNet, service_cidr: Ipv4Cidr) -> Result<(), SetupError> {
    let probe_ip = std::net::Ipv4Addr::from(u32::from(service_cidr.network) + 1).to_string();
    let routed = net
        .command("ip", &["-4", "route", "get", &probe_ip], None)
        .map_err(|e| SetupError(e.to_string()))?;
    if routed.status.success() {
        return Ok(());
    }
    let cidr = service_cidr.to_string();
    // Left from an earlier run ("File exists") is fine; a real failure shows in the batch.
    let _ = net.command("ip", &["link", "add", SERVICE_LINK, "type", "bridge"], None);
    let batch = format!("link set {SERVICE_LINK} up\nroute replace {cidr} dev {SERVICE_LINK}\n");
    let out = net
        .command("ip", &["-batch", "-"], Some(batch.clone()))
        .map_err(|e| SetupError(e.to_string()))?;
    if !out.status.success() {
        return Err(SetupError(format!(
            "routing the Service range {cidr} to {SERVICE_LINK}: {} (commands: {})",
            String::from_utf8_lossy(&out.stderr).trim(),
            batch.trim().replace('\n', "; ")
        )));
    }
    Ok(())
}
