//! The same answers over NATS request/reply (`shoal.v1.dns.query`), for clients that do not
//! speak DNS. A request is turned into a DNS query and answered by [`respond`] itself, so the
//! two can never disagree.

use std::str::FromStr;
use std::sync::Arc;

use bus_schemas::dns::{DnsAnswer, DnsQuery, DnsReply, RCODE_FORMERR, RCODE_SERVFAIL};
use bus_schemas::{codec, subjects};
use futures::StreamExt;
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use shoal_bus::shutdown::Shutdown;

use crate::answer::{respond, Transport};
use crate::index::Index;

/// Subscribes to the query subject in the naming actors' queue group.
pub async fn subscribe(
    nats: &async_nats::Client,
) -> Result<async_nats::Subscriber, async_nats::SubscribeError> {
    nats.queue_subscribe(subjects::DNS_QUERY, subjects::DNS_QUEUE_GROUP.to_string())
        .await
}

/// Answers requests until `shutdown`.
pub async fn serve(
    nats: async_nats::Client,
    mut requests: async_nats::Subscriber,
    index: Arc<Index>,
    shutdown: Shutdown,
) {
    let stop = shutdown.wait();
    tokio::pin!(stop);
    loop {
        let msg = tokio::select! {
            _ = &mut stop => break,
            msg = requests.next() => match msg {
                Some(msg) => msg,
                None => break,
            },
        };
        let Some(reply_to) = msg.reply else {
            continue;
        };
        let body = handle(&index, &msg.payload);
        if let Err(e) = nats.publish(reply_to, body.into()).await {
            tracing::debug!(error = %e, "publishing a DNS reply failed");
        }
    }
    let _ = requests.unsubscribe().await;
}

/// Decodes a request (JSON when it starts with `{`, msgpack otherwise), answers it and
/// encodes the reply the same way.
pub fn handle(index: &Index, payload: &[u8]) -> Vec<u8> {
    let json = payload.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let decoded = if json {
        serde_json::from_slice::<DnsQuery>(payload).map_err(|e| e.to_string())
    } else {
        codec::from_msgpack::<DnsQuery>(payload).map_err(|e| e.to_string())
    };
    let reply = match decoded {
        Ok(query) => lookup(index, &query),
        Err(e) => failure(RCODE_FORMERR, format!("undecodable DNS query request: {e}")),
    };
    let encoded = if json {
        serde_json::to_vec(&reply).map_err(|e| e.to_string())
    } else {
        codec::to_msgpack(&reply).map_err(|e| e.to_string())
    };
    // A reply of plain strings always encodes; keep a literal fallback all the same.
    encoded.unwrap_or_else(|_| br#"{"rcode":"SERVFAIL","answers":[]}"#.to_vec())
}

/// Answers one question exactly as a DNS client asking over TCP would be answered.
pub fn lookup(index: &Index, query: &DnsQuery) -> DnsReply {
    let Ok(qtype) = RecordType::from_str(&query.type_.to_ascii_uppercase()) else {
        return failure(
            RCODE_FORMERR,
            format!("unknown record type {:?}", query.type_),
        );
    };
    let name = match Name::from_utf8(&query.name) {
        Ok(mut name) => {
            name.set_fqdn(true);
            name
        }
        Err(e) => {
            return failure(
                RCODE_FORMERR,
                format!("{:?} is not a DNS name: {e}", query.name),
            )
        }
    };
    let mut msg = Message::new(0, MessageType::Query, OpCode::Query);
    msg.add_query(Query::query(name, qtype));
    let bytes = match msg.to_vec() {
        Ok(bytes) => bytes,
        Err(e) => return failure(RCODE_FORMERR, format!("encoding the question: {e}")),
    };
    let mut out = Vec::new();
    if !respond(index, &bytes, Transport::Tcp, &mut out) {
        return failure(RCODE_SERVFAIL, "the question was not answered".into());
    }
    match Message::from_vec(&out) {
        Ok(response) => DnsReply {
            rcode: rcode(response.response_code),
            answers: response
                .answers
                .iter()
                .map(|r| DnsAnswer {
                    name: r.name.to_string(),
                    type_: r.record_type().to_string(),
                    ttl: r.ttl,
                    data: r.data.to_string(),
                })
                .collect(),
            error: String::new(),
        },
        Err(e) => failure(RCODE_SERVFAIL, format!("decoding our own response: {e}")),
    }
}

fn failure(rcode: &str, error: String) -> DnsReply {
    DnsReply {
        rcode: rcode.into(),
        answers: Vec::new(),
        error,
    }
}

/// The usual mnemonic of a response code (`NXDOMAIN`, not hickory's "Non-Existent Domain").
pub fn rcode(code: ResponseCode) -> String {
    match code {
        ResponseCode::NoError => "NOERROR".into(),
        ResponseCode::FormErr => "FORMERR".into(),
        ResponseCode::ServFail => "SERVFAIL".into(),
        ResponseCode::NXDomain => "NXDOMAIN".into(),
        ResponseCode::NotImp => "NOTIMP".into(),
        ResponseCode::Refused => "REFUSED".into(),
        ResponseCode::BADVERS => "BADVERS".into(),
        other => format!("RCODE{}", u16::from(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::Domain;

    fn index() -> Index {
        let index = Index::new(Domain::new("cluster.local").unwrap(), 5).unwrap();
        index.set_synced();
        index
    }

    #[test]
    fn json_in_json_out_and_errors_are_replies() {
        let index = index();
        let out = handle(&index, br#" {"name": "cluster.local", "type": "soa"}"#);
        let reply: DnsReply = serde_json::from_slice(&out).unwrap();
        assert_eq!(reply.rcode, "NOERROR");
        assert_eq!(reply.answers[0].type_, "SOA");
        assert_eq!(reply.answers[0].name, "cluster.local.");

        let reply: DnsReply = serde_json::from_slice(&handle(&index, b"{nope")).unwrap();
        assert_eq!(reply.rcode, "FORMERR");
        assert!(reply.error.contains("undecodable"), "{}", reply.error);

        let out = handle(
            &index,
            &codec::to_msgpack(&DnsQuery::new("x.cluster.local", "A")).unwrap(),
        );
        let reply: DnsReply = codec::from_msgpack(&out).unwrap();
        assert_eq!(reply.rcode, "NXDOMAIN");

        let out = handle(&index, &[0xc1, 0xff, 0x00]);
        let reply: DnsReply = codec::from_msgpack(&out).unwrap();
        assert_eq!(reply.rcode, "FORMERR");
    }

    #[test]
    fn bad_types_and_names_are_formerr() {
        let index = index();
        let r = lookup(&index, &DnsQuery::new("cluster.local", "BOGUS"));
        assert_eq!(r.rcode, "FORMERR");
        assert!(r.error.contains("BOGUS"));
        let r = lookup(&index, &DnsQuery::new("a".repeat(300), "A"));
        assert_eq!(r.rcode, "FORMERR");
        let r = lookup(&index, &DnsQuery::new("example.com", "A"));
        assert_eq!(r.rcode, "REFUSED");
    }
}
