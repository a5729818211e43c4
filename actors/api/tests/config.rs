//! ConfigMaps and Secrets against a real nats-server: bad input refused with field paths and
//! nothing written, Secret values encrypted in the state log (read back byte for byte from
//! the stream and from nats-server's files), key rotation, and Secrets handed only to nodes
//! whose pods use them.

use std::time::Duration;

use base64::Engine;

use bus_schemas::api::{ListOptions, ObjectRef};
use bus_schemas::kinds::byte_string::ByteString;
use bus_schemas::kinds::{ConfigMap, Pod, Secret};
use bus_schemas::roles::Role;
use bus_schemas::subjects::{self, NodeReport, HEADER_CODE};
use bus_schemas::{codec, Reason, Status};
use shoal_api::local::{eventually, LocalCluster};

const VALUE: &str = "s3cr3t-v4lue-never-in-the-log";

fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = name.into();
    cm.data = data
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    cm
}

fn secret(name: &str, data: &[(&str, &str)], string_data: &[(&str, &str)]) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = name.into();
    s.data = data
        .iter()
        .map(|(k, v)| (k.to_string(), ByteString::from(*v)))
        .collect();
    s.string_data = string_data
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    s
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Every message the state stream holds, as stored.
async fn stream_bytes(cluster: &LocalCluster) -> Vec<u8> {
    let js = async_nats::jetstream::new(cluster.nats.clone());
    let mut stream = js.get_stream(subjects::OBJECTS_STREAM).await.unwrap();
    let last = stream.info().await.unwrap().state.last_sequence;
    let mut all = Vec::new();
    for seq in 1..=last {
        if let Ok(message) = stream.get_raw_message(seq).await {
            all.extend_from_slice(&message.payload);
        }
    }
    all
}

/// Every byte of nats-server's files under `dir`.
fn files_bytes(dir: &std::path::Path) -> Vec<u8> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                all.extend(bytes);
            }
        }
    }
    all
}

fn invalid_fields(e: &shoal_bus::ApiError) -> Vec<String> {
    match e {
        shoal_bus::ApiError::Status(s) => s.causes().iter().map(|c| c.field.clone()).collect(),
        other => panic!("expected a Status, got {other}"),
    }
}

#[actix::test]
async fn bad_config_is_refused_with_field_paths_and_nothing_is_written() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();

    let big = "x".repeat(1024 * 1024);
    let e = api
        .create(&config_map("big", &[("blob", &big)]))
        .await
        .unwrap_err();
    assert!(e.is(Reason::Invalid), "{e}");
    assert_eq!(invalid_fields(&e), ["data"]);

    let e = api
        .create(&config_map("keys", &[("bad/key", "1")]))
        .await
        .unwrap_err();
    assert_eq!(invalid_fields(&e), ["data[bad/key]"]);

    let e = api
        .create(&secret("clash", &[("user", "admin")], &[("user", "root")]))
        .await
        .unwrap_err();
    assert_eq!(invalid_fields(&e), ["stringData[user]"]);

    let mut tls = secret("tls", &[("tls.crt", "c")], &[]);
    tls.type_ = "kubernetes.io/tls".into();
    let e = api.create(&tls).await.unwrap_err();
    assert_eq!(invalid_fields(&e), ["data[tls.key]"]);

    let mut frozen = config_map("frozen", &[("a", "1")]);
    frozen.immutable = Some(true);
    let frozen = api.create(&frozen).await.unwrap();
    let mut changed = frozen.clone();
    changed.data.insert("a".into(), "2".into());
    let e = api.update(&changed).await.unwrap_err();
    assert_eq!(invalid_fields(&e), ["data"]);
    let kept: ConfigMap = api.get("default", "frozen").await.unwrap();
    assert_eq!(kept.data["a"], "1", "the refused update wrote nothing");

    let listed = api
        .list::<ConfigMap>(&ListOptions::default())
        .await
        .unwrap();
    let names: Vec<_> = listed
        .items
        .iter()
        .map(|c| c.metadata.name.as_str())
        .collect();
    assert_eq!(names, ["frozen"]);
    assert!(api
        .list::<Secret>(&ListOptions::default())
        .await
        .unwrap()
        .items
        .is_empty());

    // stringData agreeing with data (or adding keys) is folded in and never stored.
    let ok = api
        .create(&secret(
            "ok",
            &[("user", "admin")],
            &[("user", "admin"), ("pass", "pw")],
        ))
        .await
        .unwrap();
    assert!(ok.string_data.is_empty());
    assert_eq!(ok.data["pass"], ByteString::from("pw"));
    assert_eq!(ok.type_, "Opaque");
}

#[actix::test]
async fn secret_values_never_reach_the_log_in_clear() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start_in(dir.path().to_path_buf())
        .await
        .unwrap();
    let api = cluster.api();
    let created = api
        .create(&secret("db", &[], &[("password", VALUE)]))
        .await
        .unwrap();
    assert_eq!(created.data["password"], ByteString::from(VALUE));
    let mut updated = created.clone();
    updated
        .data
        .insert("password2".into(), ByteString::from(VALUE));
    api.update(&updated).await.unwrap();

    let got: Secret = api.get("default", "db").await.unwrap();
    assert_eq!(got.data["password"], ByteString::from(VALUE));
    let listed = api.list::<Secret>(&ListOptions::default()).await.unwrap();
    assert_eq!(listed.items[0].data["password2"], ByteString::from(VALUE));

    let stream = stream_bytes(&cluster).await;
    assert!(
        contains(&stream, "password"),
        "keys are visible, as in Kubernetes"
    );
    // Values travel base64-encoded (as in Kubernetes' JSON), so both forms are looked for.
    let base64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    assert!(
        contains(&stream, &base64("shoal:aesgcm:v1")),
        "values are sealed"
    );
    let disk = files_bytes(dir.path());
    for clear in [VALUE.to_string(), base64(VALUE)] {
        assert!(
            !contains(&stream, &clear),
            "the value is in the stream in clear: {clear}"
        );
        assert!(
            !contains(&disk, &clear),
            "the value is on disk in clear: {clear}"
        );
    }
}

#[actix::test]
async fn rotation_reseals_every_secret_with_the_new_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = LocalCluster::start_in(dir.path().to_path_buf())
        .await
        .unwrap();
    let api = cluster.api();
    api.create(&secret("db", &[], &[("password", VALUE)]))
        .await
        .unwrap();
    let subject = subjects::object("secret", "default", "db");
    let sealed_with = |payload: &[u8]| {
        let stored: Secret = codec::from_msgpack(payload).unwrap();
        let value = stored.data["password"].0.clone();
        shoal_api::secrets::KeyRing::key_of(&value)
            .unwrap()
            .to_string()
    };
    let before = sealed_with(
        &cluster
            .store
            .get_raw(&subject)
            .await
            .unwrap()
            .unwrap()
            .payload,
    );

    let added = shoal_api::secrets::KeyRing::add_key(&cluster.secret_key_file).unwrap();
    cluster.stop_api_replica(0);
    cluster.add_api_replica().await.unwrap();
    assert_ne!(before, added, "rotation must bring a key of another name");
    eventually(
        "the Secret re-sealed under the new key",
        Duration::from_secs(20),
        || async {
            let raw = cluster.store.get_raw(&subject).await.unwrap().unwrap();
            sealed_with(&raw.payload) == added
        },
    )
    .await;
    let got: Secret = api.get("default", "db").await.unwrap();
    assert_eq!(got.data["password"], ByteString::from(VALUE));
}

async fn node_asks(cluster: &LocalCluster, node: &str, name: &str) -> Result<Secret, Status> {
    let body = codec::to_msgpack(&ObjectRef {
        namespace: "default".into(),
        name: name.into(),
    })
    .unwrap();
    let subject = subjects::node_report(node, NodeReport::Secret);
    // Asked as that node: the server lets no one else publish on its subjects.
    let nats = cluster
        .connect_as(&Role::Node(node.into()), node)
        .await
        .unwrap();
    let reply = nats.request(subject, body.into()).await.unwrap();
    match reply.headers.as_ref().and_then(|h| h.get(HEADER_CODE)) {
        Some(_) => Err(codec::from_msgpack(&reply.payload).unwrap()),
        None => Ok(codec::from_msgpack(&reply.payload).unwrap()),
    }
}

#[actix::test]
async fn only_a_node_running_a_pod_that_uses_a_secret_may_read_it() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    api.create(&secret("db", &[], &[("password", VALUE)]))
        .await
        .unwrap();
    api.create(&secret("other", &[], &[("password", VALUE)]))
        .await
        .unwrap();

    let refused = node_asks(&cluster, "n1", "db").await.unwrap_err();
    assert!(refused.is(Reason::Forbidden), "{refused:?}");

    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "app"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "main", "image": "busybox:1.35",
                "env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]}]
        }
    }))
    .unwrap();
    api.create(&pod).await.unwrap();

    let opened = node_asks(&cluster, "n1", "db").await.unwrap();
    assert_eq!(opened.data["password"], ByteString::from(VALUE));
    let other_node = node_asks(&cluster, "n2", "db").await.unwrap_err();
    assert!(other_node.is(Reason::Forbidden), "{other_node:?}");
    let unused = node_asks(&cluster, "n1", "other").await.unwrap_err();
    assert!(unused.is(Reason::Forbidden), "{unused:?}");
}
