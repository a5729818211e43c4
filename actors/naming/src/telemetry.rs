//! What the naming actor records: answers by rcode (Prometheus), and one answer in
//! [`SPAN_EVERY`] as a span, so an operator sees what is asked without a span per query at
//! hundreds of thousands of queries a second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use hickory_proto::op::ResponseCode;
use shoal_telemetry::metrics;
use shoal_telemetry::metrics::label;
use shoal_telemetry::prometheus_client::metrics::counter::Counter;

pub const SPAN_EVERY: u64 = 1024;

const RCODES: [&str; 6] = [
    "NOERROR", "NXDOMAIN", "REFUSED", "FORMERR", "SERVFAIL", "OTHER",
];

fn slot(rcode: ResponseCode) -> usize {
    match rcode {
        ResponseCode::NoError => 0,
        ResponseCode::NXDomain => 1,
        ResponseCode::Refused => 2,
        ResponseCode::FormErr => 3,
        ResponseCode::ServFail => 4,
        _ => 5,
    }
}

/// The counters, looked up once: a query must cost an atomic add, not a map lookup.
fn counters() -> &'static [Counter; 6] {
    static COUNTERS: OnceLock<[Counter; 6]> = OnceLock::new();
    COUNTERS.get_or_init(|| {
        RCODES.map(|r| {
            metrics()
                .naming
                .dns_answers
                .get_or_create_owned(&[label("rcode", r)])
        })
    })
}

pub fn answered(rcode: ResponseCode, qname: &dyn std::fmt::Display, qtype: &dyn std::fmt::Display) {
    let i = slot(rcode);
    counters()[i].inc();
    static SEEN: AtomicU64 = AtomicU64::new(0);
    if SEEN
        .fetch_add(1, Ordering::Relaxed)
        .is_multiple_of(SPAN_EVERY)
    {
        let _span = tracing::info_span!(
            "dns.answer",
            shoal.actor = "naming",
            qname = %qname,
            qtype = %qtype,
            rcode = RCODES[i],
            sampled_one_in = SPAN_EVERY,
        )
        .entered();
    }
}
