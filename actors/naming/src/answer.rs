//! One query in, one response out: the only place DNS semantics are decided.
//!
//! hickory-proto parses every query (anything it cannot parse is FORMERR); the response is the
//! header and the client's question, followed by the name's pre-encoded [`Section`]. Never
//! panics, whatever the bytes: the serving loops rely on it.
//!
//! Names outside the cluster domain are REFUSED: there is no upstream forwarding, so clients
//! that need external names list another resolver after this one, or put a forwarder in front.

use hickory_proto::op::{
    Edns, Header, HeaderCounts, Message, MessageType, Metadata, OpCode, ResponseCode,
};
use hickory_proto::rr::{DNSClass, Name};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

use crate::encode::{Section, MAX_UDP_PAYLOAD};
use crate::index::Index;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Responses larger than the client's payload size are truncated (TC set).
    Udp,
    /// Length-prefixed; responses up to 64 KiB.
    Tcp,
}

/// The longest name in wire form (RFC 1035 §2.3.4).
const MAX_NAME: usize = 255;

/// Writes the response to `query` into `out`. Returns false when the packet gets no answer:
/// shorter than a header (no id to answer to), or itself a response (answering those could
/// loop between servers).
pub fn respond(index: &Index, query: &[u8], transport: Transport, out: &mut Vec<u8>) -> bool {
    out.clear();
    let Some(header) = query.get(..12) else {
        return false;
    };
    if header[2] & 0x80 != 0 {
        return false;
    }
    let mut meta = Metadata::new(
        u16::from_be_bytes([header[0], header[1]]),
        MessageType::Response,
        OpCode::from_u8((header[2] >> 3) & 0x0f),
    );
    meta.recursion_desired = header[2] & 0x01 != 0;
    meta.checking_disabled = header[3] & 0x10 != 0;
    if meta.op_code != OpCode::Query {
        meta.response_code = ResponseCode::NotImp;
        write_header(out, meta, HeaderCounts::default());
        return true;
    }
    let msg = match Message::from_vec(query) {
        Ok(msg) if msg.queries.len() == 1 => msg,
        _ => {
            meta.response_code = ResponseCode::FormErr;
            write_header(out, meta, HeaderCounts::default());
            return true;
        }
    };
    let question = &msg.queries[0];
    if msg.edns.as_ref().is_some_and(|e| e.version() > 0) {
        bad_version(meta, &msg, out);
        return true;
    }
    let opt = msg.edns.is_some().then(|| index.opt());
    let limit = match (transport, &msg.edns) {
        (Transport::Tcp, _) => u16::MAX as usize,
        (Transport::Udp, Some(edns)) => edns.max_payload().clamp(512, MAX_UDP_PAYLOAD) as usize,
        (Transport::Udp, None) => 512,
    };
    let reply = Reply {
        meta,
        question: &msg,
        raw_question: raw_question(query),
        opt,
        limit,
    };

    let mut key = [0u8; MAX_NAME];
    let Some(key) = lower_key(&question.name, &mut key) else {
        return reply.write(out, ResponseCode::FormErr, false, None);
    };
    if question.query_class() != DNSClass::IN || !index.in_zone(key) {
        return reply.write(out, ResponseCode::Refused, false, None);
    }
    if !index.is_synced() {
        return reply.write(out, ResponseCode::ServFail, false, None);
    }
    index.with_entry(key, |entry| match entry {
        None => reply.write(out, ResponseCode::NXDomain, true, Some(index.negative())),
        Some(entry) => match entry.section(question.query_type()) {
            Some(section) => reply.write(out, ResponseCode::NoError, true, Some(section)),
            None => reply.write(out, ResponseCode::NoError, true, Some(index.negative())),
        },
    })
}

struct Reply<'a> {
    meta: Metadata,
    /// The parsed query; its single question is echoed as the client wrote it.
    question: &'a Message,
    /// The question's bytes in the query, when its name is uncompressed (always, in
    /// practice): echoed as they are, which is cheaper than encoding the parsed question.
    raw_question: Option<&'a [u8]>,
    opt: Option<&'a [u8]>,
    limit: usize,
}

impl Reply<'_> {
    fn write(
        &self,
        out: &mut Vec<u8>,
        rcode: ResponseCode,
        authoritative: bool,
        section: Option<&Section>,
    ) -> bool {
        let mut meta = self.meta;
        meta.response_code = rcode;
        meta.authoritative = authoritative;
        let q = &self.question.queries[0];
        crate::telemetry::answered(rcode, &q.name, &q.query_type());
        let question_len = self
            .raw_question
            .map_or(crate::encode::wire_len(&q.name) + 4, <[u8]>::len);
        let opt_len = self.opt.map_or(0, <[u8]>::len);
        let empty = Section::default();
        let mut section = section.unwrap_or(&empty);
        if 12 + question_len + section.bytes.len() + opt_len > self.limit {
            meta.truncation = true;
            section = &empty;
        }
        let counts = HeaderCounts {
            queries: 1,
            answers: section.answers,
            authorities: section.authorities,
            additionals: section.additionals + u16::from(self.opt.is_some()),
        };
        let mut encoder = BinEncoder::new(out);
        let written = Header {
            metadata: meta,
            counts,
        }
        .emit(&mut encoder)
        .and_then(|()| match self.raw_question {
            Some(raw) => encoder.emit_vec(raw),
            None => q.emit(&mut encoder),
        });
        if written.is_err() {
            // Only a name hickory-proto itself refuses to write gets here: answer without it.
            meta.response_code = ResponseCode::FormErr;
            write_header(out, meta, HeaderCounts::default());
            return true;
        }
        out.extend_from_slice(&section.bytes);
        if let Some(opt) = self.opt {
            out.extend_from_slice(opt);
        }
        true
    }
}

/// RFC 6891 §6.1.3: a query of an EDNS version we do not know gets BADVERS, with our OPT.
fn bad_version(mut meta: Metadata, msg: &Message, out: &mut Vec<u8>) {
    meta.response_code = ResponseCode::BADVERS;
    let mut reply = Message::new(meta.id, MessageType::Response, OpCode::Query);
    reply.metadata = meta;
    reply.add_queries(msg.queries.iter().cloned());
    let mut edns = Edns::new();
    edns.set_max_payload(MAX_UDP_PAYLOAD);
    reply.set_edns(edns);
    match reply.to_vec() {
        Ok(bytes) => *out = bytes,
        Err(_) => {
            meta.response_code = ResponseCode::FormErr;
            write_header(out, meta, HeaderCounts::default());
        }
    }
}

fn write_header(out: &mut Vec<u8>, meta: Metadata, counts: HeaderCounts) {
    out.clear();
    let header = Header {
        metadata: meta,
        counts,
    };
    // A header is 12 fixed bytes: writing it into a Vec cannot fail.
    let _ = header.emit(&mut BinEncoder::new(out));
}

/// The first question's bytes (name, type, class) when its name has no compression pointer.
/// Only called once hickory-proto has parsed the query, so the bytes are a valid question.
fn raw_question(query: &[u8]) -> Option<&[u8]> {
    let mut at = 12;
    loop {
        let len = *query.get(at)? as usize;
        if len == 0 {
            return query.get(12..at + 5);
        }
        if len > 63 {
            return None;
        }
        at += 1 + len;
    }
}

/// The name's lowercase wire form in `buf`; None if it does not fit (hickory caps names at
/// 255 bytes, so this is defence only).
fn lower_key<'b>(name: &Name, buf: &'b mut [u8; MAX_NAME]) -> Option<&'b [u8]> {
    let mut at = 0;
    for label in name.iter() {
        let end = at + 1 + label.len();
        let dst = buf.get_mut(at..end)?;
        dst[0] = label.len() as u8;
        for (d, s) in dst[1..].iter_mut().zip(label) {
            *d = s.to_ascii_lowercase();
        }
        at = end;
    }
    *buf.get_mut(at)? = 0;
    Some(&buf[..=at])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use hickory_proto::op::Query;
    use hickory_proto::rr::RecordType;
    use shoal_bus::ObjectKey;

    use crate::index::Builder;
    use crate::names::Domain;
    use crate::records::{Contribution, RecordData, Source};

    fn index() -> Arc<Index> {
        let index = Arc::new(Index::new(Domain::new("cluster.local").unwrap(), 5).unwrap());
        let mut b = Builder::new(index.clone());
        let mut c = Contribution::new();
        c.insert(
            "web.default.svc.cluster.local".into(),
            vec![RecordData::A("10.96.0.1".parse().unwrap())],
        );
        b.set(Source::Service(ObjectKey::new("default", "web")), c);
        index.set_synced();
        index
    }

    fn query(name: &str, qtype: RecordType, edns: Option<u16>) -> Vec<u8> {
        let mut msg = Message::new(0x1234, MessageType::Query, OpCode::Query);
        msg.metadata.recursion_desired = true;
        msg.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
        if let Some(size) = edns {
            let mut e = Edns::new();
            e.set_max_payload(size);
            msg.set_edns(e);
        }
        msg.to_vec().unwrap()
    }

    fn ask(index: &Index, bytes: &[u8]) -> Message {
        let mut out = Vec::new();
        assert!(respond(index, bytes, Transport::Udp, &mut out));
        Message::from_vec(&out).expect("response decodes")
    }

    #[test]
    fn answers_echo_id_flags_and_question_case() {
        let index = index();
        let r = ask(
            &index,
            &query("WEB.default.svc.Cluster.Local.", RecordType::A, None),
        );
        assert_eq!(r.id, 0x1234);
        assert_eq!(r.message_type, MessageType::Response);
        assert!(r.authoritative && r.recursion_desired && !r.recursion_available);
        assert_eq!(r.response_code, ResponseCode::NoError);
        assert_eq!(
            r.queries[0].name.to_string(),
            "WEB.default.svc.Cluster.Local."
        );
        assert_eq!(r.answers.len(), 1);
        assert_eq!(r.answers[0].data.to_string(), "10.96.0.1");
        assert_eq!(r.answers[0].ttl, 5);
        assert!(r.edns.is_none());
    }

    #[test]
    fn negative_answers_carry_the_soa() {
        let index = index();
        let r = ask(
            &index,
            &query("nope.default.svc.cluster.local.", RecordType::A, Some(4096)),
        );
        assert_eq!(r.response_code, ResponseCode::NXDomain);
        assert_eq!(r.authorities[0].record_type(), RecordType::SOA);
        assert_eq!(
            r.edns.as_ref().map(Edns::max_payload),
            Some(MAX_UDP_PAYLOAD)
        );
        let r = ask(
            &index,
            &query("web.default.svc.cluster.local.", RecordType::AAAA, None),
        );
        assert_eq!(r.response_code, ResponseCode::NoError);
        assert!(r.answers.is_empty());
        assert_eq!(r.authorities.len(), 1);
        let r = ask(&index, &query("example.com.", RecordType::A, None));
        assert_eq!(r.response_code, ResponseCode::Refused);
        assert!(!r.authoritative);
    }

    #[test]
    fn unsynced_index_fails_instead_of_denying() {
        let index = Index::new(Domain::new("cluster.local").unwrap(), 5).unwrap();
        let r = ask(
            &index,
            &query("web.default.svc.cluster.local.", RecordType::A, None),
        );
        assert_eq!(r.response_code, ResponseCode::ServFail);
    }

    #[test]
    fn malformed_and_unsupported_packets() {
        let index = index();
        let mut out = Vec::new();
        assert!(!respond(&index, &[1, 2, 3], Transport::Udp, &mut out));
        let mut q = query("web.default.svc.cluster.local.", RecordType::A, None);
        q.truncate(q.len() - 3);
        let r = ask(&index, &q);
        assert_eq!((r.id, r.response_code), (0x1234, ResponseCode::FormErr));
        let mut q = query("web.default.svc.cluster.local.", RecordType::A, None);
        q[2] |= 2 << 3; // STATUS
        assert_eq!(ask(&index, &q).response_code, ResponseCode::NotImp);
        let mut q = query("web.default.svc.cluster.local.", RecordType::A, None);
        q[2] |= 0x80;
        assert!(
            !respond(&index, &q, Transport::Udp, &mut out),
            "responses are not answered"
        );
    }

    #[test]
    fn unknown_edns_version_gets_badvers() {
        let index = index();
        let mut msg = Message::new(9, MessageType::Query, OpCode::Query);
        msg.add_query(Query::query(
            Name::from_ascii("web.default.svc.cluster.local.").unwrap(),
            RecordType::A,
        ));
        let mut e = Edns::new();
        e.set_version(1);
        msg.set_edns(e);
        let r = ask(&index, &msg.to_vec().unwrap());
        // 16 is both BADVERS and BADSIG; decoders pick either name.
        assert_eq!(u16::from(r.response_code), 16);
    }
}
