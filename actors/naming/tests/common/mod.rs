//! Test harness: a real LocalCluster (nats-server + API actor) and a naming actor on a free
//! port of 127.0.0.1, plus a small DNS client built on hickory-proto. Objects are written
//! through the API; there is no endpoints controller here, so Services are selectorless and
//! the tests write their Endpoints themselves.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use bus_schemas::api::DeleteOptions;
use bus_schemas::roles::Role;
use bus_schemas::Resource;
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};
use shoal_api::local::LocalCluster;
use shoal_bus::shutdown::{self, Trigger};
use shoal_bus::ApiClient;
use shoal_naming::NamingConfig;

pub const T: Duration = Duration::from_secs(20);

pub struct Env {
    pub cluster: LocalCluster,
    pub api: ApiClient,
    pub dns: SocketAddr,
    naming: Option<(Trigger, tokio::task::JoinHandle<()>)>,
}

impl Env {
    pub async fn stop(mut self) {
        if let Some((trigger, handle)) = self.naming.take() {
            trigger.fire();
            let _ = handle.await;
        }
    }
}

pub async fn env() -> Env {
    let cluster = LocalCluster::start().await.expect("cluster starts");
    let api = cluster.api();
    let config = NamingConfig {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        udp_threads: 2,
        informers: Some(cluster.informers.clone()),
        ..Default::default()
    };
    let (trigger, sd) = shutdown::channel();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let nats = cluster
        .connect_as(&Role::Naming, "naming")
        .await
        .expect("naming connects");
    let handle = actix::spawn(async move {
        if let Err(e) = shoal_naming::run_with_ready(config, nats, sd.wait(), ready_tx).await {
            panic!("naming actor failed: {e}");
        }
    });
    let addrs = tokio::time::timeout(T, ready_rx)
        .await
        .expect("naming actor ready in time")
        .expect("naming actor ready");
    Env {
        cluster,
        api,
        dns: addrs[0],
        naming: Some((trigger, handle)),
    }
}

pub use shoal_api::local::eventually;

pub fn from_json<K: Resource>(v: serde_json::Value) -> K {
    serde_json::from_value(v).expect("fixture")
}

pub async fn delete_now<K: Resource>(api: &ApiClient, ns: &str, name: &str) {
    let options = DeleteOptions {
        namespace: ns.into(),
        name: name.into(),
        propagation_policy: None,
        grace_period_seconds: Some(0),
        preconditions: None,
    };
    api.delete::<K>(&options).await.expect("delete");
}

pub fn query_bytes(id: u16, name: &str, qtype: RecordType) -> Vec<u8> {
    let mut msg = Message::new(id, MessageType::Query, OpCode::Query);
    msg.metadata.recursion_desired = true;
    msg.add_query(Query::query(Name::from_ascii(name).expect("name"), qtype));
    msg.to_vec().expect("query encodes")
}

/// One query over UDP (blocking: call through [`udp`] from async code).
pub fn udp_blocking(server: SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("client socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    socket.send_to(bytes, server).expect("send");
    let mut buf = vec![0u8; 65535];
    let (n, _) = socket.recv_from(&mut buf).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// One query over TCP, length-prefixed (blocking).
pub fn tcp_blocking(server: SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&server, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(bytes);
    stream.write_all(&framed).ok()?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).ok()?;
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    stream.read_exact(&mut buf).ok()?;
    Some(buf)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Udp,
    Tcp,
}

/// Asks `name`/`qtype` and decodes the response. The blocking socket runs off the test's
/// runtime thread, which also runs the TCP server and the caches.
pub async fn ask(server: SocketAddr, via: Via, name: &str, qtype: RecordType) -> Message {
    let bytes = query_bytes(rand::random(), name, qtype);
    let id = u16::from_be_bytes([bytes[0], bytes[1]]);
    let reply = tokio::task::spawn_blocking(move || match via {
        Via::Udp => udp_blocking(server, &bytes),
        Via::Tcp => tcp_blocking(server, &bytes),
    })
    .await
    .unwrap()
    .unwrap_or_else(|| panic!("no {via:?} answer for {name} {qtype}"));
    let msg = Message::from_vec(&reply).expect("response decodes");
    assert_eq!(msg.id, id, "response id matches the query");
    msg
}

/// The answer records' data as text, sorted (`["10.96.0.1"]`, `["0 100 80 web..."]`).
pub fn data(msg: &Message) -> Vec<String> {
    let mut v: Vec<String> = msg.answers.iter().map(|r| r.data.to_string()).collect();
    v.sort();
    v
}
