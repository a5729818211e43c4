//! Pod security admission against a real nats-server: the namespace's labels choose what is
//! refused and what is only warned about.

use std::collections::BTreeMap;

use bus_schemas::api::ListOptions;
use bus_schemas::kinds::{Deployment, Namespace, Pod};
use bus_schemas::subjects::Verb;
use bus_schemas::{codec, Reason, Resource, Status};
use shoal_api::local::LocalCluster;
use shoal_bus::client::{decode_reply, warnings};
use shoal_bus::{ApiClient, ApiError};

const ENFORCE: &str = "pod-security.kubernetes.io/enforce";
const WARN: &str = "pod-security.kubernetes.io/warn";

async fn namespace(api: &ApiClient, name: &str, labels: &[(&str, &str)]) {
    let mut ns = Namespace::default();
    ns.metadata.name = name.into();
    ns.metadata.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect::<BTreeMap<_, _>>();
    api.create(&ns).await.expect("namespace created");
}

fn host_path_pod(namespace: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "rooted", "namespace": namespace},
        "spec": {
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            "containers": [{"name": "main", "image": "busybox:1.36",
                            "volumeMounts": [{"name": "root", "mountPath": "/host"}]}]
        }
    }))
    .expect("fixture pod")
}

fn plain_pod(namespace: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "plain", "namespace": namespace},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .expect("fixture pod")
}

fn refusal<T: std::fmt::Debug>(result: Result<T, ApiError>) -> Status {
    match result {
        Err(ApiError::Status(status)) => status,
        other => panic!("not refused: {other:?}"),
    }
}

fn fields(status: &Status) -> Vec<&str> {
    status.causes().iter().map(|c| c.field.as_str()).collect()
}

async fn pods_in(api: &ApiClient, namespace: &str) -> Vec<String> {
    let options = ListOptions {
        namespace: namespace.into(),
        ..Default::default()
    };
    let list = api.list::<Pod>(&options).await.expect("list");
    list.items.into_iter().map(|p| p.metadata.name).collect()
}

/// Creates `obj` and returns it with the warnings its reply carried.
async fn create_with_warnings<K: Resource>(api: &ApiClient, obj: &K) -> (K, Vec<String>) {
    let body = codec::to_msgpack(obj).expect("encodes");
    let reply = api
        .request_raw(&K::INFO.token(), Verb::Create, body)
        .await
        .expect("API answers");
    let subject = bus_schemas::subjects::api(&K::INFO.token(), Verb::Create);
    let (created, headers) = decode_reply::<K>(&subject, reply).expect("created");
    (created, warnings(&headers))
}

#[actix::test]
async fn a_host_path_pod_is_refused_under_baseline_and_admitted_where_privileged() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();

    // `default` has no label: baseline is enforced.
    let refused = refusal(api.create(&host_path_pod("default")).await);
    assert_eq!(refused.reason, Reason::Forbidden);
    assert_eq!(fields(&refused), ["spec.volumes[0].hostPath"]);
    assert_eq!(
        refused.message,
        "pods \"rooted\" is forbidden: violates PodSecurity \"baseline:latest\": \
         hostPath volumes (volume \"root\")"
    );
    assert!(pods_in(&api, "default").await.is_empty(), "nothing written");

    namespace(&api, "ops", &[(ENFORCE, "privileged")]).await;
    let admitted = api.create(&host_path_pod("ops")).await.expect("admitted");
    assert_eq!(admitted.metadata.namespace, "ops");
    assert_eq!(pods_in(&api, "ops").await, ["rooted"]);

    // The cluster's own namespace is born privileged.
    let system: Namespace = api.get("", "shoal-system").await.unwrap();
    assert_eq!(
        system.metadata.labels.get(ENFORCE).map(String::as_str),
        Some("privileged")
    );
}

#[actix::test]
async fn restricted_names_every_missing_field_and_a_bad_label_means_restricted() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    namespace(&api, "locked", &[(ENFORCE, "restricted")]).await;

    let refused = refusal(api.create(&plain_pod("locked")).await);
    assert_eq!(refused.reason, Reason::Forbidden);
    let mut got = fields(&refused);
    got.sort_unstable();
    assert_eq!(
        got,
        [
            "spec.containers[0].securityContext.allowPrivilegeEscalation",
            "spec.containers[0].securityContext.capabilities.drop",
            "spec.containers[0].securityContext.runAsNonRoot",
            "spec.containers[0].securityContext.seccompProfile.type",
        ]
    );
    assert!(
        refused
            .message
            .contains("violates PodSecurity \"restricted:latest\": "),
        "{}",
        refused.message
    );
    assert!(pods_in(&api, "locked").await.is_empty(), "nothing written");

    let mut hardened = plain_pod("locked");
    hardened.spec.containers[0].security_context = Some(
        serde_json::from_value(serde_json::json!({
            "runAsNonRoot": true,
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}
        }))
        .unwrap(),
    );
    api.create(&hardened).await.expect("a hardened pod passes");

    // A typo in the level is read as restricted, and the refusal says why.
    namespace(&api, "typo", &[(ENFORCE, "privilegd")]).await;
    let refused = refusal(api.create(&plain_pod("typo")).await);
    assert!(
        refused.message.contains("\"restricted:latest\"")
            && refused.message.contains("\"privilegd\"")
            && refused.message.contains("using restricted"),
        "{}",
        refused.message
    );
}

#[actix::test]
async fn the_warn_level_admits_and_warns() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    namespace(
        &api,
        "lenient",
        &[(ENFORCE, "baseline"), (WARN, "restricted")],
    )
    .await;

    let (created, warned) = create_with_warnings(&api, &plain_pod("lenient")).await;
    assert_eq!(created.metadata.name, "plain");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].starts_with("would violate PodSecurity \"restricted:latest\": ")
            && warned[0].contains("runAsNonRoot != true"),
        "{}",
        warned[0]
    );

    // A pod meeting the warn level gets no warning.
    let mut quiet = plain_pod("default");
    quiet.metadata.name = "quiet".into();
    let (_, warned) = create_with_warnings(&api, &quiet).await;
    assert!(warned.is_empty(), "{warned:?}");
}

#[actix::test]
async fn a_workload_whose_pods_would_be_refused_is_admitted_with_a_warning() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "node-agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "hostNetwork": true,
                    "containers": [{"name": "main", "image": "busybox:1.36"}]
                }
            }
        }
    }))
    .unwrap();
    let (_, warned) = create_with_warnings(&api, &deployment).await;
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].starts_with("would violate PodSecurity \"baseline:latest\": host namespaces")
            && warned[0].contains("hostNetwork=true"),
        "{}",
        warned[0]
    );
    let stored: Deployment = api.get("default", "node-agent").await.expect("admitted");
    assert!(stored.spec.template.spec.host_network);
}
