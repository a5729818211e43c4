//! Every kind: golden msgpack bytes, round trips, defaulting, helpers and update rules.
//!
//! Golden files live in tests/golden/<kind>.hex. After an intended encoding change, regenerate
//! them with `UPDATE_GOLDEN=1 cargo test -p bus-schemas --test kinds` and review the diff.

mod fixtures;

use std::path::PathBuf;

use bus_schemas::codec::{from_json_value_strict, from_msgpack, from_msgpack_strict, to_msgpack};
use bus_schemas::kinds::intstr::IntOrString;
use bus_schemas::kinds::*;
use bus_schemas::validation::validate_meta;
use bus_schemas::{Condition, Resource};
use fixtures::*;

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.hex"))
}

/// Compares the msgpack encoding with the golden file (or rewrites it under UPDATE_GOLDEN=1),
/// then checks the bytes decode back, tolerantly and strictly, and JSON round-trips.
fn check_golden<T: Resource>(name: &str, obj: &T) {
    let bytes = to_msgpack(obj).expect("encode");
    let hex = hex::encode(&bytes);
    let path = golden_path(name);
    if std::env::var("UPDATE_GOLDEN").as_deref() == Ok("1") {
        let lines: Vec<&str> = hex
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).expect("hex is ascii"))
            .collect();
        std::fs::create_dir_all(path.parent().expect("golden dir")).expect("mkdir golden");
        std::fs::write(&path, lines.join("\n") + "\n").expect("write golden");
    } else {
        let regenerate =
            "regenerate with `UPDATE_GOLDEN=1 cargo test -p bus-schemas --test kinds` \
                          if the encoding change is intended";
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; {regenerate}", path.display()));
        let want: String = want.split_whitespace().collect();
        if want != hex {
            let at = want
                .bytes()
                .zip(hex.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(0)
                / 2;
            panic!(
                "{name}: msgpack differs from {} at byte {at} (golden {} bytes, now {} bytes); \
                 now encodes as JSON:\n{}\n{regenerate}",
                path.display(),
                want.len() / 2,
                bytes.len(),
                serde_json::to_string_pretty(obj).unwrap_or_default(),
            );
        }
    }

    let decoded: T = from_msgpack(&bytes).expect("tolerant decode");
    assert_eq!(&decoded, obj, "{name}: msgpack round trip");
    let strict: T = from_msgpack_strict(&bytes)
        .unwrap_or_else(|causes| panic!("{name}: strict msgpack decode: {causes:?}"));
    assert_eq!(&strict, obj, "{name}: strict msgpack round trip");
    let json = serde_json::to_value(obj).expect("to json");
    let back: T = from_json_value_strict(json)
        .unwrap_or_else(|causes| panic!("{name}: strict JSON decode: {causes:?}"));
    assert_eq!(&back, obj, "{name}: JSON round trip");
}

/// Defaults the fixture, checks defaulting is idempotent and the result validates clean.
fn defaulted<T: Resource>(mut obj: T) -> T {
    obj.apply_defaults();
    let once = obj.clone();
    obj.apply_defaults();
    assert_eq!(
        obj,
        once,
        "{}: apply_defaults is not idempotent",
        T::INFO.kind
    );
    let mut causes = validate_meta(&T::INFO, obj.meta());
    causes.extend(obj.validate_kind());
    assert!(
        causes.is_empty(),
        "{} fixture is invalid: {causes:#?}",
        T::INFO.kind
    );
    obj
}

macro_rules! golden_tests {
    ($($test:ident => $fixture:ident, $file:literal;)*) => {
        $(
            #[test]
            fn $test() {
                check_golden($file, &defaulted($fixture()));
            }
        )*
    };
}

golden_tests! {
    golden_pod => pod, "pod";
    golden_node => node, "node";
    golden_replicaset => replicaset, "replicaset";
    golden_deployment => deployment, "deployment";
    golden_daemonset => daemonset, "daemonset";
    golden_job => job, "job";
    golden_service => service, "service";
    golden_endpoints => endpoints, "endpoints";
    golden_event => event, "event";
    golden_hpa => hpa, "horizontalpodautoscaler";
    golden_vpa => vpa, "verticalpodautoscaler";
    golden_lease => lease, "lease";
    golden_priorityclass => priorityclass, "priorityclass";
    golden_namespace => namespace, "namespace";
    golden_persistentvolume => persistentvolume, "persistentvolume";
    golden_persistentvolumeclaim => persistentvolumeclaim, "persistentvolumeclaim";
    golden_storageclass => storageclass, "storageclass";
}

/// Defaulting an object that holds almost nothing must also be idempotent.
#[test]
fn defaults_of_empty_objects_are_idempotent() {
    fn check<T: Resource + Default>() {
        let mut obj = T::default();
        obj.apply_defaults();
        let once = obj.clone();
        obj.apply_defaults();
        assert_eq!(obj, once, "{}", T::INFO.kind);
    }
    check::<Pod>();
    check::<Node>();
    check::<ReplicaSet>();
    check::<Deployment>();
    check::<DaemonSet>();
    check::<Job>();
    check::<Service>();
    check::<Endpoints>();
    check::<Event>();
    check::<HorizontalPodAutoscaler>();
    check::<bus_schemas::kinds::VerticalPodAutoscaler>();
    check::<Lease>();
    check::<Namespace>();
    check::<PersistentVolume>();
    check::<PersistentVolumeClaim>();
    check::<StorageClass>();
    let mut pc = PriorityClass::default();
    pc.apply_defaults();
    assert_eq!(pc.preemption_policy, "PreemptLowerPriority");
}

#[test]
fn pod_defaults_follow_kubernetes() {
    let mut pod = Pod {
        spec: PodSpec {
            containers: vec![
                Container {
                    name: "a".into(),
                    image: "nginx".into(),
                    ..Default::default()
                },
                Container {
                    name: "b".into(),
                    image: "nginx:1.25".into(),
                    ports: vec![bus_schemas::kinds::container::ContainerPort {
                        container_port: 80,
                        ..Default::default()
                    }],
                    resources: ResourceRequirements {
                        limits: resources(&[("cpu", "1"), ("memory", "1Gi")]),
                        ..Default::default()
                    },
                    liveness_probe: Some(Probe {
                        http_get: Some(bus_schemas::kinds::probe::HttpGetAction {
                            port: 80.into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ],
            volumes: vec![bus_schemas::kinds::pod_spec::Volume {
                name: "scratch".into(),
                ..Default::default()
            }],
            ..Default::default()
        },
        ..Default::default()
    };
    pod.apply_defaults();
    let spec = &pod.spec;
    assert_eq!(spec.restart_policy, "Always");
    assert_eq!(spec.dns_policy, "ClusterFirst");
    assert_eq!(spec.scheduler_name, "default-scheduler");
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(
        spec.priority, None,
        "priority is resolved by admission, not defaulting"
    );
    assert_eq!(spec.enable_service_links, None);
    assert!(spec.volumes[0].empty_dir.is_some());
    let (a, b) = (&spec.containers[0], &spec.containers[1]);
    assert_eq!(a.image_pull_policy, "Always");
    assert_eq!(b.image_pull_policy, "IfNotPresent");
    assert_eq!(a.termination_message_path, "/dev/termination-log");
    assert_eq!(a.termination_message_policy, "File");
    assert_eq!(b.ports[0].protocol, "TCP");
    assert_eq!(b.ports[0].host_port, 0);
    assert_eq!(
        b.resources.requests, b.resources.limits,
        "requests default to limits"
    );
    let probe = b.liveness_probe.as_ref().unwrap();
    assert_eq!(
        (
            probe.timeout_seconds,
            probe.period_seconds,
            probe.success_threshold,
            probe.failure_threshold
        ),
        (Some(1), Some(10), Some(1), Some(3))
    );
    let get = probe.http_get.as_ref().unwrap();
    assert_eq!((get.path.as_str(), get.scheme.as_str()), ("/", "HTTP"));
    assert_eq!(pod.status.phase, "Pending");
    assert_eq!(pod.status.qos_class, "Burstable");
}

#[test]
fn host_network_ports_default_host_port() {
    let mut spec = web_pod_spec();
    spec.host_network = true;
    spec.apply_defaults();
    assert_eq!(spec.containers[0].ports[0].host_port, 8080);
}

#[test]
fn workload_defaults() {
    let d = defaulted(deployment());
    assert_eq!(d.spec.replicas, Some(3));
    assert_eq!(d.spec.revision_history_limit, Some(10));
    assert_eq!(d.spec.progress_deadline_seconds, Some(600));
    assert_eq!(d.spec.min_ready_seconds, 0);
    assert_eq!(d.spec.strategy.type_, "RollingUpdate");
    let rolling = d.spec.strategy.rolling_update.as_ref().unwrap();
    assert_eq!(rolling.max_surge, Some(IntOrString::from("25%")));
    assert_eq!(rolling.max_unavailable, Some(IntOrString::from("25%")));
    assert_eq!(d.spec.template.spec.restart_policy, "Always");
    assert_eq!(
        d.spec.template.spec.containers[0].image_pull_policy,
        "IfNotPresent"
    );
    // Templates keep requests as written: only Pods default requests from limits.
    assert_eq!(
        d.spec.template.spec.containers[0].resources,
        web_container().resources
    );
    assert_eq!(d.rollout_budget(), (1, 0));

    let mut recreate = deployment();
    recreate.spec.strategy.type_ = "Recreate".into();
    recreate.apply_defaults();
    assert_eq!(recreate.spec.strategy.rolling_update, None);

    let mut rs = replicaset();
    rs.spec.replicas = None;
    rs.apply_defaults();
    assert_eq!(rs.spec.replicas, Some(1));

    let ds = defaulted(daemonset());
    assert_eq!(ds.spec.update_strategy.type_, "RollingUpdate");
    let rolling = ds.spec.update_strategy.rolling_update.as_ref().unwrap();
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(1)));
    assert_eq!(ds.spec.revision_history_limit, Some(10));
}

#[test]
fn job_defaults() {
    let mut single = job();
    single.spec.completions = None;
    single.spec.parallelism = None;
    single.apply_defaults();
    assert_eq!(
        (single.spec.completions, single.spec.parallelism),
        (Some(1), Some(1))
    );
    assert_eq!(single.spec.backoff_limit, Some(6));
    assert_eq!(single.spec.completion_mode, "NonIndexed");
    assert_eq!(single.spec.suspend, Some(false));

    // Parallelism alone is the work-queue pattern: completions stays unset.
    let mut queue = job();
    queue.spec.completions = None;
    queue.spec.parallelism = Some(5);
    queue.apply_defaults();
    assert_eq!(
        (queue.spec.completions, queue.spec.parallelism),
        (None, Some(5))
    );

    // The selector is generated from the uid and the template labelled to match it.
    let j = defaulted(job());
    let selector = j.spec.selector.as_ref().expect("generated selector");
    assert_eq!(
        selector
            .match_labels
            .get("batch.kubernetes.io/controller-uid")
            .map(String::as_str),
        Some("uid-report-2024-04")
    );
    assert!(selector.matches(&j.spec.template.metadata.labels));
    assert_eq!(
        j.spec
            .template
            .metadata
            .labels
            .get("job-name")
            .map(String::as_str),
        Some("report-2024-04")
    );
    assert_eq!(
        j.metadata.labels,
        labels(&[("app", "report")]),
        "job labels copied from template"
    );

    let mut manual = job();
    manual.spec.manual_selector = Some(true);
    manual.apply_defaults();
    assert_eq!(manual.spec.selector, None);
}

#[test]
fn service_and_other_defaults() {
    let svc = defaulted(service());
    assert_eq!(svc.spec.type_, "ClusterIP");
    assert_eq!(svc.spec.session_affinity, "None");
    assert_eq!(svc.spec.ports[0].protocol, "TCP");
    assert_eq!(svc.spec.ports[0].target_port, IntOrString::from("http"));
    assert_eq!(svc.spec.ports[1].target_port, IntOrString::Int(9090));
    assert_eq!(svc.spec.cluster_ips, vec!["10.96.0.42".to_string()]);

    let mut sticky = service();
    sticky.spec.session_affinity = "ClientIP".into();
    sticky.apply_defaults();
    let timeout = sticky
        .spec
        .session_affinity_config
        .and_then(|c| c.client_ip)
        .and_then(|c| c.timeout_seconds);
    assert_eq!(timeout, Some(10800));

    let ep = defaulted(endpoints());
    assert!(ep.subsets[0].ports.iter().all(|p| p.protocol == "TCP"));

    let n = defaulted(node());
    assert_eq!(n.status.allocatable, n.status.capacity);
    assert_eq!(n.spec.pod_cidrs, vec!["10.244.1.0/24".to_string()]);

    let h = defaulted(hpa());
    let behavior = h.spec.behavior.as_ref().unwrap();
    let up = behavior.scale_up.as_ref().unwrap();
    assert_eq!(
        (
            up.stabilization_window_seconds,
            up.select_policy.as_str(),
            up.policies.len()
        ),
        (Some(0), "Max", 2)
    );
    let down = behavior.scale_down.as_ref().unwrap();
    assert_eq!(
        (
            down.stabilization_window_seconds,
            down.select_policy.as_str()
        ),
        (Some(120), "Max")
    );

    let mut bare = hpa();
    bare.spec.min_replicas = None;
    bare.spec.metrics.clear();
    bare.spec.behavior = None;
    bare.apply_defaults();
    assert_eq!(bare.spec.min_replicas, Some(1));
    let cpu = bare.spec.metrics[0].resource.as_ref().unwrap();
    assert_eq!(
        (cpu.name.as_str(), cpu.target.average_utilization),
        ("cpu", Some(80))
    );
    assert_eq!(bare.spec.behavior, None);
}

#[test]
fn pod_helpers() {
    let p = defaulted(pod());
    assert!(p.is_ready());
    assert_eq!(p.phase(), "Running");
    assert!(!p.is_terminal());
    assert_eq!(p.controller_uid(), Some("uid-web-7d4b9c"));
    // web requests 100m/128Mi; the init container's 1 cpu dominates, its 64Mi does not.
    let total = p.requests_total();
    assert_eq!(total.get("cpu"), Some(&q("1")));
    assert_eq!(total.get("memory"), Some(&q("128Mi")));
    assert_eq!(p.compute_qos_class(), "Burstable");

    // A sidecar keeps running: its 500m adds to the app's 100m and to the init container
    // started after it (500m + 1 = 1500m), which is now the peak.
    let mut with_sidecar = p.clone();
    let mut sidecar = with_sidecar.spec.init_containers[0].clone();
    sidecar.name = "proxy".into();
    sidecar.restart_policy = "Always".into();
    sidecar.resources.requests = resources(&[("cpu", "500m"), ("memory", "256Mi")]);
    with_sidecar.spec.init_containers.insert(0, sidecar);
    let total = with_sidecar.requests_total();
    assert_eq!(total.get("cpu"), Some(&q("1500m")));
    assert_eq!(total.get("memory"), Some(&q("384Mi")));

    let mut guaranteed = Pod::default();
    guaranteed.spec.containers = vec![Container {
        name: "a".into(),
        image: "x:1".into(),
        resources: ResourceRequirements {
            limits: resources(&[("cpu", "1"), ("memory", "1Gi")]),
            ..Default::default()
        },
        ..Default::default()
    }];
    guaranteed.apply_defaults();
    assert_eq!(guaranteed.status.qos_class, "Guaranteed");
    let mut best_effort = Pod::default();
    best_effort.spec.containers = vec![Container {
        name: "a".into(),
        image: "x:1".into(),
        ..Default::default()
    }];
    assert_eq!(best_effort.compute_qos_class(), "BestEffort");

    let mut done = p.clone();
    done.status.phase = "Succeeded".into();
    done.status.conditions = vec![Condition {
        type_: "Ready".into(),
        status: "False".into(),
        ..Default::default()
    }];
    assert!(done.is_terminal());
    assert!(!done.is_ready());
}

#[test]
fn other_helpers() {
    let n = defaulted(node());
    assert!(n.is_ready());
    assert!(n.is_schedulable());
    assert_eq!(n.address("InternalIP"), Some("10.0.0.11"));
    let p = pod();
    let taint = &n.spec.taints[0];
    assert!(p.spec.tolerations.iter().any(|t| t.tolerates(taint)));

    let svc = service();
    assert!(svc.selects(&web_labels()));
    assert!(!svc.is_headless());

    let l = lease();
    assert_eq!(l.expires_at(), Some(time("2024-05-01T10:00:15.654321Z")));
    assert!(!l.is_available(time("2024-05-01T10:00:10Z")));
    assert!(l.is_available(time("2024-05-01T10:00:20Z")));

    let mut j = job();
    assert!(!j.is_finished());
    j.status.conditions = vec![Condition {
        type_: "Complete".into(),
        status: "True".into(),
        ..Default::default()
    }];
    assert!(j.is_finished());
}

#[test]
fn field_values_for_field_selectors() {
    let p = defaulted(pod());
    assert_eq!(p.field_value("spec.nodeName").as_deref(), Some("node-a"));
    assert_eq!(
        p.field_value("spec.schedulerName").as_deref(),
        Some("default-scheduler")
    );
    assert_eq!(
        p.field_value("spec.restartPolicy").as_deref(),
        Some("Always")
    );
    assert_eq!(p.field_value("status.phase").as_deref(), Some("Running"));
    assert_eq!(
        p.field_value("status.podIP").as_deref(),
        Some("10.244.1.17")
    );
    assert_eq!(
        p.field_value("metadata.name").as_deref(),
        Some("web-7d4b9c-x2x1z")
    );
    assert_eq!(p.field_value("spec.containers"), None);

    let mut n = node();
    assert_eq!(
        n.field_value("spec.unschedulable").as_deref(),
        Some("false")
    );
    n.spec.unschedulable = true;
    assert_eq!(n.field_value("spec.unschedulable").as_deref(), Some("true"));

    let e = event();
    for (field, want) in [
        ("involvedObject.kind", "Pod"),
        ("involvedObject.name", "web-7d4b9c-x2x1z"),
        ("involvedObject.namespace", "default"),
        ("involvedObject.uid", "uid-web-7d4b9c-x2x1z"),
        ("reason", "Scheduled"),
        ("type", "Normal"),
    ] {
        assert_eq!(e.field_value(field).as_deref(), Some(want), "{field}");
    }
    assert_eq!(deployment().field_value("spec.replicas"), None);
}

fn update_fields<T: Resource>(new: &T, old: &T) -> Vec<String> {
    new.validate_update(old)
        .into_iter()
        .map(|c| c.field)
        .collect()
}

#[test]
fn pod_updates() {
    let old = defaulted(pod());

    let mut image = old.clone();
    image.spec.containers[0].image = "registry.shoal.local:5000/web:1.4.3".into();
    image.spec.init_containers[0].image = "registry.shoal.local:5000/web:1.4.3".into();
    image.spec.active_deadline_seconds = Some(600);
    image.spec.tolerations.push(Toleration {
        key: "gpu".into(),
        operator: "Exists".into(),
        ..Default::default()
    });
    assert!(update_fields(&image, &old).is_empty());

    let mut shorter = image.clone();
    shorter.spec.active_deadline_seconds = Some(300);
    assert!(update_fields(&shorter, &image).is_empty());
    let mut longer = image.clone();
    longer.spec.active_deadline_seconds = Some(900);
    assert_eq!(
        update_fields(&longer, &image),
        ["spec.activeDeadlineSeconds"]
    );

    let mut removed = old.clone();
    removed.spec.tolerations.pop();
    assert_eq!(update_fields(&removed, &old), ["spec.tolerations"]);

    let mut env = old.clone();
    env.spec.containers[0].env.clear();
    let causes = env.validate_update(&old);
    assert_eq!(causes.len(), 1);
    assert_eq!(
        (causes[0].field.as_str(), causes[0].reason.as_str()),
        ("spec", "FieldValueForbidden")
    );

    // nodeName: set once by binding, never moved.
    let mut unbound = old.clone();
    unbound.spec.node_name.clear();
    assert!(update_fields(&old, &unbound).is_empty());
    let mut moved = old.clone();
    moved.spec.node_name = "node-b".into();
    assert_eq!(update_fields(&moved, &old), ["spec.nodeName"]);
}

#[test]
fn immutable_fields_of_other_kinds() {
    let old = defaulted(deployment());
    let mut scaled = old.clone();
    scaled.spec.replicas = Some(10);
    scaled.spec.template.spec.containers[0].image = "web:2".into();
    assert!(update_fields(&scaled, &old).is_empty());
    let mut reselected = old.clone();
    reselected.spec.selector = Some(bus_schemas::selector::LabelSelector {
        match_labels: labels(&[("app", "web"), ("tier", "frontend")]),
        ..Default::default()
    });
    assert_eq!(update_fields(&reselected, &old), ["spec.selector"]);

    let old_rs = defaulted(replicaset());
    let mut rs = old_rs.clone();
    rs.spec.selector = None;
    assert_eq!(update_fields(&rs, &old_rs), ["spec.selector"]);

    let old_ds = defaulted(daemonset());
    let mut ds = old_ds.clone();
    ds.spec.selector = Some(web_selector());
    assert_eq!(update_fields(&ds, &old_ds), ["spec.selector"]);

    let old_svc = defaulted(service());
    let mut svc = old_svc.clone();
    svc.spec.cluster_ip = "10.96.0.43".into();
    assert_eq!(update_fields(&svc, &old_svc), ["spec.clusterIP"]);
    // A re-applied manifest without the allocated clusterIP keeps it.
    let mut reapplied = service();
    reapplied.spec.cluster_ip.clear();
    reapplied.apply_defaults();
    reapplied.carry_allocated_from(&old_svc);
    assert!(update_fields(&reapplied, &old_svc).is_empty());
    assert_eq!(reapplied.spec.cluster_ip, "10.96.0.42");

    let old_job = defaulted(job());
    let mut j = old_job.clone();
    j.spec.parallelism = Some(4);
    j.spec.suspend = Some(true);
    assert!(update_fields(&j, &old_job).is_empty());
    j.spec.completions = Some(8);
    j.spec.template.spec.containers[0].image = "report:2".into();
    assert_eq!(
        update_fields(&j, &old_job),
        ["spec.completions", "spec.template"]
    );

    let old_node = defaulted(node());
    let mut n = old_node.clone();
    n.spec.unschedulable = true;
    assert!(update_fields(&n, &old_node).is_empty());
    n.spec.pod_cidr = "10.244.9.0/24".into();
    assert_eq!(update_fields(&n, &old_node), ["spec.podCIDR"]);

    let old_pc = defaulted(priorityclass());
    let mut pc = old_pc.clone();
    pc.description = "changed".into();
    assert!(update_fields(&pc, &old_pc).is_empty());
    pc.value = 5;
    assert_eq!(update_fields(&pc, &old_pc), ["value"]);
}
