//! Trace context through the API: a request's `traceparent` is continued into the object
//! event it causes, and a malformed one starts a new root trace without failing the request.

use bus_schemas::kinds::Pod;
use bus_schemas::subjects;
use shoal_api::local::LocalCluster;
use shoal_telemetry::propagation::trace_id_of;

const SENDER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

fn pod(name: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = name.into();
    pod.metadata.namespace = "default".into();
    pod.spec.containers = vec![bus_schemas::kinds::container::Container {
        name: "c".into(),
        image: "busybox".into(),
        ..Default::default()
    }];
    pod
}

async fn event_traceparent(cluster: &LocalCluster, name: &str) -> Option<String> {
    cluster
        .store
        .get_raw(&subjects::object("pod", "default", name))
        .await
        .unwrap()
        .unwrap()
        .traceparent
}

#[actix::test]
async fn a_malformed_traceparent_starts_a_new_root_trace_and_the_request_succeeds() {
    // The OpenTelemetry layer is what turns the API's spans into trace contexts.
    let _telemetry = shoal_telemetry::init(shoal_telemetry::TelemetryConfig {
        service: "api-test".into(),
        default_actor: "test".into(),
        log_filter: "warn".into(),
        log_format: shoal_telemetry::LogFormat::Text,
        otlp_endpoint: None,
    })
    .unwrap();
    let cluster = LocalCluster::start().await.unwrap();

    let continued = cluster
        .api()
        .with_traceparent(Some(format!("00-{SENDER_TRACE}-b7ad6b7169203331-01")));
    continued.create(&pod("continued")).await.unwrap();
    let tp = event_traceparent(&cluster, "continued")
        .await
        .expect("the event carries the trace");
    assert_eq!(trace_id_of(&tp).as_deref(), Some(SENDER_TRACE), "{tp}");
    assert!(
        !tp.contains("b7ad6b7169203331"),
        "the event's parent is the API's write, not the sender: {tp}"
    );

    for malformed in [
        "00-not-a-trace-01",
        "garbage",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
    ] {
        let name = format!("fresh-{}", malformed.len());
        let api = cluster.api().with_traceparent(Some(malformed.into()));
        let created = api.create(&pod(&name)).await;
        assert!(created.is_ok(), "{malformed}: {created:?}");
        let tp = event_traceparent(&cluster, &name)
            .await
            .expect("a new root trace");
        let trace = trace_id_of(&tp).expect("a well-formed traceparent");
        assert_ne!(trace, SENDER_TRACE);
        assert!(!tp.contains(malformed), "{tp}");
    }
}
