//! Validation with exact field paths, strict decoding, and real kubectl manifests.

mod fixtures;

use bus_schemas::codec::from_json_value_strict;
use bus_schemas::kinds::container::ContainerPort;
use bus_schemas::kinds::pod_spec::Volume;
use bus_schemas::kinds::probe::{ExecAction, Probe, TcpSocketAction};
use bus_schemas::kinds::*;
use bus_schemas::{Cause, Resource};
use fixtures::*;
use serde_json::json;

fn causes_of<T: Resource>(mut obj: T) -> Vec<Cause> {
    obj.apply_defaults();
    obj.validate_kind()
}

fn fields(causes: &[Cause]) -> Vec<&str> {
    causes.iter().map(|c| c.field.as_str()).collect()
}

fn has(causes: &[Cause], field: &str, reason: &str) -> bool {
    causes
        .iter()
        .any(|c| c.field == field && c.reason == reason)
}

#[track_caller]
fn assert_cause(causes: &[Cause], field: &str, reason: &str) {
    assert!(
        has(causes, field, reason),
        "no {reason} at {field} in {causes:#?}"
    );
}

#[test]
fn pod_needs_containers() {
    let mut p = pod();
    p.spec.containers.clear();
    p.spec.init_containers.clear();
    let causes = causes_of(p);
    assert_eq!(fields(&causes), ["spec.containers"]);
    assert_eq!(causes[0].reason, "FieldValueRequired");
}

#[test]
fn invalid_containers() {
    let mut p = pod();
    let mut second = web_container();
    second.name = "web".into();
    second.image = String::new();
    second.ports = vec![
        ContainerPort {
            name: "http".into(),
            container_port: 0,
            ..Default::default()
        },
        ContainerPort {
            name: "http".into(),
            container_port: 9090,
            protocol: "HTTP".into(),
            ..Default::default()
        },
        ContainerPort {
            name: "way-too-long-port".into(),
            container_port: 70000,
            ..Default::default()
        },
    ];
    second.env[0].name = "1BAD".into();
    second.volume_mounts[0].name = "missing".into();
    p.spec.containers.push(second);
    p.spec.init_containers[0].name = "Migrate".into();
    let causes = causes_of(p);
    let want = [
        ("spec.initContainers[0].name", "FieldValueInvalid"),
        ("spec.containers[1].name", "FieldValueDuplicate"),
        ("spec.containers[1].image", "FieldValueRequired"),
        (
            "spec.containers[1].ports[0].containerPort",
            "FieldValueInvalid",
        ),
        ("spec.containers[1].ports[1].name", "FieldValueDuplicate"),
        (
            "spec.containers[1].ports[1].protocol",
            "FieldValueNotSupported",
        ),
        ("spec.containers[1].ports[2].name", "FieldValueInvalid"),
        (
            "spec.containers[1].ports[2].containerPort",
            "FieldValueInvalid",
        ),
        ("spec.containers[1].env[0].name", "FieldValueInvalid"),
        (
            "spec.containers[1].volumeMounts[0].name",
            "FieldValueNotFound",
        ),
    ];
    for (field, reason) in want {
        assert_cause(&causes, field, reason);
    }
    assert_eq!(causes.len(), want.len(), "{causes:#?}");
}

#[test]
fn invalid_resources_and_probes() {
    let mut p = pod();
    let web = &mut p.spec.containers[0];
    web.resources.requests.insert("cpu".into(), q("2"));
    web.resources.limits.insert("memory".into(), q("-1Mi"));
    web.liveness_probe = Some(Probe {
        exec: Some(ExecAction {
            command: vec!["true".into()],
        }),
        tcp_socket: Some(TcpSocketAction {
            port: 8080.into(),
            host: String::new(),
        }),
        failure_threshold: Some(-1),
        ..Default::default()
    });
    web.readiness_probe = Some(Probe::default());
    let causes = causes_of(p);
    let want = [
        (
            "spec.containers[0].resources.limits[memory]",
            "FieldValueInvalid",
        ),
        (
            "spec.containers[0].resources.requests[cpu]",
            "FieldValueInvalid",
        ),
        (
            "spec.containers[0].livenessProbe.tcpSocket",
            "FieldValueForbidden",
        ),
        (
            "spec.containers[0].livenessProbe.failureThreshold",
            "FieldValueInvalid",
        ),
        ("spec.containers[0].readinessProbe", "FieldValueRequired"),
    ];
    for (field, reason) in want {
        assert_cause(&causes, field, reason);
    }
    let cpu = causes
        .iter()
        .find(|c| c.field.ends_with("requests[cpu]"))
        .unwrap();
    assert_eq!(
        cpu.message,
        "Invalid value: \"2\": must be less than or equal to cpu limit of 500m"
    );
}

#[test]
fn invalid_pod_level_fields() {
    let mut p = pod();
    p.spec.restart_policy = "Sometimes".into();
    p.spec.volumes.push(Volume {
        name: "cache".into(),
        ..Default::default()
    });
    p.spec.volumes[0].host_path = Some(Default::default());
    p.spec.tolerations.push(Toleration {
        key: "x".into(),
        operator: "Exists".into(),
        value: "y".into(),
        effect: "NoWay".into(),
        ..Default::default()
    });
    p.spec.node_selector.insert("bad key".into(), "v".into());
    let causes = causes_of(p);
    for (field, reason) in [
        ("spec.restartPolicy", "FieldValueNotSupported"),
        ("spec.volumes[2].name", "FieldValueDuplicate"),
        ("spec.volumes[0].hostPath", "FieldValueForbidden"),
        ("spec.volumes[0].hostPath.path", "FieldValueRequired"),
        ("spec.tolerations[2].operator", "FieldValueInvalid"),
        ("spec.tolerations[2].effect", "FieldValueNotSupported"),
        ("spec.nodeSelector[bad key]", "FieldValueInvalid"),
    ] {
        assert_cause(&causes, field, reason);
    }
}

#[test]
fn invalid_affinity() {
    let mut p = pod();
    let affinity = p.spec.affinity.as_mut().unwrap();
    let node = affinity.node_affinity.as_mut().unwrap();
    node.required_during_scheduling_ignored_during_execution
        .as_mut()
        .unwrap()
        .node_selector_terms[0]
        .match_expressions[0]
        .operator = "Exists".into();
    node.preferred_during_scheduling_ignored_during_execution[0].weight = 0;
    let anti = affinity.pod_anti_affinity.as_mut().unwrap();
    anti.preferred_during_scheduling_ignored_during_execution[0]
        .pod_affinity_term
        .topology_key
        .clear();
    let causes = causes_of(p);
    let base = "spec.affinity.nodeAffinity";
    assert_eq!(
        fields(&causes),
        [
            format!("{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values").as_str(),
            format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[0].weight").as_str(),
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey",
        ]
    );
}

#[test]
fn deployment_selector_must_match_template() {
    let mut d = deployment();
    d.spec.selector = Some(bus_schemas::selector::LabelSelector {
        match_labels: labels(&[("app", "api")]),
        ..Default::default()
    });
    let causes = causes_of(d);
    assert_eq!(fields(&causes), ["spec.template.metadata.labels"]);
    assert_eq!(
        causes[0].message,
        "Invalid value: \"map[app:web tier:frontend]\": `selector` does not match template `labels`"
    );

    let mut empty = deployment();
    empty.spec.selector = Some(Default::default());
    assert_eq!(fields(&causes_of(empty)), ["spec.selector"]);
    let mut missing = deployment();
    missing.spec.selector = None;
    let causes = causes_of(missing);
    assert_eq!(fields(&causes), ["spec.selector"]);
    assert_eq!(causes[0].reason, "FieldValueRequired");
}

#[test]
fn deployment_fields() {
    let mut d = deployment();
    d.spec.replicas = Some(-1);
    d.spec.template.spec.restart_policy = "Never".into();
    d.spec.template.spec.containers[0].ports[0].container_port = 99999;
    d.spec
        .template
        .metadata
        .labels
        .insert("bad/key/x".into(), "v".into());
    d.spec.strategy.rolling_update =
        Some(bus_schemas::kinds::deployment::RollingUpdateDeployment {
            max_unavailable: Some(0.into()),
            max_surge: Some("0%".into()),
        });
    let causes = causes_of(d);
    assert_eq!(
        fields(&causes),
        [
            "spec.replicas",
            "spec.template.metadata.labels[bad/key/x]",
            "spec.template.spec.containers[0].ports[0].containerPort",
            "spec.template.spec.restartPolicy",
            "spec.strategy.rollingUpdate.maxUnavailable",
        ]
    );

    let mut recreate = deployment();
    recreate.spec.strategy.type_ = "Recreate".into();
    recreate.spec.strategy.rolling_update = Some(Default::default());
    assert_eq!(
        fields(&causes_of(recreate)),
        ["spec.strategy.rollingUpdate"]
    );

    let mut pct = deployment();
    pct.spec.strategy.rolling_update =
        Some(bus_schemas::kinds::deployment::RollingUpdateDeployment {
            max_unavailable: Some("150%".into()),
            max_surge: Some("ten".into()),
        });
    assert_eq!(
        fields(&causes_of(pct)),
        [
            "spec.strategy.rollingUpdate.maxUnavailable",
            "spec.strategy.rollingUpdate.maxSurge"
        ]
    );
}

#[test]
fn service_ports() {
    let mut svc = service();
    svc.spec.ports[0].port = 0;
    svc.spec.ports[1].name = String::new();
    svc.spec
        .ports
        .push(bus_schemas::kinds::service::ServicePort {
            name: "http".into(),
            port: 70000,
            protocol: "ICMP".into(),
            target_port: "Not_A_Name".into(),
            ..Default::default()
        });
    let causes = causes_of(svc);
    assert_eq!(
        fields(&causes),
        [
            "spec.ports[0].port",
            "spec.ports[1].name",
            "spec.ports[2].name",
            "spec.ports[2].port",
            "spec.ports[2].protocol",
            "spec.ports[2].targetPort",
        ]
    );
    assert_eq!(
        causes[0].message,
        "Invalid value: 0: must be between 1 and 65535, inclusive"
    );
    assert_eq!(causes[2].reason, "FieldValueDuplicate");
}

#[test]
fn service_types_and_ips() {
    let mut node_port = service();
    node_port.spec.type_ = "NodePort".into();
    node_port.spec.cluster_ip = "10.96.0.300".into();
    node_port
        .spec
        .selector
        .insert("app".into(), "not valid!".into());
    let causes = causes_of(node_port);
    assert_eq!(
        fields(&causes),
        [
            "spec.type",
            "spec.clusterIP",
            "spec.clusterIPs[0]",
            "spec.selector[app]"
        ]
    );

    let mut headless = service();
    headless.spec.cluster_ip = "None".into();
    headless.spec.ports.clear();
    assert!(causes_of(headless).is_empty());

    let mut external = service();
    external.spec.type_ = "ExternalName".into();
    external.spec.cluster_ip.clear();
    external.spec.external_name = "db.example.com".into();
    assert!(causes_of(external).is_empty());
}

#[test]
fn job_rejects_restart_always() {
    let mut j = job();
    j.spec.template.spec.restart_policy = "Always".into();
    let causes = causes_of(j);
    assert_eq!(fields(&causes), ["spec.template.spec.restartPolicy"]);
    assert_eq!(causes[0].reason, "FieldValueNotSupported");
    assert!(
        causes[0].message.contains("OnFailure, Never"),
        "{}",
        causes[0].message
    );

    // An unknown policy is reported once, not again by the workload rule.
    let mut bogus = job();
    bogus.spec.template.spec.restart_policy = "Sometimes".into();
    let causes = causes_of(bogus);
    assert_eq!(fields(&causes), ["spec.template.spec.restartPolicy"]);
    assert!(
        causes[0].message.contains("Always, OnFailure, Never"),
        "{}",
        causes[0].message
    );

    // Unset restartPolicy defaults to Always, which a Job cannot use (as in Kubernetes).
    let mut unset = job();
    unset.spec.template.spec.restart_policy.clear();
    assert_eq!(
        fields(&causes_of(unset)),
        ["spec.template.spec.restartPolicy"]
    );

    let mut indexed = job();
    indexed.spec.completions = None;
    indexed.spec.completion_mode = "Indexed".into();
    indexed.spec.backoff_limit = Some(-1);
    assert_eq!(
        fields(&causes_of(indexed)),
        ["spec.backoffLimit", "spec.completions"]
    );

    let mut manual = job();
    manual.spec.manual_selector = Some(true);
    assert_eq!(fields(&causes_of(manual)), ["spec.selector"]);
}

// Every target must be positive, every behavior field within Kubernetes' bounds, and the
// metric type one Kubernetes knows; each cause names its field.
#[test]
fn hpa_targets_behavior_and_metric_types_name_their_fields() {
    let h = from_json_value_strict::<HorizontalPodAutoscaler>(json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 5,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 0}}},
                {"type": "Pods", "pods": {"metric": {"name": "rps"},
                    "target": {"type": "AverageValue", "averageValue": "-1"}}},
                {"type": "External", "external": {"metric": {"name": "queue"},
                    "target": {"type": "Value", "value": "0"}}},
                {"type": "Magic"}
            ],
            "behavior": {
                "scaleUp": {"selectPolicy": "Biggest", "stabilizationWindowSeconds": 7200,
                    "policies": [{"type": "Bananas", "value": 0, "periodSeconds": 0}]}
            }
        }
    }))
    .expect("decodes: every field is known");
    let causes = causes_of(h);
    assert_cause(
        &causes,
        "spec.metrics[0].resource.target.averageUtilization",
        "FieldValueInvalid",
    );
    assert_cause(
        &causes,
        "spec.metrics[1].pods.target.averageValue",
        "FieldValueInvalid",
    );
    assert_cause(
        &causes,
        "spec.metrics[2].external.target.value",
        "FieldValueInvalid",
    );
    assert_cause(&causes, "spec.metrics[3].type", "FieldValueNotSupported");
    for (field, reason) in [
        (
            "spec.behavior.scaleUp.selectPolicy",
            "FieldValueNotSupported",
        ),
        (
            "spec.behavior.scaleUp.stabilizationWindowSeconds",
            "FieldValueInvalid",
        ),
        (
            "spec.behavior.scaleUp.policies[0].type",
            "FieldValueNotSupported",
        ),
        (
            "spec.behavior.scaleUp.policies[0].value",
            "FieldValueInvalid",
        ),
        (
            "spec.behavior.scaleUp.policies[0].periodSeconds",
            "FieldValueInvalid",
        ),
    ] {
        assert_cause(&causes, field, reason);
    }
    let positive = causes
        .iter()
        .find(|c| c.field == "spec.metrics[1].pods.target.averageValue")
        .unwrap();
    assert!(
        positive.message.contains("must be positive"),
        "{positive:?}"
    );
}

#[test]
fn hpa_bounds() {
    let mut h = hpa();
    h.spec.min_replicas = Some(5);
    h.spec.max_replicas = 3;
    let causes = causes_of(h);
    assert_eq!(fields(&causes), ["spec.maxReplicas"]);
    assert_eq!(
        causes[0].message,
        "Invalid value: 3: must be greater than or equal to `minReplicas`"
    );

    let mut zero = hpa();
    zero.spec.min_replicas = Some(0);
    zero.spec.max_replicas = 0;
    zero.spec.scale_target_ref.name.clear();
    assert_eq!(
        fields(&causes_of(zero)),
        [
            "spec.scaleTargetRef.name",
            "spec.minReplicas",
            "spec.maxReplicas"
        ]
    );

    // minReplicas 0 (scale to zero) only with a metric that does not come from the pods.
    let mut to_zero = hpa();
    to_zero.spec.min_replicas = Some(0);
    let causes = causes_of(to_zero.clone());
    assert_eq!(fields(&causes), ["spec.minReplicas"]);
    assert!(
        causes[0].message.contains("Object or External"),
        "{causes:?}"
    );
    to_zero
        .spec
        .metrics
        .push(bus_schemas::kinds::hpa::MetricSpec {
            type_: "External".into(),
            external: Some(bus_schemas::kinds::hpa::ExternalMetricSource {
                metric: bus_schemas::kinds::hpa::MetricIdentifier {
                    name: "queue".into(),
                    selector: None,
                },
                target: bus_schemas::kinds::hpa::MetricTarget {
                    type_: "AverageValue".into(),
                    average_value: Some(bus_schemas::quantity::Quantity::parse("30").unwrap()),
                    ..Default::default()
                },
            }),
            ..Default::default()
        });
    assert_eq!(fields(&causes_of(to_zero.clone())), Vec::<String>::new());

    // The built-in lag metric names its consumer; an activation threshold is a quantity.
    let mut lag = to_zero;
    lag.spec.metrics[2].external.as_mut().unwrap().metric.name = "jetstream_consumer_lag".into();
    lag.metadata.annotations.insert(
        "autoscaling.shoal.io/activation-threshold".into(),
        "lots".into(),
    );
    let causes = causes_of(lag.clone());
    assert_eq!(
        fields(&causes),
        [
            "metadata.annotations[autoscaling.shoal.io/activation-threshold]",
            "spec.metrics[2].external.metric.selector.matchLabels.stream",
            "spec.metrics[2].external.metric.selector.matchLabels.consumer"
        ]
    );
    lag.metadata.annotations.insert(
        "autoscaling.shoal.io/activation-threshold".into(),
        "2.5".into(),
    );
    lag.spec.metrics[2]
        .external
        .as_mut()
        .unwrap()
        .metric
        .selector = Some(bus_schemas::selector::LabelSelector {
        match_labels: [("stream", "JOBS"), ("consumer", "worker")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    });
    assert_eq!(fields(&causes_of(lag)), Vec::<String>::new());

    let mut metrics = hpa();
    metrics.spec.metrics[0].type_ = "Pods".into();
    metrics.spec.metrics[1]
        .resource
        .as_mut()
        .unwrap()
        .target
        .type_ = "Value".into();
    assert_eq!(
        fields(&causes_of(metrics)),
        [
            "spec.metrics[0].resource",
            "spec.metrics[0].pods",
            "spec.metrics[1].resource.target.type"
        ]
    );
}

#[test]
fn other_kinds_validate() {
    let mut ep = endpoints();
    ep.subsets[0].addresses[0].ip = "10.244.1.300".into();
    ep.subsets[0].not_ready_addresses[0].ip = "127.0.0.1".into();
    ep.subsets[0].ports[1].name.clear();
    assert_eq!(
        fields(&causes_of(ep)),
        [
            "subsets[0].addresses[0].ip",
            "subsets[0].notReadyAddresses[0].ip",
            "subsets[0].ports[1].name"
        ]
    );

    let mut ev = event();
    ev.type_ = "Info".into();
    ev.involved_object.namespace = "other".into();
    assert_eq!(fields(&causes_of(ev)), ["type", "involvedObject.namespace"]);

    let mut n = node();
    n.spec.taints.push(n.spec.taints[0].clone());
    n.spec.taints.push(bus_schemas::kinds::node::Taint {
        key: "k".into(),
        effect: "Sometimes".into(),
        ..Default::default()
    });
    n.spec.pod_cidr = "10.244.1.0/40".into();
    assert_eq!(
        fields(&causes_of(n)),
        [
            "spec.taints[1]",
            "spec.taints[2].effect",
            "spec.podCIDR",
            "spec.podCIDRs[0]"
        ]
    );

    let mut pc = priorityclass();
    pc.value = 1_000_000_001;
    assert_eq!(fields(&causes_of(pc)), ["value"]);
    let mut system = priorityclass();
    system.metadata.name = "system-node-critical".into();
    system.value = 2_000_001_000;
    assert!(causes_of(system.clone()).is_empty());
    system.metadata.name = "system-mine".into();
    assert_eq!(fields(&causes_of(system)), ["metadata.name"]);

    let mut l = lease();
    l.spec.lease_duration_seconds = Some(0);
    assert_eq!(fields(&causes_of(l)), ["spec.leaseDurationSeconds"]);
}

#[test]
fn strict_decoding_names_the_unknown_field() {
    let causes = from_json_value_strict::<Pod>(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "imagee": "nginx"}]}
    }))
    .unwrap_err();
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].field, "spec.containers[0].imagee");
    assert_eq!(causes[0].reason, "FieldValueUnknown");

    let causes = from_json_value_strict::<Pod>(json!({
        "spec": {"containers": [{"name": "web", "image": "nginx",
            "livenessProbe": {"httpGet": {"port": 80, "paht": "/"}}}]}
    }))
    .unwrap_err();
    assert_eq!(
        fields(&causes),
        ["spec.containers[0].livenessProbe.httpGet.paht"]
    );
}

#[test]
fn strict_decoding_names_the_mistyped_field() {
    let causes = from_json_value_strict::<Deployment>(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": "three"}
    }))
    .unwrap_err();
    assert_eq!(causes.len(), 1);
    assert!(causes[0].field.contains("spec.replicas"), "{causes:?}");
    assert_eq!(causes[0].reason, "FieldValueTypeInvalid");

    let causes = from_json_value_strict::<Service>(json!({
        "spec": {"ports": [{"port": 80, "targetPort": [8080]}]}
    }))
    .unwrap_err();
    assert!(
        causes[0].field.contains("spec.ports[0].targetPort"),
        "{causes:?}"
    );
}

const MANIFEST: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels:
    app: web
  annotations:
    deployment.kubernetes.io/revision: "1"
spec:
  replicas: 3
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      app: web
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  template:
    metadata:
      labels:
        app: web
        tier: frontend
    spec:
      terminationGracePeriodSeconds: 20
      containers:
        - name: web
          image: nginx:1.25.4
          imagePullPolicy: IfNotPresent
          args: ["-g", "daemon off;"]
          ports:
            - name: http
              containerPort: 80
              protocol: TCP
          env:
            - name: NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
            - name: MODE
              value: production
          resources:
            requests:
              cpu: 100m
              memory: 128Mi
            limits:
              cpu: "1"
              memory: 512Mi
          livenessProbe:
            httpGet:
              path: /healthz
              port: http
              httpHeaders:
                - name: X-Probe
                  value: liveness
            initialDelaySeconds: 10
            periodSeconds: 15
          readinessProbe:
            tcpSocket:
              port: 80
            periodSeconds: 5
            failureThreshold: 2
          startupProbe:
            exec:
              command: ["cat", "/tmp/started"]
            failureThreshold: 30
            periodSeconds: 2
          volumeMounts:
            - name: cache
              mountPath: /var/cache/nginx
          securityContext:
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
              add: ["NET_BIND_SERVICE"]
      volumes:
        - name: cache
          emptyDir:
            sizeLimit: 1Gi
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                labelSelector:
                  matchExpressions:
                    - key: app
                      operator: In
                      values: [web]
                topologyKey: kubernetes.io/hostname
      tolerations:
        - key: node.kubernetes.io/not-ready
          operator: Exists
          effect: NoExecute
          tolerationSeconds: 60
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
spec:
  type: ClusterIP
  selector:
    app: web
  ports:
    - name: http
      port: 80
      targetPort: http
    - name: https
      port: 443
      targetPort: 8443
      protocol: TCP
  sessionAffinity: ClientIP
  sessionAffinityConfig:
    clientIP:
      timeoutSeconds: 3600
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: web
  minReplicas: 3
  maxReplicas: 12
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 60
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 300
      policies:
        - type: Percent
          value: 10
          periodSeconds: 60
"#;

#[test]
fn kubectl_manifest_decodes_strictly_and_validates() {
    use serde::Deserialize;
    let docs: Vec<serde_json::Value> = serde_norway::Deserializer::from_str(MANIFEST)
        .map(|doc| serde_json::Value::deserialize(doc).expect("yaml"))
        .collect();
    assert_eq!(docs.len(), 3);

    let mut deploy: Deployment =
        from_json_value_strict(docs[0].clone()).unwrap_or_else(|c| panic!("deployment: {c:#?}"));
    let container = &deploy.spec.template.spec.containers[0];
    assert_eq!(container.resources.limits.get("cpu"), Some(&q("1")));
    assert_eq!(
        container
            .liveness_probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .map(|g| g.port.clone()),
        Some(IntOrString::from("http"))
    );
    let rolling = deploy.spec.strategy.rolling_update.clone().unwrap();
    assert_eq!(
        (rolling.max_surge, rolling.max_unavailable),
        (Some(1.into()), Some(0.into()))
    );
    deploy.apply_defaults();
    assert!(
        deploy.validate_kind().is_empty(),
        "{:#?}",
        deploy.validate_kind()
    );

    let mut svc: Service =
        from_json_value_strict(docs[1].clone()).unwrap_or_else(|c| panic!("service: {c:#?}"));
    assert_eq!(svc.spec.ports[1].target_port, IntOrString::Int(8443));
    svc.apply_defaults();
    assert!(svc.validate_kind().is_empty(), "{:#?}", svc.validate_kind());

    let mut hpa: HorizontalPodAutoscaler =
        from_json_value_strict(docs[2].clone()).unwrap_or_else(|c| panic!("hpa: {c:#?}"));
    hpa.apply_defaults();
    assert!(hpa.validate_kind().is_empty(), "{:#?}", hpa.validate_kind());

    // What the API stores survives msgpack, strictly.
    let bytes = bus_schemas::codec::to_msgpack(&deploy).unwrap();
    assert_eq!(
        bus_schemas::codec::from_msgpack_strict::<Deployment>(&bytes).unwrap(),
        deploy
    );
}

#[test]
fn vpa_manifest_as_written_for_kubernetes_is_valid() {
    let vpa: VerticalPodAutoscaler = from_json_value_strict(json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "updatePolicy": {"updateMode": "Initial"},
            "resourcePolicy": {"containerPolicies": [
                {"containerName": "*", "minAllowed": {"cpu": "100m"}, "maxAllowed": {"cpu": "1", "memory": "500Mi"},
                 "controlledResources": ["cpu", "memory"], "controlledValues": "RequestsOnly"},
                {"containerName": "sidecar", "mode": "Off"}
            ]}
        }
    }))
    .unwrap();
    assert!(causes_of(vpa.clone()).is_empty());
    let mut defaulted = vpa;
    defaulted.spec.update_policy = None;
    defaulted.apply_defaults();
    assert_eq!(defaulted.update_mode(), "Auto", "upstream's default mode");
}

#[test]
fn vpa_bad_fields_are_named_by_path() {
    let mut v = vpa();
    v.spec.target_ref = None;
    v.spec.update_policy.as_mut().unwrap().update_mode = Some("Sometimes".into());
    v.spec.update_policy.as_mut().unwrap().min_replicas = Some(0);
    let policy = &mut v.spec.resource_policy.as_mut().unwrap().container_policies[0];
    policy.min_allowed.insert("cpu".into(), q("3"));
    policy.max_allowed.insert("gpu".into(), q("1"));
    policy.mode = Some("Manual".into());
    policy.controlled_values = Some("LimitsOnly".into());
    policy.controlled_resources = Some(vec!["cpu".into(), "disk".into()]);
    let mut dup = policy.clone();
    dup.mode = None;
    dup.controlled_values = None;
    dup.controlled_resources = None;
    dup.min_allowed.clear();
    dup.max_allowed.clear();
    v.spec
        .resource_policy
        .as_mut()
        .unwrap()
        .container_policies
        .push(dup);
    let causes = causes_of(v);
    let at = "spec.resourcePolicy.containerPolicies";
    assert_cause(&causes, "spec.targetRef", "FieldValueRequired");
    assert_cause(
        &causes,
        "spec.updatePolicy.updateMode",
        "FieldValueNotSupported",
    );
    assert_cause(
        &causes,
        "spec.updatePolicy.minReplicas",
        "FieldValueInvalid",
    );
    assert_cause(
        &causes,
        &format!("{at}[0].maxAllowed[cpu]"),
        "FieldValueInvalid",
    );
    assert_cause(
        &causes,
        &format!("{at}[0].maxAllowed[gpu]"),
        "FieldValueNotSupported",
    );
    assert_cause(&causes, &format!("{at}[0].mode"), "FieldValueNotSupported");
    assert_cause(
        &causes,
        &format!("{at}[0].controlledValues"),
        "FieldValueNotSupported",
    );
    assert_cause(
        &causes,
        &format!("{at}[0].controlledResources[1]"),
        "FieldValueNotSupported",
    );
    assert_cause(
        &causes,
        &format!("{at}[1].containerName"),
        "FieldValueDuplicate",
    );
    assert_eq!(causes.len(), 9, "{causes:#?}");

    // A target without kind or name, and a quantity that does not parse.
    let mut v = vpa();
    v.spec.target_ref.as_mut().unwrap().name.clear();
    assert_eq!(fields(&causes_of(v)), ["spec.targetRef.name"]);
    let bad = from_json_value_strict::<VerticalPodAutoscaler>(json!({
        "metadata": {"name": "web"},
        "spec": {"targetRef": {"kind": "Deployment", "name": "web"},
                 "resourcePolicy": {"containerPolicies": [
                     {"containerName": "*", "maxAllowed": {"cpu": "lots"}}]}}
    }))
    .unwrap_err();
    assert!(
        bad.iter().any(|c| c
            .field
            .starts_with("spec.resourcePolicy.containerPolicies[0].maxAllowed")),
        "{bad:#?}"
    );
}
