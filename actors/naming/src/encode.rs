//! Pre-encoded answers: each name's records are turned into wire bytes once, when they
//! change, so answering a query is a lookup and a copy.
//!
//! A [`Section`] is everything a response holds after its question (answer, authority and
//! additional records). It is encoded with hickory-proto as the tail of a whole response to
//! the lowercase question, with name compression: owner names become pointers to the
//! question at offset 12. Every response to the same name (in any letter case: compression
//! only follows label lengths) has its question at the same offsets, so the tail can be
//! spliced after any such question unchanged.

use std::collections::BTreeSet;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::{A, CNAME, SOA, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder, NameEncoding};
use hickory_proto::ProtoError;

use crate::records::RecordData;

/// The largest UDP response we send: the EDNS payload size DNS Flag Day 2020 settled on,
/// which avoids IP fragmentation on any common path.
pub const MAX_UDP_PAYLOAD: u16 = 1232;

/// The tail of a response after its question.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Section {
    pub answers: u16,
    pub authorities: u16,
    pub additionals: u16,
    pub bytes: Box<[u8]>,
}

/// Everything one name answers: a section per record type it holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entry {
    sections: Vec<(RecordType, Section)>,
}

impl Entry {
    /// The section answering `qtype`; None means the name exists without such records (NODATA).
    /// A CNAME answers every type, as the name has nothing else.
    pub fn section(&self, qtype: RecordType) -> Option<&Section> {
        let find = |t: RecordType| self.sections.iter().find(|(k, _)| *k == t).map(|(_, s)| s);
        find(qtype).or_else(|| find(RecordType::CNAME))
    }

    pub fn is_empty(&self) -> bool {
        self.sections.is_empty()
    }
}

/// Encodes the records of `owner` (lowercase, absolute). `apex_soa` is given for the apex.
pub fn entry(
    owner: &Name,
    records: &BTreeSet<RecordData>,
    apex_soa: Option<&SOA>,
    ttl: u32,
) -> Result<Entry, ProtoError> {
    let mut by_type: Vec<(RecordType, Vec<Record>, Vec<Record>)> = Vec::new();
    let mut push = |t: RecordType, answer: Record, glue: Option<Record>| {
        let pos = match by_type.iter().position(|(k, _, _)| *k == t) {
            Some(pos) => pos,
            None => {
                by_type.push((t, Vec::new(), Vec::new()));
                by_type.len() - 1
            }
        };
        by_type[pos].1.push(answer);
        if let Some(glue) = glue {
            if !by_type[pos].2.contains(&glue) {
                by_type[pos].2.push(glue);
            }
        }
    };
    for record in records {
        match record {
            RecordData::A(ip) => push(
                RecordType::A,
                Record::from_rdata(owner.clone(), ttl, RData::A(A(*ip))),
                None,
            ),
            RecordData::Srv(srv) => {
                let target = absolute(&srv.target)?;
                let glue = srv
                    .glue
                    .map(|ip| Record::from_rdata(target.clone(), ttl, RData::A(A(ip))));
                let data = SRV::new(srv.priority, srv.weight, srv.port, target);
                push(
                    RecordType::SRV,
                    Record::from_rdata(owner.clone(), ttl, RData::SRV(data)),
                    glue,
                );
            }
            RecordData::Cname(target) => push(
                RecordType::CNAME,
                Record::from_rdata(owner.clone(), ttl, RData::CNAME(CNAME(absolute(target)?))),
                None,
            ),
        }
    }
    if let Some(soa) = apex_soa {
        push(
            RecordType::SOA,
            Record::from_rdata(owner.clone(), ttl, RData::SOA(soa.clone())),
            None,
        );
    }
    let mut sections = Vec::with_capacity(by_type.len() + 1);
    let mut all = (Vec::new(), Vec::new());
    for (t, answers, glue) in by_type {
        sections.push((t, tail(owner, t, &answers, &[], &glue)?));
        all.0.extend(answers);
        all.1.extend(glue);
    }
    if !sections.is_empty() {
        // RFC 8482 lets ANY be answered with less; the whole set is small here.
        sections.push((
            RecordType::ANY,
            tail(owner, RecordType::ANY, &all.0, &[], &all.1)?,
        ));
    }
    Ok(Entry { sections })
}

/// The records after the question of a response to `owner`/`qtype`.
fn tail(
    owner: &Name,
    qtype: RecordType,
    answers: &[Record],
    authorities: &[Record],
    additionals: &[Record],
) -> Result<Section, ProtoError> {
    let mut msg = Message::new(0, MessageType::Response, OpCode::Query);
    msg.add_query(Query::query(owner.clone(), qtype));
    msg.add_answers(answers.iter().cloned());
    msg.add_authorities(authorities.iter().cloned());
    msg.add_additionals(additionals.iter().cloned());
    let bytes = msg.to_vec()?;
    let question_end = 12 + wire_len(owner) + 4;
    let count = |n: usize| {
        u16::try_from(n).map_err(|_| ProtoError::Message("too many records for one response"))
    };
    Ok(Section {
        answers: count(answers.len())?,
        authorities: count(authorities.len())?,
        additionals: count(additionals.len())?,
        bytes: bytes
            .get(question_end..)
            .ok_or(ProtoError::Message(
                "encoded response shorter than its question",
            ))?
            .into(),
    })
}

/// The zone's SOA as an authority section for negative answers. Encoded without
/// compression, so it can follow any question.
pub fn negative(apex: &Name, soa: &SOA, ttl: u32) -> Result<Section, ProtoError> {
    let record = Record::from_rdata(apex.clone(), ttl, RData::SOA(soa.clone()));
    let mut bytes = Vec::new();
    let mut encoder = BinEncoder::new(&mut bytes);
    encoder.set_name_encoding(NameEncoding::Uncompressed);
    record.emit(&mut encoder)?;
    Ok(Section {
        answers: 0,
        authorities: 1,
        additionals: 0,
        bytes: bytes.into(),
    })
}

/// The OPT record every EDNS response carries: our payload size, version 0, no options.
pub fn opt_record() -> Result<Box<[u8]>, ProtoError> {
    let mut edns = Edns::new();
    edns.set_max_payload(MAX_UDP_PAYLOAD);
    edns.set_version(0);
    let record = Record::from(&edns);
    let mut bytes = Vec::new();
    record.emit(&mut BinEncoder::new(&mut bytes))?;
    Ok(bytes.into())
}

/// The zone's SOA: small negative-caching TTL, as names come and go with pods.
pub fn soa(apex: &Name, serial: u32, negative_ttl: u32) -> Result<SOA, ProtoError> {
    let mname = Name::from_ascii("ns.dns")?.append_domain(apex)?;
    let rname = Name::from_ascii("hostmaster")?.append_domain(apex)?;
    Ok(SOA::new(
        mname,
        rname,
        serial,
        7200,
        1800,
        86400,
        negative_ttl,
    ))
}

fn absolute(name: &str) -> Result<Name, ProtoError> {
    let mut n = Name::from_ascii(name)?;
    n.set_fqdn(true);
    Ok(n)
}

/// The length of a name in uncompressed wire form.
pub fn wire_len(name: &Name) -> usize {
    name.iter().map(|label| label.len() + 1).sum::<usize>() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Srv;

    fn name(s: &str) -> Name {
        absolute(s).unwrap()
    }

    /// Splices a tail after a question the way responses are built, and decodes the result.
    fn splice(owner: &str, qtype: RecordType, section: &Section) -> Message {
        let mut msg = Message::new(7, MessageType::Response, OpCode::Query);
        msg.add_query(Query::query(name(owner), qtype));
        let mut bytes = msg.to_vec().unwrap();
        bytes[6..8].copy_from_slice(&section.answers.to_be_bytes());
        bytes[8..10].copy_from_slice(&section.authorities.to_be_bytes());
        bytes[10..12].copy_from_slice(&section.additionals.to_be_bytes());
        bytes.extend_from_slice(&section.bytes);
        Message::from_vec(&bytes).expect("spliced response decodes")
    }

    #[test]
    fn tails_decode_after_a_question_in_any_case() {
        let owner = name("_http._tcp.web.default.svc.cluster.local");
        let records = [RecordData::Srv(Srv {
            priority: 0,
            weight: 100,
            port: 80,
            target: "web.default.svc.cluster.local".into(),
            glue: Some("10.96.0.5".parse().unwrap()),
        })]
        .into_iter()
        .collect();
        let e = entry(&owner, &records, None, 5).unwrap();
        let s = e.section(RecordType::SRV).unwrap();
        let msg = splice(
            "_HTTP._tcp.Web.default.svc.cluster.local",
            RecordType::SRV,
            s,
        );
        assert_eq!(msg.answers.len(), 1);
        assert_eq!(msg.answers[0].ttl, 5);
        assert_eq!(
            msg.answers[0].data.to_string(),
            "0 100 80 web.default.svc.cluster.local."
        );
        assert_eq!(msg.additionals.len(), 1);
        assert_eq!(msg.additionals[0].data.to_string(), "10.96.0.5");
        assert!(e.section(RecordType::AAAA).is_none());
        assert!(e.section(RecordType::ANY).is_some());
    }

    #[test]
    fn negative_section_follows_any_question() {
        let apex = name("cluster.local");
        let soa = soa(&apex, 1, 5).unwrap();
        let s = negative(&apex, &soa, 5).unwrap();
        let msg = splice("nope.cluster.local", RecordType::A, &s);
        assert_eq!(msg.authorities.len(), 1);
        assert_eq!(msg.authorities[0].record_type(), RecordType::SOA);
        assert_eq!(msg.authorities[0].name.to_string(), "cluster.local.");
    }

    #[test]
    fn cname_answers_every_type() {
        let owner = name("ext.default.svc.cluster.local");
        let records = [RecordData::Cname("example.com".into())]
            .into_iter()
            .collect();
        let e = entry(&owner, &records, None, 5).unwrap();
        assert!(e.section(RecordType::A).is_some());
        assert!(e.section(RecordType::AAAA).is_some());
    }
}
