//! The Pod Security Standards check, rule by rule, on pod specs written as manifests.

use std::collections::BTreeMap;

use bus_schemas::kinds::pod_spec::PodSpec;
use bus_schemas::pod_security::{check, summary, Level, Policy, Violation};

fn spec(json: serde_json::Value) -> PodSpec {
    serde_json::from_value(json).expect("a pod spec")
}

fn fields(violations: &[Violation]) -> Vec<&str> {
    violations.iter().map(|v| v.field.as_str()).collect()
}

/// A spec that meets `restricted`: what every restricted test starts from.
fn restricted_ok() -> serde_json::Value {
    serde_json::json!({
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}],
        "containers": [{
            "name": "app",
            "image": "busybox",
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
            }
        }]
    })
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn levels_parse_and_a_bad_label_means_restricted() {
    assert_eq!(Level::parse("baseline"), Ok(Level::Baseline));
    assert!(Level::parse("Baseline").is_err());

    let none = Policy::from_labels(&BTreeMap::new());
    assert_eq!(
        (none.enforce, none.warn),
        (Level::Baseline, Level::Baseline)
    );

    let privileged = Policy::from_labels(&labels(&[(
        "pod-security.kubernetes.io/enforce",
        "privileged",
    )]));
    assert_eq!(privileged.enforce, Level::Privileged);
    assert_eq!(privileged.warn, Level::Privileged, "warn follows enforce");

    let warned = Policy::from_labels(&labels(&[
        ("pod-security.kubernetes.io/enforce", "privileged"),
        ("pod-security.kubernetes.io/warn", "restricted"),
    ]));
    assert_eq!(
        (warned.enforce, warned.warn),
        (Level::Privileged, Level::Restricted)
    );

    let typo = Policy::from_labels(&labels(&[(
        "pod-security.kubernetes.io/enforce",
        "basline",
    )]));
    assert_eq!(typo.enforce, Level::Restricted);
    assert_eq!(typo.label_errors.len(), 1);
    let error = &typo.label_errors[0];
    assert!(
        error.contains("pod-security.kubernetes.io/enforce")
            && error.contains("\"basline\"")
            && error.contains("using restricted"),
        "{error}"
    );
}

#[test]
fn privileged_allows_everything() {
    let s = spec(serde_json::json!({
        "hostNetwork": true,
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
        "containers": [{"name": "a", "securityContext": {"privileged": true}}]
    }));
    assert!(check(Level::Privileged, &s, "spec").is_empty());
    assert_eq!(check(Level::Baseline, &s, "spec").len(), 3);
}

#[test]
fn baseline_refuses_host_path_with_its_field_and_message() {
    let s = spec(serde_json::json!({
        "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "root", "hostPath": {"path": "/"}}],
        "containers": [{"name": "a"}]
    }));
    let v = check(Level::Baseline, &s, "spec");
    assert_eq!(fields(&v), ["spec.volumes[1].hostPath"]);
    assert_eq!(summary(&v), "hostPath volumes (volume \"root\")");
    let cause = v[0].to_cause();
    assert_eq!(cause.field, "spec.volumes[1].hostPath");
    assert_eq!(cause.reason, "FieldValueForbidden");

    // In a template, the path is the template's.
    let v = check(Level::Baseline, &s, "spec.template.spec");
    assert_eq!(fields(&v), ["spec.template.spec.volumes[1].hostPath"]);
}

#[test]
fn baseline_refuses_host_namespaces() {
    let s = spec(serde_json::json!({
        "hostNetwork": true, "hostPID": true, "hostIPC": true,
        "containers": [{"name": "a"}]
    }));
    let v = check(Level::Baseline, &s, "spec");
    assert_eq!(
        fields(&v),
        ["spec.hostNetwork", "spec.hostPID", "spec.hostIPC"]
    );
    assert_eq!(
        summary(&v),
        "host namespaces (hostNetwork=true; hostPID=true; hostIPC=true)"
    );
}

#[test]
fn baseline_refuses_privileged_containers_including_init_containers() {
    let s = spec(serde_json::json!({
        "initContainers": [{"name": "setup", "securityContext": {"privileged": true}}],
        "containers": [
            {"name": "a", "securityContext": {"privileged": false}},
            {"name": "b", "securityContext": {"privileged": true}}
        ]
    }));
    let v = check(Level::Baseline, &s, "spec");
    assert_eq!(
        fields(&v),
        [
            "spec.initContainers[0].securityContext.privileged",
            "spec.containers[1].securityContext.privileged"
        ]
    );
    assert!(v[1]
        .detail
        .contains("container \"b\" must not set securityContext.privileged=true"));
}

#[test]
fn baseline_allows_only_the_default_capabilities() {
    let s = spec(serde_json::json!({
        "containers": [
            {"name": "a", "securityContext": {"capabilities": {"add": ["CHOWN", "KILL", "SYS_CHROOT"]}}},
            {"name": "b", "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE", "NET_ADMIN", "SYS_ADMIN"]}}}
        ]
    }));
    let v = check(Level::Baseline, &s, "spec");
    assert_eq!(
        fields(&v),
        [
            "spec.containers[1].securityContext.capabilities.add[1]",
            "spec.containers[1].securityContext.capabilities.add[2]"
        ]
    );
    assert_eq!(v[0].check, "non-default capabilities");
}

#[test]
fn baseline_refuses_host_ports_but_not_container_ports() {
    let s = spec(serde_json::json!({
        "containers": [{"name": "a", "ports": [
            {"containerPort": 80},
            {"containerPort": 443, "hostPort": 8443}
        ]}]
    }));
    let v = check(Level::Baseline, &s, "spec");
    assert_eq!(fields(&v), ["spec.containers[0].ports[1].hostPort"]);
    assert_eq!(v[0].detail, "container \"a\" uses hostPort 8443");
}

#[test]
fn baseline_allows_only_the_default_proc_mount() {
    let s = spec(serde_json::json!({
        "containers": [
            {"name": "a", "securityContext": {"procMount": "Default"}},
            {"name": "b", "securityContext": {"procMount": "Unmasked"}}
        ]
    }));
    let v = check(Level::Baseline, &s, "spec");
    assert_eq!(fields(&v), ["spec.containers[1].securityContext.procMount"]);
}

#[test]
fn baseline_refuses_unconfined_seccomp_only() {
    let s = spec(serde_json::json!({
        "securityContext": {"seccompProfile": {"type": "Unconfined"}},
        "containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
            {"name": "c", "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}}
        ]
    }));
    let v = check(Level::Baseline, &s, "spec");
    assert_eq!(
        fields(&v),
        [
            "spec.securityContext.seccompProfile.type",
            "spec.containers[1].securityContext.seccompProfile.type"
        ]
    );
}

#[test]
fn baseline_allows_only_safe_sysctls() {
    let s = spec(serde_json::json!({
        "securityContext": {"sysctls": [
            {"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"},
            {"name": "kernel.msgmax", "value": "65536"},
            {"name": "net.ipv4.tcp_keepalive_probes", "value": "5"},
            {"name": "net.core.somaxconn", "value": "1024"}
        ]},
        "containers": [{"name": "a"}]
    }));
    let v = check(Level::Baseline, &s, "spec");
    assert_eq!(
        fields(&v),
        [
            "spec.securityContext.sysctls[1].name",
            "spec.securityContext.sysctls[3].name"
        ]
    );
    assert_eq!(
        summary(&v),
        "forbidden sysctls (kernel.msgmax; net.core.somaxconn)"
    );
}

#[test]
fn baseline_does_not_ask_for_restricted_settings() {
    let s = spec(serde_json::json!({"containers": [{"name": "a", "image": "busybox"}]}));
    assert!(check(Level::Baseline, &s, "spec").is_empty());
    assert!(!check(Level::Restricted, &s, "spec").is_empty());
}

#[test]
fn restricted_accepts_a_hardened_pod() {
    let s = spec(restricted_ok());
    assert_eq!(check(Level::Restricted, &s, "spec"), Vec::new());
}

#[test]
fn restricted_names_every_missing_field() {
    let s = spec(serde_json::json!({
        "initContainers": [{"name": "init"}],
        "containers": [{"name": "app"}]
    }));
    let v = check(Level::Restricted, &s, "spec");
    let mut got = fields(&v);
    got.sort();
    let mut want = Vec::new();
    for c in ["spec.initContainers[0]", "spec.containers[0]"] {
        for field in [
            "capabilities.drop",
            "seccompProfile.type",
            "allowPrivilegeEscalation",
            "runAsNonRoot",
        ] {
            want.push(format!("{c}.securityContext.{field}"));
        }
    }
    want.sort();
    assert_eq!(got, want);
    let text = summary(&v);
    assert!(
        text.starts_with("unrestricted capabilities (container \"init\" must set securityContext.capabilities.drop=[\"ALL\"]"),
        "{text}"
    );
    assert!(text.contains("runAsNonRoot != true (pod or container \"init\" must set securityContext.runAsNonRoot=true"));
}

#[test]
fn restricted_volume_types_replace_the_host_path_check() {
    let mut json = restricted_ok();
    json["volumes"][1] = serde_json::json!({"name": "root", "hostPath": {"path": "/"}});
    let v = check(Level::Restricted, &spec(json), "spec");
    assert_eq!(fields(&v), ["spec.volumes[1].hostPath"]);
    assert_eq!(
        summary(&v),
        "restricted volume types (volume \"root\" uses restricted volume type \"hostPath\")"
    );
}

#[test]
fn restricted_allows_only_net_bind_service_added() {
    let mut json = restricted_ok();
    json["containers"][0]["securityContext"]["capabilities"]["add"] =
        serde_json::json!(["NET_BIND_SERVICE", "CHOWN"]);
    let v = check(Level::Restricted, &spec(json), "spec");
    assert_eq!(
        fields(&v),
        ["spec.containers[0].securityContext.capabilities.add[1]"]
    );
    assert_eq!(v[0].check, "unrestricted capabilities");
}

#[test]
fn restricted_requires_dropping_all() {
    let mut json = restricted_ok();
    json["containers"][0]["securityContext"]["capabilities"]["drop"] =
        serde_json::json!(["NET_RAW"]);
    let v = check(Level::Restricted, &spec(json), "spec");
    assert_eq!(
        fields(&v),
        ["spec.containers[0].securityContext.capabilities.drop"]
    );
}

#[test]
fn restricted_refuses_privilege_escalation_unless_set_false() {
    let mut json = restricted_ok();
    json["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = true.into();
    let v = check(Level::Restricted, &spec(json), "spec");
    assert_eq!(
        fields(&v),
        ["spec.containers[0].securityContext.allowPrivilegeEscalation"]
    );
    assert_eq!(v[0].check, "allowPrivilegeEscalation != false");
}

#[test]
fn restricted_run_as_non_root_on_pod_or_every_container() {
    // Set on every container instead of the pod: fine.
    let mut json = restricted_ok();
    json["securityContext"]["runAsNonRoot"] = serde_json::Value::Null;
    json["containers"][0]["securityContext"]["runAsNonRoot"] = true.into();
    assert!(check(Level::Restricted, &spec(json.clone()), "spec").is_empty());

    // The pod says false: wrong even with the container true.
    json["securityContext"]["runAsNonRoot"] = false.into();
    let v = check(Level::Restricted, &spec(json.clone()), "spec");
    assert_eq!(fields(&v), ["spec.securityContext.runAsNonRoot"]);

    // The pod says true but a container overrides it with false.
    let mut json = restricted_ok();
    json["containers"][0]["securityContext"]["runAsNonRoot"] = false.into();
    let v = check(Level::Restricted, &spec(json), "spec");
    assert_eq!(
        fields(&v),
        ["spec.containers[0].securityContext.runAsNonRoot"]
    );
    assert!(v[0]
        .detail
        .contains("must not set securityContext.runAsNonRoot=false"));
}

#[test]
fn restricted_refuses_run_as_user_zero() {
    let mut json = restricted_ok();
    json["securityContext"]["runAsUser"] = 0.into();
    json["containers"][0]["securityContext"]["runAsUser"] = 0.into();
    let v = check(Level::Restricted, &spec(json.clone()), "spec");
    assert_eq!(
        fields(&v),
        [
            "spec.securityContext.runAsUser",
            "spec.containers[0].securityContext.runAsUser"
        ]
    );
    json["securityContext"]["runAsUser"] = 1000.into();
    json["containers"][0]["securityContext"]["runAsUser"] = 1000.into();
    assert!(check(Level::Restricted, &spec(json), "spec").is_empty());
}

#[test]
fn restricted_seccomp_on_pod_or_every_container() {
    // Unset on the pod, set on the container: fine.
    let mut json = restricted_ok();
    json["securityContext"]["seccompProfile"] = serde_json::Value::Null;
    json["containers"][0]["securityContext"]["seccompProfile"] =
        serde_json::json!({"type": "Localhost", "localhostProfile": "p.json"});
    assert!(check(Level::Restricted, &spec(json.clone()), "spec").is_empty());

    // Unset on both: the container is named.
    json["containers"][0]["securityContext"]["seccompProfile"] = serde_json::Value::Null;
    let v = check(Level::Restricted, &spec(json), "spec");
    assert_eq!(
        fields(&v),
        ["spec.containers[0].securityContext.seccompProfile.type"]
    );
    assert!(v[0].detail.contains(
        "must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\""
    ));

    // Unconfined on the container overrides a good pod setting, and is refused.
    let mut json = restricted_ok();
    json["containers"][0]["securityContext"]["seccompProfile"] =
        serde_json::json!({"type": "Unconfined"});
    let v = check(Level::Restricted, &spec(json), "spec");
    assert_eq!(
        fields(&v),
        ["spec.containers[0].securityContext.seccompProfile.type"]
    );
}

#[test]
fn restricted_keeps_the_baseline_checks() {
    let mut json = restricted_ok();
    json["hostPID"] = true.into();
    json["containers"][0]["securityContext"]["procMount"] = "Unmasked".into();
    json["securityContext"]["sysctls"] = serde_json::json!([{"name": "kernel.sem", "value": "1"}]);
    let v = check(Level::Restricted, &spec(json), "spec");
    assert_eq!(
        fields(&v),
        [
            "spec.hostPID",
            "spec.containers[0].securityContext.procMount",
            "spec.securityContext.sysctls[0].name"
        ]
    );
}
