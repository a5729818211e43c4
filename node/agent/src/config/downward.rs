//! The downward API: a pod's own fields and its containers' resources, as the text an
//! environment variable or a file holds.

use std::collections::BTreeMap;

use bus_schemas::kinds::config_sources::ResourceFieldSelector;
use bus_schemas::kinds::container::Container;
use bus_schemas::kinds::Pod;
use bus_schemas::quantity::Quantity;

/// What the node adds to the pod's own object: its IP (before the status carrying it has
/// landed) and, for limits a container does not set, the node's allocatable resources.
#[derive(Debug, Clone, Default)]
pub struct NodeFacts {
    pub pod_ip: String,
    pub cpu_milli: i128,
    pub memory_bytes: i128,
}

/// `labels` / `annotations` as a file: `key="value"` lines, sorted, values quoted as Go's
/// `%q` would (what Kubernetes writes).
fn map_file(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}={}", serde_json::Value::String(v.clone())))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A `fieldRef` path's value; None for a path the downward API does not offer.
pub fn field_value(pod: &Pod, path: &str, node: &NodeFacts) -> Option<String> {
    let subscript = |prefix: &str| {
        path.strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")
            .map(str::to_string)
    };
    if let Some(key) = subscript("metadata.labels") {
        return Some(pod.metadata.labels.get(&key).cloned().unwrap_or_default());
    }
    if let Some(key) = subscript("metadata.annotations") {
        return Some(
            pod.metadata
                .annotations
                .get(&key)
                .cloned()
                .unwrap_or_default(),
        );
    }
    let pod_ip = if pod.status.pod_ip.is_empty() {
        node.pod_ip.clone()
    } else {
        pod.status.pod_ip.clone()
    };
    Some(match path {
        "metadata.name" => pod.metadata.name.clone(),
        "metadata.namespace" => pod.metadata.namespace.clone(),
        "metadata.uid" => pod.metadata.uid.clone(),
        "metadata.labels" => map_file(&pod.metadata.labels),
        "metadata.annotations" => map_file(&pod.metadata.annotations),
        "spec.nodeName" => pod.spec.node_name.clone(),
        "spec.serviceAccountName" => pod.spec.service_account_name.clone(),
        "status.podIP" | "status.podIPs" => pod_ip,
        "status.hostIP" | "status.hostIPs" => pod.status.host_ip.clone(),
        _ => return None,
    })
}

/// A `resourceFieldRef`'s value: the request or limit divided by the divisor (default 1),
/// rounded up, as Kubernetes does (`limits.cpu` of 250m with divisor 1 is `1`). A limit the
/// container does not set reads as the node's allocatable amount; a request it does not set
/// reads as its limit (the defaulting Kubernetes applies), else 0.
pub fn resource_value(
    pod: &Pod,
    container: &Container,
    selector: &ResourceFieldSelector,
    node: &NodeFacts,
) -> Result<String, String> {
    let target = if selector.container_name.is_empty() {
        container
    } else {
        pod.spec
            .containers
            .iter()
            .chain(&pod.spec.init_containers)
            .find(|c| c.name == selector.container_name)
            .ok_or_else(|| {
                format!(
                    "resourceFieldRef: container {:?} not found in pod",
                    selector.container_name
                )
            })?
    };
    let (kind, resource) = selector.resource.split_once('.').ok_or_else(|| {
        format!(
            "resourceFieldRef: unsupported resource {:?}",
            selector.resource
        )
    })?;
    let limits = &target.resources.limits;
    let requests = &target.resources.requests;
    let allocatable = match resource {
        "cpu" => Quantity::from_milli(node.cpu_milli),
        "memory" => Quantity::from_value(node.memory_bytes),
        _ => Quantity::zero(),
    };
    let amount = match kind {
        "limits" => limits.get(resource).cloned().unwrap_or(allocatable),
        "requests" => requests
            .get(resource)
            .or(limits.get(resource))
            .cloned()
            .unwrap_or_else(Quantity::zero),
        _ => {
            return Err(format!(
                "resourceFieldRef: unsupported resource {:?}",
                selector.resource
            ))
        }
    };
    let divisor = selector.divisor.unwrap_or_else(|| Quantity::from_value(1));
    let d = divisor.milli_value();
    if d <= 0 {
        return Err(format!(
            "resourceFieldRef: divisor {divisor} must be positive"
        ));
    }
    let n = amount.milli_value();
    let rounded_up = (n + d - 1).div_euclid(d);
    Ok(rounded_up.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    fn pod() -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = "web-1".into();
        pod.metadata.namespace = "shop".into();
        pod.metadata.labels.insert("app".into(), "web".into());
        pod.metadata
            .labels
            .insert("tier".into(), "front \"end\"".into());
        pod.metadata
            .annotations
            .insert("owner".into(), "ops".into());
        pod.spec.node_name = "n1".into();
        pod.status.host_ip = "10.0.0.5".into();
        let mut c = Container {
            name: "app".into(),
            ..Default::default()
        };
        c.resources.limits.insert("cpu".into(), q("250m"));
        c.resources.limits.insert("memory".into(), q("64Mi"));
        c.resources.requests.insert("cpu".into(), q("100m"));
        pod.spec.containers.push(c);
        pod
    }

    fn facts() -> NodeFacts {
        NodeFacts {
            pod_ip: "10.244.0.9".into(),
            cpu_milli: 2000,
            memory_bytes: 4 << 30,
        }
    }

    #[test]
    fn fields() {
        let p = pod();
        let f = facts();
        assert_eq!(
            field_value(&p, "metadata.labels['app']", &f).unwrap(),
            "web"
        );
        assert_eq!(
            field_value(&p, "metadata.annotations['owner']", &f).unwrap(),
            "ops"
        );
        assert_eq!(field_value(&p, "metadata.labels['none']", &f).unwrap(), "");
        assert_eq!(field_value(&p, "status.podIP", &f).unwrap(), "10.244.0.9");
        assert_eq!(field_value(&p, "status.hostIP", &f).unwrap(), "10.0.0.5");
        assert_eq!(
            field_value(&p, "metadata.labels", &f).unwrap(),
            "app=\"web\"\ntier=\"front \\\"end\\\"\""
        );
        assert!(field_value(&p, "spec.containers", &f).is_none());
    }

    #[test]
    fn resources_round_up_and_default() {
        let p = pod();
        let c = &p.spec.containers[0];
        let f = facts();
        let sel = |resource: &str, divisor: Option<&str>| ResourceFieldSelector {
            container_name: String::new(),
            resource: resource.into(),
            divisor: divisor.map(q),
        };
        assert_eq!(
            resource_value(&p, c, &sel("limits.cpu", None), &f).unwrap(),
            "1"
        );
        assert_eq!(
            resource_value(&p, c, &sel("limits.cpu", Some("1m")), &f).unwrap(),
            "250"
        );
        assert_eq!(
            resource_value(&p, c, &sel("requests.cpu", Some("1m")), &f).unwrap(),
            "100"
        );
        assert_eq!(
            resource_value(&p, c, &sel("limits.memory", Some("1Mi")), &f).unwrap(),
            "64"
        );
        assert_eq!(
            resource_value(&p, c, &sel("limits.memory", None), &f).unwrap(),
            "67108864"
        );
        // A request defaults to the limit; an unset limit reads as the node's allocatable.
        assert_eq!(
            resource_value(&p, c, &sel("requests.memory", Some("1Mi")), &f).unwrap(),
            "64"
        );
        let mut bare = p.clone();
        bare.spec.containers[0].resources = Default::default();
        let c = &bare.spec.containers[0];
        assert_eq!(
            resource_value(&bare, c, &sel("limits.cpu", Some("1m")), &f).unwrap(),
            "2000"
        );
        assert_eq!(
            resource_value(&bare, c, &sel("requests.cpu", None), &f).unwrap(),
            "0"
        );
        let other = ResourceFieldSelector {
            container_name: "ghost".into(),
            ..sel("limits.cpu", None)
        };
        assert!(resource_value(&bare, c, &other, &f)
            .unwrap_err()
            .contains("ghost"));
    }
}
