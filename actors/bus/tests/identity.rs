//! Identities on a real nats-server: each test proves a refusal (and, beside it, that the
//! same identity can do its own job, so the refusal is the permission and not a broken bus).

use std::time::Duration;

use async_nats::jetstream;
use bus_schemas::roles::Role;
use bus_schemas::subjects::{self, NodeReport, OBJECTS_STREAM};
use shoal_bus::auth::ClientAuth;
use shoal_bus::natsd::Natsd;
use shoal_bus::store::{ensure_stream, StreamSettings};
use tokio::sync::mpsc;

/// A connection whose server errors (permission violations among them) a test can read.
async fn watched(
    natsd: &Natsd,
    auth: &ClientAuth,
) -> (async_nats::Client, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let client = auth
        .apply(async_nats::ConnectOptions::new())
        .event_callback(move |event| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(event.to_string());
            }
        })
        .connect(natsd.url())
        .await
        .expect("connects with its credential");
    (client, rx)
}

/// Waits for an event containing `needle`; the other events are skipped.
async fn expect_event(events: &mut mpsc::UnboundedReceiver<String>, needle: &str) -> String {
    let wait = async {
        while let Some(event) = events.recv().await {
            if event.contains(needle) {
                return event;
            }
        }
        panic!("the connection ended without an event containing {needle:?}")
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("no event containing {needle:?} within 10 s"))
}

/// Requests until someone answers: a subscription made on another connection reaches the
/// server a moment after `subscribe` returns.
async fn answered(client: &async_nats::Client, subject: String) -> async_nats::Message {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match client.request(subject.clone(), "{}".into()).await {
            Ok(reply) => return reply,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("nobody answered {subject} within 5 s: {e}"),
        }
    }
}

async fn objects_in_log(natsd: &Natsd) -> u64 {
    let admin = shoal_bus::connect(
        &natsd.url(),
        "count",
        &natsd.creds(&Role::Admin).await.unwrap(),
    )
    .await
    .unwrap();
    let mut stream = jetstream::new(admin)
        .get_stream(OBJECTS_STREAM)
        .await
        .unwrap();
    stream.info().await.unwrap().state.messages
}

async fn cluster(dir: &std::path::Path) -> Natsd {
    let natsd = Natsd::start_in(dir).await.expect("nats-server starts");
    let api = shoal_bus::connect(&natsd.url(), "api", &natsd.creds(&Role::Api).await.unwrap())
        .await
        .unwrap();
    ensure_stream(&jetstream::new(api), &StreamSettings::default())
        .await
        .unwrap();
    natsd
}

#[tokio::test]
async fn an_anonymous_connection_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let natsd = cluster(dir.path()).await;
    let err = shoal_bus::connect(&natsd.url(), "nobody", &ClientAuth::anonymous())
        .await
        .expect_err("anonymous connections are refused");
    assert!(
        err.to_string().to_lowercase().contains("authorization"),
        "the refusal says why: {err}"
    );
}

#[tokio::test]
async fn only_the_api_stores_into_the_state_log() {
    let dir = tempfile::tempdir().unwrap();
    let natsd = cluster(dir.path()).await;
    let forged = subjects::object("pod", "default", "forged");
    let before = objects_in_log(&natsd).await;
    for role in [
        Role::Node("n1".into()),
        Role::Admin,
        Role::Controllers,
        Role::Viewer,
        Role::Integration,
    ] {
        let (client, mut events) = watched(&natsd, &natsd.creds(&role).await.unwrap()).await;
        let js = jetstream::new(client);
        let publish = async { js.publish(forged.clone(), "{}".into()).await?.await };
        let acked = tokio::time::timeout(Duration::from_secs(2), publish).await;
        assert!(
            !matches!(acked, Ok(Ok(_))),
            "{role}: JetStream acknowledged a forged object"
        );
        expect_event(&mut events, "Permissions Violation for Publish").await;
    }
    assert_eq!(objects_in_log(&natsd).await, before, "nothing was written");

    let api = natsd.creds(&Role::Api).await.unwrap();
    let js = jetstream::new(shoal_bus::connect(&natsd.url(), "api", &api).await.unwrap());
    js.publish(forged, "{}".into())
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(
        objects_in_log(&natsd).await,
        before + 1,
        "the API's write lands"
    );
}

#[tokio::test]
async fn a_node_speaks_only_for_itself() {
    let dir = tempfile::tempdir().unwrap();
    let natsd = cluster(dir.path()).await;
    let (n1, mut events) = watched(
        &natsd,
        &natsd.creds(&Role::Node("n1".into())).await.unwrap(),
    )
    .await;

    n1.publish(
        subjects::node_report("n2", NodeReport::PodStatus),
        "{}".into(),
    )
    .await
    .unwrap();
    let event = expect_event(&mut events, "Permissions Violation for Publish").await;
    assert!(event.contains("shoal.v1.node.n2"), "{event}");

    n1.publish(subjects::api("pod", subjects::Verb::Create), "{}".into())
        .await
        .unwrap();
    expect_event(&mut events, "shoal.v1.api.pod.create").await;

    // Serving another node's exec subject: the subscription is refused, so a request there
    // finds no responder at all.
    let _stolen = n1
        .subscribe(subjects::agent_request("n2", "exec"))
        .await
        .unwrap();
    expect_event(&mut events, "Permissions Violation for Subscription").await;
    let admin = shoal_bus::connect(
        &natsd.url(),
        "admin",
        &natsd.creds(&Role::Admin).await.unwrap(),
    )
    .await
    .unwrap();
    let stolen = admin
        .request(subjects::agent_request("n2", "exec"), "{}".into())
        .await;
    assert!(stolen.is_err(), "nobody answers n2's exec subject");

    // Its own exec subject it serves.
    let mut own = n1
        .subscribe(subjects::agent_request("n1", "exec"))
        .await
        .unwrap();
    let server = tokio::spawn({
        let n1 = n1.clone();
        async move {
            use futures::StreamExt;
            let request = own.next().await.unwrap();
            n1.publish(request.reply.unwrap(), "ok".into())
                .await
                .unwrap();
        }
    });
    n1.flush().await.unwrap();
    let reply = answered(&admin, subjects::agent_request("n1", "exec")).await;
    assert_eq!(&reply.payload[..], b"ok");
    server.await.unwrap();
}

#[tokio::test]
async fn a_viewer_may_not_exec_nor_read_others_replies() {
    let dir = tempfile::tempdir().unwrap();
    let natsd = cluster(dir.path()).await;
    let (viewer, mut events) = watched(&natsd, &natsd.creds(&Role::Viewer).await.unwrap()).await;
    viewer
        .publish(subjects::agent_request("n1", "exec"), "{}".into())
        .await
        .unwrap();
    expect_event(&mut events, "Permissions Violation for Publish").await;
    let _snoop = viewer.subscribe("_INBOX.>").await.unwrap();
    expect_event(&mut events, "Permissions Violation for Subscription").await;
}

#[tokio::test]
async fn an_integration_publishes_metrics_and_serves_hooks_and_nothing_else() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let natsd = cluster(dir.path()).await;
    let (integration, mut events) =
        watched(&natsd, &natsd.creds(&Role::Integration).await.unwrap()).await;

    let autoscaler = shoal_bus::connect(
        &natsd.url(),
        "autoscaler",
        &natsd.creds(&Role::Autoscaler).await.unwrap(),
    )
    .await
    .unwrap();
    let metric = subjects::external_metric("default", "queue");
    integration
        .publish(metric.clone(), "7".into())
        .await
        .unwrap();
    integration.flush().await.unwrap();
    // The autoscaler reads external metrics from the metrics stream, as it does in service.
    let stream = jetstream::new(autoscaler.clone())
        .get_stream(subjects::METRICS_STREAM)
        .await
        .unwrap();
    let mut sample = None;
    for _ in 0..100 {
        if let Ok(message) = stream.direct_get_last_for_subject(metric.as_str()).await {
            sample = Some(message);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sample = sample.expect("the metric is in the metrics stream within 5 s");
    assert_eq!(&sample.payload[..], b"7");

    let mut hook = integration
        .subscribe(subjects::autoscale_hook("queue-depth"))
        .await
        .unwrap();
    integration.flush().await.unwrap();
    let serving = tokio::spawn({
        let integration = integration.clone();
        async move {
            let request = hook.next().await.unwrap();
            integration
                .publish(request.reply.unwrap(), "3".into())
                .await
                .unwrap();
        }
    });
    let answer = answered(&autoscaler, subjects::autoscale_hook("queue-depth")).await;
    assert_eq!(&answer.payload[..], b"3");
    serving.await.unwrap();

    for forbidden in [
        subjects::api("deployment", subjects::Verb::UpdateScale),
        subjects::object("pod", "default", "x"),
        subjects::node_report("n1", NodeReport::Heartbeat),
        subjects::agent_request("n1", "exec"),
    ] {
        integration
            .publish(forbidden.clone(), "{}".into())
            .await
            .unwrap();
        let event = expect_event(&mut events, "Permissions Violation").await;
        assert!(event.contains(&forbidden), "{event}");
    }
}

#[tokio::test]
async fn a_revoked_credential_is_cut_off_and_refused_on_reconnect() {
    let dir = tempfile::tempdir().unwrap();
    let natsd = cluster(dir.path()).await;
    let auth_dir = natsd.config().auth.clone().unwrap();
    let path = auth_dir.issue(&Role::Viewer, "alice").unwrap();
    let alice = ClientAuth::from_creds_file(&path).unwrap();
    natsd.reload_admitting(&alice).await.unwrap();
    let (live, mut events) = watched(&natsd, &alice).await;
    live.flush().await.unwrap();

    auth_dir.revoke("alice").unwrap();
    natsd.reload().unwrap();
    expect_event(&mut events, "disconnected").await;
    let err = shoal_bus::connect(&natsd.url(), "alice-again", &alice)
        .await
        .expect_err("a revoked credential is refused");
    assert!(
        err.to_string().to_lowercase().contains("authorization"),
        "{err}"
    );
}

#[tokio::test]
async fn a_fleet_of_nodes_is_admitted_by_one_reload_each_confined_to_itself() {
    let dir = tempfile::tempdir().unwrap();
    let natsd = cluster(dir.path()).await;
    let roles: Vec<Role> = (0..50).map(|i| Role::Node(format!("h-{i:02}"))).collect();
    let creds = natsd.creds_many(&roles).await.unwrap();
    assert_eq!(creds.len(), roles.len());
    let keys: std::collections::BTreeSet<_> = creds.iter().map(|c| c.public_key()).collect();
    assert_eq!(keys.len(), roles.len(), "one credential per node");

    // Admitted together: the first and the last both connect, each confined to itself.
    for (i, auth) in [(0, &creds[0]), (49, &creds[49])] {
        let (node, mut events) = watched(&natsd, auth).await;
        let other = if i == 0 { "h-49" } else { "h-00" };
        node.publish(
            subjects::node_report(other, NodeReport::PodStatus),
            "{}".into(),
        )
        .await
        .unwrap();
        let event = expect_event(&mut events, "Permissions Violation for Publish").await;
        assert!(event.contains(other), "{event}");
    }

    // Asked again, the same credentials come back (no new identity, no reload needed).
    let again = natsd.creds_many(&roles[..2]).await.unwrap();
    assert_eq!(again[0].public_key(), creds[0].public_key());
    assert_eq!(again[1].public_key(), creds[1].public_key());
    // And the single form agrees with the batch.
    let single = natsd.creds(&roles[3]).await.unwrap();
    assert_eq!(single.public_key(), creds[3].public_key());
}

/// What was logged at ERROR on this thread while `work` ran.
async fn errors_logged_during<T>(work: impl std::future::Future<Output = T>) -> (T, String) {
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::ERROR)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // The test's runtime runs every task on this thread, spawned ones included.
    let guard = tracing::subscriber::set_default(subscriber);
    let out = work.await;
    drop(guard);
    let text = String::from_utf8_lossy(&captured.0.lock().unwrap()).to_string();
    (out, text)
}

/// `connect` tries a refused credential again (a server reloading its identities can refuse
/// one it admits, once), and the client library logs every refusal as an ERROR: a process
/// that connected during a reload printed "authorization violation" and then ran
/// normally. Only the refusal that ends the retries may be logged.
#[tokio::test]
async fn a_refusal_that_is_retried_is_not_logged_and_the_last_one_is() {
    let dir = tempfile::tempdir().unwrap();
    let natsd = cluster(dir.path()).await;
    let auth_dir = natsd.config().auth.clone().unwrap();
    // Issued but never admitted: the server refuses it on every attempt.
    let path = auth_dir.issue(&Role::Viewer, "unadmitted").unwrap();
    let unadmitted = ClientAuth::from_creds_file(&path).unwrap();
    let (refused, errors) =
        errors_logged_during(shoal_bus::connect(&natsd.url(), "unadmitted", &unadmitted)).await;
    let err = refused.expect_err("a credential the server does not know is refused");
    assert!(
        err.to_string().to_lowercase().contains("authorization"),
        "{err}"
    );
    let logged = errors
        .lines()
        .filter(|l| l.contains("authorization violation"))
        .count();
    assert_eq!(
        logged, 1,
        "the refusal that ended the retries, and no other, is logged:\n{errors}"
    );
}

/// Issuing an identity waits until the reloaded server admits it, trying to connect with
/// it meanwhile. Those refusals are expected; the client library logs each one as an
/// ERROR ("authorization violation"), which the benchmarks (`bench_scheduling --tls` among
/// them) printed at every start, as if something were wrong.
#[tokio::test]
async fn admitting_a_new_identity_logs_no_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let natsd = cluster(dir.path()).await;
    let (issued, errors) = errors_logged_during(async {
        let mut issued = Vec::new();
        for i in 0..5 {
            issued.push(
                natsd
                    .creds(&Role::Node(format!("quiet-{i}")))
                    .await
                    .unwrap(),
            );
        }
        issued.push(
            natsd
                .creds_many(&[Role::Node("quiet-fleet".into())])
                .await
                .unwrap()
                .remove(0),
        );
        issued
    })
    .await;
    assert!(
        errors.is_empty(),
        "logged while admitting identities:\n{errors}"
    );
    // Each was admitted all the same.
    for auth in &issued {
        shoal_bus::connect(&natsd.url(), "admitted", auth)
            .await
            .expect("admitted");
    }
}
