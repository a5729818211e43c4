//! No input makes the responder panic, and everything it answers is a well-formed response
//! to the packet's id. Random bytes, and valid queries with random mutations (which reach far
//! deeper into the parser than pure noise does).

use std::sync::Arc;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};
use proptest::prelude::*;
use shoal_bus::ObjectKey;
use shoal_naming::answer::{respond, Transport};
use shoal_naming::index::Builder;
use shoal_naming::records::{self, Source};
use shoal_naming::{Domain, Index};

fn index() -> Arc<Index> {
    let domain = Domain::new("cluster.local").unwrap();
    let index = Arc::new(Index::new(domain.clone(), 5).unwrap());
    let mut builder = Builder::new(index.clone());
    let svc = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.5", "ports": [{"name": "http", "port": 80}]}
    }))
    .unwrap();
    builder.set(
        Source::Service(ObjectKey::new("default", "web")),
        records::service(&domain, &svc, None),
    );
    index.set_synced();
    index
}

fn valid_query(name: &str, qtype: u16, edns: bool) -> Vec<u8> {
    let mut msg = Message::new(0x0102, MessageType::Query, OpCode::Query);
    msg.add_query(Query::query(
        Name::from_ascii(name).unwrap(),
        RecordType::from(qtype),
    ));
    if edns {
        msg.set_edns(Edns::new());
    }
    msg.to_vec().unwrap()
}

/// The responder's contract on any input.
fn check(index: &Index, packet: &[u8]) -> Result<(), TestCaseError> {
    for transport in [Transport::Udp, Transport::Tcp] {
        let mut out = Vec::new();
        let answered = respond(index, packet, transport, &mut out);
        let is_query = packet.len() >= 12 && packet[2] & 0x80 == 0;
        prop_assert_eq!(answered, is_query);
        if answered {
            prop_assert!(out.len() >= 12);
            prop_assert_eq!(&out[..2], &packet[..2], "answers the packet's id");
            prop_assert!(out[2] & 0x80 != 0, "a response");
            if transport == Transport::Udp {
                prop_assert!(out.len() <= shoal_naming::encode::MAX_UDP_PAYLOAD as usize);
            }
            prop_assert!(
                Message::from_vec(&out).is_ok(),
                "response decodes: {:?}",
                out
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_bytes(packet in prop::collection::vec(any::<u8>(), 0..600)) {
        check(&index(), &packet)?;
    }

    #[test]
    fn mutated_queries(
        name in prop::sample::select(vec![
            "web.default.svc.cluster.local.",
            "_http._tcp.web.default.svc.cluster.local.",
            "x.cluster.local.",
            "example.com.",
            ".",
        ]),
        qtype in any::<u16>(),
        edns in any::<bool>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        shorten in any::<bool>(),
    ) {
        let mut packet = valid_query(name, qtype, edns);
        for (at, value) in flips {
            let i = at.index(packet.len());
            packet[i] = value;
        }
        if shorten {
            let len = cut.index(packet.len() + 1);
            packet.truncate(len);
        }
        check(&index(), &packet)?;
    }
}

#[test]
fn every_truncation_of_a_valid_query_is_handled() {
    let index = index();
    let query = valid_query("_http._tcp.web.default.svc.cluster.local.", 33, true);
    for len in 0..=query.len() {
        check(&index, &query[..len]).unwrap();
    }
}
