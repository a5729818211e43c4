//! URL paths of the Kubernetes REST API, parsed into what they name.

use crate::resources::{self, RestResource};

#[derive(Debug, Clone)]
pub enum Route {
    Version,
    /// `/api`
    CoreGroup,
    /// `/apis`
    Groups,
    /// `/api/v1`, `/apis/<group>/<version>`
    GroupVersion {
        group: String,
        version: String,
    },
    /// `/openapi/v3` and `/openapi/v3/<group-version path>`
    OpenApi(Option<String>),
    /// `/healthz`, `/livez`, `/readyz`
    Health,
    /// A collection or an item of a bus-backed resource.
    Object(ObjectPath),
    /// A review of the caller's own rights or identity: its kind ([`crate::reviews`]).
    Review(&'static str),
    /// `metrics.k8s.io`: `nodes` or `pods`, maybe one namespace, maybe one name.
    Metrics {
        plural: String,
        namespace: Option<String>,
        name: Option<String>,
    },
    Unknown,
}

#[derive(Debug, Clone)]
pub struct ObjectPath {
    pub resource: RestResource,
    /// Set for namespaced URLs; None for cluster-scoped kinds and all-namespace lists.
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

pub fn parse(path: &str) -> Route {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::CoreGroup,
        ["apis"] => Route::Groups,
        ["openapi", "v3"] => Route::OpenApi(None),
        ["openapi", "v3", rest @ ..] => Route::OpenApi(Some(rest.join("/"))),
        ["api", version] => Route::GroupVersion {
            group: String::new(),
            version: version.to_string(),
        },
        ["apis", group, version] => Route::GroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        },
        ["api", version, rest @ ..] => objects("", version, rest),
        ["apis", group, version, plural]
            if crate::reviews::find(group, version, plural).is_some() =>
        {
            Route::Review(crate::reviews::find(group, version, plural).unwrap_or_default())
        }
        ["apis", group, version, rest @ ..] if *group == crate::metrics::GROUP => {
            metrics(version, rest)
        }
        ["apis", group, version, rest @ ..] => objects(group, version, rest),
        _ => Route::Unknown,
    }
}

fn percent_decode(s: &str) -> String {
    form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_string())
}

fn metrics(version: &str, rest: &[&str]) -> Route {
    if version != crate::metrics::VERSION {
        return Route::Unknown;
    }
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(ns.to_string()), tail),
        _ => (None, rest),
    };
    match rest {
        [plural] => Route::Metrics {
            plural: plural.to_string(),
            namespace,
            name: None,
        },
        [plural, name] => Route::Metrics {
            plural: plural.to_string(),
            namespace,
            name: Some(name.to_string()),
        },
        _ => Route::Unknown,
    }
}

fn objects(group: &str, version: &str, rest: &[&str]) -> Route {
    // `/namespaces/<ns>/<plural>…` names a namespaced resource; `/namespaces/<name>[/<sub>]`
    // is the Namespace object itself.
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if resources::find(group, version, plural).is_some_and(|r| r.namespaced()) =>
        {
            let mut rest = vec![*plural];
            rest.extend_from_slice(tail);
            (Some(ns.to_string()), rest)
        }
        _ => (None, rest.to_vec()),
    };
    let Some(plural) = rest.first() else {
        return Route::Unknown;
    };
    let Some(resource) = resources::find(group, version, plural) else {
        return Route::Unknown;
    };
    if namespace.is_none() && rest.len() > 1 && resource.namespaced() {
        // An item of a namespaced kind needs its namespace in the path.
        return Route::Unknown;
    }
    Route::Object(ObjectPath {
        resource,
        namespace,
        name: rest.get(1).map(|s| s.to_string()),
        subresource: rest.get(2).map(|s| s.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(path: &str) -> ObjectPath {
        match parse(path) {
            Route::Object(o) => o,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_paths() {
        let o = object("/api/v1/namespaces/default/pods/web-1/log");
        assert_eq!(o.resource.kind(), "Pod");
        assert_eq!(o.namespace.as_deref(), Some("default"));
        assert_eq!(o.name.as_deref(), Some("web-1"));
        assert_eq!(o.subresource.as_deref(), Some("log"));
        let o = object("/apis/apps/v1/namespaces/x/deployments");
        assert_eq!(o.resource.kind(), "Deployment");
        assert!(o.name.is_none());
    }

    #[test]
    fn namespaces_themselves_and_all_namespace_lists() {
        let o = object("/api/v1/namespaces/kube-system");
        assert_eq!(o.resource.kind(), "Namespace");
        assert_eq!(o.name.as_deref(), Some("kube-system"));
        let o = object("/api/v1/namespaces/x/status");
        assert_eq!(o.resource.kind(), "Namespace");
        assert_eq!(o.subresource.as_deref(), Some("status"));
        let o = object("/api/v1/pods");
        assert!(o.namespace.is_none() && o.name.is_none());
        let o = object("/api/v1/nodes/n1");
        assert_eq!(o.name.as_deref(), Some("n1"));
    }

    #[test]
    fn unknown_paths() {
        assert!(matches!(parse("/api/v1/widgets"), Route::Unknown));
        assert!(matches!(parse("/api/v1/pods/x"), Route::Unknown));
        assert!(matches!(parse("/apis/apps/v1"), Route::GroupVersion { .. }));
        assert!(matches!(
            parse("/apis/metrics.k8s.io/v1beta1/namespaces/d/pods"),
            Route::Metrics { .. }
        ));
        assert!(matches!(
            parse("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"),
            Route::Review("SelfSubjectAccessReview")
        ));
    }
}
