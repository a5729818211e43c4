//! Names in the cluster domain: how Services, their ports, their endpoints and pods are named.
//!
//! Names are kept lowercase, absolute and without the trailing dot
//! (`web.default.svc.cluster.local`); DNS matching is case-insensitive, so lowercasing once
//! here lets every lookup be a plain byte comparison.

use std::net::Ipv4Addr;

use hickory_proto::rr::Name;

/// The cluster domain (`cluster.local` by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    text: String,
    name: Name,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cluster domain {domain:?} is not a valid DNS name: {why}")]
pub struct DomainError {
    pub domain: String,
    pub why: String,
}

impl Domain {
    pub fn new(domain: &str) -> Result<Domain, DomainError> {
        let text = domain.trim_end_matches('.').to_ascii_lowercase();
        let err = |why: String| DomainError {
            domain: domain.to_string(),
            why,
        };
        if text.is_empty() {
            return Err(err(
                "it is empty (the root cannot be the cluster domain)".into()
            ));
        }
        let mut name = Name::from_ascii(&text).map_err(|e| err(e.to_string()))?;
        name.set_fqdn(true);
        Ok(Domain { text, name })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The apex as an absolute DNS name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// `<svc>.<ns>.svc.<domain>`.
    pub fn service(&self, namespace: &str, service: &str) -> String {
        lower(&format!("{service}.{namespace}.svc.{}", self.text))
    }

    /// `_<port>._<proto>.<svc>.<ns>.svc.<domain>`.
    pub fn service_port(
        &self,
        port: &str,
        protocol: &str,
        namespace: &str,
        service: &str,
    ) -> String {
        lower(&format!(
            "_{port}._{protocol}.{}",
            self.service(namespace, service)
        ))
    }

    /// `<host>.<svc>.<ns>.svc.<domain>`: one endpoint of a headless Service.
    pub fn endpoint(&self, host: &str, namespace: &str, service: &str) -> String {
        lower(&format!("{host}.{}", self.service(namespace, service)))
    }

    /// `a-b-c-d.<ns>.pod.<domain>`.
    pub fn pod(&self, namespace: &str, ip: Ipv4Addr) -> String {
        lower(&format!("{}.{namespace}.pod.{}", dashed(ip), self.text))
    }

    /// The names strictly between `name` and the apex (`b.c.<domain>` and `c.<domain>` for
    /// `a.b.c.<domain>`): they exist as soon as anything below them does.
    pub fn ancestors<'n>(&self, name: &'n str) -> impl Iterator<Item = &'n str> + 'n {
        let suffix_len = self.text.len();
        let inside = name.len() > suffix_len + 1
            && name.ends_with(self.text.as_str())
            && name.as_bytes()[name.len() - suffix_len - 1] == b'.';
        let stop = name.len() - if inside { suffix_len } else { 0 };
        name.match_indices('.')
            .map(move |(i, _)| i + 1)
            .take_while(move |&start| inside && start < stop)
            .map(move |start| &name[start..])
    }

    /// Whether `name` (lowercase, no trailing dot) is the apex or below it.
    pub fn contains(&self, name: &str) -> bool {
        name == self.text
            || (name.len() > self.text.len()
                && name.ends_with(self.text.as_str())
                && name.as_bytes()[name.len() - self.text.len() - 1] == b'.')
    }
}

/// `10.0.0.7` → `10-0-0-7`, the label pod and endpoint names use for an address.
pub fn dashed(ip: Ipv4Addr) -> String {
    let [a, b, c, d] = ip.octets();
    format!("{a}-{b}-{c}-{d}")
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_kubernetes_scheme() {
        let d = Domain::new("Cluster.Local.").unwrap();
        assert_eq!(d.as_str(), "cluster.local");
        assert_eq!(d.service("default", "Web"), "web.default.svc.cluster.local");
        assert_eq!(
            d.service_port("http", "tcp", "default", "web"),
            "_http._tcp.web.default.svc.cluster.local"
        );
        assert_eq!(
            d.endpoint("10-0-0-7", "default", "db"),
            "10-0-0-7.db.default.svc.cluster.local"
        );
        assert_eq!(
            d.pod("ns1", Ipv4Addr::new(10, 244, 0, 7)),
            "10-244-0-7.ns1.pod.cluster.local"
        );
    }

    #[test]
    fn ancestors_stop_below_the_apex() {
        let d = Domain::new("cluster.local").unwrap();
        let got: Vec<_> = d.ancestors("a.web.default.svc.cluster.local").collect();
        assert_eq!(
            got,
            [
                "web.default.svc.cluster.local",
                "default.svc.cluster.local",
                "svc.cluster.local"
            ]
        );
        assert_eq!(d.ancestors("svc.cluster.local").count(), 0);
        assert_eq!(d.ancestors("cluster.local").count(), 0);
        assert_eq!(d.ancestors("a.othercluster.local").count(), 0);
    }

    #[test]
    fn containment_is_by_whole_labels() {
        let d = Domain::new("cluster.local").unwrap();
        assert!(d.contains("cluster.local"));
        assert!(d.contains("x.cluster.local"));
        assert!(!d.contains("mycluster.local"));
        assert!(!d.contains("local"));
    }

    #[test]
    fn bad_domains_are_rejected() {
        assert!(Domain::new("").is_err());
        assert!(Domain::new(".").is_err());
        assert!(Domain::new(&"a".repeat(64)).is_err());
    }
}
