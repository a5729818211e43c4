//! ConfigMaps, Secrets and the downward API reaching real containers through a real cluster
//! (nats-server + API actors) and a real node agent: env, envFrom, volumes that follow
//! their source through the atomic `..data` swap, and pods waiting for what they miss.

use std::path::PathBuf;
use std::time::Duration;

mod common;

use common::one_node;

use bus_schemas::api::ListOptions;
use bus_schemas::kinds::{ConfigMap, Event, Pod};
use shoal_api::local::eventually;
use shoal_bus::ApiClient;

const WAIT: Duration = Duration::from_secs(60);

fn pod(node: &str, name: &str, spec: serde_json::Value) -> Pod {
    let mut value =
        serde_json::json!({"metadata": {"name": name, "labels": {"app": "cfg"}}, "spec": spec});
    value["spec"]["nodeName"] = serde_json::Value::String(node.into());
    serde_json::from_value(value).unwrap()
}

fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = name.into();
    cm.data = data
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    cm
}

async fn wait_pod(api: &ApiClient, name: &str, what: &str, ok: impl Fn(&Pod) -> bool) -> Pod {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let got = api.get::<Pod>("default", name).await;
        if let Ok(p) = &got {
            if ok(p) {
                return p.clone();
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {name} to be {what}: {:#?}",
            got.map(|p| p.status)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn events_about(api: &ApiClient, pod: &str) -> Vec<Event> {
    let options = ListOptions {
        namespace: "default".into(),
        field_selector: format!("involvedObject.name={pod}"),
        ..Default::default()
    };
    api.list::<Event>(&options)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

fn waiting_reason(p: &Pod) -> Option<String> {
    p.status
        .container_statuses
        .first()
        .and_then(|c| c.state.waiting.as_ref())
        .map(|w| w.reason.clone())
}

/// A ConfigMap change reaches the file a running container reads, and the container never
/// reads a mix: it reads the 30,000-line file in a loop and records the distinct lines it
/// saw each time.
#[actix::test]
async fn a_config_map_update_reaches_a_running_container_whole() {
    let (cluster, _dir, node) = one_node().await;
    let api = cluster.api();
    let old = "old\n".repeat(30_000);
    let new = "new\n".repeat(30_000);
    api.create(&config_map("app-config", &[("content", &old)]))
        .await
        .unwrap();
    api.create(&pod(&node.name, "reader", serde_json::json!({
        "volumes": [
            {"name": "config", "configMap": {"name": "app-config"}},
            {"name": "out", "emptyDir": {}}
        ],
        "containers": [{"name": "c", "image": "shoal/busybox:1.35",
            "command": ["sh", "-c", "while :; do sort -u /etc/config/content | tr '\\n' , >> /out/seen; echo >> /out/seen; done"],
            "volumeMounts": [
                {"name": "config", "mountPath": "/etc/config"},
                {"name": "out", "mountPath": "/out"}
            ]}]
    }))).await.unwrap();
    let running = wait_pod(&api, "reader", "Running", |p| p.status.phase == "Running").await;
    let seen = node.volume(&running, "out").join("seen");
    eventually("the reader reads the old content", WAIT, || async {
        std::fs::read_to_string(&seen).is_ok_and(|s| s.contains("old,"))
    })
    .await;

    let mut cm: ConfigMap = api.get("default", "app-config").await.unwrap();
    cm.data.insert("content".into(), new);
    api.update(&cm).await.unwrap();
    eventually("the reader reads the new content", WAIT, || async {
        std::fs::read_to_string(&seen).is_ok_and(|s| s.contains("new,"))
    })
    .await;
    let text = std::fs::read_to_string(&seen).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mixed: Vec<&&str> = lines
        .iter()
        .filter(|l| **l != "old," && **l != "new,")
        .take(5)
        .collect();
    assert!(
        mixed.is_empty(),
        "reads of a half-written volume: {mixed:?} among {} reads",
        lines.len()
    );
    // The visible key is a symlink through `..data`, as in Kubernetes.
    let config = node.volume(&running, "config");
    assert_eq!(
        std::fs::read_link(config.join("content")).unwrap(),
        PathBuf::from("..data/content")
    );
}

/// A pod whose ConfigMap does not exist waits in CreateContainerConfigError with an Event
/// naming it, and starts by itself once it is created; envFrom skips (and reports) a key that
/// is not a valid variable name; Secrets, the downward API and resourceFieldRef reach env and
/// volumes; a downwardAPI labels file follows the pod's labels.
#[actix::test]
async fn env_and_volumes_from_config_secrets_and_the_downward_api() {
    let (cluster, _dir, node) = one_node().await;
    let api = cluster.api();
    let mut secret = bus_schemas::kinds::Secret::default();
    secret.metadata.name = "db".into();
    secret
        .string_data
        .insert("password".into(), "hunter2".into());
    api.create(&secret).await.unwrap();

    let check = [
        "test \"$greeting\" = hello",
        "test \"$CFG_MODE\" = fast",
        "test -z \"$(env | grep ^1BAD)\"",
        "test \"$CFG_1BAD\" = x",
        "test \"$PW\" = hunter2",
        "test \"$POD\" = app",
        "test \"$NS\" = default",
        "test \"$APP\" = cfg",
        "test -n \"$IP\"",
        "test \"$NODE\" = \"$EXPECTED_NODE\"",
        "test \"$MEM_MI\" = 64",
        "test \"$CPU_M\" = 250",
        "test \"$(cat /etc/config/greeting)\" = hello",
        "test \"$(cat /etc/renamed/hi.txt)\" = hello",
        "test \"$(cat /etc/secret/password)\" = hunter2",
        "test \"$(stat -c %a /etc/secret/..data/password)\" = 400",
        "test \"$(cat /etc/one-key)\" = fast",
        "grep -q 'app=\"cfg\"' /etc/podinfo/labels",
        "test \"$(cat /etc/all/greeting)\" = hello",
        "test \"$(cat /etc/all/password)\" = hunter2",
        "test \"$(cat /etc/all/name)\" = app",
    ];
    // Each check that fails says which; the container then stays up for the label test.
    let script: String = check
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c} || echo failed {i} >> /out/result; "))
        .collect::<String>()
        + "echo done >> /out/result; exec sleep 1000";
    let expected_node = node.name.clone();
    api.create(&pod(&node.name, "app", serde_json::json!({
        "volumes": [
            {"name": "config", "configMap": {"name": "app-config"}},
            {"name": "renamed", "configMap": {"name": "app-config", "items": [{"key": "greeting", "path": "hi.txt"}]}},
            {"name": "secret", "secret": {"secretName": "db", "defaultMode": 256}},
            {"name": "podinfo", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
            {"name": "out", "emptyDir": {}},
            {"name": "all", "projected": {"sources": [
                {"configMap": {"name": "app-config", "items": [{"key": "greeting", "path": "greeting"}]}},
                {"secret": {"name": "db"}},
                {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}
            ]}}
        ],
        "containers": [{"name": "c", "image": "shoal/busybox:1.35",
            "command": ["sh", "-c", script],
            "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}},
            "envFrom": [{"configMapRef": {"name": "app-config"}, "prefix": "CFG_"},
                        {"configMapRef": {"name": "app-config"}}],
            "env": [
                {"name": "EXPECTED_NODE", "value": expected_node},
                {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
                {"name": "CPU_M", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
                {"name": "MISSING_OK", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "x", "optional": true}}}
            ],
            "volumeMounts": [
                {"name": "config", "mountPath": "/etc/config"},
                {"name": "renamed", "mountPath": "/etc/renamed"},
                {"name": "secret", "mountPath": "/etc/secret"},
                {"name": "config", "mountPath": "/etc/one-key", "subPath": "MODE"},
                {"name": "podinfo", "mountPath": "/etc/podinfo"},
                {"name": "all", "mountPath": "/etc/all"},
                {"name": "out", "mountPath": "/out"}
            ]}]
    }))).await.unwrap();

    let waiting = wait_pod(&api, "app", "waiting for its ConfigMap", |p| {
        waiting_reason(p).as_deref() == Some("CreateContainerConfigError")
    })
    .await;
    let message = &waiting.status.container_statuses[0]
        .state
        .waiting
        .as_ref()
        .unwrap()
        .message;
    assert!(
        message.contains("configmap \"app-config\" not found"),
        "{message}"
    );
    eventually("an Event names the missing ConfigMap", WAIT, || async {
        events_about(&api, "app").await.iter().any(|e| {
            e.reason == "Failed" && e.message.contains("configmap \"app-config\" not found")
        })
    })
    .await;

    api.create(&config_map(
        "app-config",
        &[("greeting", "hello"), ("MODE", "fast"), ("1BAD", "x")],
    ))
    .await
    .unwrap();
    let running = wait_pod(&api, "app", "Running", |p| {
        p.status
            .container_statuses
            .first()
            .is_some_and(|c| c.state.running.is_some())
    })
    .await;
    let events = events_about(&api, "app").await;
    let skipped = events
        .iter()
        .find(|e| e.reason == "InvalidEnvironmentVariableNames")
        .unwrap_or_else(|| panic!("no event for the skipped key: {events:#?}"));
    assert!(skipped.message.contains("1BAD"), "{}", skipped.message);
    assert_eq!(skipped.type_, "Warning");
    let result = node.volume(&running, "out").join("result");
    eventually("the checks in the container ran", WAIT, || async {
        std::fs::read_to_string(&result).is_ok_and(|s| s.contains("done"))
    })
    .await;
    let result = std::fs::read_to_string(&result).unwrap();
    let failed: Vec<&str> = result
        .lines()
        .filter_map(|l| l.strip_prefix("failed "))
        .map(|i| check[i.parse::<usize>().unwrap()])
        .collect();
    assert!(
        failed.is_empty(),
        "checks that failed in the container: {failed:#?}"
    );

    // A label change reaches the downwardAPI file.
    let mut relabelled = api.get::<Pod>("default", "app").await.unwrap();
    relabelled
        .metadata
        .labels
        .insert("tier".into(), "gold".into());
    api.update(&relabelled).await.unwrap();
    let labels = node.volume(&running, "podinfo").join("labels");
    eventually("the labels file shows the new label", WAIT, || async {
        std::fs::read_to_string(&labels).is_ok_and(|s| s.contains("tier=\"gold\""))
    })
    .await;
}
