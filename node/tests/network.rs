//! Pod networking on a bridge inside a test-owned node namespace: pod-to-pod
//! traffic, probes, and complete teardown.

mod common;

use common::*;
use shoal_node::probe::{self, ProbeResult};
use shoal_node::{ExecRequest, Runtime};
use std::collections::HashSet;
use std::net::IpAddr;
use std::process::Command;
use std::time::Duration;

fn link_exists(ns: &str, dev: &str) -> bool {
    Command::new("ip")
        .args(["-n", ns, "link", "show", dev])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
fn two_pods_talk_over_the_bridge_and_probes_work() {
    let env = Env::new();
    let server = env.sandbox("web");
    let client = env.sandbox("client");
    assert_ne!(server.ip, client.ip);
    assert!(env.cidr.contains(server.ip) && env.cidr.contains(client.ip));
    let httpd = env.run(
        &server,
        "httpd",
        &["httpd", "-f", "-p", "80", "-h", "/var/www"],
    );
    let cli = env.run(&client, "cli", &["sleep", "1000"]);
    let url = format!("http://{}/index.html", server.ip);
    let body = poll_until(Duration::from_secs(15), || {
        let r = env
            .rt
            .exec(
                &cli.id,
                &ExecRequest::new(
                    ["wget", "-q", "-O", "-", url.as_str()],
                    Duration::from_secs(5),
                ),
            )
            .ok()?;
        (r.exit_code == 0).then(|| String::from_utf8_lossy(&r.stdout).into_owned())
    })
    .expect("client reached server over the bridge");
    assert_eq!(body, "hello from shoal\n");
    // The pod's default route points at the bridge address.
    let routes = exec_ok(&env, &cli.id, &["ip", "route"]);
    assert!(
        routes.contains(&format!("default via {}", env.cidr.gateway())),
        "{routes}"
    );

    // Probes run from the node namespace, where the bridge is.
    let ip = IpAddr::V4(server.ip);
    let ok = probe::in_netns(&env.node_ns.path, move || {
        probe::http_get(ip, 80, "/index.html", Duration::from_secs(5))
    })
    .unwrap();
    assert_eq!(ok, ProbeResult::Success);
    let missing = probe::in_netns(&env.node_ns.path, move || {
        probe::http_get(ip, 80, "/nope", Duration::from_secs(5))
    })
    .unwrap();
    assert!(
        matches!(missing, ProbeResult::Failure(ref m) if m.contains("404")),
        "{missing:?}"
    );
    let tcp = probe::in_netns(&env.node_ns.path, move || {
        probe::tcp_socket(ip, 80, Duration::from_secs(5))
    })
    .unwrap();
    assert!(tcp.is_success());
    let closed = probe::in_netns(&env.node_ns.path, move || {
        probe::tcp_socket(ip, 81, Duration::from_secs(2))
    })
    .unwrap();
    assert!(!closed.is_success());
    env.rt.stop_container(&httpd.id, Duration::ZERO).unwrap();
}

#[test]
fn remove_sandbox_leaves_nothing_behind() {
    let env = Env::new();
    let sb = env.sandbox("gone");
    let c = env.run(&sb, "sleeper", &["sleep", "1000"]);
    assert!(link_exists(&env.node_ns.name, &sb.host_veth));
    assert!(driver(&env).exists(&sb.cgroup));
    assert!(!env.mounts_under_tmp().is_empty());
    env.rt.remove_sandbox(&sb.id).unwrap();
    assert!(env.rt.container_state(&c.id).unwrap_err().is_not_found());
    assert_eq!(env.mounts_under_tmp(), Vec::<String>::new(), "mounts left");
    assert!(!driver(&env).exists(&sb.cgroup), "pod cgroup left");
    assert!(!link_exists(&env.node_ns.name, &sb.host_veth), "veth left");
    assert!(!sb.netns_path.exists(), "netns file left");
    assert!(!sb.dir.exists(), "sandbox dir left");
    let ipam = env.state_dir().join("ipam").join(sb.ip.to_string());
    assert!(!ipam.exists(), "IP allocation left");
    // Idempotent, and fine for ids that never existed.
    env.rt.remove_sandbox(&sb.id).unwrap();
    env.rt.remove_sandbox("never-existed").unwrap();
}

#[test]
fn half_created_sandbox_and_orphans_are_cleaned() {
    let env = Env::new();
    let keep = env.sandbox("keep");
    let drop_me = env.sandbox("drop");
    // A half-created sandbox: directory and IP allocation but no namespaces.
    let half = "half-1";
    std::fs::create_dir_all(env.state_dir().join("sandboxes").join(half)).unwrap();
    let ipam = shoal_node::net::Ipam::open(env.state_dir().join("ipam"), env.cidr).unwrap();
    let half_ip = ipam.allocate(half).unwrap();
    let report = env
        .rt
        .cleanup_orphans(&HashSet::from([keep.id.clone()]))
        .unwrap();
    let mut removed = report.sandboxes.clone();
    removed.sort();
    let mut want = vec![drop_me.id.clone(), half.to_string()];
    want.sort();
    assert_eq!(removed, want);
    assert!(!ipam
        .allocations()
        .unwrap()
        .iter()
        .any(|(ip, _)| *ip == half_ip));
    let left: Vec<String> = env
        .rt
        .list_sandboxes()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(left, vec![keep.id.clone()]);
    assert!(!driver(&env).exists(&drop_me.cgroup));
    assert!(link_exists(&env.node_ns.name, &keep.host_veth));
}
