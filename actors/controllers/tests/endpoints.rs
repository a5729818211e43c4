//! The endpoints controller against a real cluster. There is NO node agent here: pod IPs and
//! readiness are written through the API's status endpoint by the test itself, standing in
//! for the node agent.

mod common;

use std::time::Duration;

use bus_schemas::kinds::{Endpoints, Lease, Pod, Service};
use common::*;
use shoal_api::service_ips::{service_ip_lease_name, SERVICE_IP_NAMESPACE};

const T: Duration = Duration::from_secs(20);

fn service(name: &str, app: &str) -> Service {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"app": app}, "ports": [{"port": 80, "targetPort": 8080}]}
    }))
}

fn pod(name: &str, app: &str) -> Pod {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1"}]}
    }))
}

/// Stands in for the node agent: the pod runs with `ip`, ready or not.
async fn set_status(env: &Env, name: &str, ip: &str, ready: bool) {
    let mut p: Pod = env.api.get("default", name).await.expect("pod exists");
    p.metadata.resource_version.clear();
    p.status.phase = "Running".into();
    p.status.pod_ip = ip.into();
    p.status.conditions.retain(|c| c.type_ != "Ready");
    let mut c = ready_condition();
    if !ready {
        c.status = "False".into();
    }
    p.status.conditions.push(c);
    env.api.update_status(&p).await.expect("pod status written");
}

async fn endpoints(env: &Env, name: &str) -> Option<Endpoints> {
    env.api.get::<Endpoints>("default", name).await.ok()
}

fn ips(ep: &Endpoints) -> (Vec<String>, Vec<String>) {
    let ready = ep.subsets.iter().flat_map(|s| &s.addresses);
    let not_ready = ep.subsets.iter().flat_map(|s| &s.not_ready_addresses);
    (
        ready.map(|a| a.ip.clone()).collect(),
        not_ready.map(|a| a.ip.clone()).collect(),
    )
}

async fn wait_ips(env: &Env, name: &str, ready: &[&str], not_ready: &[&str]) {
    let want = (
        ready.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        not_ready.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
    );
    eventually(&format!("endpoints {name} = {want:?}"), T, || {
        let want = want.clone();
        async move {
            endpoints(env, name)
                .await
                .is_some_and(|ep| ips(&ep) == want)
        }
    })
    .await;
}

#[actix::test]
async fn endpoints_follow_pod_readiness_and_labels() {
    let (env, controllers) = env().await;
    let svc = env.api.create(&service("web", "web")).await.expect("svc");
    let empty = env
        .api
        .create(&service("nobody", "nothing"))
        .await
        .expect("svc");
    for name in ["a", "b", "c"] {
        env.api.create(&pod(name, "web")).await.expect("pod");
    }
    env.api.create(&pod("other", "db")).await.expect("pod");

    // A Service selecting nothing has Endpoints with no addresses.
    wait_ips(&env, "nobody", &[], &[]).await;

    set_status(&env, "a", "10.244.0.1", true).await;
    set_status(&env, "b", "10.244.0.2", false).await;
    set_status(&env, "other", "10.244.0.9", true).await;
    wait_ips(&env, "web", &["10.244.0.1"], &["10.244.0.2"]).await;
    let ep = endpoints(&env, "web").await.unwrap();
    let subset = &ep.subsets[0];
    assert_eq!(subset.ports[0].port, 8080);
    let target = subset.addresses[0].target_ref.as_ref().unwrap();
    let a: Pod = env.api.get("default", "a").await.unwrap();
    assert_eq!(
        (
            target.kind.as_str(),
            target.name.as_str(),
            target.uid.as_str()
        ),
        ("Pod", "a", a.metadata.uid.as_str())
    );

    // Readiness changes move addresses.
    set_status(&env, "b", "10.244.0.2", true).await;
    set_status(&env, "c", "10.244.0.3", false).await;
    wait_ips(&env, "web", &["10.244.0.1", "10.244.0.2"], &["10.244.0.3"]).await;

    // Relabelling a pod out of the selector removes it.
    let mut b: Pod = env.api.get("default", "b").await.unwrap();
    b.metadata.labels.insert("app".into(), "moved".into());
    env.api.update(&b).await.expect("relabel");
    wait_ips(&env, "web", &["10.244.0.1"], &["10.244.0.3"]).await;

    // Deleting the Service removes its Endpoints. (Releasing its IP reservation is not
    // implemented yet; the reservation must survive GC while the Service lives.)
    let ip = svc.spec.cluster_ip.parse().expect("allocated IP");
    let lease = service_ip_lease_name(ip);
    env.api
        .get::<Lease>(SERVICE_IP_NAMESPACE, &lease)
        .await
        .expect("reservation exists");
    delete_now::<Service>(&env.api, "default", "web", None).await;
    eventually("endpoints web deleted", T, || async {
        endpoints(&env, "web").await.is_none()
    })
    .await;
    // The other Service's Endpoints stay.
    assert!(endpoints(&env, "nobody").await.is_some());
    let _ = empty;
    controllers.stop().await;
}

/// Stands in for a node agent (or the node lifecycle controller): the node's Ready condition.
async fn set_node_ready(env: &Env, name: &str, status: &str) {
    let mut n: bus_schemas::kinds::Node = env.api.get("", name).await.expect("node exists");
    n.metadata.resource_version.clear();
    n.status.conditions.retain(|c| c.type_ != "Ready");
    let mut c = ready_condition();
    c.status = status.into();
    c.reason = if status == "True" {
        "AgentReady"
    } else {
        "NetworkUnavailable"
    }
    .into();
    n.status.conditions.push(c);
    env.api
        .update_status(&n)
        .await
        .expect("node status written");
}

#[actix::test]
async fn pods_on_a_node_that_is_not_ready_leave_the_ready_addresses() {
    let cluster = shoal_api::local::LocalCluster::start()
        .await
        .expect("cluster starts");
    let api = cluster.api();
    let mut tunables = tunables();
    // No agent heartbeats here: keep the node lifecycle from marking the nodes unreachable
    // and evicting the pods; this test drives the nodes' Ready condition itself.
    tunables.node_monitor_grace = Duration::from_secs(3600);
    let controllers = start_controllers(
        &cluster,
        shoal_controllers::ControllersConfig {
            tunables,
            ..Default::default()
        },
    )
    .await;
    let env = Env { cluster, api };
    add_node(&env.api, "n1", &[]).await;
    add_node(&env.api, "n2", &[]).await;
    env.api.create(&service("web", "web")).await.expect("svc");
    for (name, node) in [("a", "n1"), ("b", "n2")] {
        let created = env.api.create(&pod(name, "web")).await.expect("pod");
        bind(&env.api, &created, node).await;
    }
    set_status(&env, "a", "10.244.1.1", true).await;
    set_status(&env, "b", "10.244.2.1", true).await;
    wait_ips(&env, "web", &["10.244.1.1", "10.244.2.1"], &[]).await;

    // n2's agent reports its network cut: nothing about the pods changes, yet b must go.
    set_node_ready(&env, "n2", "False").await;
    wait_ips(&env, "web", &["10.244.1.1"], &["10.244.2.1"]).await;
    // Heartbeats lapsing (Ready=Unknown) count the same.
    set_node_ready(&env, "n1", "Unknown").await;
    wait_ips(&env, "web", &[], &["10.244.1.1", "10.244.2.1"]).await;
    // Back to ready: the pods serve again.
    set_node_ready(&env, "n1", "True").await;
    set_node_ready(&env, "n2", "True").await;
    wait_ips(&env, "web", &["10.244.1.1", "10.244.2.1"], &[]).await;
    controllers.stop().await;
}
