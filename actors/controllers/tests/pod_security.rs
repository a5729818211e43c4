//! Pods a controller creates meet pod security admission like anyone's: a Deployment whose
//! template the namespace's level refuses reports `ReplicaFailure` on its ReplicaSet and on
//! itself, with a FailedCreate Event, and recovers once the namespace allows the pods.

mod common;

use std::time::Duration;

use bus_schemas::api::PatchRequest;
use bus_schemas::kinds::{Deployment, Event, Namespace, ReplicaSet};
use bus_schemas::meta::{find_condition, Condition};
use bus_schemas::selector::Selector;
use common::*;

const T: Duration = Duration::from_secs(60);
const NS: &str = "agents";

fn host_path_deployment() -> Deployment {
    from_json(serde_json::json!({
        "metadata": {"name": "log-shipper", "namespace": NS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "log-shipper"}},
            "template": {
                "metadata": {"labels": {"app": "log-shipper"}},
                "spec": {
                    "volumes": [{"name": "logs", "hostPath": {"path": "/var/log"}}],
                    "containers": [{"name": "main", "image": "busybox:1.36",
                                    "volumeMounts": [{"name": "logs", "mountPath": "/logs"}]}]
                }
            }
        }
    }))
}

fn replica_failure(conditions: &[Condition]) -> Option<Condition> {
    find_condition(conditions, "ReplicaFailure").cloned()
}

fn the_replicaset(env: &Env) -> Option<std::sync::Arc<ReplicaSet>> {
    env.cluster
        .informers
        .get::<ReplicaSet>()
        .list(Some(NS), &Selector::everything())
        .into_iter()
        .next()
}

#[actix::test]
async fn refused_pods_show_as_replica_failure_until_the_namespace_allows_them() {
    let (env, controllers) = env().await;
    let mut ns = Namespace::default();
    ns.metadata.name = NS.into();
    env.api.create(&ns).await.unwrap();
    env.api.create(&host_path_deployment()).await.unwrap();

    // The ReplicaSet says why it has no pods, in the API's words.
    eventually("ReplicaFailure on the ReplicaSet", T, || async {
        the_replicaset(&env).is_some_and(|rs| replica_failure(&rs.status.conditions).is_some())
    })
    .await;
    let rs = the_replicaset(&env).unwrap();
    let failure = replica_failure(&rs.status.conditions).unwrap();
    assert_eq!(
        (failure.status.as_str(), failure.reason.as_str()),
        ("True", "FailedCreate")
    );
    assert!(
        failure.message.contains(
            "violates PodSecurity \"baseline:latest\": hostPath volumes (volume \"logs\")"
        ),
        "{}",
        failure.message
    );
    assert!(
        live_pods(&env, NS, "log-shipper").is_empty(),
        "no pod was written"
    );

    eventually("a FailedCreate Event on the ReplicaSet", T, || async {
        env.cluster
            .informers
            .get::<Event>()
            .list(Some(NS), &Selector::everything())
            .iter()
            .any(|e| {
                e.reason == "FailedCreate"
                    && e.type_ == "Warning"
                    && e.involved_object.name == rs.metadata.name
                    && e.message.contains("violates PodSecurity")
            })
    })
    .await;

    // The Deployment shows its ReplicaSet's failure.
    eventually("ReplicaFailure on the Deployment", T, || async {
        let d: Deployment = env.api.get(NS, "log-shipper").await.unwrap();
        replica_failure(&d.status.conditions)
            .is_some_and(|c| c.reason == "FailedCreate" && c.message == failure.message)
    })
    .await;

    // Once the namespace allows host paths, the retries (paced by the backoff) succeed and
    // the condition goes from both.
    let patch = PatchRequest {
        name: NS.into(),
        patch: r#"{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}"#
            .into(),
        ..Default::default()
    };
    env.api.patch::<Namespace>(&patch).await.unwrap();
    eventually("both pods created", T, || async {
        live_pods(&env, NS, "log-shipper").len() == 2
    })
    .await;
    eventually("ReplicaFailure cleared on the ReplicaSet", T, || async {
        the_replicaset(&env).is_some_and(|rs| replica_failure(&rs.status.conditions).is_none())
    })
    .await;
    eventually("ReplicaFailure cleared on the Deployment", T, || async {
        let d: Deployment = env.api.get(NS, "log-shipper").await.unwrap();
        replica_failure(&d.status.conditions).is_none()
    })
    .await;
    controllers.stop().await;
}
