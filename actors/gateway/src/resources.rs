//! The catalogue of REST resources the gateway serves: every bus kind as Kubernetes names it
//! in URLs (group, version, plural), with the verbs, categories and subresources discovery
//! advertises. Discovery, routing and Tables all read this one list.
//!
//! Each kind is served at its bus version; a few are also served at an older version that
//! clients still write (kubectl autoscale's autoscaling/v1), converted by [`crate::convert`].

use bus_schemas::kinds::KINDS;
use bus_schemas::KindInfo;

/// One REST resource backed by a bus kind.
#[derive(Debug, Clone, Copy)]
pub struct RestResource {
    pub info: &'static KindInfo,
    /// "" for the core group.
    pub group: &'static str,
    pub version: &'static str,
    /// `group/version` as served here; differs from the bus kind's for older versions.
    pub api_version: &'static str,
}

/// Older versions served beside a kind's bus version: (kind, group, version, apiVersion).
const OLDER_VERSIONS: &[(&str, &str, &str, &str)] = &[(
    "HorizontalPodAutoscaler",
    "autoscaling",
    "v1",
    "autoscaling/v1",
)];

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
        self.api_version
    }

    /// Whether objects are converted between this version and the bus kind's.
    pub fn is_converted(&self) -> bool {
        self.api_version != self.info.api_version
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

/// Every resource, in the bus' kind order, then the older versions.
pub fn all() -> impl Iterator<Item = RestResource> {
    let current = KINDS.iter().map(|info| {
        let (group, version) = split_api_version(info.api_version);
        RestResource {
            info,
            group,
            version,
            api_version: info.api_version,
        }
    });
    let older = OLDER_VERSIONS
        .iter()
        .filter_map(|&(kind, group, version, api_version)| {
            let info = KINDS.iter().find(|k| k.kind == kind)?;
            Some(RestResource {
                info,
                group,
                version,
                api_version,
            })
        });
    current.chain(older)
}

/// The resource at `group`/`version` whose plural is `plural`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<RestResource> {
    all().find(|r| r.group == group && r.version == version && r.plural() == plural)
}

/// The resource of a bus kind name (`Pod`), at its bus version.
pub fn of_kind(kind: &str) -> Option<RestResource> {
    all().find(|r| r.kind() == kind)
}

/// The named API groups in the order discovery lists them, each with its versions, the
/// preferred (the bus') first.
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for r in all().filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) if !versions.contains(&r.version) => versions.push(r.version),
            Some(_) => {}
            None => out.push((r.group, vec![r.version])),
        }
    }
    out.push((crate::metrics::GROUP, vec![crate::metrics::VERSION]));
    for group in crate::reviews::groups() {
        out.push((group, vec![crate::reviews::VERSION]));
    }
    out
}

/// Every group-version served, the core `("", "v1")` first.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out = vec![("", "v1")];
    for (group, versions) in groups() {
        out.extend(versions.into_iter().map(|v| (group, v)));
    }
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
    fn groups_list_apps_and_autoscaling_v2_before_v1() {
        let groups = groups();
        assert!(groups.contains(&("apps", vec!["v1"])));
        assert!(groups.contains(&("autoscaling", vec!["v2", "v1"])));
        assert!(!groups.iter().any(|(g, _)| g.is_empty()));
        let v1 = find("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
        assert!(v1.is_converted());
        assert_eq!(v1.api_version(), "autoscaling/v1");
        assert!(!of_kind("HorizontalPodAutoscaler").unwrap().is_converted());
    }

    #[test]
    fn vertical_pod_autoscalers_are_served_where_kubectl_looks_for_them() {
        let vpa = find("autoscaling.k8s.io", "v1", "verticalpodautoscalers").unwrap();
        assert_eq!(vpa.kind(), "VerticalPodAutoscaler");
        assert_eq!(vpa.info.short_names, &["vpa"]);
        assert!(vpa.subresources().iter().any(|s| s.name == "status"));
        assert!(groups().contains(&("autoscaling.k8s.io", vec!["v1"])));
    }
}
