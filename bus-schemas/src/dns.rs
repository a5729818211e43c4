//! DNS over the bus: the request and reply of [`crate::subjects::DNS_QUERY`], for clients that
//! do not speak the DNS wire protocol.
//!
//! A request is [`DnsQuery`] as msgpack (named fields) or JSON; the reply uses the same
//! encoding as the request (JSON when the body starts with `{`). The answers are exactly those
//! the naming actor gives over UDP and TCP for the same question; names are absolute in DNS
//! presentation form (`web.default.svc.cluster.local.`) and there are no search domains: a
//! trailing dot in the request is optional.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsQuery {
    pub name: String,
    /// A record type mnemonic: `A`, `AAAA`, `SRV`, `CNAME`, `SOA`, `ANY`, … (case-insensitive).
    #[serde(rename = "type", default = "default_query_type")]
    pub type_: String,
}

fn default_query_type() -> String {
    "A".into()
}

impl DnsQuery {
    pub fn new(name: impl Into<String>, type_: impl Into<String>) -> Self {
        DnsQuery {
            name: name.into(),
            type_: type_.into(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsReply {
    /// The DNS response code: `NOERROR`, `NXDOMAIN`, `REFUSED`, `SERVFAIL`, `FORMERR`, …
    pub rcode: String,
    #[serde(default)]
    pub answers: Vec<DnsAnswer>,
    /// Why the request could not be answered (set with `FORMERR` for an undecodable request).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsAnswer {
    /// The record's owner, absolute (`web.default.svc.cluster.local.`).
    pub name: String,
    /// The record type mnemonic (`A`, `SRV`, `CNAME`, …).
    #[serde(rename = "type")]
    pub type_: String,
    pub ttl: u32,
    /// The record data in zone-file form: `10.96.0.12`, `0 100 80 web.default.svc.cluster.local.`.
    pub data: String,
}

/// The response codes by their usual mnemonics.
pub const RCODE_NOERROR: &str = "NOERROR";
pub const RCODE_FORMERR: &str = "FORMERR";
pub const RCODE_SERVFAIL: &str = "SERVFAIL";
pub const RCODE_NXDOMAIN: &str = "NXDOMAIN";
pub const RCODE_NOTIMP: &str = "NOTIMP";
pub const RCODE_REFUSED: &str = "REFUSED";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_type_defaults_to_a_and_round_trips() {
        let q: DnsQuery =
            serde_json::from_str(r#"{"name":"web.default.svc.cluster.local"}"#).expect("decodes");
        assert_eq!(q.type_, "A");
        let json = serde_json::to_string(&DnsQuery::new("x", "SRV")).unwrap();
        assert_eq!(json, r#"{"name":"x","type":"SRV"}"#);
        let bytes = crate::codec::to_msgpack(&q).unwrap();
        assert_eq!(crate::codec::from_msgpack::<DnsQuery>(&bytes).unwrap(), q);
    }

    #[test]
    fn reply_omits_an_empty_error() {
        let reply = DnsReply {
            rcode: RCODE_NOERROR.into(),
            answers: vec![DnsAnswer {
                name: "a.b.".into(),
                type_: "A".into(),
                ttl: 5,
                data: "10.0.0.1".into(),
            }],
            error: String::new(),
        };
        let json = serde_json::to_string(&reply).unwrap();
        assert_eq!(
            json,
            r#"{"rcode":"NOERROR","answers":[{"name":"a.b.","type":"A","ttl":5,"data":"10.0.0.1"}]}"#
        );
    }
}
