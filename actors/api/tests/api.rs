//! The API actors against a real nats-server: CAS, races, graceful deletion, bad input,
//! node ownership, idempotent retries, lists by selector.

use std::collections::BTreeMap;
use std::time::Duration;

use bus_schemas::api::{DeleteOptions, ListOptions, PatchRequest};
use bus_schemas::kinds::{Node, PersistentVolumeClaim, Pod, StorageClass};
use bus_schemas::roles::Role;
use bus_schemas::subjects::{self, NodeReport, Verb, HEADER_CODE};
use bus_schemas::{codec, Reason, Status};
use shoal_api::local::LocalCluster;
use shoal_bus::client::{HEADER_REQUEST_ID, HEADER_TIMEOUT_MS};
use shoal_bus::ApiClient;

fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.35"}]}
    }))
    .expect("fixture pod")
}

async fn raw(api: &ApiClient, kind: &str, verb: Verb, body: Vec<u8>) -> (u16, Vec<u8>) {
    let reply = api
        .request_raw(kind, verb, body)
        .await
        .expect("API answers");
    let code = reply
        .headers
        .get(HEADER_CODE)
        .map(|v| v.as_str().parse().unwrap())
        .unwrap_or(200);
    (code, reply.payload.to_vec())
}

fn status(body: &[u8]) -> Status {
    codec::from_msgpack(body).expect("a Status")
}

#[actix::test]
async fn create_get_update_status_and_generation() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let created = api.create(&pod("web-1", &[("app", "web")])).await.unwrap();
    assert_eq!(created.metadata.generation, 1);
    assert!(!created.metadata.uid.is_empty());
    assert_eq!(created.metadata.namespace, "default");
    assert_eq!(created.spec.restart_policy, "Always", "defaulted");
    let again = api.create(&pod("web-1", &[])).await.unwrap_err();
    assert!(again.is_already_exists(), "{again}");

    let mut changed = created.clone();
    changed.spec.containers[0].image = "busybox:1.36".into();
    let updated = api.update(&changed).await.unwrap();
    assert_eq!(
        updated.metadata.generation, 2,
        "a spec change bumps generation"
    );
    assert!(updated.metadata.revision() > created.metadata.revision());

    let stale = api.update(&changed).await.unwrap_err();
    assert!(
        stale.is_conflict(),
        "stale resourceVersion must conflict: {stale}"
    );

    let mut reported = updated.clone();
    reported.status.phase = "Running".into();
    let with_status = api.update_status(&reported).await.unwrap();
    assert_eq!(with_status.status.phase, "Running");
    assert_eq!(
        with_status.metadata.generation, 2,
        "status never bumps generation"
    );

    // An update never writes status, and a status write never changes the spec.
    let mut sneaky = with_status.clone();
    sneaky.status.phase = "Failed".into();
    sneaky.spec.containers[0].image = "busybox:1.37".into();
    let after = api.update(&sneaky).await.unwrap();
    assert_eq!(after.status.phase, "Running");
    let mut sneaky = after.clone();
    sneaky.spec.containers[0].image = "evil".into();
    sneaky.status.phase = "Succeeded".into();
    let after = api.update_status(&sneaky).await.unwrap();
    assert_eq!(after.spec.containers[0].image, "busybox:1.37");

    let got: Pod = api.get("default", "web-1").await.unwrap();
    assert_eq!(got, after);
    let missing = api.get::<Pod>("default", "nope").await.unwrap_err();
    assert!(missing.is_not_found());
}

#[actix::test]
async fn two_writers_race_and_exactly_one_wins() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let base = api.create(&pod("race", &[])).await.unwrap();
    for round in 0..10 {
        let current: Pod = api.get("default", "race").await.unwrap();
        let mut a = current.clone();
        a.metadata
            .labels
            .insert("writer".into(), format!("a{round}"));
        let mut b = current.clone();
        b.metadata
            .labels
            .insert("writer".into(), format!("b{round}"));
        let (ra, rb) = tokio::join!(api.update(&a), api.update(&b));
        let wins = [ra.is_ok(), rb.is_ok()].iter().filter(|x| **x).count();
        assert_eq!(wins, 1, "round {round}: exactly one writer wins");
        let loser = if ra.is_ok() {
            rb.unwrap_err()
        } else {
            ra.unwrap_err()
        };
        assert!(loser.is_conflict(), "the loser gets Conflict, got {loser}");
    }
    let end: Pod = api.get("default", "race").await.unwrap();
    assert_eq!(end.metadata.uid, base.metadata.uid);
}

#[actix::test]
async fn two_hundred_concurrent_creates_make_one_object() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let attempts = (0..200).map(|i| {
        let api = api.clone();
        async move {
            let mut p = pod("contended", &[]);
            p.metadata.labels.insert("attempt".into(), i.to_string());
            api.create(&p).await
        }
    });
    let results = futures::future::join_all(attempts).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let exists = results
        .iter()
        .filter(|r| matches!(r, Err(e) if e.is_already_exists()))
        .count();
    assert_eq!(ok, 1, "exactly one create succeeds");
    assert_eq!(exists, 199, "every other gets AlreadyExists");
    let list = api.list::<Pod>(&ListOptions::default()).await.unwrap();
    assert_eq!(
        list.items
            .iter()
            .filter(|p| p.metadata.name == "contended")
            .count(),
        1
    );
}

#[actix::test]
async fn graceful_deletion_waits_for_finalizers_and_names_can_be_reused() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let mut p = pod("held", &[]);
    p.metadata.finalizers.push("example.com/hold".into());
    let created = api.create(&p).await.unwrap();
    let deleting: Pod = api
        .delete(&DeleteOptions {
            name: "held".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        deleting.metadata.deletion_timestamp.is_some(),
        "marked, not removed"
    );
    let still: Pod = api.get("default", "held").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    let mut release = still.clone();
    release.metadata.finalizers.clear();
    api.update(&release).await.unwrap();
    assert!(api
        .get::<Pod>("default", "held")
        .await
        .unwrap_err()
        .is_not_found());
    let reborn = api.create(&pod("held", &[])).await.unwrap();
    assert_ne!(
        reborn.metadata.uid, created.metadata.uid,
        "a new object, a new uid"
    );
}

#[actix::test]
async fn bad_input_gets_status_errors_and_the_actor_keeps_serving() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();

    let (code, body) = raw(&api, "pod", Verb::Create, vec![0xc1, 0xff, 0x00]).await;
    assert!((400..500).contains(&code), "malformed msgpack: {code}");
    assert_eq!(status(&body).reason, Reason::Invalid);

    let (code, body) = raw(&api, "widget", Verb::Create, vec![]).await;
    assert_eq!(code, 404);
    assert!(status(&body).message.contains("widget"));

    let unknown_field = rmp_serde::to_vec_named(&serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
        "spec": {"containers": [{"name": "a", "image": "i", "imagee": "typo"}]}
    }))
    .unwrap();
    let (code, body) = raw(&api, "pod", Verb::Create, unknown_field).await;
    assert_eq!(code, 422);
    let s = status(&body);
    assert!(
        s.causes()
            .iter()
            .any(|c| c.field == "spec.containers[0].imagee"),
        "{s:?}"
    );

    let mistyped = rmp_serde::to_vec_named(&serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
        "spec": {"containers": "not-a-list"}
    }))
    .unwrap();
    let (code, body) = raw(&api, "pod", Verb::Create, mistyped).await;
    assert_eq!(code, 422);
    assert!(status(&body)
        .causes()
        .iter()
        .any(|c| c.field.starts_with("spec.containers")));

    let bad_name = api.create(&pod("Bad_Name", &[])).await.unwrap_err();
    match &bad_name {
        shoal_bus::ApiError::Status(s) => {
            assert!(
                s.causes().iter().any(|c| c.field == "metadata.name"),
                "{s:?}"
            )
        }
        other => panic!("expected a Status, got {other}"),
    }
    let bad_label = api
        .create(&pod("ok", &[("bad key", "v")]))
        .await
        .unwrap_err();
    assert!(bad_label.is(Reason::Invalid), "{bad_label}");

    let mut huge = pod("huge", &[]);
    huge.metadata
        .annotations
        .insert("blob".into(), "x".repeat(codec::MAX_OBJECT_BYTES + 10));
    let (code, _) = raw(&api, "pod", Verb::Create, codec::to_msgpack(&huge).unwrap()).await;
    assert_eq!(code, 413, "objects over 1.5 MiB are refused");

    let (code, _) = raw(&api, "pod", Verb::Get, vec![0x90]).await;
    assert!(code >= 400);

    let nothing_written = api.list::<Pod>(&ListOptions::default()).await.unwrap();
    assert!(
        nothing_written.items.is_empty(),
        "no partial writes: {:?}",
        nothing_written.items
    );
    api.create(&pod("after-the-storm", &[]))
        .await
        .expect("the API still serves");
}

/// Sends one `generateName: gen-` pod create twice under `request_id` (a retry); returns
/// the (name, uid) each attempt was answered with.
async fn create_generated_twice(cluster: &LocalCluster, request_id: &str) -> Vec<(String, String)> {
    let mut generated = pod("", &[]);
    generated.metadata.generate_name = "gen-".into();
    let body = bytes::Bytes::from(codec::to_msgpack(&generated).unwrap());
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(HEADER_REQUEST_ID, request_id);
    let subject = subjects::api("pod", Verb::Create);
    let mut created = Vec::new();
    for _ in 0..2 {
        let reply = cluster
            .nats
            .request_with_headers(subject.clone(), headers.clone(), body.clone())
            .await
            .unwrap();
        let p: Pod = codec::from_msgpack(&reply.payload).expect("created");
        created.push((p.metadata.name, p.metadata.uid));
    }
    created
}

#[actix::test]
async fn a_retried_request_is_applied_once() {
    let cluster = LocalCluster::start().await.unwrap();
    let subject = subjects::api("pod", Verb::Create);
    let body = bytes::Bytes::from(codec::to_msgpack(&pod("once", &[])).unwrap());
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(HEADER_REQUEST_ID, "fixed-request-id");
    let first = cluster
        .nats
        .request_with_headers(subject.clone(), headers.clone(), body.clone())
        .await
        .unwrap();
    let second = cluster
        .nats
        .request_with_headers(subject, headers, body)
        .await
        .unwrap();
    let a: Pod = codec::from_msgpack(&first.payload).unwrap();
    let b: Pod = codec::from_msgpack(&second.payload).expect("the retry succeeds too");
    assert_eq!(
        a.metadata.uid, b.metadata.uid,
        "the retry returns the first attempt's object"
    );

    // A generated name too: the retry (maybe answered by another replica) must not become a
    // second object under a new name.
    let created = create_generated_twice(&cluster, "another-fixed-request-id").await;
    assert_eq!(created[0], created[1], "one object for one request");
    assert!(created[0].0.starts_with("gen-") && created[0].0.len() == 9);
    let pods = cluster
        .api()
        .list::<Pod>(&ListOptions::default())
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 2, "`once` and one generated pod");
}

#[actix::test]
async fn a_retried_create_is_recognised_after_someone_else_wrote_the_object() {
    let cluster = LocalCluster::start().await.unwrap();
    let subject = subjects::api("pod", Verb::Create);
    let body = bytes::Bytes::from(codec::to_msgpack(&pod("busy", &[])).unwrap());
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(HEADER_REQUEST_ID, "create-busy");
    let first = cluster
        .nats
        .request_with_headers(subject.clone(), headers.clone(), body.clone())
        .await
        .unwrap();
    let first: Pod = codec::from_msgpack(&first.payload).unwrap();
    // Before the retry arrives, someone else (a scheduler, say) writes the pod.
    let mut touched = first.clone();
    touched.metadata.labels.insert("seen".into(), "yes".into());
    cluster.api().update(&touched).await.unwrap();

    let retry = cluster
        .nats
        .request_with_headers(subject, headers, body)
        .await
        .unwrap();
    assert!(
        retry
            .headers
            .as_ref()
            .and_then(|h| h.get(HEADER_CODE))
            .is_none(),
        "the retry is answered as the create it repeats, not as a conflict: {:?}",
        codec::from_msgpack::<Status>(&retry.payload).map(|s| s.message)
    );
    let retried: Pod = codec::from_msgpack(&retry.payload).unwrap();
    assert_eq!(retried.metadata.uid, first.metadata.uid);
    assert_eq!(
        retried.metadata.resource_version, first.metadata.resource_version,
        "the answer is what the first attempt wrote"
    );
}

#[actix::test]
async fn a_generated_name_that_is_taken_moves_on_to_the_next_and_a_retry_follows() {
    let cluster = LocalCluster::start().await.unwrap();
    let request_id = "colliding-request-id";
    let first_choice = format!(
        "gen-{}",
        shoal_api::write::generated_suffix(Some(request_id), 0)
    );
    let squatter = cluster
        .api()
        .create(&pod(&first_choice, &[]))
        .await
        .unwrap();

    let created = create_generated_twice(&cluster, request_id).await;
    assert!(created[0].0.starts_with("gen-"));
    assert_ne!(created[0].0, first_choice, "a taken name is not reused");
    assert_eq!(created[0], created[1], "the retry finds the same object");
    let still: Pod = cluster.api().get("default", &first_choice).await.unwrap();
    assert_eq!(
        still.metadata.uid, squatter.metadata.uid,
        "the squatter is untouched"
    );
}

#[actix::test]
async fn a_request_its_sender_stopped_waiting_for_is_dropped_unanswered() {
    let cluster = LocalCluster::start().await.unwrap();
    let subject = subjects::api("pod", Verb::Create);
    let send = |name: &str, timeout_ms: &str| {
        let body = bytes::Bytes::from(codec::to_msgpack(&pod(name, &[])).unwrap());
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(HEADER_TIMEOUT_MS, timeout_ms);
        let (nats, subject) = (cluster.nats.clone(), subject.clone());
        async move {
            tokio::time::timeout(
                Duration::from_millis(1500),
                nats.request_with_headers(subject, headers, body),
            )
            .await
        }
    };
    // A sender that waits 0 ms has stopped waiting by the time any request is started.
    assert!(
        send("late", "0").await.is_err(),
        "no reply to a request nobody waits for"
    );
    let served = send("on-time", "5000").await;
    assert!(matches!(served, Ok(Ok(_))), "a request in time is served");
    let names: Vec<String> = cluster
        .api()
        .list::<Pod>(&ListOptions::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| p.metadata.name)
        .collect();
    assert_eq!(
        names,
        vec!["on-time".to_string()],
        "the dropped request wrote nothing"
    );
}

#[actix::test]
async fn nodes_write_only_what_is_bound_to_them() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    // Each report comes from the node whose subject it is on, as the server allows only that;
    // what it says inside is still checked against the subject.
    let n1 = cluster
        .connect_as(&Role::Node("n1".into()), "n1")
        .await
        .unwrap();
    let n2 = cluster
        .connect_as(&Role::Node("n2".into()), "n2")
        .await
        .unwrap();
    let mut node = Node::default();
    node.metadata.name = "n1".into();
    let node_bytes = codec::to_msgpack(&node).unwrap();
    let reply = n1
        .request(
            subjects::node_report("n1", NodeReport::NodeStatus),
            node_bytes.clone().into(),
        )
        .await
        .unwrap();
    assert!(
        reply
            .headers
            .as_ref()
            .and_then(|h| h.get(HEADER_CODE))
            .is_none(),
        "registered"
    );
    let forged = n2
        .request(
            subjects::node_report("n2", NodeReport::NodeStatus),
            node_bytes.into(),
        )
        .await
        .unwrap();
    assert_eq!(
        forged.headers.unwrap().get(HEADER_CODE).unwrap().as_str(),
        "403"
    );

    let mut p = pod("bound", &[]);
    p.spec.node_name = "n1".into();
    let mut created = api.create(&p).await.unwrap();
    created.status.phase = "Running".into();
    let body = codec::to_msgpack(&created).unwrap();
    let wrong = n2
        .request(
            subjects::node_report("n2", NodeReport::PodStatus),
            body.clone().into(),
        )
        .await
        .unwrap();
    assert_eq!(
        wrong.headers.unwrap().get(HEADER_CODE).unwrap().as_str(),
        "403"
    );
    let right = n1
        .request(
            subjects::node_report("n1", NodeReport::PodStatus),
            body.into(),
        )
        .await
        .unwrap();
    let written: Pod = codec::from_msgpack(&right.payload).unwrap();
    assert_eq!(written.status.phase, "Running");

    // A bound, running pod waits for its node to confirm the containers stopped.
    let deleting: Pod = api
        .delete(&DeleteOptions {
            name: "bound".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(deleting.metadata.deletion_grace_period_seconds, Some(30));
    let confirm = codec::to_msgpack(&DeleteOptions {
        name: "bound".into(),
        namespace: "default".into(),
        ..Default::default()
    })
    .unwrap();
    n1.request(
        subjects::node_report("n1", NodeReport::PodDelete),
        confirm.into(),
    )
    .await
    .unwrap();
    assert!(api
        .get::<Pod>("default", "bound")
        .await
        .unwrap_err()
        .is_not_found());
}

#[actix::test]
async fn patch_labels_and_namespaces_must_exist() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    api.create(&pod("p", &[("app", "a")])).await.unwrap();
    let patched: Pod = api
        .patch(&PatchRequest {
            namespace: "default".into(),
            name: "p".into(),
            patch: r#"{"metadata":{"labels":{"app":null,"tier":"x"}}}"#.into(),
            status: false,
        })
        .await
        .unwrap();
    assert_eq!(
        patched.metadata.labels.get("tier").map(String::as_str),
        Some("x")
    );
    assert!(!patched.metadata.labels.contains_key("app"));
    assert_eq!(patched.metadata.generation, 1, "labels are not spec");

    let mut elsewhere = pod("q", &[]);
    elsewhere.metadata.namespace = "nowhere".into();
    let err = api.create(&elsewhere).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[actix::test]
async fn ten_thousand_pods_list_correctly_by_selector() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let total = 10_000;
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(128));
    let creates = (0..total).map(|i| {
        let (api, sem) = (api.clone(), sem.clone());
        async move {
            let _permit = sem.acquire().await.unwrap();
            let app = if i % 2 == 0 { "even" } else { "odd" };
            let tier = if i % 5 == 0 { "five" } else { "other" };
            api.create(&pod(&format!("p-{i:05}"), &[("app", app), ("tier", tier)]))
                .await
        }
    });
    let results = futures::future::join_all(creates).await;
    assert!(results.iter().all(|r| r.is_ok()));
    let list = |selector: &str| {
        let api = api.clone();
        let options = ListOptions {
            label_selector: selector.into(),
            ..Default::default()
        };
        async move { api.list::<Pod>(&options).await.unwrap().items }
    };
    assert_eq!(list("").await.len(), total);
    assert_eq!(list("app=even").await.len(), total / 2);
    assert_eq!(list("app=even,tier=five").await.len(), total / 10);
    assert_eq!(list("tier notin (five)").await.len(), total * 4 / 5);
    assert_eq!(
        list("app in (odd),tier!=five").await.len(),
        total / 2 - total / 10
    );
    assert_eq!(list("missing").await.len(), 0);
    assert_eq!(list("!missing").await.len(), total);
    let paged = api
        .list_page::<Pod>(&ListOptions {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(paged.items.len(), 100);
    assert!(!paged.metadata.continue_token.is_empty());
    // Read page by page, every pod comes exactly once and in (namespace, name) order, with
    // or without a selector, whatever the page size.
    for (selector, limit, expected) in [("", 700, total), ("app=even", 333, total / 2)] {
        let mut names = Vec::new();
        let mut options = ListOptions {
            label_selector: selector.into(),
            limit,
            ..Default::default()
        };
        loop {
            let page = api.list_page::<Pod>(&options).await.unwrap();
            assert!(page.items.len() <= limit as usize);
            names.extend(page.items.into_iter().map(|p| p.metadata.name));
            if page.metadata.continue_token.is_empty() {
                break;
            }
            options.continue_token = page.metadata.continue_token;
        }
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names.len(), expected, "{selector:?} in pages of {limit}");
        assert_eq!(names, sorted, "{selector:?}: in order, none twice");
    }
    let by_field = api
        .list::<Pod>(&ListOptions {
            field_selector: "metadata.name=p-00042".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_field.items.len(), 1);
    let _ = Duration::from_secs(0);
}

fn claim(name: &str, spec: serde_json::Value) -> PersistentVolumeClaim {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"}, "spec": spec
    }))
    .expect("fixture claim")
}

fn causes_of(result: Result<PersistentVolumeClaim, shoal_bus::ApiError>) -> Vec<String> {
    match result {
        Err(shoal_bus::ApiError::Status(s)) => s.causes().iter().map(|c| c.field.clone()).collect(),
        other => panic!("not refused: {other:?}"),
    }
}

#[actix::test]
async fn claims_get_the_default_class_and_bad_ones_are_refused_with_field_paths() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    // Every cluster is born with the default class.
    let class: StorageClass = api.get("", "local-path").await.unwrap();
    assert!(class.is_default() && class.waits_for_first_consumer());

    let ok = serde_json::json!({"accessModes": ["ReadWriteOnce"],
                                 "resources": {"requests": {"storage": "1Gi"}}});
    let made = api.create(&claim("data", ok.clone())).await.unwrap();
    assert_eq!(made.spec.storage_class_name.as_deref(), Some("local-path"));
    assert_eq!(made.status.phase, "Pending");
    // An explicit empty class means "no class" and stays so.
    let mut none = ok.clone();
    none["storageClassName"] = "".into();
    let made = api.create(&claim("classless", none)).await.unwrap();
    assert_eq!(made.spec.storage_class_name.as_deref(), Some(""));

    let refused = api
        .create(&claim(
            "bad",
            serde_json::json!({"accessModes": ["ReadWriteSometimes"]}),
        ))
        .await;
    assert_eq!(
        causes_of(refused),
        ["spec.accessModes[0]", "spec.resources.requests[storage]"]
    );
    assert!(
        api.get::<PersistentVolumeClaim>("default", "bad")
            .await
            .is_err(),
        "nothing written"
    );

    // A larger request is accepted; a smaller one, or another change, is not.
    let mut grown: PersistentVolumeClaim = api.get("default", "data").await.unwrap();
    grown.spec.resources.requests.insert(
        "storage".into(),
        bus_schemas::quantity::Quantity::parse("2Gi").unwrap(),
    );
    let grown = api.update(&grown).await.unwrap();
    let mut shrunk = grown.clone();
    shrunk.spec.resources.requests.insert(
        "storage".into(),
        bus_schemas::quantity::Quantity::parse("1Gi").unwrap(),
    );
    assert_eq!(
        causes_of(api.update(&shrunk).await),
        ["spec.resources.requests[storage]"]
    );
    let mut remoded = grown.clone();
    remoded.spec.access_modes = vec!["ReadWriteMany".into()];
    assert_eq!(causes_of(api.update(&remoded).await), ["spec"]);
    let stored: PersistentVolumeClaim = api.get("default", "data").await.unwrap();
    assert_eq!(stored.request().unwrap().to_string(), "2Gi");
}
