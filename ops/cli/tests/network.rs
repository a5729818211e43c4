//! Pod networking and Services across nodes, with real containers: every node is a real
//! agent whose network lives in its own namespace ("host"), and the hosts are wired into a
//! test-made fabric (see `shoal_node::testnet`). The API, scheduler and controllers run in
//! this process. Nothing is added to the namespace the test runs in, and everything made
//! (namespaces, bridges, containers, cgroups) is removed on drop, also when a test fails.
//!
//! - pods on two nodes reach each other by pod IP, without address translation;
//! - a Service name resolves through each host's naming replica (node-local DNS), and its
//!   ClusterIP spreads requests over every ready pod, on this node and the other, from pods
//!   and from the host; a Service without ready pods refuses at once;
//! - a pod failing readiness and a pod relabelled out of the selector stop receiving traffic
//!   within 2 s;
//! - a node whose link is cut turns NotReady, its pods leave the endpoints and traffic goes to
//!   the survivors.
//!
//! Requests come from a client pod (`wget` in a loop, run through the agent's exec), whose
//! output names the pod that answered each request. (`timeout N wget`, not `wget -T N`: the
//! busybox-static 1.35 wget crashes with -T.)
//!
//! Run: `cargo build -p shoal-node --bin shoal-shim && cargo nextest run -p shoal-cli --test network`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use shoal_api::local::eventually;

use bus_schemas::kinds::{Endpoints, Node, Pod, Service};
use bus_schemas::meta::find_condition;

use harness::{NetCluster, Options};

/// Bound on every wait; generous for a loaded 2-core machine.
const T: Duration = Duration::from_secs(90);

mod harness {
    //! The multi-node cluster: a fabric of host namespaces, a control plane in this process,
    //! and one real agent per host (its network in the host namespace, its uplink the host's
    //! fabric link, so a cut link makes its node NotReady).

    use std::any::Any;
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    use bus_schemas::api::{ExecReply, ExecRequest};
    use bus_schemas::kinds::{Node, Pod};
    use bus_schemas::meta::find_condition;
    use bus_schemas::roles::Role;
    use bus_schemas::{codec, subjects};
    use shoal_agent::{AgentConfig, Backend};
    use shoal_api::local::LocalCluster;
    use shoal_bus::shutdown::{self, Trigger};
    use shoal_bus::{ApiClient, InformerFactory};
    use shoal_controllers::{ControllersConfig, Tunables};
    use shoal_node::net::NetworkConfig;
    use shoal_node::testnet::{Fabric, FabricHost};
    use shoal_node::{LinuxRuntime, Runtime, RuntimeConfig};

    /// One host as a per-host service sees it when it starts (before the host's agent).
    #[allow(dead_code)] // read by per-host services plugged in later
    pub struct HostCtx<'a> {
        pub index: usize,
        pub node: &'a str,
        pub host: &'a FabricHost,
        pub nats: &'a async_nats::Client,
        pub informers: &'a InformerFactory,
    }

    /// Something started on every host beside its agent — the naming actor's DNS server, for
    /// one, listening inside the host namespace (see `HostNet::run`). What it returns is kept
    /// until the cluster is dropped.
    pub type HostPlugin = Box<dyn Fn(&HostCtx<'_>) -> Box<dyn Any>>;

    pub struct Options {
        pub hosts: usize,
        /// A naming replica per host, serving DNS on the host's pod gateway (port 53, inside
        /// the host namespace), which the host's agent writes into its pods' resolv.conf.
        pub dns: bool,
        /// The nameserver agents write into pods' resolv.conf (None: the agent's default).
        pub cluster_dns: Option<String>,
        pub per_host: Vec<HostPlugin>,
    }

    impl Options {
        pub fn hosts(n: usize) -> Options {
            Options {
                hosts: n,
                dns: true,
                cluster_dns: None,
                per_host: Vec::new(),
            }
        }
    }

    pub struct NodeAgent {
        pub name: String,
        pub host: FabricHost,
        runtime: Arc<LinuxRuntime>,
        cgroup_parent: String,
        trigger: Option<Trigger>,
        _state: tempfile::TempDir,
    }

    pub struct NetCluster {
        pub nodes: Vec<NodeAgent>,
        pub api: ApiClient,
        _plugins: Vec<Box<dyn Any>>,
        actors: Vec<Trigger>,
        pub cluster: LocalCluster,
        // Last: the namespaces go once everything inside them is stopped.
        pub fabric: Fabric,
    }

    fn shim() -> PathBuf {
        let exe = std::env::current_exe().expect("test binary path");
        let shim = exe
            .parent()
            .and_then(|deps| deps.parent())
            .map(|dir| dir.join("shoal-shim"))
            .expect("target dir");
        assert!(
            shim.is_file(),
            "{} is missing: cargo build -p shoal-node --bin shoal-shim",
            shim.display()
        );
        shim
    }

    async fn push_busybox(cluster: &LocalCluster) {
        let dir = tempfile::tempdir().unwrap();
        let layout = dir.path().join("layout");
        shoal_node::testimage::build_busybox_layout(&layout, "shoal/busybox", "1.35").unwrap();
        let scratch = shoal_node::image::ImageStore::open(dir.path().join("store")).unwrap();
        let js = async_nats::jetstream::new(cluster.nats.clone());
        let registry = shoal_agent::registry::Registry::open(&js).await.unwrap();
        registry
            .import_path(&scratch, &layout, |_, _| {})
            .await
            .unwrap();
    }

    impl NetCluster {
        pub async fn start(options: Options) -> NetCluster {
            let fabric = Fabric::new(options.hosts).expect("test fabric");
            let cluster = LocalCluster::start().await.expect("cluster starts");
            push_busybox(&cluster).await;
            let mut net = NetCluster {
                nodes: Vec::new(),
                api: cluster.api(),
                _plugins: Vec::new(),
                actors: Vec::new(),
                cluster,
                fabric,
            };
            net.start_control_plane().await;
            let tag = net.fabric.netns["fabric-".len()..].to_string();
            for (index, host) in net.fabric.hosts.clone().into_iter().enumerate() {
                let name = format!("node-{tag}-{index}");
                let ctx = HostCtx {
                    index,
                    node: &name,
                    host: &host,
                    nats: &net.cluster.nats,
                    informers: &net.cluster.informers,
                };
                let started: Vec<Box<dyn Any>> = options.per_host.iter().map(|p| p(&ctx)).collect();
                net._plugins.extend(started);
                let mut cluster_dns = options.cluster_dns.clone();
                if options.dns {
                    let gateway = host.pod_cidr.gateway();
                    net.start_naming(&host, gateway).await;
                    cluster_dns = Some(gateway.to_string());
                }
                let node = net.start_agent(name, host, cluster_dns).await;
                net.nodes.push(node);
            }
            net.wait_nodes_ready().await;
            net
        }

        /// Pods bound to a node that is not registered yet would be garbage collected.
        async fn wait_nodes_ready(&self) {
            let start = std::time::Instant::now();
            for node in &self.nodes {
                loop {
                    let n = self.api.get::<Node>("", &node.name).await.ok();
                    if n.as_ref().is_some_and(|n| {
                        find_condition(&n.status.conditions, "Ready")
                            .is_some_and(|c| c.status == "True")
                    }) {
                        break;
                    }
                    assert!(
                        start.elapsed() < super::T,
                        "node {} did not register Ready: {:#?}",
                        node.name,
                        n.map(|n| n.status.conditions)
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }

        /// A naming replica bound inside `host`'s namespace; returns once it serves.
        async fn start_naming(&mut self, host: &FabricHost, gateway: std::net::Ipv4Addr) {
            let config = shoal_naming::NamingConfig {
                listen: vec![std::net::SocketAddr::from((gateway, 53))],
                netns: Some(host.netns_path()),
                informers: Some(self.cluster.informers.clone()),
                udp_threads: 1,
                ..Default::default()
            };
            let (trigger, stop) = shutdown::channel();
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            let nats = self.connect_as(Role::Naming).await;
            actix::spawn(async move {
                if let Err(e) =
                    shoal_naming::run_with_ready(config, nats, stop.wait(), ready_tx).await
                {
                    eprintln!("naming failed: {e}");
                }
            });
            tokio::time::timeout(super::T, ready_rx)
                .await
                .expect("the naming replica serves in time")
                .expect("the naming replica started");
            self.actors.push(trigger);
        }

        /// A connection as `role`: each actor confined to what its role may do, as in a
        /// real cluster.
        async fn connect_as(&self, role: Role) -> async_nats::Client {
            self.cluster
                .connect_as(&role, &format!("test-{}", role.kind()))
                .await
                .expect("an actor connects with its credential")
        }

        async fn start_control_plane(&mut self) {
            let tunables = Tunables {
                node_monitor_grace: Duration::from_secs(5),
                // Long enough that a NotReady node's pods leave the endpoints because the
                // node is not ready, not because they were evicted.
                default_unreachable_toleration: Duration::from_secs(120),
                ..Default::default()
            };
            let config = ControllersConfig {
                informers: Some(self.cluster.informers.clone()),
                tunables,
                ..Default::default()
            };
            let (trigger, stop) = shutdown::channel();
            let nats = self.connect_as(Role::Controllers).await;
            actix::spawn(async move {
                if let Err(e) = shoal_controllers::run(config, nats, stop.wait()).await {
                    eprintln!("controllers failed: {e}");
                }
            });
            self.actors.push(trigger);
            let config = shoal_scheduler::SchedulerConfig {
                informers: Some(self.cluster.informers.clone()),
                ..Default::default()
            };
            let (trigger, stop) = shutdown::channel();
            let nats = self.connect_as(Role::Scheduler).await;
            actix::spawn(async move {
                if let Err(e) = shoal_scheduler::run(config, nats, stop.wait()).await {
                    eprintln!("scheduler failed: {e}");
                }
            });
            self.actors.push(trigger);
        }

        async fn start_agent(
            &self,
            name: String,
            host: FabricHost,
            cluster_dns: Option<String>,
        ) -> NodeAgent {
            let state = tempfile::Builder::new()
                .prefix("shoal-net-")
                .tempdir()
                .unwrap();
            let mut network = NetworkConfig::new("shoal0", host.pod_cidr);
            network.host_netns = Some(host.netns_path());
            let mut rc = RuntimeConfig::new(state.path().join("node"), network);
            rc.shim_path = Some(shim());
            // Unique per node: several agents share this machine's cgroup tree.
            let cgroup_parent = format!("shoal-test-{name}");
            rc.cgroup_parent = cgroup_parent.clone();
            let runtime = Arc::new(LinuxRuntime::new(rc).expect("runtime"));
            let mut config = AgentConfig::new(name.clone(), host.pod_cidr.to_string());
            config.host_ip = host.address.to_string();
            config.host_netns = Some(host.netns_path());
            config.uplink = Some(host.uplink.clone());
            config.informers = Some(self.cluster.informers.clone());
            config.backoff_base = Duration::from_millis(500);
            config.sync_period = Duration::from_millis(200);
            config.heartbeat_interval = Duration::from_millis(500);
            if let Some(dns) = cluster_dns {
                config.pod_defaults.cluster_dns = dns;
            }
            let (trigger, stop) = shutdown::channel();
            let nats = self.connect_as(Role::Node(name.clone())).await;
            let backend = Backend::Linux(runtime.clone());
            let agent = name.clone();
            actix::spawn(async move {
                if let Err(e) = shoal_agent::run(config, backend, nats, stop.wait()).await {
                    eprintln!("agent {agent} failed: {e}");
                }
            });
            NodeAgent {
                name,
                host,
                runtime,
                cgroup_parent,
                trigger: Some(trigger),
                _state: state,
            }
        }

        /// Runs `command` in the pod's first container through its node's agent, as
        /// `shoal exec` does.
        pub async fn exec(&self, pod: &str, command: &str, timeout: Duration) -> ExecReply {
            let p: Pod = self.api.get("default", pod).await.expect("pod exists");
            let request = ExecRequest {
                namespace: "default".into(),
                pod: pod.into(),
                container: String::new(),
                command: vec!["sh".into(), "-c".into(), command.into()],
                timeout_seconds: timeout.as_secs().max(1) as u32,
                ..Default::default()
            };
            let subject = subjects::agent_request(&p.spec.node_name, "exec");
            let body = codec::to_msgpack(&request).unwrap();
            // The client's default request timeout (10 s) would cut a long command short
            // before the agent's own deadline: this request waits as long as the command may run.
            let request = async_nats::Request::new()
                .payload(body.into())
                .timeout(Some(timeout + Duration::from_secs(10)));
            let reply = tokio::time::timeout(
                timeout + Duration::from_secs(15),
                self.cluster.nats.send_request(subject, request),
            )
            .await
            .expect("the agent answers exec in time")
            .expect("exec request");
            let reply: ExecReply = codec::from_msgpack(&reply.payload).unwrap();
            assert!(reply.error.is_empty(), "exec in {pod}: {}", reply.error);
            reply
        }

        /// Stops the agents and removes every container, sandbox and cgroup they made.
        fn teardown(&mut self) {
            for node in &mut self.nodes {
                if let Some(t) = node.trigger.take() {
                    t.fire();
                }
            }
            for t in self.actors.drain(..) {
                t.fire();
            }
            for node in &self.nodes {
                // A pod step already running on a blocking thread may still create a sandbox
                // after the first sweep: sweep until the runtime holds nothing.
                for attempt in 0..10 {
                    if let Err(e) = node.runtime.cleanup_orphans(&Default::default()) {
                        eprintln!("cleanup {}: {e}", node.name);
                    }
                    let left = node.runtime.list_sandboxes().map(|s| s.len()).unwrap_or(0);
                    let parent = node
                        .runtime
                        .cgroup_driver()
                        .delete(&node.cgroup_parent, Duration::from_secs(10));
                    if left == 0 && parent.is_ok() {
                        break;
                    }
                    if attempt == 9 {
                        eprintln!("cleanup {}: {left} sandboxes left, {parent:?}", node.name);
                    }
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
        }
    }

    impl Drop for NetCluster {
        fn drop(&mut self) {
            self.teardown();
        }
    }
}

fn from_json<K: bus_schemas::Resource>(v: serde_json::Value) -> K {
    serde_json::from_value(v).expect("fixture")
}

/// An httpd pod pinned to `node` whose `/` names the pod, whose `/cgi-bin/ip` echoes the
/// client address it sees, and which is ready while `/ready.html` exists.
fn web_pod(name: &str, node: &str) -> Pod {
    // httpd listens on IPv6 too and names IPv4 clients [::ffff:a.b.c.d]: the CGI unwraps it.
    let script = r#"mkdir -p /www/cgi-bin && hostname > /www/index.html && echo ok > /www/ready.html
cat > /www/cgi-bin/ip <<'CGI'
#!/bin/sh
echo Content-Type: text/plain
echo
echo "$REMOTE_ADDR" | sed -e 's/^\[::ffff://' -e 's/\]$//'
CGI
chmod +x /www/cgi-bin/ip && exec httpd -f -p 8080 -h /www"#;
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "httpd", "image": "shoal/busybox:1.35",
                "command": ["sh", "-c", script],
                "ports": [{"name": "http", "containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/ready.html", "port": "http"},
                                   "periodSeconds": 1, "failureThreshold": 1}
            }]
        }
    }))
}

/// A pod that idles, placed by the scheduler onto `node` (by its hostname label). Its pid
/// namespace is shared, so the pod's pause process is PID 1 and reaps what `timeout` leaves
/// behind (its watchdog child outlives a quick command and is reparented to PID 1; `sleep`
/// as PID 1 would keep the zombies until the pod's pid limit stops every fork).
fn client_pod(name: &str, node: &str) -> Pod {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "shareProcessNamespace": true,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "client", "image": "shoal/busybox:1.35",
                            "command": ["sleep", "100000"]}]
        }
    }))
}

fn service(name: &str, app: &str) -> Service {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"app": app},
                 "ports": [{"name": "web", "port": 80, "targetPort": "http"}]}
    }))
}

async fn ready_pods(net: &NetCluster, names: &[&str]) -> BTreeMap<String, Pod> {
    let start = Instant::now();
    let mut pods = BTreeMap::new();
    for name in names {
        loop {
            let pod = net.api.get::<Pod>("default", name).await.ok();
            if let Some(p) = pod
                .as_ref()
                .filter(|p| p.is_ready() && !p.status.pod_ip.is_empty())
            {
                pods.insert(name.to_string(), p.clone());
                break;
            }
            assert!(
                start.elapsed() < T,
                "timed out waiting for pod {name} to run and be ready: {:#?}",
                pod.map(|p| p.status)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    pods
}

/// The ready IPs of the Service's Endpoints, sorted.
async fn ready_endpoints(net: &NetCluster, svc: &str) -> Vec<String> {
    let Ok(ep) = net.api.get::<Endpoints>("default", svc).await else {
        return Vec::new();
    };
    let mut ips: Vec<String> = ep.ready_addresses().map(|a| a.ip.clone()).collect();
    ips.sort();
    ips
}

fn sorted_ips<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Vec<String> {
    let mut ips: Vec<String> = pods.into_iter().map(|p| p.status.pod_ip.clone()).collect();
    ips.sort();
    ips
}

/// `n` sequential requests from `client` to `url`: one line per request, the answer or FAIL.
async fn requests(net: &NetCluster, client: &str, url: &str, n: usize) -> Vec<String> {
    let loop_ = format!(
        "for i in $(seq {n}); do r=$(timeout 3 wget -q -O - {url} 2>/dev/null); echo \"${{r:-FAIL}}\"; done"
    );
    let reply = net.exec(client, &loop_, Duration::from_secs(120)).await;
    String::from_utf8_lossy(&reply.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn tally(lines: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for l in lines {
        *counts.entry(l.clone()).or_default() += 1;
    }
    counts
}

#[actix::test]
async fn pods_on_two_nodes_reach_each_other_by_pod_ip() {
    let net = NetCluster::start(Options::hosts(2)).await;
    let (n0, n1) = (net.nodes[0].name.clone(), net.nodes[1].name.clone());
    net.api.create(&web_pod("server", &n1)).await.unwrap();
    net.api.create(&client_pod("client", &n0)).await.unwrap();
    let pods = ready_pods(&net, &["server", "client"]).await;
    let (server, client) = (&pods["server"], &pods["client"]);
    assert_eq!(
        client.spec.node_name, n0,
        "the scheduler honoured the node selector"
    );
    assert_eq!(server.status.host_ip, net.nodes[1].host.address.to_string());
    assert!(net.nodes[1]
        .host
        .pod_cidr
        .contains(server.status.pod_ip.parse().unwrap()));

    let base = format!("http://{}:8080", server.status.pod_ip);
    let answer = net
        .exec(
            "client",
            &format!("timeout 5 wget -q -O - {base}/"),
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(
        (
            answer.exit_code,
            String::from_utf8_lossy(&answer.stdout).trim()
        ),
        (0, "server"),
        "stderr: {}",
        String::from_utf8_lossy(&answer.stderr)
    );
    // Pod to pod is routed, never translated: the server sees the client's own address.
    let seen = net
        .exec(
            "client",
            &format!("timeout 5 wget -q -O - {base}/cgi-bin/ip"),
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(
        String::from_utf8_lossy(&seen.stdout).trim(),
        client.status.pod_ip
    );
    // And back the other way.
    net.api.create(&web_pod("near", &n0)).await.unwrap();
    let near = ready_pods(&net, &["near"]).await.remove("near").unwrap();
    let back = net
        .exec(
            "server",
            &format!("timeout 5 wget -q -O - http://{}:8080/", near.status.pod_ip),
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(String::from_utf8_lossy(&back.stdout).trim(), "near");
}

/// Four web pods, two per node, behind `web`; a client pod on node 0.
async fn web_service(net: &NetCluster) -> (String, BTreeMap<String, Pod>) {
    let (n0, n1) = (net.nodes[0].name.clone(), net.nodes[1].name.clone());
    for (name, node) in [
        ("web-0", &n0),
        ("web-1", &n0),
        ("web-2", &n1),
        ("web-3", &n1),
    ] {
        net.api.create(&web_pod(name, node)).await.unwrap();
    }
    net.api.create(&client_pod("client", &n0)).await.unwrap();
    let svc = net.api.create(&service("web", "web")).await.unwrap();
    let pods = ready_pods(net, &["web-0", "web-1", "web-2", "web-3", "client"]).await;
    let want = sorted_ips(pods.values().filter(|p| p.metadata.name != "client"));
    eventually("all four pods in the endpoints", T, || async {
        ready_endpoints(net, "web").await == want
    })
    .await;
    // The client's node has loaded them.
    for ip in &want {
        rules_mention(net, 0, ip, true).await;
    }
    (svc.spec.cluster_ip, pods)
}

/// Waits until node `i`'s Service rules send `ip` traffic (`present`) or not.
async fn rules_mention(net: &NetCluster, i: usize, ip: &str, present: bool) {
    let hostnet = shoal_agent::hostnet::HostNet::new(Some(net.nodes[i].host.netns_path()));
    eventually(
        &format!(
            "node {i}'s rules {} {ip}",
            if present { "with" } else { "without" }
        ),
        T,
        || {
            let hostnet = hostnet.clone();
            let ip = format!("{ip} . 8080");
            async move {
                let out = tokio::task::spawn_blocking(move || {
                    hostnet.command("nft", &["list", "table", "ip", "shoal"], None)
                })
                .await
                .unwrap()
                .expect("nft runs");
                String::from_utf8_lossy(&out.stdout).contains(&ip) == present
            }
        },
    )
    .await;
}

#[actix::test]
async fn a_cluster_ip_spreads_requests_and_follows_readiness_and_labels() {
    let net = NetCluster::start(Options::hosts(2)).await;
    let (cip, pods) = web_service(&net).await;

    // The Service by name, from the client pod's node-local DNS: full and short names
    // resolve to the ClusterIP, a name that does not exist does not.
    for name in ["web.default.svc.cluster.local", "web"] {
        let looked_up = net
            .exec(
                "client",
                &format!("nslookup {name}"),
                Duration::from_secs(20),
            )
            .await;
        let out = String::from_utf8_lossy(&looked_up.stdout);
        // busybox nslookup tries every search domain and exits non-zero when any of them
        // fails, so only the full name's exit code means anything.
        let full = name.ends_with(".cluster.local");
        assert!(
            (looked_up.exit_code == 0 || !full)
                && out.contains("web.default.svc.cluster.local")
                && out.contains(&format!("Address: {cip}")),
            "nslookup {name}: {out} {}",
            String::from_utf8_lossy(&looked_up.stderr)
        );
    }
    let missing = net
        .exec(
            "client",
            "nslookup nothere.default.svc.cluster.local",
            Duration::from_secs(20),
        )
        .await;
    assert_ne!(missing.exit_code, 0, "a missing Service does not resolve");

    // Spread: every ready pod gets a fair share, the other node's included.
    let lines = requests(&net, "client", "http://web.default.svc.cluster.local/", 300).await;
    let counts = tally(&lines);
    eprintln!("300 requests to web.default.svc.cluster.local ({cip}): {counts:?}");
    assert_eq!(lines.len(), 300);
    for name in ["web-0", "web-1", "web-2", "web-3"] {
        let got = counts.get(name).copied().unwrap_or(0);
        assert!(
            got >= 30,
            "{name} answered {got} of 300 (fair share 75): {counts:?}"
        );
    }
    assert_eq!(counts.get("FAIL"), None, "{counts:?}");

    // ClientIP affinity: one client, one pod (by a hash of its address).
    let mut sticky = service("sticky", "web");
    sticky.spec.session_affinity = "ClientIP".into();
    let sticky = net.api.create(&sticky).await.unwrap();
    let sticky_url = format!("http://{}/", sticky.spec.cluster_ip);
    eventually("the sticky Service answers", T, || async {
        requests(&net, "client", &sticky_url, 1).await != ["FAIL"]
    })
    .await;
    let stuck = tally(&requests(&net, "client", &sticky_url, 30).await);
    assert_eq!(stuck.len(), 1, "every request to the same pod: {stuck:?}");
    assert!(!stuck.contains_key("FAIL"), "{stuck:?}");

    // A pod on the other node sees the client's address; a pod on the client's own node is
    // reached through the host (hairpin SNAT to the bridge address), so its replies return
    // through the DNAT that must undo them.
    let seen = requests(&net, "client", &format!("http://{cip}/cgi-bin/ip"), 40).await;
    let client_ip = pods["client"].status.pod_ip.clone();
    let gateway = net.nodes[0].host.pod_cidr.gateway().to_string();
    let seen = tally(&seen);
    assert_eq!(
        seen.keys().cloned().collect::<Vec<_>>(),
        {
            let mut want = vec![client_ip.clone(), gateway.clone()];
            want.sort();
            want
        },
        "{seen:?}"
    );

    // A pod reaching itself through the Service: the bridge must send the packet back out
    // of the port it came in on (hairpin mode on the pod's veth).
    let own = tally(&requests(&net, "web-0", &format!("http://{cip}/"), 40).await);
    assert!(
        own.contains_key("web-0") && !own.contains_key("FAIL"),
        "{own:?}"
    );

    // From the host itself (the output hook), through the route to the Service range.
    let hostnet = shoal_agent::hostnet::HostNet::new(Some(net.nodes[1].host.netns_path()));
    let target: std::net::SocketAddr = format!("{cip}:80").parse().unwrap();
    let from_host = tokio::task::spawn_blocking(move || {
        hostnet.run(move || (0..20).map(|_| http_get(target)).collect::<Vec<_>>())
    })
    .await
    .unwrap()
    .expect("in the host namespace");
    let from_host = tally(&from_host);
    assert!(
        from_host.len() >= 2 && !from_host.contains_key("FAIL"),
        "{from_host:?}"
    );

    // A Service without ready pods refuses at once instead of timing out.
    let empty = net.api.create(&service("empty", "nobody")).await.unwrap();
    let cip_empty = empty.spec.cluster_ip.clone();
    eventually("the empty Service's rules", T, || async {
        let reply = net
            .exec(
                "client",
                &format!("timeout 10 wget -q -O - http://{cip_empty}/"),
                Duration::from_secs(30),
            )
            .await;
        String::from_utf8_lossy(&reply.stderr).contains("refused")
    })
    .await;
    let started = Instant::now();
    let refused = net
        .exec(
            "client",
            &format!("timeout 10 wget -q -O - http://{cip_empty}/"),
            Duration::from_secs(30),
        )
        .await;
    assert_ne!(refused.exit_code, 0);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "refused at once: {:?}",
        started.elapsed()
    );

    // One pod fails readiness (its probe's file is removed), another is relabelled out of
    // the selector, while the client keeps requesting. Lines: "<uptime> <answer>"; both the
    // client and this test read the same clock (/proc/uptime). The loop logs to a file the
    // test watches, and stops when told (or after a minute).
    let url = format!("http://{cip}/");
    let load = format!(
        "rm -f /tmp/load.log /tmp/stop; end=$(( $(cut -d. -f1 /proc/uptime) + 60 )); \
         while [ ! -e /tmp/stop ] && [ $(cut -d. -f1 /proc/uptime) -lt $end ]; do \
         t=$(cut -d' ' -f1 /proc/uptime); r=$(timeout 2 wget -q -O - {url} 2>/dev/null); \
         echo \"$t ${{r:-FAIL}}\" >> /tmp/load.log; done; cat /tmp/load.log"
    );
    let traffic = net.exec("client", &load, Duration::from_secs(90));
    let change = async {
        wait_load_log(&net, "50 requests logged before the change", |log| {
            log.lines().count() >= 50
        })
        .await;
        let t0 = uptime();
        let rm = net
            .exec("web-1", "rm /www/ready.html", Duration::from_secs(10))
            .await;
        assert_eq!(rm.exit_code, 0);
        loop {
            let mut p: Pod = net.api.get("default", "web-2").await.unwrap();
            p.metadata.labels.insert("app".into(), "quarantined".into());
            match net.api.update(&p).await {
                Ok(_) => break,
                Err(e) if e.is_conflict() => continue,
                Err(e) => panic!("relabel web-2: {e}"),
            }
        }
        // Five seconds of traffic after the change: the 2 s allowed, and then some.
        wait_load_log(&net, "requests logged 5 s after the change", |log| {
            log.lines()
                .last()
                .and_then(|l| l.split(' ').next()?.parse::<f64>().ok())
                .is_some_and(|t| t >= t0 + 5.0)
        })
        .await;
        let stop = net
            .exec("client", "touch /tmp/stop", Duration::from_secs(10))
            .await;
        assert_eq!(stop.exit_code, 0);
        t0
    };
    let (reply, t0) = futures::join!(traffic, change);
    let samples: Vec<(f64, String)> = String::from_utf8_lossy(&reply.stdout)
        .lines()
        .filter_map(|l| {
            let (t, who) = l.split_once(' ')?;
            Some((t.parse().ok()?, who.to_string()))
        })
        .collect();
    let excluded = ["web-1", "web-2"];
    let last_excluded = samples
        .iter()
        .filter(|(t, who)| *t >= t0 && excluded.contains(&who.as_str()))
        .map(|(t, _)| *t)
        .fold(t0, f64::max);
    let took = last_excluded - t0;
    let after: Vec<&String> = samples
        .iter()
        .filter(|(t, _)| *t > last_excluded)
        .map(|(_, w)| w)
        .collect();
    eprintln!(
        "readiness + relabel: excluded pods stopped receiving traffic {took:.2} s after the change; \
         {} requests before the change, {} after convergence: {:?}",
        samples.iter().filter(|(t, _)| *t < t0).count(),
        after.len(),
        tally(&after.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    );
    assert!(
        samples
            .iter()
            .any(|(t, w)| *t < t0 && excluded.contains(&w.as_str())),
        "the excluded pods served before the change: {samples:?}"
    );
    assert!(
        took <= 2.0,
        "took {took:.2} s (> 2 s) to stop sending to {excluded:?}"
    );
    assert!(
        after.len() >= 20,
        "too few requests after convergence: {}",
        after.len()
    );
    for name in ["web-0", "web-3"] {
        assert!(
            after.iter().any(|w| *w == name),
            "{name} still serves: {after:?}"
        );
    }
    assert!(
        after.iter().all(|w| *w == "web-0" || *w == "web-3"),
        "only the rest answer after convergence: {after:?}"
    );
    assert!(
        samples.iter().all(|(_, w)| w != "FAIL"),
        "no request failed: {samples:?}"
    );
    // The relabelled pod keeps running and answers on its own address.
    let relabelled: Pod = net.api.get("default", "web-2").await.unwrap();
    assert!(relabelled.is_ready() && relabelled.metadata.deletion_timestamp.is_none());
    let direct = net
        .exec(
            "client",
            &format!(
                "timeout 5 wget -q -O - http://{}:8080/",
                relabelled.status.pod_ip
            ),
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(String::from_utf8_lossy(&direct.stdout).trim(), "web-2");
}

/// Waits until the client's load log (see the readiness test) satisfies `ok`.
async fn wait_load_log(net: &NetCluster, what: &str, ok: impl Fn(&str) -> bool) {
    eventually(what, T, || async {
        let out = net
            .exec(
                "client",
                "cat /tmp/load.log 2>/dev/null",
                Duration::from_secs(10),
            )
            .await;
        ok(&String::from_utf8_lossy(&out.stdout))
    })
    .await
}

/// The current uptime, the clock the client pod's timestamps use.
fn uptime() -> f64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/uptime")
}

/// A GET from this thread (so from whatever namespace it is in); the body's first line or
/// FAIL.
fn http_get(addr: std::net::SocketAddr) -> String {
    use std::io::{Read, Write};
    let attempt = || -> std::io::Result<String> {
        let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
        s.set_read_timeout(Some(Duration::from_secs(3)))?;
        s.write_all(b"GET / HTTP/1.0\r\nHost: web\r\n\r\n")?;
        let mut body = String::new();
        s.read_to_string(&mut body)?;
        Ok(body
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or("")
            .trim()
            .to_string())
    };
    attempt().unwrap_or_else(|_| "FAIL".into())
}

#[actix::test]
async fn a_node_cut_off_the_network_leaves_the_service_to_the_survivors() {
    let net = NetCluster::start(Options::hosts(2)).await;
    let (cip, pods) = web_service(&net).await;
    let url = format!("http://{cip}/");
    // Before: both nodes' pods answer.
    let counts = tally(&requests(&net, "client", &url, 60).await);
    assert!(
        ["web-0", "web-1", "web-2", "web-3"]
            .iter()
            .all(|n| counts.contains_key(*n)),
        "{counts:?}"
    );

    let cut_at = Instant::now();
    net.fabric.cut(1).expect("cut node 1's link");
    let node1 = net.nodes[1].name.clone();
    eventually("node 1 NotReady with NetworkUnavailable", T, || async {
        net.api.get::<Node>("", &node1).await.is_ok_and(|n| {
            let ready = find_condition(&n.status.conditions, "Ready");
            let unavailable = find_condition(&n.status.conditions, "NetworkUnavailable");
            ready.is_some_and(|c| c.status == "False" && c.reason == "NetworkUnavailable")
                && unavailable.is_some_and(|c| c.status == "True")
        })
    })
    .await;
    let not_ready_after = cut_at.elapsed();
    let survivors = sorted_ips([&pods["web-0"], &pods["web-1"]]);
    eventually("only node 0's pods in the endpoints", T, || async {
        ready_endpoints(&net, "web").await == survivors
    })
    .await;
    let endpoints_after = cut_at.elapsed();
    // Because the node is not ready, not because its pods were evicted (the controllers'
    // toleration is 120 s here).
    assert!(
        endpoints_after < Duration::from_secs(10),
        "the cut node's pods left the endpoints only after {endpoints_after:?}"
    );
    for gone in ["web-2", "web-3"] {
        rules_mention(&net, 0, &pods[gone].status.pod_ip, false).await;
    }
    eprintln!(
        "link cut: node NotReady after {not_ready_after:?}, endpoints without its pods after {endpoints_after:?}, rules updated after {:?}",
        cut_at.elapsed()
    );
    let counts = tally(&requests(&net, "client", &url, 100).await);
    assert_eq!(
        counts.keys().cloned().collect::<Vec<_>>(),
        ["web-0", "web-1"],
        "only the survivors answer, every request succeeds: {counts:?}"
    );

    // The link comes back: so does the node, and its pods serve again.
    net.fabric.restore(1).expect("restore node 1's link");
    let all = sorted_ips(pods.values().filter(|p| p.metadata.name != "client"));
    eventually("all four pods back in the endpoints", T, || async {
        ready_endpoints(&net, "web").await == all
    })
    .await;
}
