//! Trace context through the API: a request's `traceparent` is continued into the object
//! event it causes, a malformed one starts a new root trace without failing the request, and
//! the write a request makes is a step on its span, read back from `SHOAL_TRACES`.

use bus_schemas::kinds::Pod;
use bus_schemas::subjects;
use shoal_api::local::LocalCluster;

use bus_schemas::roles::Role;
use shoal_api::local::{exported_spans, ExportedSpan};
use shoal_telemetry::opentelemetry_proto::tonic::trace::v1::span::Event as SpanEvent;
use shoal_telemetry::propagation::trace_id_of;
use shoal_telemetry::traceview::attribute;

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

fn telemetry() -> shoal_telemetry::Telemetry {
    shoal_api::local::install_tracing("api-test")
}

/// The traceparent the object's last event carries.
async fn written_traceparent<K: bus_schemas::resource::Resource>(
    cluster: &LocalCluster,
    namespace: &str,
    name: &str,
) -> Option<String> {
    cluster
        .store
        .get_raw(&subjects::object(&K::INFO.token(), namespace, name))
        .await
        .unwrap()
        .unwrap()
        .traceparent
}

async fn event_traceparent(cluster: &LocalCluster, name: &str) -> Option<String> {
    written_traceparent::<Pod>(cluster, "default", name).await
}

/// The spans of `trace` in `SHOAL_TRACES`, once its API request's span is there.
async fn request_spans(
    cluster: &LocalCluster,
    telemetry: &shoal_telemetry::Telemetry,
    trace: &str,
) -> Vec<ExportedSpan> {
    let reader = cluster.connect_as(&Role::Admin, "reader").await.unwrap();
    exported_spans(telemetry, &reader, trace, "the request's span", |spans| {
        spans.iter().any(|s| s.name == "api.request")
    })
    .await
}

/// The compare-and-swap writes, in order, on the request span among `spans`.
fn cas_writes(spans: &[ExportedSpan]) -> Vec<&SpanEvent> {
    let request = spans.iter().find(|s| s.name == "api.request").unwrap();
    request
        .events
        .iter()
        .filter(|e| e.name == "api.cas_write")
        .collect()
}

#[actix::test]
async fn a_malformed_traceparent_starts_a_new_root_trace_and_the_request_succeeds() {
    // The OpenTelemetry layer is what turns the API's spans into trace contexts.
    let _telemetry = telemetry();
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
        "the event's parent is the API's request span, not the sender: {tp}"
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

#[actix::test]
async fn a_write_is_a_step_of_its_request_span_saying_what_it_wrote() {
    let telemetry = telemetry();
    let cluster = LocalCluster::start().await.unwrap();
    shoal_api::local::export_traces(&cluster).await;

    let api = cluster
        .api()
        .with_traceparent(Some(format!("00-{SENDER_TRACE}-b7ad6b7169203331-01")));
    let created = api.create(&pod("written")).await.unwrap();
    let spans = request_spans(&cluster, &telemetry, SENDER_TRACE).await;

    assert!(
        spans.iter().all(|s| s.name != "api.cas_write"),
        "the write made no span of its own"
    );
    let writes = cas_writes(&spans);
    assert_eq!(writes.len(), 1, "one attempt, one write: {writes:?}");
    let value = |key: &str| attribute(&writes[0].attributes, key);
    assert_eq!(value("name").as_deref(), Some("written"));
    assert_eq!(value("namespace").as_deref(), Some("default"));
    assert_eq!(
        value("expected").as_deref(),
        Some("0"),
        "a create expects no version"
    );
    assert_eq!(value("write").as_deref(), Some("written"));
    assert_eq!(
        value("outcome"),
        None,
        "a write that went well records no outcome"
    );
    assert_eq!(
        value("resource_version"),
        Some(created.metadata.resource_version.clone())
    );
    assert!(value("duration_us").is_some());
}

#[actix::test]
async fn a_nodes_heartbeat_and_status_start_no_trace_but_continue_one_they_carry() {
    use bus_schemas::kinds::{Lease, Node};
    use bus_schemas::subjects::NodeReport;
    use bus_schemas::wellknown::NODE_LEASE_NAMESPACE;

    let _telemetry = telemetry();
    let cluster = LocalCluster::start().await.unwrap();
    let node = cluster
        .connect_as(&Role::Node("n1".into()), "n1")
        .await
        .unwrap();
    let mut registered = Node::default();
    registered.metadata.name = "n1".into();
    let status = bus_schemas::codec::to_msgpack(&registered).unwrap();
    let report = |report: NodeReport, body: Vec<u8>, traceparent: Option<&str>| {
        let node = node.clone();
        let mut headers = async_nats::HeaderMap::new();
        if let Some(tp) = traceparent {
            headers.insert("traceparent", tp);
        }
        async move {
            let reply = node
                .request_with_headers(subjects::node_report("n1", report), headers, body.into())
                .await
                .unwrap();
            assert!(
                reply
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(subjects::HEADER_CODE))
                    .is_none(),
                "{report:?} accepted: {:?}",
                reply.headers
            );
        }
    };

    report(NodeReport::NodeStatus, status.clone(), None).await;
    report(NodeReport::Heartbeat, Vec::new(), None).await;
    assert_eq!(written_traceparent::<Node>(&cluster, "", "n1").await, None);
    assert_eq!(
        written_traceparent::<Lease>(&cluster, NODE_LEASE_NAMESPACE, "n1").await,
        None,
        "a heartbeat is no trace's root, even with every new trace kept"
    );
    // A pod create with no traceparent does start one, in the same process.
    cluster.api().create(&pod("rooted")).await.unwrap();
    assert!(event_traceparent(&cluster, "rooted").await.is_some());

    let sent = format!("00-{SENDER_TRACE}-b7ad6b7169203331-01");
    report(NodeReport::Heartbeat, Vec::new(), Some(&sent)).await;
    let continued = written_traceparent::<Lease>(&cluster, NODE_LEASE_NAMESPACE, "n1")
        .await
        .expect("the heartbeat continued its sender's trace");
    assert_eq!(trace_id_of(&continued).as_deref(), Some(SENDER_TRACE));
}

/// An event keeps the request's trace only when it is sampled: work the change causes
/// continues a sampled trace, and starts none where the event keeps none.
#[actix::test]
async fn an_event_keeps_the_requests_trace_only_when_it_is_sampled() {
    let _telemetry = telemetry();
    let cluster = LocalCluster::start().await.unwrap();
    let send = |name: &'static str, flags: &str| {
        let api = cluster
            .api()
            .with_traceparent(Some(format!("00-{SENDER_TRACE}-b7ad6b7169203331-{flags}")));
        async move { api.create(&pod(name)).await }
    };
    send("sampled", "01").await.unwrap();
    send("sampled-out", "00").await.unwrap();
    let kept = event_traceparent(&cluster, "sampled")
        .await
        .expect("a sampled trace is kept with the event");
    assert_eq!(trace_id_of(&kept).as_deref(), Some(SENDER_TRACE), "{kept}");
    assert_eq!(
        event_traceparent(&cluster, "sampled-out").await,
        None,
        "a trace decided against is not"
    );
}

/// A create over a deleted object's name: the log refuses the write that expects no version
/// (the tombstone is a version), and the API writes over the tombstone. That is no lost race:
/// the trace shows no failed write and the conflict counter does not move; a create of a
/// live name is refused without counting one either.
#[actix::test]
async fn a_create_over_a_deleted_name_shows_no_failed_write_and_counts_no_conflict() {
    use bus_schemas::api::DeleteOptions;
    use bus_schemas::kinds::ConfigMap;
    const REUSE_TRACE: &str = "6e0c63257de34c926f9efcd03899b5a1";
    let telemetry = telemetry();
    let cluster = LocalCluster::start().await.unwrap();
    shoal_api::local::export_traces(&cluster).await;
    let config_map = || {
        let mut cm = ConfigMap::default();
        cm.metadata.name = "reused".into();
        cm.metadata.namespace = "default".into();
        cm
    };
    let conflicts = || {
        shoal_telemetry::metrics()
            .api
            .cas_conflicts
            .get_or_create(&[shoal_telemetry::metrics::label("kind", "ConfigMap")])
            .get()
    };
    let api = cluster.api();
    api.create(&config_map()).await.unwrap();
    api.delete::<ConfigMap>(&DeleteOptions {
        namespace: "default".into(),
        name: "reused".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let conflicts_before = conflicts();

    let recreated = cluster
        .api()
        .with_traceparent(Some(format!("00-{REUSE_TRACE}-b7ad6b7169203331-01")))
        .create(&config_map())
        .await
        .unwrap();
    let again = api.create(&config_map()).await;
    assert!(
        matches!(&again, Err(e) if e.is_already_exists()),
        "a live name is taken: {again:?}"
    );
    assert_eq!(conflicts(), conflicts_before, "no write lost a race");

    let spans = request_spans(&cluster, &telemetry, REUSE_TRACE).await;
    let writes = cas_writes(&spans);
    let value = |write: usize, key: &str| attribute(&writes[write].attributes, key);
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert_eq!(value(0, "expected").as_deref(), Some("0"));
    assert_eq!(value(0, "write").as_deref(), Some("earlier_version"));
    assert_eq!(value(0, "outcome"), None, "went well");
    assert_ne!(
        value(1, "expected").as_deref(),
        Some("0"),
        "written over the tombstone"
    );
    assert_eq!(value(1, "write").as_deref(), Some("written"));
    assert_eq!(value(1, "outcome"), None, "went well");
    assert_eq!(
        value(1, "resource_version"),
        Some(recreated.metadata.resource_version.clone())
    );
}
