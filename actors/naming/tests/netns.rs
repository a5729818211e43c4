//! Binding inside a network namespace: the node-local deployment, where each node's replica
//! listens in that node's namespace. Needs root and `ip` (as the node agent does).

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use bus_schemas::roles::Role;
use common::*;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use shoal_naming::NamingConfig;

/// A network namespace with its loopback up, deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn create() -> Netns {
        let name = format!("shoalnm-{:08x}", rand::random::<u32>());
        let ok = |args: &[&str]| {
            let status = Command::new("ip").args(args).status().expect("running ip");
            assert!(status.success(), "ip {args:?} failed");
        };
        ok(&["netns", "add", &name]);
        let netns = Netns { name };
        ok(&["-n", &netns.name, "link", "set", "lo", "up"]);
        netns
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/var/run/netns/{}", self.name))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .status();
    }
}

/// Asks from a thread that has joined the namespace (sockets it creates live there).
fn ask_in(netns: PathBuf, server: SocketAddr, name: &'static str) -> Option<Message> {
    std::thread::spawn(move || {
        let file = std::fs::File::open(&netns).expect("netns file");
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        let socket = UdpSocket::bind("127.0.0.1:0").expect("client socket in netns");
        socket
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        socket
            .send_to(&query_bytes(0x2b2b, name, RecordType::A), server)
            .expect("send in netns");
        let mut buf = [0u8; 1500];
        let (n, _) = socket.recv_from(&mut buf).ok()?;
        Message::from_vec(&buf[..n]).ok()
    })
    .join()
    .expect("client thread")
}

#[test]
fn bind_creates_sockets_in_the_namespace() {
    let netns = Netns::create();
    let bound = shoal_naming::bind("127.0.0.1:0".parse().unwrap(), Some(&netns.path()))
        .expect("bind in netns");
    let addr = bound.local_addr().unwrap();
    // Only a datagram sent from inside the namespace can reach a socket bound to loopback
    // there: this process's own loopback is another interface.
    let server = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        bound
            .udp
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        bound
            .udp
            .recv_from(&mut buf)
            .map(|(n, _)| buf[..n].to_vec())
    });
    let path = netns.path();
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap();
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.send_to(b"inside", addr).unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(
        server.join().unwrap().expect("datagram from the netns"),
        b"inside"
    );
}

#[actix::test]
async fn naming_actor_serves_port_53_inside_a_namespace() {
    let netns = Netns::create();
    let cluster = shoal_api::local::LocalCluster::start()
        .await
        .expect("cluster");
    let svc: bus_schemas::kinds::Service = from_json(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80}]}
    }));
    let ip = cluster.api().create(&svc).await.unwrap().spec.cluster_ip;
    let config = NamingConfig {
        listen: vec!["127.0.0.1:53".parse().unwrap()],
        netns: Some(netns.path()),
        udp_threads: 1,
        serve_nats: false,
        informers: Some(cluster.informers.clone()),
        ..Default::default()
    };
    let (trigger, sd) = shoal_bus::shutdown::channel();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let nats = cluster
        .connect_as(&Role::Naming, "naming")
        .await
        .expect("naming connects");
    let handle = actix::spawn(async move {
        shoal_naming::run_with_ready(config, nats, sd.wait(), ready_tx).await
    });
    let addrs = tokio::time::timeout(T, ready_rx).await.unwrap().unwrap();
    assert_eq!(addrs, vec!["127.0.0.1:53".parse::<SocketAddr>().unwrap()]);

    let path = netns.path();
    let server = addrs[0];
    eventually("web answers inside the namespace", T, || {
        let (path, ip) = (path.clone(), ip.clone());
        async move {
            let reply = tokio::task::spawn_blocking(move || {
                ask_in(path, server, "web.default.svc.cluster.local.")
            })
            .await
            .unwrap();
            reply.is_some_and(|m| {
                m.response_code == ResponseCode::NoError
                    && m.answers.first().map(|a| a.data.to_string()) == Some(ip)
            })
        }
    })
    .await;
    trigger.fire();
    handle.await.unwrap().expect("naming actor ends cleanly");
}
