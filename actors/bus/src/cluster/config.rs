//! The `cluster {}` block of a clustered nats-server: its name, where it listens for routes
//! from its peers, and the peers it dials. JetStream then replicates streams across the
//! servers through Raft, and every server needs a distinct `server_name`.

use std::fmt::Write;

/// The cluster name every server of one Shoal cluster shares; routes between servers of
/// different names are refused by nats-server.
pub const CLUSTER_NAME: &str = "shoal";

/// How often a server pings its routes.
pub const ROUTE_PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
/// Unanswered route pings before the route is closed and redialled.
pub const ROUTE_PING_MAX: u32 = 3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    pub name: String,
    /// `host:port` where peers' routes connect (`0.0.0.0:6222` on a real machine).
    pub listen: String,
    /// The peers' route URLs, `nats://host:6222`. Listing oneself is harmless: nats-server
    /// recognises and drops a route to itself.
    pub routes: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClusterConfigError {
    #[error("--cluster-listen {0:?}: expected HOST:PORT, e.g. 0.0.0.0:6222")]
    Listen(String),
    #[error("--routes entry {index} {url:?}: expected nats://HOST:PORT, e.g. nats://h2:6222")]
    Route { index: usize, url: String },
    #[error("--server-name {0:?}: expected letters, digits, '-' or '_' (it names the server in JetStream's Raft groups)")]
    ServerName(String),
}

fn valid_host_port(s: &str) -> bool {
    match s.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0),
        None => false,
    }
}

/// A server name fit for nats-server's config and for JetStream's peer names.
pub fn check_server_name(name: &str) -> Result<(), ClusterConfigError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ClusterConfigError::ServerName(name.to_string()))
    }
}

impl ClusterConfig {
    /// Parses the command-line form: a listen address and a comma list of route URLs.
    pub fn parse(listen: &str, routes: &str) -> Result<ClusterConfig, ClusterConfigError> {
        if !valid_host_port(listen) {
            return Err(ClusterConfigError::Listen(listen.to_string()));
        }
        let routes: Vec<String> = routes
            .split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(String::from)
            .collect();
        for (index, url) in routes.iter().enumerate() {
            let ok = url
                .strip_prefix("nats://")
                .or_else(|| url.strip_prefix("nats-route://"))
                .is_some_and(valid_host_port);
            if !ok {
                return Err(ClusterConfigError::Route {
                    index,
                    url: url.clone(),
                });
            }
        }
        Ok(ClusterConfig {
            name: CLUSTER_NAME.to_string(),
            listen: listen.to_string(),
            routes,
        })
    }

    /// The `cluster {}` block of nats-server's configuration.
    pub fn render(&self) -> String {
        self.render_with_tls(None)
    }

    /// The block with routes over TLS when the servers speak it to clients: the same
    /// certificate and CA, each end verifying the other's (hence server and client use).
    pub fn render_with_tls(&self, tls: Option<&crate::natsd::TlsFiles>) -> String {
        let mut block = String::from("cluster {\n");
        let _ = writeln!(block, "  name: \"{}\"", self.name);
        let _ = writeln!(block, "  listen: \"{}\"", self.listen);
        // A route whose link went silent is closed after three missed pings (3 s) and then
        // redialled every second, so a healed partition rejoins within about a second.
        // Left to TCP, the route would wait for a retransmission whose backoff had grown to
        // several seconds during the cut (nats-server's own route ping is two minutes).
        let _ = writeln!(
            block,
            "  ping_interval: \"{}s\"\n  ping_max: {ROUTE_PING_MAX}",
            ROUTE_PING_INTERVAL.as_secs()
        );
        if !self.routes.is_empty() {
            block.push_str("  routes: [\n");
            for route in &self.routes {
                let _ = writeln!(block, "    \"{route}\"");
            }
            block.push_str("  ]\n");
        }
        if let Some(tls) = tls {
            let _ = writeln!(
                block,
                "  tls {{\n    cert_file: \"{}\"\n    key_file: \"{}\"\n    ca_file: \"{}\"\n    verify: true\n    timeout: 5\n  }}",
                tls.cert.display(),
                tls.key.display(),
                tls.ca.display()
            );
        }
        block.push_str("}\n");
        block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_use_tls_when_clients_do() {
        let c = ClusterConfig::parse("0.0.0.0:6222", "nats://h2:6222").unwrap();
        assert!(!c.render().contains("tls"));
        let files = crate::natsd::TlsFiles {
            ca: "/d/ca.pem".into(),
            cert: "/d/server.pem".into(),
            key: "/d/server-key.pem".into(),
        };
        let text = c.render_with_tls(Some(&files));
        let tls = text
            .split("  tls {")
            .nth(1)
            .expect("a tls block in the cluster block");
        for line in [
            "cert_file: \"/d/server.pem\"",
            "key_file: \"/d/server-key.pem\"",
            "ca_file: \"/d/ca.pem\"",
            "verify: true",
        ] {
            assert!(tls.contains(line), "{text}");
        }
        assert!(text.trim_end().ends_with('}'), "{text}");
    }

    #[test]
    fn parses_listen_and_routes_and_renders_a_cluster_block() {
        let c = ClusterConfig::parse("0.0.0.0:6222", "nats://h2:6222, nats://h3:6222").unwrap();
        assert_eq!(c.routes, vec!["nats://h2:6222", "nats://h3:6222"]);
        let text = c.render();
        assert!(text.contains("name: \"shoal\""), "{text}");
        assert!(text.contains("listen: \"0.0.0.0:6222\""), "{text}");
        assert!(text.contains("\"nats://h3:6222\""), "{text}");
    }

    #[test]
    fn a_bad_route_is_named_by_its_index() {
        let err = ClusterConfig::parse("0.0.0.0:6222", "nats://h2:6222,h3").unwrap_err();
        assert_eq!(
            err,
            ClusterConfigError::Route {
                index: 1,
                url: "h3".into()
            }
        );
        assert!(err.to_string().contains("nats://HOST:PORT"));
    }

    #[test]
    fn a_listen_address_without_port_is_refused() {
        assert!(matches!(
            ClusterConfig::parse("0.0.0.0", ""),
            Err(ClusterConfigError::Listen(_))
        ));
    }

    #[test]
    fn server_names_with_spaces_or_dots_are_refused() {
        assert!(check_server_name("s1").is_ok());
        assert!(check_server_name("host-2_b").is_ok());
        assert!(check_server_name("s 1").is_err());
        assert!(check_server_name("").is_err());
    }
}
