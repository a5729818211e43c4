//! The catalogue of REST resources the gateway serves: every bus kind as Kubernetes names it
//! in URLs (group, version, plural), with the verbs, categories and subresources discovery
//! advertises. Discovery, routing and Tables all read this one list.

use bus_schemas::kinds::KINDS;
use bus_schemas::KindInfo;

/// One REST resource backed by a bus kind.
#[derive(Debug, Clone, Copy)]
pub struct RestResource {
    pub info: &'static KindInfo,
    /// "" for the core group.
    pub group: &'static str,
    pub version: &'static str,
}

/// Verbs of every collection and item: the bus serves each of them.
pub const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

impl RestResource {
    pub fn plural(&self) -> &'static str {
        self.info.plural
    }

    pub fn kind(&self) -> &'static str {
        self.info.kind
    }

    pub fn api_version(&self) -> &'static str {
        self.info.api_version
    }

    pub fn namespaced(&self) -> bool {
        self.info.namespaced
    }

    /// What `kubectl get all` shows, as upstream registers it.
    pub fn categories(&self) -> &'static [&'static str] {
        match self.info.kind {
            "Pod"
            | "Service"
            | "Deployment"
            | "ReplicaSet"
            | "DaemonSet"
            | "Job"
            | "CronJob"
            | "StatefulSet"
            | "HorizontalPodAutoscaler" => &["all"],
            _ => &[],
        }
    }

    /// Subresources as (name, kind, group, version, verbs).
    pub fn subresources(&self) -> Vec<Subresource> {
        let mut subs = Vec::new();
        if self.info.has_status {
            subs.push(Subresource {
                name: "status",
                kind: self.info.kind,
                group: self.group,
                version: self.version,
                verbs: &["get", "patch", "update"],
            });
        }
        if matches!(self.info.kind, "Deployment" | "ReplicaSet") {
            subs.push(Subresource {
                name: "scale",
                kind: "Scale",
                group: "autoscaling",
                version: "v1",
                verbs: &["get", "patch", "update"],
            });
        }
        if self.info.kind == "Pod" {
            subs.push(Subresource {
                name: "log",
                kind: "Pod",
                group: "",
                version: "v1",
                verbs: &["get"],
            });
            subs.push(Subresource {
                name: "exec",
                kind: "PodExecOptions",
                group: "",
                version: "v1",
                verbs: &["create", "get"],
            });
            subs.push(Subresource {
                name: "eviction",
                kind: "Eviction",
                group: "policy",
                version: "v1",
                verbs: &["create"],
            });
        }
        subs
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Subresource {
    pub name: &'static str,
    pub kind: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub verbs: &'static [&'static str],
}

fn split_api_version(api_version: &'static str) -> (&'static str, &'static str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// Every resource, in the bus' kind order.
pub fn all() -> impl Iterator<Item = RestResource> {
    KINDS.iter().map(|info| {
        let (group, version) = split_api_version(info.api_version);
        RestResource {
            info,
            group,
            version,
        }
    })
}

/// The resource at `group`/`version` whose plural is `plural`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<RestResource> {
    all().find(|r| r.group == group && r.version == version && r.plural() == plural)
}

/// The resource of a bus kind name (`Pod`).
pub fn of_kind(kind: &str) -> Option<RestResource> {
    all().find(|r| r.kind() == kind)
}

/// The named API groups in the order discovery lists them, each with its one version.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in all() {
        if !r.group.is_empty() && !out.iter().any(|(g, _)| *g == r.group) {
            out.push((r.group, r.version));
        }
    }
    out.push((crate::metrics::GROUP, crate::metrics::VERSION));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_unique_url() {
        for r in all() {
            assert_eq!(
                find(r.group, r.version, r.plural()).unwrap().kind(),
                r.kind()
            );
        }
        assert_eq!(
            find("apps", "v1", "deployments").unwrap().kind(),
            "Deployment"
        );
        assert_eq!(find("", "v1", "pods").unwrap().kind(), "Pod");
        assert!(find("apps", "v1", "pods").is_none());
    }

    #[test]
    fn groups_list_apps_and_autoscaling_v2() {
        let groups = groups();
        assert!(groups.contains(&("apps", "v1")));
        assert!(groups.contains(&("autoscaling", "v2")));
        assert!(!groups.iter().any(|(g, _)| g.is_empty()));
    }
}
