//! Reconciles in traces, against a real cluster (no node agent: see `common`), read back from
//! `SHOAL_TRACES`: the reconciles a change causes continue its trace; the periodic resyncs
//! after it do not, so the trace of a change ends when its work does.

mod common;

use std::time::Duration;

use bus_schemas::roles::Role;
use common::*;
use shoal_api::local::{export_traces, exported_spans, install_tracing, ExportedSpan};
use shoal_telemetry::traceview::attribute;

const T: Duration = Duration::from_secs(30);
const CREATOR_TRACE: &str = "5cf92f3577b34da6a3ce929d0e0e4736";

fn reconciles_of(spans: &[ExportedSpan], name: &str) -> usize {
    spans
        .iter()
        .filter(|s| {
            s.name == "reconcile"
                && attribute(&s.attributes, "controller").as_deref() == Some("replicaset")
                && attribute(&s.attributes, "name").as_deref() == Some(name)
        })
        .count()
}

/// Reconciles of ReplicaSets this process has finished, as its `/metrics` counts them.
fn replicaset_reconciles() -> u64 {
    shoal_telemetry::metrics()
        .encode()
        .lines()
        .filter(|l| {
            l.contains("controller_reconcile_duration_seconds_count")
                && l.contains("controller=\"replicaset\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[actix::test]
async fn resyncs_add_nothing_to_the_trace_of_the_change_an_object_last_saw() {
    let telemetry = install_tracing("controllers-test");
    let cluster = shoal_api::local::LocalCluster::start().await.unwrap();
    export_traces(&cluster).await;
    let mut tunables = tunables();
    tunables.resync = Duration::from_millis(100);
    let _controllers = start_controllers_tuned(&cluster, tunables).await;
    let creator = cluster
        .api()
        .with_traceparent(Some(format!("00-{CREATOR_TRACE}-b7ad6b7169203331-01")));
    creator
        .create(&replicaset("quiet", "quiet", 0))
        .await
        .unwrap();

    let reader = cluster.connect_as(&Role::Admin, "reader").await.unwrap();
    exported_spans(
        &telemetry,
        &reader,
        CREATOR_TRACE,
        "the create's reconcile in its trace",
        |spans| reconciles_of(spans, "quiet") > 0,
    )
    .await;
    // Twenty more reconciles of the only ReplicaSet: resyncs, the object unchanged.
    let seen = replicaset_reconciles();
    eventually("twenty resyncs", T, || async {
        replicaset_reconciles() >= seen + 20
    })
    .await;
    let spans = exported_spans(&telemetry, &reader, CREATOR_TRACE, "a look", |_| true).await;
    let in_trace = reconciles_of(&spans, "quiet");
    assert!(
        in_trace <= 3,
        "{in_trace} reconciles in the create's trace after twenty resyncs: the change's own are one or two"
    );
}

/// An event a reconcile records is written in the reconcile's trace, though in the
/// background: a ReplicaSet's SuccessfulCreate is a child of the reconcile that created the
/// pod, not the root of a trace of its own.
#[actix::test]
async fn an_event_a_reconcile_records_is_in_its_trace() {
    const RECORDER_TRACE: &str = "6df92f3577b34da6a3ce929d0e0e4736";
    let telemetry = install_tracing("controllers-test");
    let cluster = shoal_api::local::LocalCluster::start().await.unwrap();
    export_traces(&cluster).await;
    let _controllers = start_controllers_tuned(&cluster, tunables()).await;
    cluster
        .api()
        .with_traceparent(Some(format!("00-{RECORDER_TRACE}-b7ad6b7169203331-01")))
        .create(&replicaset("eventful", "eventful", 1))
        .await
        .unwrap();

    let reader = cluster.connect_as(&Role::Admin, "reader").await.unwrap();
    let kind_of = |s: &ExportedSpan| attribute(&s.attributes, "kind").unwrap_or_default();
    exported_spans(
        &telemetry,
        &reader,
        RECORDER_TRACE,
        "the event's write in the reconcile's trace",
        |spans| {
            let reconciles: Vec<_> = spans
                .iter()
                .filter(|s| s.name == "reconcile" && kind_of(s) == "ReplicaSet")
                .map(|s| s.span_id.clone())
                .collect();
            spans.iter().any(|s| {
                s.name == "api.request"
                    && kind_of(s) == "event"
                    && reconciles.contains(&s.parent_span_id)
            })
        },
    )
    .await;
}
