//! What a caller may do, in Kubernetes' terms (verb, resource, subresource, namespace),
//! decided from the bus: each request attribute maps onto the subjects the gateway would
//! publish to or subscribe on to serve it, and the caller's role must allow every one of
//! them ([`Role::permissions`](bus_schemas::roles::Role::permissions) stays the single
//! source of who may do what). Requests and `kubectl auth can-i` are both answered here.

use std::collections::HashMap;

use bus_schemas::roles::Permissions;
use bus_schemas::subjects::{self, Verb};
use bus_schemas::{Reason, Status};
use hyper::Method;

use crate::authn::Caller;
use crate::resources::{self, RestResource};
use crate::route::Route;

/// A request on a resource, as Kubernetes' authorizers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    /// Empty for cluster-scoped kinds and all-namespace requests.
    pub namespace: String,
    pub name: String,
}

/// The verbs a rules review lists, in Kubernetes' order.
pub const VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// One use of the bus a request makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusUse {
    Publish(String),
    Subscribe(String),
}

impl BusUse {
    fn allowed(&self, p: &Permissions) -> bool {
        match self {
            BusUse::Publish(s) => p.may_publish(s),
            BusUse::Subscribe(s) => p.may_subscribe(s),
        }
    }
}

impl std::fmt::Display for BusUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BusUse::Publish(s) => write!(f, "publish {s}"),
            BusUse::Subscribe(s) => write!(f, "subscribe {s}"),
        }
    }
}

/// Paths anyone may read, credential or not: Kubernetes' `system:public-info-viewer`.
pub fn public(route: &Route) -> bool {
    matches!(route, Route::Version | Route::Health)
}

/// The resource attributes of a request to `route`; None for non-resource paths
/// (discovery, OpenAPI, health, reviews), which every authenticated caller may read.
pub fn of_request(
    method: &Method,
    query: &HashMap<String, String>,
    route: &Route,
) -> Option<Attributes> {
    match route {
        Route::Object(path) => {
            let sub = path.subresource.clone().unwrap_or_default();
            // As `Request::flag` reads it: the Python client sends `True`.
            let watch = query
                .get("watch")
                .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
            let verb = match (method, path.name.is_some()) {
                // Exec is a create whatever the method (kubectl's WebSocket upgrade is a GET).
                _ if sub == "exec" => "create",
                (&Method::GET | &Method::HEAD, false) if watch => "watch",
                (&Method::GET | &Method::HEAD, false) => "list",
                (&Method::GET | &Method::HEAD, true) => "get",
                (&Method::POST, _) => "create",
                (&Method::PUT, _) => "update",
                (&Method::PATCH, _) => "patch",
                (&Method::DELETE, false) => "deletecollection",
                (&Method::DELETE, true) => "delete",
                _ => "unknown",
            };
            Some(Attributes {
                verb: verb.into(),
                group: path.resource.group.into(),
                resource: path.resource.plural().into(),
                subresource: sub,
                namespace: path.namespace.clone().unwrap_or_default(),
                name: path.name.clone().unwrap_or_default(),
            })
        }
        Route::Metrics {
            plural,
            namespace,
            name,
        } => Some(Attributes {
            verb: if name.is_some() { "get" } else { "list" }.into(),
            group: crate::metrics::GROUP.into(),
            resource: plural.clone(),
            subresource: String::new(),
            namespace: namespace.clone().unwrap_or_default(),
            name: name.clone().unwrap_or_default(),
        }),
        _ => None,
    }
}

/// What serving `a` takes on the bus; None when nothing the gateway serves matches it
/// (an unknown resource, subresource or verb), which no role may then do.
pub fn bus_uses(a: &Attributes) -> Option<Vec<BusUse>> {
    use BusUse::{Publish, Subscribe};
    if a.group == crate::metrics::GROUP {
        return (matches!(a.resource.as_str(), "pods" | "nodes")
            && matches!(a.verb.as_str(), "get" | "list")
            && a.subresource.is_empty())
        .then(|| vec![Publish(consumer_create(subjects::METRICS_STREAM))]);
    }
    let r = resource(&a.group, &a.resource)?;
    if !a.subresource.is_empty() && !r.subresources().iter().any(|s| s.name == a.subresource) {
        return None;
    }
    let token = r.info.token();
    let api = |verb: Verb| Publish(subjects::api(&token, verb));
    let pod_get = || {
        let pods = resources::of_kind("Pod")?;
        Some(Publish(subjects::api(&pods.info.token(), Verb::Get)))
    };
    Some(match (a.subresource.as_str(), a.verb.as_str()) {
        ("", "get") | ("status" | "scale", "get") => vec![api(Verb::Get)],
        ("", "list") => vec![api(Verb::List)],
        // A watch continues a list from the state log, which the gateway reads through a
        // consumer of its own: who may list may watch, as Kubernetes' roles grant them
        // together. (The admin's bus deny of raw Secret events is about subscribing to the
        // log directly; through the gateway an admin watches Secrets sealed, as before.)
        ("", "watch") => vec![
            api(Verb::List),
            Publish(consumer_create(subjects::OBJECTS_STREAM)),
        ],
        ("", "create") => vec![api(Verb::Create)],
        ("", "update") => vec![api(Verb::Update)],
        // A patch is a read and a compare-and-swap update; server-side apply is its own verb.
        ("", "patch") => vec![api(Verb::Get), api(Verb::Update), api(Verb::Apply)],
        ("", "delete") => vec![api(Verb::Delete)],
        ("", "deletecollection") => vec![api(Verb::List), api(Verb::Delete)],
        ("status", "update") => vec![api(Verb::UpdateStatus)],
        ("status", "patch") => vec![api(Verb::Get), api(Verb::UpdateStatus)],
        ("scale", "update" | "patch") => vec![api(Verb::Get), api(Verb::Patch)],
        ("log", "get") => vec![pod_get()?, Publish(consumer_create(subjects::LOGS_STREAM))],
        ("exec", "create" | "get") => vec![
            pod_get()?,
            // Whichever node runs the pod: a role may exec on all nodes or on none.
            Publish(subjects::agent_request("any-node", "exec")),
            // An interactive session's output (`-i`, `-t`).
            Subscribe(subjects::exec_session_out("any-node", "any-session")),
        ],
        ("eviction", "create") => vec![api(Verb::Delete)],
        _ => return None,
    })
}

/// Whether `a` names a served resource and (if any) one of its subresources: then a request
/// [`bus_uses`] finds nothing for has a method the resource does not take.
pub fn known_subresource(a: &Attributes) -> bool {
    if a.group == crate::metrics::GROUP {
        return a.subresource.is_empty();
    }
    resource(&a.group, &a.resource).is_some_and(|r| {
        a.subresource.is_empty() || r.subresources().iter().any(|s| s.name == a.subresource)
    })
}

/// The JetStream call that starts reading `stream` (what logs and metrics do).
fn consumer_create(stream: &str) -> String {
    format!("$JS.API.CONSUMER.CREATE.{stream}")
}

fn resource(group: &str, plural: &str) -> Option<RestResource> {
    resources::all().find(|r| r.group == group && r.plural() == plural)
}

/// Whether `p` allows `a`; when not, the first bus use it refuses (for the reason given).
pub fn decide(p: &Permissions, a: &Attributes) -> Result<(), String> {
    let Some(uses) = bus_uses(a) else {
        return Err(format!(
            "the gateway serves no {} on {}",
            a.verb,
            resource_text(a)
        ));
    };
    match uses.iter().find(|u| !u.allowed(p)) {
        Some(refused) => Err(format!("its role may not {refused}")),
        None => Ok(()),
    }
}

/// [`decide`] with `*` standing for every verb, every resource of the group, or every group,
/// as `kubectl auth can-i '*' '*'` asks.
pub fn decide_wildcards(p: &Permissions, a: &Attributes) -> Result<(), String> {
    let verbs: Vec<String> = if a.verb == "*" {
        VERBS.iter().map(|v| v.to_string()).collect()
    } else {
        vec![a.verb.clone()]
    };
    let targets: Vec<(String, String)> = if a.resource == "*" || a.group == "*" {
        resources::all()
            .filter(|r| a.group == "*" || r.group == a.group)
            .filter(|r| a.resource == "*" || r.plural() == a.resource)
            .map(|r| (r.group.to_string(), r.plural().to_string()))
            .collect()
    } else {
        vec![(a.group.clone(), a.resource.clone())]
    };
    if targets.is_empty() {
        return Err(format!("the gateway serves no {}", resource_text(a)));
    }
    for verb in &verbs {
        for (group, resource) in &targets {
            let one = Attributes {
                verb: verb.clone(),
                group: group.clone(),
                resource: resource.clone(),
                ..a.clone()
            };
            // A verb a resource does not serve (deletecollection, say) does not make `*` no.
            if a.verb == "*" && bus_uses(&one).is_none() {
                continue;
            }
            decide(p, &one)?;
        }
    }
    Ok(())
}

fn resource_text(a: &Attributes) -> String {
    if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    }
}

/// Kubernetes' refusal: `pods "web" is forbidden: User "alice" cannot create resource "pods"
/// in API group "" in the namespace "default"`.
pub fn forbidden(caller: &Caller, a: &Attributes) -> Status {
    // Kubernetes qualifies the resource with its group (`deployments.apps`).
    let qualified = if a.group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let object = if a.name.is_empty() {
        qualified
    } else {
        format!("{qualified} {:?}", a.name)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {:?}", a.namespace)
    };
    let message = format!(
        "{object} is forbidden: User {:?} cannot {} resource {:?} in API group {:?} {scope}",
        caller.name,
        a.verb,
        resource_text(a),
        a.group
    );
    Status::new(Reason::Forbidden, message).with_details(&a.resource, &a.name, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::roles::Role;

    fn attrs(verb: &str, group: &str, resource: &str, sub: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: "default".into(),
            name: String::new(),
        }
    }

    #[test]
    fn a_viewer_reads_but_does_not_write_exec_or_read_secrets() {
        let viewer = Caller::new("v", Role::Viewer);
        let p = &viewer.permissions;
        for verb in ["get", "list", "watch"] {
            assert!(decide(p, &attrs(verb, "", "pods", "")).is_ok(), "{verb}");
        }
        assert!(decide(p, &attrs("get", "", "pods", "log")).is_ok());
        assert!(decide(p, &attrs("list", "metrics.k8s.io", "pods", "")).is_ok());
        for (verb, sub) in [
            ("create", ""),
            ("delete", ""),
            ("patch", ""),
            ("create", "exec"),
        ] {
            let err = decide(p, &attrs(verb, "", "pods", sub)).unwrap_err();
            assert!(err.contains("may not"), "{verb} {sub}: {err}");
        }
        assert!(decide(p, &attrs("get", "", "secrets", "")).is_err());
        assert!(decide(p, &attrs("watch", "", "secrets", "")).is_err());
        assert!(decide(p, &attrs("update", "apps", "deployments", "scale")).is_err());
        assert!(decide_wildcards(p, &attrs("*", "*", "*", "")).is_err());
    }

    #[test]
    fn an_admin_may_do_everything_served_and_nothing_else() {
        let admin = Caller::new("a", Role::Admin);
        let p = &admin.permissions;
        for verb in VERBS {
            assert!(
                decide(p, &attrs(verb, "apps", "deployments", "")).is_ok(),
                "{verb}"
            );
        }
        assert!(decide(p, &attrs("create", "", "pods", "exec")).is_ok());
        assert!(decide(p, &attrs("create", "", "pods", "eviction")).is_ok());
        assert!(decide(p, &attrs("patch", "apps", "deployments", "scale")).is_ok());
        assert!(decide(p, &attrs("get", "", "secrets", "")).is_ok());
        assert!(decide_wildcards(p, &attrs("*", "*", "*", "")).is_ok());
        assert!(decide(p, &attrs("get", "", "widgets", "")).is_err());
        assert!(decide(p, &attrs("escalate", "", "pods", "")).is_err());
        assert!(decide(p, &attrs("get", "", "pods", "attach")).is_err());
    }

    #[test]
    fn refusals_read_as_kubernetes_writes_them() {
        let caller = Caller::new("alice", Role::Viewer);
        let s = forbidden(&caller, &attrs("create", "", "pods", ""));
        assert_eq!(s.code, 403);
        assert_eq!(
            s.message,
            r#"pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace "default""#
        );
        let mut a = attrs("delete", "", "nodes", "");
        a.namespace.clear();
        a.name = "n1".into();
        assert_eq!(
            forbidden(&caller, &a).message,
            r#"nodes "n1" is forbidden: User "alice" cannot delete resource "nodes" in API group "" at the cluster scope"#
        );
        let mut a = attrs("patch", "apps", "deployments", "scale");
        a.name = "web".into();
        assert_eq!(
            forbidden(&caller, &a).message,
            r#"deployments.apps "web" is forbidden: User "alice" cannot patch resource "deployments/scale" in API group "apps" in the namespace "default""#
        );
    }
}
