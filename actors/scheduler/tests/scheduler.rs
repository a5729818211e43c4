//! The scheduler against a real cluster (nats-server + API actors): binds, explanations and
//! events, retries on cluster changes, constraints, preemption, and two schedulers racing.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bus_schemas::api::ListOptions;
use bus_schemas::kinds::node::Taint;
use bus_schemas::kinds::{
    Event, Node, PersistentVolume, PersistentVolumeClaim, Pod, PriorityClass,
};
use bus_schemas::meta::find_condition;
use bus_schemas::quantity::Quantity;
use bus_schemas::roles::Role;
use bus_schemas::Condition;
use shoal_api::local::LocalCluster;
use shoal_bus::shutdown::{self, Trigger};
use shoal_bus::ApiClient;
use shoal_scheduler::{SchedulerConfig, SchedulerMetrics};

const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `check` until it yields Some, or fails the test at the deadline.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

struct Running {
    _trigger: Trigger,
    metrics: Arc<SchedulerMetrics>,
}

/// Starts a scheduler; `shared` uses the cluster's informers, otherwise it builds its own
/// (as a scheduler in another process would).
/// Either way it has a connection of its own with the scheduler's identity.
async fn start_scheduler(cluster: &LocalCluster, identity: &str, shared: bool) -> Running {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let (trigger, stop) = shutdown::channel();
    let config = SchedulerConfig {
        identity: identity.into(),
        informers: shared.then(|| cluster.informers.clone()),
        ..Default::default()
    };
    let metrics = config.metrics.clone();
    let nats = cluster
        .connect_as(&Role::Scheduler, &format!("scheduler-{identity}"))
        .await
        .expect("scheduler connects");
    actix::spawn(async move {
        if let Err(e) = shoal_scheduler::run(config, nats, stop.wait()).await {
            panic!("scheduler failed: {e}");
        }
    });
    Running {
        _trigger: trigger,
        metrics,
    }
}

fn quantities(cpu: &str, mem: &str, pods: &str) -> BTreeMap<String, Quantity> {
    [("cpu", cpu), ("memory", mem), ("pods", pods)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Quantity::parse(v).unwrap()))
        .collect()
}

async fn add_node(
    api: &ApiClient,
    name: &str,
    cpu: &str,
    labels: &[(&str, &str)],
    taints: Vec<Taint>,
) {
    let mut node = Node::default();
    node.metadata.name = name.into();
    node.metadata.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    node.metadata
        .labels
        .insert("kubernetes.io/hostname".into(), name.into());
    node.spec.taints = taints;
    let mut node = api.create(&node).await.expect("create node");
    node.status.capacity = quantities(cpu, "16Gi", "110");
    node.status.allocatable = quantities(cpu, "16Gi", "110");
    node.status.conditions.push(Condition {
        type_: "Ready".into(),
        status: "True".into(),
        ..Default::default()
    });
    api.update_status(&node).await.expect("node status");
}

fn pod(name: &str, cpu: &str) -> Pod {
    let mut p: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox:1.35",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]
        }
    }))
    .expect("fixture pod");
    p.metadata.labels.insert("test".into(), name.into());
    p
}

async fn node_of(api: &ApiClient, name: &str) -> Option<String> {
    let p: Pod = api.get("default", name).await.ok()?;
    (!p.spec.node_name.is_empty()).then_some(p.spec.node_name)
}

async fn wait_bound(api: &ApiClient, name: &str) -> String {
    eventually(&format!("{name} bound"), || node_of(api, name)).await
}

async fn all_pods(api: &ApiClient) -> Vec<Pod> {
    let options = ListOptions {
        namespace: "default".into(),
        ..Default::default()
    };
    api.list::<Pod>(&options).await.expect("list pods").items
}

#[actix::test]
async fn binds_pods_to_fitting_nodes() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    add_node(&api, "small", "1", &[], vec![]).await;
    add_node(&api, "big", "4", &[], vec![]).await;
    let s = start_scheduler(&cluster, "s1", true).await;
    for name in ["a", "b"] {
        api.create(&pod(name, "1500m")).await.unwrap();
    }
    let mut other = pod("not-mine", "100m");
    other.spec.scheduler_name = "someone-else".into();
    api.create(&other).await.unwrap();
    assert_eq!(wait_bound(&api, "a").await, "big");
    assert_eq!(wait_bound(&api, "b").await, "big");
    api.create(&pod("c", "500m")).await.unwrap();
    assert_eq!(wait_bound(&api, "c").await, "small", "the emptier node");
    assert_eq!(
        node_of(&api, "not-mine").await,
        None,
        "other schedulers' pods are left alone"
    );
    assert_eq!(s.metrics.snapshot().scheduled, 3);
}

#[actix::test]
async fn unschedulable_pods_are_explained_and_retried_when_nodes_change() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    add_node(&api, "n1", "1", &[], vec![]).await;
    let gpu = Taint {
        key: "dedicated".into(),
        value: "gpu".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    add_node(&api, "n2", "8", &[], vec![gpu]).await;
    let _s = start_scheduler(&cluster, "s1", true).await;
    api.create(&pod("huge", "4")).await.unwrap();

    let want = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}.";
    let cond = eventually("PodScheduled=False", || async {
        let p: Pod = api.get("default", "huge").await.ok()?;
        find_condition(&p.status.conditions, "PodScheduled").cloned()
    })
    .await;
    assert_eq!(cond.status, "False");
    assert_eq!(cond.reason, "Unschedulable");
    assert_eq!(cond.message, want);
    let event: Event = eventually("FailedScheduling event", || async {
        api.get::<Event>("default", "huge.failedscheduling")
            .await
            .ok()
    })
    .await;
    assert_eq!(event.type_, "Warning");
    assert_eq!(event.reason, "FailedScheduling");
    assert_eq!(event.involved_object.name, "huge");
    assert_eq!(event.message, want);
    assert!(event.count >= 1);

    // A big node arrives: the pod is retried without anyone touching it.
    add_node(&api, "n3", "8", &[], vec![]).await;
    assert_eq!(wait_bound(&api, "huge").await, "n3");
    let cond = eventually("PodScheduled=True", || async {
        let p: Pod = api.get("default", "huge").await.ok()?;
        find_condition(&p.status.conditions, "PodScheduled")
            .filter(|c| c.status == "True")
            .cloned()
    })
    .await;
    assert_eq!(cond.status, "True");
}

#[actix::test]
async fn selectors_taints_and_pod_affinities_are_honoured() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let gpu = Taint {
        key: "dedicated".into(),
        value: "gpu".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    add_node(&api, "gpu", "8", &[("zone", "a")], vec![gpu]).await;
    add_node(&api, "ssd", "8", &[("disk", "ssd"), ("zone", "a")], vec![]).await;
    add_node(&api, "plain-1", "8", &[("zone", "b")], vec![]).await;
    add_node(&api, "plain-2", "8", &[("zone", "b")], vec![]).await;
    let _s = start_scheduler(&cluster, "s1", true).await;

    let mut selective = pod("selective", "100m");
    selective
        .spec
        .node_selector
        .insert("disk".into(), "ssd".into());
    api.create(&selective).await.unwrap();
    assert_eq!(wait_bound(&api, "selective").await, "ssd");

    let mut tolerant: Pod = pod("tolerant", "100m");
    tolerant
        .spec
        .node_selector
        .insert("zone".into(), "a".into());
    tolerant
        .spec
        .tolerations
        .push(bus_schemas::kinds::Toleration {
            key: "dedicated".into(),
            value: "gpu".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
    api.create(&tolerant).await.unwrap();
    let placed = wait_bound(&api, "tolerant").await;
    assert!(placed == "gpu" || placed == "ssd");

    // Untolerating pods never land on the gpu node.
    for i in 0..6 {
        api.create(&pod(&format!("plain-{i}"), "100m"))
            .await
            .unwrap();
    }
    for i in 0..6 {
        assert_ne!(wait_bound(&api, &format!("plain-{i}")).await, "gpu");
    }

    // Anti-affinity by hostname: three replicas on three different nodes.
    let anti = |name: &str| {
        let mut p = pod(name, "100m");
        p.metadata.labels.insert("app".into(), "web".into());
        p.spec.affinity = Some(serde_json::from_value(serde_json::json!({
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
            ]}
        })).unwrap());
        p
    };
    for i in 0..3 {
        // One at a time, so each sees the previous one bound.
        api.create(&anti(&format!("web-{i}"))).await.unwrap();
        wait_bound(&api, &format!("web-{i}")).await;
    }
    let mut hosts = Vec::new();
    for i in 0..3 {
        hosts.push(node_of(&api, &format!("web-{i}")).await.unwrap());
    }
    hosts.sort();
    hosts.dedup();
    assert_eq!(hosts.len(), 3, "anti-affinity spreads replicas: {hosts:?}");
    // A fourth replica has no node left (gpu is tainted).
    api.create(&anti("web-3")).await.unwrap();
    let cond = eventually("web-3 unschedulable", || async {
        let p: Pod = api.get("default", "web-3").await.ok()?;
        find_condition(&p.status.conditions, "PodScheduled").cloned()
    })
    .await;
    assert!(
        cond.message
            .contains("3 node(s) didn't match pod anti-affinity rules"),
        "{}",
        cond.message
    );

    // Affinity by zone: follows the selective pod (zone a) onto a zone-a node.
    let mut follower = pod("follower", "100m");
    follower.spec.affinity = Some(
        serde_json::from_value(serde_json::json!({
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"test": "selective"}}, "topologyKey": "zone"}
            ]}
        }))
        .unwrap(),
    );
    api.create(&follower).await.unwrap();
    assert_eq!(
        wait_bound(&api, "follower").await,
        "ssd",
        "zone a, and gpu is tainted"
    );
}

async fn priority_class(api: &ApiClient, name: &str, value: i32) {
    let mut pc = PriorityClass {
        value,
        ..Default::default()
    };
    pc.metadata.name = name.into();
    api.create(&pc).await.unwrap();
}

#[actix::test]
async fn high_priority_pods_preempt_low_priority_ones() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    priority_class(&api, "batch", 10).await;
    priority_class(&api, "prod", 1000).await;
    add_node(&api, "n1", "2", &[], vec![]).await;
    let s = start_scheduler(&cluster, "s1", true).await;

    let mut low = pod("low", "1500m");
    low.spec.priority_class_name = "batch".into();
    api.create(&low).await.unwrap();
    assert_eq!(wait_bound(&api, "low").await, "n1");

    // Equal priority never preempts.
    let mut peer = pod("peer", "1500m");
    peer.spec.priority_class_name = "batch".into();
    api.create(&peer).await.unwrap();
    eventually("peer unschedulable", || async {
        let p: Pod = api.get("default", "peer").await.ok()?;
        find_condition(&p.status.conditions, "PodScheduled").cloned()
    })
    .await;
    assert_eq!(s.metrics.snapshot().preemptions, 0);

    let mut high = pod("high", "1500m");
    high.spec.priority_class_name = "prod".into();
    api.create(&high).await.unwrap();
    assert_eq!(wait_bound(&api, "high").await, "n1");
    assert!(
        api.get::<Pod>("default", "low")
            .await
            .unwrap_err()
            .is_not_found(),
        "victim evicted"
    );
    let event: Event = eventually("Preempted event", || async {
        api.get::<Event>("default", "low.preempted").await.ok()
    })
    .await;
    assert!(event.message.contains("default/high"), "{}", event.message);
    assert_eq!(s.metrics.snapshot().preemptions, 1);
    assert_eq!(node_of(&api, "peer").await, None, "peer still does not fit");
}

#[actix::test]
async fn two_schedulers_racing_never_overcommit_a_node() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    for i in 0..10 {
        add_node(&api, &format!("n{i}"), "3", &[], vec![]).await;
    }
    // Separate caches, as two scheduler processes would have.
    let a = start_scheduler(&cluster, "a", false).await;
    let b = start_scheduler(&cluster, "b", false).await;
    let creates = (0..40).map(|i| {
        let api = api.clone();
        async move { api.create(&pod(&format!("p{i:02}"), "1")).await }
    });
    for r in futures::future::join_all(creates).await {
        r.unwrap();
    }
    // 30 fit; the other 10 end up explained as unschedulable.
    eventually("30 bound and 10 unschedulable", || async {
        let pods = all_pods(&api).await;
        let bound = pods.iter().filter(|p| !p.spec.node_name.is_empty()).count();
        let unschedulable = pods
            .iter()
            .filter(|p| p.spec.node_name.is_empty())
            .filter(|p| {
                find_condition(&p.status.conditions, "PodScheduled")
                    .is_some_and(|c| c.status == "False")
            })
            .count();
        (bound == 30 && unschedulable == 10).then_some(())
    })
    .await;
    let mut per_node: BTreeMap<String, i128> = BTreeMap::new();
    for p in all_pods(&api)
        .await
        .iter()
        .filter(|p| !p.spec.node_name.is_empty())
    {
        let cpu = p.requests_total().get("cpu").map_or(0, |q| q.milli_value());
        *per_node.entry(p.spec.node_name.clone()).or_default() += cpu;
    }
    for (node, cpu) in &per_node {
        assert!(*cpu <= 3000, "node {node} overcommitted: {cpu}m of 3000m");
    }
    let (ma, mb) = (a.metrics.snapshot(), b.metrics.snapshot());
    assert_eq!(ma.scheduled + mb.scheduled, 30, "{ma:?} {mb:?}");
    eprintln!("scheduler a: {ma:?}\nscheduler b: {mb:?}");
}

/// A rough throughput probe (not a benchmark): pods created first, then one scheduler binds
/// them all. `cargo nextest run -p shoal-scheduler --run-ignored only --no-capture`.
#[actix::test]
#[ignore]
async fn throughput_probe() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    let (nodes, pods) = (500, 3000);
    let sem = Arc::new(tokio::sync::Semaphore::new(128));
    let adds = (0..nodes).map(|i| {
        let (api, sem) = (api.clone(), sem.clone());
        async move {
            let _p = sem.acquire().await.unwrap();
            add_node(&api, &format!("n{i:04}"), "16", &[], vec![]).await
        }
    });
    futures::future::join_all(adds).await;
    let creates = (0..pods).map(|i| {
        let (api, sem) = (api.clone(), sem.clone());
        async move {
            let _p = sem.acquire().await.unwrap();
            api.create(&pod(&format!("p{i:05}"), "100m")).await.unwrap();
        }
    });
    futures::future::join_all(creates).await;
    let start = Instant::now();
    let s = start_scheduler(&cluster, "bench", true).await;
    eventually("all bound", || async {
        (s.metrics.snapshot().scheduled == pods as u64).then_some(())
    })
    .await;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{pods} pods on {nodes} nodes in {secs:.2}s: {:.0} pods/s; {:?}",
        pods as f64 / secs,
        s.metrics.snapshot()
    );
}

fn with_claim(mut pod: Pod, claim: &str) -> Pod {
    pod.spec.volumes.push(
        serde_json::from_value(serde_json::json!(
            {"name": "data", "persistentVolumeClaim": {"claimName": claim}}
        ))
        .expect("volume"),
    );
    pod
}

fn claim(name: &str) -> PersistentVolumeClaim {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim")
}

/// A claim bound to a volume on `node` (as a provisioner leaves them). The claim names its
/// volume from the start, so the scheduler never sees it unbound.
async fn claim_on_volume(api: &ApiClient, claim_name: &str, node: &str) {
    let mut c = claim(claim_name);
    c.spec.volume_name = format!("pv-{claim_name}");
    let c = api.create(&c).await.unwrap();
    let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("pv-{claim_name}")},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "local-path", "local": {"path": "/data/x"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
                 "claimRef": {"namespace": "default", "name": claim_name, "uid": c.metadata.uid}}
    }))
    .unwrap();
    api.create(&pv).await.unwrap();
}

#[actix::test]
async fn pods_follow_their_volumes_and_choose_nodes_for_unbound_claims() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    add_node(&api, "n1", "4", &[], vec![]).await;
    add_node(&api, "n2", "1", &[], vec![]).await;
    let _s = start_scheduler(&cluster, "s1", true).await;

    // Without the volume, n1 (the emptier node) would win: the bound volume lives on n2.
    claim_on_volume(&api, "pinned", "n2").await;
    api.create(&with_claim(pod("follower", "100m"), "pinned"))
        .await
        .unwrap();
    assert_eq!(wait_bound(&api, "follower").await, "n2");

    // An unbound WaitForFirstConsumer claim (the default class) gets the pod's node first.
    api.create(&claim("fresh")).await.unwrap();
    api.create(&with_claim(pod("first", "100m"), "fresh"))
        .await
        .unwrap();
    let node = wait_bound(&api, "first").await;
    let fresh: PersistentVolumeClaim = api.get("default", "fresh").await.unwrap();
    assert_eq!(fresh.spec.storage_class_name.as_deref(), Some("local-path"));
    assert_eq!(fresh.selected_node(), Some(node.as_str()));

    // A volume on a node that does not exist: explained, and nothing is bound.
    claim_on_volume(&api, "stranded", "gone").await;
    api.create(&with_claim(pod("stuck", "100m"), "stranded"))
        .await
        .unwrap();
    let cond = eventually("PodScheduled=False", || async {
        let p: Pod = api.get("default", "stuck").await.ok()?;
        find_condition(&p.status.conditions, "PodScheduled").cloned()
    })
    .await;
    assert_eq!(
        cond.message,
        "0/2 nodes are available: 2 node(s) had volume node affinity conflict."
    );

    // A missing claim is named; creating it (and binding it) lets the pod go.
    api.create(&with_claim(pod("early", "100m"), "later"))
        .await
        .unwrap();
    let cond = eventually("missing claim explained", || async {
        let p: Pod = api.get("default", "early").await.ok()?;
        find_condition(&p.status.conditions, "PodScheduled").cloned()
    })
    .await;
    assert_eq!(
        cond.message,
        "0/2 nodes are available: persistentvolumeclaim \"later\" not found."
    );
    claim_on_volume(&api, "later", "n1").await;
    assert_eq!(wait_bound(&api, "early").await, "n1");
    assert_eq!(node_of(&api, "stuck").await, None);
}

/// A local disk made by hand (class `disks`, no provisioner) of `size` on `node`.
async fn disk(api: &ApiClient, name: &str, node: &str, size: &str) {
    let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "disks", "local": {"path": "/mnt/disk"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}
    }))
    .unwrap();
    let mut pv = api.create(&pv).await.unwrap();
    // As the binder leaves a new volume.
    pv.status.phase = "Available".into();
    api.update_status(&pv).await.unwrap();
}

#[actix::test]
async fn a_claim_for_a_local_disk_made_by_hand_takes_its_pod_to_the_disk() {
    let cluster = LocalCluster::start().await.unwrap();
    let api = cluster.api();
    add_node(&api, "n1", "4", &[], vec![]).await;
    add_node(&api, "n2", "1", &[], vec![]).await;
    let class: bus_schemas::kinds::StorageClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "disks"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Retain"
    }))
    .unwrap();
    api.create(&class).await.unwrap();
    // n1 has only a disk too small for the claim; the one that fits is on n2.
    disk(&api, "small-on-n1", "n1", "512Mi").await;
    disk(&api, "big-on-n2", "n2", "10Gi").await;
    let _s = start_scheduler(&cluster, "s1", true).await;

    let mut wants = claim("data");
    wants.spec.storage_class_name = Some("disks".into());
    api.create(&wants).await.unwrap();
    api.create(&with_claim(pod("db", "100m"), "data"))
        .await
        .unwrap();
    // Without the disk, n1 (the emptier node) would win.
    assert_eq!(wait_bound(&api, "db").await, "n2");
    let chosen: PersistentVolumeClaim = api.get("default", "data").await.unwrap();
    assert_eq!(chosen.selected_node(), Some("n2"));

    // A claim no disk fits: every node says why.
    let mut huge = claim("huge");
    huge.spec.storage_class_name = Some("disks".into());
    huge.spec
        .resources
        .requests
        .insert("storage".into(), Quantity::parse("1Ti").unwrap());
    api.create(&huge).await.unwrap();
    api.create(&with_claim(pod("hoarder", "100m"), "huge"))
        .await
        .unwrap();
    let cond = eventually("PodScheduled=False", || async {
        let p: Pod = api.get("default", "hoarder").await.ok()?;
        find_condition(&p.status.conditions, "PodScheduled").cloned()
    })
    .await;
    assert_eq!(
        cond.message,
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    );
}

/// A pod's trace goes on through the attempts that fail it: the condition an attempt that
/// finds no node writes, and the later attempt that binds the pod, are in the trace that
/// created the pod, read back from `SHOAL_TRACES`.
#[actix::test]
async fn an_unschedulable_attempt_and_the_bind_after_it_continue_the_pods_trace() {
    use shoal_api::local::{export_traces, exported_spans, install_tracing, ExportedSpan};
    use shoal_telemetry::traceview::attribute;
    const CREATOR_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    let telemetry = install_tracing("scheduler-test");
    let cluster = LocalCluster::start().await.unwrap();
    export_traces(&cluster).await;
    let api = cluster.api();
    add_node(&api, "small", "1", &[], vec![]).await;
    let _s = start_scheduler(&cluster, "traced", true).await;
    let creator = cluster
        .api()
        .with_traceparent(Some(format!("00-{CREATOR_TRACE}-b7ad6b7169203331-01")));
    creator.create(&pod("waits", "2")).await.unwrap();
    eventually("PodScheduled=False", || async {
        let p: Pod = api.get("default", "waits").await.ok()?;
        find_condition(&p.status.conditions, "PodScheduled").filter(|c| c.status == "False")?;
        Some(())
    })
    .await;
    add_node(&api, "big", "4", &[], vec![]).await;

    // The API's spans of the scheduler's writes: the condition saying why the pod waits,
    // then the bind. A write made outside the attempt's trace starts a trace of its own.
    let verb = |s: &ExportedSpan| attribute(&s.attributes, "verb");
    let reader = cluster.connect_as(&Role::Admin, "reader").await.unwrap();
    let spans = exported_spans(
        &telemetry,
        &reader,
        CREATOR_TRACE,
        "the scheduler's writes in the creator's trace",
        |spans| {
            let verbs: Vec<String> = spans.iter().filter_map(verb).collect();
            let both =
                verbs.iter().any(|v| v == "update-status") && verbs.iter().any(|v| v == "update");
            // The binding attempt's span ends after the bind's request span (it stays open
            // until its last write, the condition's clearing): wait for it too.
            let bound = spans.iter().any(|s| {
                s.name == "schedule"
                    && attribute(&s.attributes, "outcome").as_deref() == Some("assumed")
            });
            both && bound
        },
    )
    .await;
    let outcome = |s: &&ExportedSpan| attribute(&s.attributes, "outcome").unwrap_or_default();
    let attempts: Vec<_> = spans.iter().filter(|s| s.name == "schedule").collect();
    let failed = attempts
        .iter()
        .find(|s| outcome(s) == "unschedulable")
        .expect("the failed attempt is in the trace");
    assert!(
        attempts.iter().any(|s| outcome(s) == "assumed"),
        "the attempt that bound the pod is in the trace: {:?}",
        attempts.iter().map(outcome).collect::<Vec<_>>()
    );
    // The first status write; the bind's clearing of the condition comes later.
    let condition = spans
        .iter()
        .filter(|s| verb(s).as_deref() == Some("update-status"))
        .min_by_key(|s| s.start_time_unix_nano)
        .unwrap();
    assert_eq!(
        condition.parent_span_id, failed.span_id,
        "the condition is written inside the attempt that failed"
    );
}
