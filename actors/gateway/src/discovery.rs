//! Discovery documents: `/version`, legacy `/api`, `/apis` and per-group-version resource
//! lists (what the Python client reads), and aggregated discovery (`APIGroupDiscoveryList`,
//! kubectl's one round trip). All generated from [`crate::resources`].

use serde_json::{json, Value};

use crate::resources::{self, RestResource, VERBS};

/// The Kubernetes minor version whose API this gateway follows.
pub const KUBERNETES_VERSION: &str = "v1.32.0";

/// Content type of aggregated discovery, as kubectl asks for it.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": format!("{KUBERNETES_VERSION}+shoal-{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

pub fn api_versions() -> Value {
    json!({"kind": "APIVersions", "apiVersion": "v1", "versions": ["v1"],
           "serverAddressByClientCIDRs": []})
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

pub fn api_group_list() -> Value {
    let groups: Vec<Value> = resources::groups()
        .into_iter()
        .map(|(group, versions)| {
            let gvs: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": group_version(group, v), "version": v}))
                .collect();
            json!({"name": group, "preferredVersion": gvs[0].clone(), "versions": gvs})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn legacy_entry(r: &RestResource) -> Value {
    json!({
        "name": r.plural(),
        "singularName": r.info.singular(),
        "namespaced": r.namespaced(),
        "kind": r.kind(),
        "verbs": VERBS,
        "shortNames": r.info.short_names,
        "categories": r.categories(),
    })
}

/// `APIResourceList` of one group-version; None when nothing is served there.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    if group == crate::metrics::GROUP && version == crate::metrics::VERSION {
        return Some(crate::metrics::resource_list());
    }
    if crate::reviews::groups().contains(&group) && version == crate::reviews::VERSION {
        return Some(crate::reviews::resource_list(group));
    }
    let mut entries = Vec::new();
    for r in resources::all().filter(|r| r.group == group && r.version == version) {
        entries.push(legacy_entry(&r));
        for sub in r.subresources() {
            entries.push(json!({
                "name": format!("{}/{}", r.plural(), sub.name),
                "singularName": "",
                "namespaced": r.namespaced(),
                "group": sub.group,
                "version": sub.version,
                "kind": sub.kind,
                "verbs": sub.verbs,
            }));
        }
    }
    if entries.is_empty() {
        return None;
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(group, version),
        "resources": entries,
    }))
}

fn aggregated_resource(r: &RestResource) -> Value {
    let subresources: Vec<Value> = r
        .subresources()
        .iter()
        .map(|s| {
            json!({
                "subresource": s.name,
                "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                "verbs": s.verbs,
            })
        })
        .collect();
    json!({
        "resource": r.plural(),
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind()},
        "scope": if r.namespaced() { "Namespaced" } else { "Cluster" },
        "singularResource": r.info.singular(),
        "verbs": VERBS,
        "shortNames": r.info.short_names,
        "categories": r.categories(),
        "subresources": subresources,
    })
}

/// One group with its versions, the preferred first (as aggregated discovery orders them).
fn aggregated_group(group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|version| {
            let resources: Vec<Value> = if group == crate::metrics::GROUP {
                crate::metrics::aggregated_resources()
            } else if crate::reviews::groups().contains(&group) {
                crate::reviews::aggregated_resources(group)
            } else {
                resources::all()
                    .filter(|r| r.group == group && r.version == *version)
                    .map(|r| aggregated_resource(&r))
                    .collect()
            };
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({
        "metadata": {"name": group, "creationTimestamp": null},
        "versions": versions,
    })
}

/// Aggregated discovery of the core group (`/api`) or of every named group (`/apis`).
pub fn aggregated(core: bool) -> Value {
    let items: Vec<Value> = if core {
        vec![aggregated_group("", &["v1"])]
    } else {
        resources::groups()
            .into_iter()
            .map(|(g, v)| aggregated_group(g, &v))
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_subresources_are_discoverable() {
        let apps = resource_list("apps", "v1").unwrap();
        let names: Vec<&str> = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"deployments/scale"), "{names:?}");
        assert!(names.contains(&"replicasets/scale"));
        assert!(resource_list("apps", "v2").is_none());
    }

    #[test]
    fn autoscaling_prefers_v2_and_serves_v1() {
        let groups = api_group_list();
        let autoscaling = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "autoscaling")
            .unwrap();
        assert_eq!(autoscaling["preferredVersion"]["version"], "v2");
        assert_eq!(autoscaling["versions"][1]["groupVersion"], "autoscaling/v1");
        let v1 = resource_list("autoscaling", "v1").unwrap();
        assert_eq!(v1["resources"][0]["name"], "horizontalpodautoscalers");
    }

    #[test]
    fn kubectl_finds_the_reviews_of_its_own_rights() {
        let authz = resource_list("authorization.k8s.io", "v1").unwrap();
        assert_eq!(authz["resources"][0]["name"], "selfsubjectaccessreviews");
        let all = aggregated(false).to_string();
        assert!(all.contains("selfsubjectrulesreviews") && all.contains("selfsubjectreviews"));
    }

    #[test]
    fn preferred_version_is_one_of_the_versions() {
        for g in api_group_list()["groups"].as_array().unwrap() {
            assert!(g["versions"]
                .as_array()
                .unwrap()
                .contains(&g["preferredVersion"]));
        }
    }
}
