//! The caller asking about itself: `SelfSubjectAccessReview` (`kubectl auth can-i`),
//! `SelfSubjectRulesReview` (`kubectl auth can-i --list`), both authorization.k8s.io/v1,
//! and `SelfSubjectReview` (`kubectl auth whoami`, authentication.k8s.io/v1). Answered from
//! [`crate::authz`], the same decisions requests get; nothing touches the bus.

use serde_json::{json, Value};

use crate::authn::Caller;
use crate::authz::{self, Attributes};
use crate::http::{self, Request, Response};
use crate::resources;

pub const AUTHORIZATION_GROUP: &str = "authorization.k8s.io";
pub const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";
pub const VERSION: &str = "v1";

/// The review kinds: (group, plural, kind).
const REVIEWS: &[(&str, &str, &str)] = &[
    (
        AUTHORIZATION_GROUP,
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
    ),
    (
        AUTHORIZATION_GROUP,
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
    ),
    (
        AUTHENTICATION_GROUP,
        "selfsubjectreviews",
        "SelfSubjectReview",
    ),
];

/// Paths every authenticated caller may read without a rule, as Kubernetes'
/// `system:discovery` and `system:public-info-viewer` grant them.
const NON_RESOURCE_URLS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];

/// The review kind served at `group`/`version`/`plural`, if any.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static str> {
    (version == VERSION)
        .then(|| REVIEWS.iter().find(|(g, p, _)| *g == group && *p == plural))
        .flatten()
        .map(|(_, _, kind)| *kind)
}

pub fn groups() -> [&'static str; 2] {
    [AUTHENTICATION_GROUP, AUTHORIZATION_GROUP]
}

fn of_group(
    group: &str,
) -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str)> + '_ {
    REVIEWS.iter().filter(move |(g, _, _)| *g == group)
}

/// The legacy `APIResourceList` of a review group.
pub fn resource_list(group: &str) -> Value {
    let entries: Vec<Value> = of_group(group)
        .map(|(_, plural, kind)| {
            json!({"name": plural, "singularName": "", "namespaced": false, "kind": kind,
                   "verbs": ["create"]})
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1",
           "groupVersion": format!("{group}/{VERSION}"), "resources": entries})
}

/// Aggregated discovery entries of a review group.
pub fn aggregated_resources(group: &str) -> Vec<Value> {
    of_group(group)
        .map(|(group, plural, kind)| {
            json!({"resource": plural, "responseKind": {"group": group, "version": VERSION, "kind": kind},
                   "scope": "Cluster", "singularResource": kind.to_ascii_lowercase(), "verbs": ["create"]})
        })
        .collect()
}

/// `POST` of a review: the request echoed with its `status` filled in.
pub fn serve(req: &Request, caller: &Caller, kind: &str) -> Response {
    if req.method != hyper::Method::POST {
        return http::method_not_allowed(&req.method, &req.path);
    }
    let mut review = match crate::objects::parse_body(req) {
        Ok(v) if v.is_object() => v,
        Ok(_) => {
            return http::error(
                bus_schemas::Reason::BadRequest,
                "the request body must be a JSON object",
            )
        }
        Err(s) => return http::status(&s),
    };
    let group = if kind == "SelfSubjectReview" {
        AUTHENTICATION_GROUP
    } else {
        AUTHORIZATION_GROUP
    };
    let status = match kind {
        "SelfSubjectAccessReview" => match access_review(caller, &review["spec"]) {
            Ok(status) => status,
            Err(s) => return http::status(&s),
        },
        "SelfSubjectRulesReview" => {
            rules_review(caller, review["spec"]["namespace"].as_str().unwrap_or(""))
        }
        _ => json!({"userInfo": {"username": caller.name, "groups": caller.groups()}}),
    };
    review["apiVersion"] = json!(format!("{group}/{VERSION}"));
    review["kind"] = json!(kind);
    review["status"] = status;
    http::created(&review)
}

fn access_review(caller: &Caller, spec: &Value) -> Result<Value, bus_schemas::Status> {
    if let Some(non) = spec.get("nonResourceAttributes").filter(|v| v.is_object()) {
        let path = non["path"].as_str().unwrap_or("");
        let allowed = non["verb"].as_str() == Some("get") && non_resource_allowed(path);
        return Ok(json!({"allowed": allowed}));
    }
    let Some(ra) = spec.get("resourceAttributes").filter(|v| v.is_object()) else {
        return Err(bus_schemas::Status::invalid(
            "SelfSubjectAccessReview",
            "",
            vec![bus_schemas::Cause::required("spec.resourceAttributes")],
        ));
    };
    let text = |k: &str| ra[k].as_str().unwrap_or("").to_string();
    let attributes = Attributes {
        verb: text("verb"),
        group: text("group"),
        resource: text("resource"),
        subresource: text("subresource"),
        namespace: text("namespace"),
        name: text("name"),
    };
    Ok(
        match authz::decide_wildcards(&caller.permissions, &attributes) {
            Ok(()) => json!({"allowed": true, "reason": format!("role {} allows it", caller.role)}),
            Err(why) => json!({"allowed": false, "reason": format!("role {}: {why}", caller.role)}),
        },
    )
}

fn non_resource_allowed(path: &str) -> bool {
    NON_RESOURCE_URLS.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => path == *p,
    })
}

/// Every resource (and subresource) the caller may use in `namespace`, with its verbs.
fn rules_review(caller: &Caller, namespace: &str) -> Value {
    let mut rules = vec![
        json!({"verbs": ["create"], "apiGroups": [AUTHORIZATION_GROUP],
        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}),
        json!({"verbs": ["create"], "apiGroups": [AUTHENTICATION_GROUP], "resources": ["selfsubjectreviews"]}),
    ];
    let mut targets: Vec<(String, String, String)> = Vec::new();
    for r in resources::all() {
        let key = (r.group.to_string(), r.plural().to_string(), String::new());
        if targets.contains(&key) {
            continue; // an older version of the same resource
        }
        targets.push(key);
        for sub in r.subresources() {
            targets.push((r.group.into(), r.plural().into(), sub.name.into()));
        }
    }
    for plural in ["pods", "nodes"] {
        targets.push((crate::metrics::GROUP.into(), plural.into(), String::new()));
    }
    for (group, resource, subresource) in targets {
        let verbs: Vec<&str> = authz::VERBS
            .iter()
            .copied()
            .filter(|verb| {
                let a = Attributes {
                    verb: verb.to_string(),
                    group: group.clone(),
                    resource: resource.clone(),
                    subresource: subresource.clone(),
                    namespace: namespace.to_string(),
                    name: String::new(),
                };
                authz::decide(&caller.permissions, &a).is_ok()
            })
            .collect();
        if verbs.is_empty() {
            continue;
        }
        let name = if subresource.is_empty() {
            resource
        } else {
            format!("{resource}/{subresource}")
        };
        rules.push(json!({"verbs": verbs, "apiGroups": [group], "resources": [name]}));
    }
    json!({
        "resourceRules": rules,
        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": NON_RESOURCE_URLS}],
        "incomplete": false,
    })
}
