//! The naming actor against a real cluster: objects written through the API, questions asked
//! over real UDP and TCP sockets and over NATS.

mod common;

use std::collections::BTreeSet;
use std::net::UdpSocket;
use std::time::Duration;

use bus_schemas::dns::{DnsQuery, DnsReply};
use bus_schemas::kinds::{Endpoints, Pod, Service};
use bus_schemas::{codec, subjects};
use common::*;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;

const WEB: &str = "web.default.svc.cluster.local.";
const DB: &str = "db.default.svc.cluster.local.";

fn cluster_ip_service(name: &str) -> Service {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [
            {"name": "http", "port": 80, "protocol": "TCP"},
            {"name": "dns", "port": 53, "protocol": "UDP"}]}
    }))
}

fn headless_service(name: &str) -> Service {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterIP": "None", "ports": [{"name": "pg", "port": 5432}]}
    }))
}

/// `ready` and `not_ready` as (ip, hostname) pairs.
fn endpoints(name: &str, ready: &[(&str, &str)], not_ready: &[(&str, &str)]) -> Endpoints {
    let list = |pairs: &[(&str, &str)]| -> Vec<serde_json::Value> {
        pairs
            .iter()
            .map(|(ip, host)| serde_json::json!({"ip": ip, "hostname": host}))
            .collect()
    };
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "subsets": [{
            "addresses": list(ready),
            "notReadyAddresses": list(not_ready),
            "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}]
        }]
    }))
}

async fn running_pod(env: &Env, name: &str, ip: &str) {
    let pod: Pod = from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1"}]}
    }));
    let mut pod = env.api.create(&pod).await.expect("pod");
    pod.metadata.resource_version.clear();
    pod.status.phase = "Running".into();
    pod.status.pod_ip = ip.into();
    env.api.update_status(&pod).await.expect("pod status");
}

async fn a_records(env: &Env, name: &str) -> (ResponseCode, Vec<String>) {
    let r = ask(env.dns, Via::Udp, name, RecordType::A).await;
    (r.response_code, data(&r))
}

async fn wait_a(env: &Env, name: &str, rcode: ResponseCode, want: &[&str]) {
    let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    eventually(&format!("{name} A = {rcode} {want:?}"), T, || {
        let want = want.clone();
        async move { a_records(env, name).await == (rcode, want) }
    })
    .await;
}

#[actix::test]
async fn answers_services_endpoints_pods_and_negatives_over_udp_and_tcp() {
    let env = env().await;
    let web = env.api.create(&cluster_ip_service("web")).await.unwrap();
    let web_ip = web.spec.cluster_ip.clone();
    assert!(web_ip.starts_with("10.96."), "allocated {web_ip}");
    let lonely: Service = from_json(serde_json::json!({
        "metadata": {"name": "lonely", "namespace": "default"},
        "spec": {"selector": {"app": "nothing"}, "ports": [{"port": 80}]}
    }));
    let lonely_ip = env.api.create(&lonely).await.unwrap().spec.cluster_ip;
    env.api.create(&headless_service("db")).await.unwrap();
    env.api
        .create(&endpoints(
            "db",
            &[("10.244.0.1", "db-0"), ("10.244.0.2", "")],
            &[("10.244.0.3", "")],
        ))
        .await
        .unwrap();
    env.api.create(&headless_service("empty")).await.unwrap();
    running_pod(&env, "p1", "10.244.1.5").await;

    wait_a(&env, WEB, ResponseCode::NoError, &[&web_ip]).await;
    wait_a(
        &env,
        DB,
        ResponseCode::NoError,
        &["10.244.0.1", "10.244.0.2"],
    )
    .await;
    wait_a(
        &env,
        "10-244-1-5.default.pod.cluster.local.",
        ResponseCode::NoError,
        &["10.244.1.5"],
    )
    .await;
    wait_a(
        &env,
        "empty.default.svc.cluster.local.",
        ResponseCode::NoError,
        &[],
    )
    .await;

    for via in [Via::Udp, Via::Tcp] {
        let q = |name: &'static str, t: RecordType| ask(env.dns, via, name, t);

        // ClusterIP Service: its IP, whatever the letter case, authoritative, TTL 5 s.
        let r = q("Web.DEFAULT.svc.Cluster.Local.", RecordType::A).await;
        assert_eq!(
            (r.response_code, data(&r)),
            (ResponseCode::NoError, vec![web_ip.clone()])
        );
        assert!(r.authoritative, "{via:?}");
        assert_eq!(r.answers[0].ttl, 5);
        assert_eq!(
            r.queries[0].name.to_string(),
            "Web.DEFAULT.svc.Cluster.Local."
        );
        // A Service selecting nothing still answers its ClusterIP.
        let r = q("lonely.default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(data(&r), vec![lonely_ip.clone()]);

        // SRV per named port, pointing at the Service, with its address as glue.
        let r = q("_http._tcp.web.default.svc.cluster.local.", RecordType::SRV).await;
        assert_eq!(data(&r), vec![format!("0 100 80 {WEB}")]);
        let glue: Vec<String> = r.additionals.iter().map(|a| a.data.to_string()).collect();
        assert_eq!(glue, vec![web_ip.clone()]);
        let r = q("_dns._udp.web.default.svc.cluster.local.", RecordType::SRV).await;
        assert_eq!(data(&r), vec![format!("0 100 53 {WEB}")]);
        let r = q("_http._udp.web.default.svc.cluster.local.", RecordType::SRV).await;
        assert_eq!(r.response_code, ResponseCode::NXDomain);

        // Headless: the ready endpoints only, one SRV each, each with a name of its own.
        let r = q(DB, RecordType::A).await;
        assert_eq!(data(&r), vec!["10.244.0.1", "10.244.0.2"]);
        let r = q("_pg._tcp.db.default.svc.cluster.local.", RecordType::SRV).await;
        assert_eq!(
            data(&r),
            vec![
                format!("0 100 5432 10-244-0-2.{DB}"),
                format!("0 100 5432 db-0.{DB}"),
            ]
        );
        let r = q("db-0.db.default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(data(&r), vec!["10.244.0.1"]);
        let r = q("10-244-0-2.db.default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(data(&r), vec!["10.244.0.2"]);
        let r = q("10-244-0-3.db.default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(
            r.response_code,
            ResponseCode::NXDomain,
            "not-ready endpoint"
        );
        // Headless selecting nothing: exists, no records.
        let r = q("empty.default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(
            (r.response_code, r.answers.len()),
            (ResponseCode::NoError, 0)
        );

        // Pods by address, only when such a pod exists.
        let r = q("10-244-1-5.default.pod.cluster.local.", RecordType::A).await;
        assert_eq!(data(&r), vec!["10.244.1.5"]);
        let r = q("10-244-1-6.default.pod.cluster.local.", RecordType::A).await;
        assert_eq!(r.response_code, ResponseCode::NXDomain);
        let r = q("10-244-1-5.other.pod.cluster.local.", RecordType::A).await;
        assert_eq!(r.response_code, ResponseCode::NXDomain, "wrong namespace");

        // Negative answers carry the SOA, with a small TTL.
        let r = q("nothere.default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(r.response_code, ResponseCode::NXDomain);
        assert!(r.authoritative);
        assert_eq!(r.authorities.len(), 1);
        assert_eq!(r.authorities[0].record_type(), RecordType::SOA);
        assert!(r.authorities[0].ttl <= 5);
        // NODATA: AAAA of an existing name, and names that only have names below them.
        let r = q(WEB, RecordType::AAAA).await;
        assert_eq!(
            (r.response_code, r.answers.len()),
            (ResponseCode::NoError, 0)
        );
        assert_eq!(r.authorities[0].record_type(), RecordType::SOA);
        let r = q("default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(
            (r.response_code, r.answers.len()),
            (ResponseCode::NoError, 0)
        );
        // Outside the cluster domain: refused, no forwarding.
        let r = q("example.com.", RecordType::A).await;
        assert_eq!(r.response_code, ResponseCode::Refused);
        assert!(!r.authoritative);
    }
    env.stop().await;
}

#[actix::test]
async fn changes_show_in_answers() {
    let env = env().await;
    env.api.create(&cluster_ip_service("web")).await.unwrap();
    env.api.create(&headless_service("db")).await.unwrap();
    let ep = env
        .api
        .create(&endpoints(
            "db",
            &[("10.244.0.1", ""), ("10.244.0.2", "")],
            &[],
        ))
        .await
        .unwrap();
    running_pod(&env, "p1", "10.244.1.5").await;
    wait_a(
        &env,
        DB,
        ResponseCode::NoError,
        &["10.244.0.1", "10.244.0.2"],
    )
    .await;
    let pod_name = "10-244-1-5.default.pod.cluster.local.";
    wait_a(&env, pod_name, ResponseCode::NoError, &["10.244.1.5"]).await;

    // An endpoint becomes not ready: gone from the Service's answers and its own name.
    let mut changed = endpoints("db", &[("10.244.0.1", "")], &[("10.244.0.2", "")]);
    changed.metadata.resource_version = ep.metadata.resource_version.clone();
    env.api.update(&changed).await.expect("endpoints update");
    wait_a(&env, DB, ResponseCode::NoError, &["10.244.0.1"]).await;
    let r = ask(
        env.dns,
        Via::Tcp,
        "10-244-0-2.db.default.svc.cluster.local.",
        RecordType::A,
    )
    .await;
    assert_eq!(r.response_code, ResponseCode::NXDomain);
    let r = ask(
        env.dns,
        Via::Udp,
        "_pg._tcp.db.default.svc.cluster.local.",
        RecordType::SRV,
    )
    .await;
    assert_eq!(data(&r), vec![format!("0 100 5432 10-244-0-1.{DB}")]);

    // The Service is deleted: NXDOMAIN, its ports too.
    wait_a(
        &env,
        WEB,
        ResponseCode::NoError,
        &[&env
            .api
            .get::<Service>("default", "web")
            .await
            .unwrap()
            .spec
            .cluster_ip],
    )
    .await;
    delete_now::<Service>(&env.api, "default", "web").await;
    wait_a(&env, WEB, ResponseCode::NXDomain, &[]).await;
    let r = ask(
        env.dns,
        Via::Udp,
        "_http._tcp.web.default.svc.cluster.local.",
        RecordType::SRV,
    )
    .await;
    assert_eq!(r.response_code, ResponseCode::NXDomain);
    // The namespace's other Service keeps the namespace name alive.
    let r = ask(
        env.dns,
        Via::Udp,
        "default.svc.cluster.local.",
        RecordType::A,
    )
    .await;
    assert_eq!(r.response_code, ResponseCode::NoError);

    // The pod goes: so does its name.
    delete_now::<Pod>(&env.api, "default", "p1").await;
    wait_a(&env, pod_name, ResponseCode::NXDomain, &[]).await;
    env.stop().await;
}

/// Replies on `socket` until one with `id` arrives; returns the others (decoded headers).
fn replies_until(socket: &UdpSocket, id: u16) -> Vec<Vec<u8>> {
    let mut others = Vec::new();
    let mut buf = vec![0u8; 65535];
    loop {
        let (n, _) = socket
            .recv_from(&mut buf)
            .expect("a reply before the timeout");
        if n >= 2 && u16::from_be_bytes([buf[0], buf[1]]) == id {
            return others;
        }
        others.push(buf[..n].to_vec());
    }
}

#[actix::test]
async fn malformed_packets_get_formerr_or_nothing_and_serving_goes_on() {
    let env = env().await;
    let server = env.dns;
    let outcome = tokio::task::spawn_blocking(move || {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let formerr = |bytes: &[u8], id: u16| {
            socket.send_to(bytes, server).unwrap();
            let mut buf = [0u8; 512];
            let (n, _) = socket.recv_from(&mut buf).unwrap();
            let msg = Message::from_vec(&buf[..n]).expect("FORMERR decodes");
            (msg.id == id, msg.response_code)
        };
        // A header claiming one question, followed by garbage.
        let mut garbage = vec![0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        garbage.extend_from_slice(&[0x3f, 0xff, 0x13, 0x37]);
        assert_eq!(formerr(&garbage, 0xbeef), (true, ResponseCode::FormErr));
        // A bare header without a question.
        let bare = [0x12, 0x34, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(formerr(&bare, 0x1234), (true, ResponseCode::FormErr));
        // An opcode other than QUERY (UPDATE).
        let mut update = query_bytes(0x4242, WEB, RecordType::A);
        update[2] = (update[2] & 0x87) | (5 << 3);
        assert_eq!(formerr(&update, 0x4242), (true, ResponseCode::NotImp));

        // Too short to have an id: dropped. Then random packets, in rounds of 50 each
        // followed by a valid query: that query is always answered, and everything else that
        // was answered is a well-formed response to the packet's id. (Rounds keep the
        // replies within this socket's receive buffer.)
        socket.send_to(&[1, 2, 3, 4, 5], server).unwrap();
        let mut others = Vec::new();
        for round in 0..40u16 {
            for _ in 0..50 {
                let len = rand::random_range(0..600);
                let mut packet: Vec<u8> = (0..len).map(|_| rand::random()).collect();
                if packet.len() > 2 {
                    packet[0] = 0xAA; // so no random packet takes a valid query's id
                    packet[2] &= 0x7f; // a query, which we must answer or drop
                }
                socket.send_to(&packet, server).unwrap();
            }
            let id = 0x7000 + round;
            socket
                .send_to(&query_bytes(id, WEB, RecordType::A), server)
                .unwrap();
            others.extend(replies_until(&socket, id));
        }
        for reply in &others {
            assert!(
                reply.len() >= 12 && reply[2] & 0x80 != 0,
                "a response: {reply:?}"
            );
            assert_eq!(reply[0], 0xAA, "answers the packet's id");
        }
        let answered = udp_blocking(server, &query_bytes(0x8888, WEB, RecordType::A));
        (others.len(), answered.is_some())
    })
    .await
    .unwrap();
    assert!(
        outcome.0 > 0,
        "some random packets were answered with errors"
    );
    assert!(outcome.1, "still serving after the noise");

    // Over TCP: a malformed message gets FORMERR and the connection serves the next one.
    let server = env.dns;
    let (first, second) = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(server).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let read_one = |s: &mut std::net::TcpStream| {
            let mut len = [0u8; 2];
            s.read_exact(&mut len).unwrap();
            let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
            s.read_exact(&mut buf).unwrap();
            Message::from_vec(&buf).unwrap()
        };
        let bad = [
            0x00, 0x0e, 0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
        ];
        s.write_all(&bad).unwrap();
        let first = read_one(&mut s);
        let good = query_bytes(0x5555, "example.org.", RecordType::A);
        let mut framed = (good.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&good);
        s.write_all(&framed).unwrap();
        (first, read_one(&mut s))
    })
    .await
    .unwrap();
    assert_eq!(
        (first.id, first.response_code),
        (0xabcd, ResponseCode::FormErr)
    );
    assert_eq!(
        (second.id, second.response_code),
        (0x5555, ResponseCode::Refused)
    );
    env.stop().await;
}

async fn over_nats(env: &Env, name: &str, qtype: &str, json: bool) -> DnsReply {
    let q = DnsQuery::new(name, qtype);
    let body = if json {
        serde_json::to_vec(&q).unwrap()
    } else {
        codec::to_msgpack(&q).unwrap()
    };
    let msg = env
        .cluster
        .nats
        .request(subjects::DNS_QUERY, body.into())
        .await
        .expect("a naming actor answers");
    if json {
        serde_json::from_slice(&msg.payload).expect("JSON reply")
    } else {
        codec::from_msgpack(&msg.payload).expect("msgpack reply")
    }
}

#[actix::test]
async fn nats_answers_as_dns_does() {
    let env = env().await;
    let web = env.api.create(&cluster_ip_service("web")).await.unwrap();
    env.api.create(&headless_service("db")).await.unwrap();
    env.api
        .create(&endpoints(
            "db",
            &[("10.244.0.1", "db-0"), ("10.244.0.2", "")],
            &[],
        ))
        .await
        .unwrap();
    wait_a(
        &env,
        DB,
        ResponseCode::NoError,
        &["10.244.0.1", "10.244.0.2"],
    )
    .await;
    wait_a(&env, WEB, ResponseCode::NoError, &[&web.spec.cluster_ip]).await;

    let questions = [
        ("web.default.svc.cluster.local", RecordType::A),
        ("_http._tcp.web.default.svc.cluster.local.", RecordType::SRV),
        ("db.default.svc.cluster.local", RecordType::A),
        ("_pg._tcp.db.default.svc.cluster.local", RecordType::SRV),
        ("web.default.svc.cluster.local", RecordType::AAAA),
        ("nothere.default.svc.cluster.local", RecordType::A),
        ("example.com", RecordType::A),
    ];
    for (name, qtype) in questions {
        let dns = ask(
            env.dns,
            Via::Udp,
            &format!("{}.", name.trim_end_matches('.')),
            qtype,
        )
        .await;
        let dns_rcode = shoal_naming::bus::rcode(dns.response_code);
        let dns_answers: BTreeSet<(String, String, u32, String)> = dns
            .answers
            .iter()
            .map(|r| {
                (
                    r.name.to_ascii(),
                    r.record_type().to_string(),
                    r.ttl,
                    r.data.to_string(),
                )
            })
            .collect();
        for json in [true, false] {
            let reply = over_nats(&env, name, &qtype.to_string().to_lowercase(), json).await;
            let answers: BTreeSet<_> = reply
                .answers
                .iter()
                .map(|a| (a.name.clone(), a.type_.clone(), a.ttl, a.data.clone()))
                .collect();
            assert_eq!(
                (reply.rcode.as_str(), &answers),
                (dns_rcode.as_str(), &dns_answers),
                "{name} {qtype} (json: {json})"
            );
            assert!(reply.error.is_empty());
        }
    }
    let a = over_nats(&env, "web.default.svc.cluster.local", "A", true).await;
    assert_eq!(a.answers[0].data, web.spec.cluster_ip);
    assert_eq!(a.answers[0].name, WEB);

    // Undecodable requests and unknown types get an error reply, and serving goes on.
    let msg = env
        .cluster
        .nats
        .request(subjects::DNS_QUERY, "{\"name\": 7}".into())
        .await
        .unwrap();
    let reply: DnsReply = serde_json::from_slice(&msg.payload).unwrap();
    assert_eq!(reply.rcode, "FORMERR");
    assert!(!reply.error.is_empty());
    let reply = over_nats(&env, "web.default.svc.cluster.local", "NOPE", true).await;
    assert_eq!(reply.rcode, "FORMERR");
    assert!(reply.error.contains("NOPE"), "{}", reply.error);
    let reply = over_nats(&env, "web.default.svc.cluster.local", "A", false).await;
    assert_eq!(reply.rcode, "NOERROR");
    env.stop().await;
}
