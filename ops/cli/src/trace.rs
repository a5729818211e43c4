//! `shoal trace`: one trace read back from the cluster's SHOAL_TRACES stream, printed as a
//! waterfall or as OTLP JSON (which Jaeger and Tempo import).
//!
//! `KIND/NAME` finds the trace of the write that started the object's current state: for kinds
//! with a generation (a Deployment's rollout), the first kept version of the current
//! generation; for a Pod, and kinds without one, the oldest version the log keeps, normally
//! its creation (a Pod's generation moves when it is bound, but its start is one trace from
//! its creation on).
//! Only the object that exists now counts: a name deleted and created again keeps the old
//! object's versions, and its deletion, in the same history.

use std::io::IsTerminal;

use anyhow::{anyhow, bail, Context, Result};
use bus_schemas::kinds::Pod;
use bus_schemas::resource::Resource;
use bus_schemas::{codec, subjects};
use shoal_bus::{RawEvent, Store};
use shoal_telemetry::opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use shoal_telemetry::propagation::trace_id_of;
use shoal_telemetry::traceview::{self, Row};

use crate::remote::Session;

#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    /// `deploy/NAME`, `pod/NAME` (any KIND/NAME), or a trace id (32 hex digits).
    pub target: String,
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// `json`: OTLP JSON (ExportTraceServiceRequest) instead of the waterfall.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
}

/// What a version says of its object, decoded once: which object it is and its generation.
#[derive(Default)]
struct Identity {
    uid: Option<String>,
    generation: Option<i64>,
}

fn identity(raw: &RawEvent) -> Identity {
    let Ok(value) = codec::from_msgpack::<serde_json::Value>(&raw.payload) else {
        return Identity::default();
    };
    Identity {
        uid: value
            .pointer("/metadata/uid")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        generation: value
            .pointer("/metadata/generation")
            .and_then(|v| v.as_i64()),
    }
}

/// The version whose write started the object's current state (see the module docs);
/// `by_generation` false: its creation. Only the object that exists now counts: the
/// versions after its last deletion, of the newest version's uid.
fn starting_version(history: &[RawEvent], by_generation: bool) -> Option<&RawEvent> {
    let identities: Vec<Identity> = history.iter().map(identity).collect();
    let newest = identities.last()?;
    let start = match &newest.uid {
        Some(current) => history
            .iter()
            .zip(&identities)
            .rposition(|(raw, id)| {
                raw.is_tombstone() || id.uid.as_ref().is_some_and(|u| u != current)
            })
            .map_or(0, |i| i + 1),
        None => 0,
    };
    let generation = newest.generation.filter(|&g| by_generation && g > 0);
    history[start..]
        .iter()
        .zip(&identities[start..])
        .find(|(raw, id)| {
            raw.traceparent.is_some() && generation.is_none_or(|g| id.generation == Some(g))
        })
        .map(|(raw, _)| raw)
}

async fn trace_id_for_object(
    session: &Session,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<String> {
    let info = crate::kinds::resolve(kind)?;
    let ns = if info.namespaced { namespace } else { "" };
    let store = Store::open(session.nats.clone()).await?;
    let history = store
        .history(&subjects::object(&info.token(), ns, name))
        .await?;
    let Some(newest) = history.last() else {
        bail!("{} {name:?} not found in namespace {ns:?}", info.singular());
    };
    if newest.is_tombstone() {
        let deletion = newest
            .traceparent
            .as_deref()
            .and_then(trace_id_of)
            .map(|id| format!("; its deletion's trace: shoal trace {id}"))
            .unwrap_or_default();
        bail!(
            "{} {name:?} not found in namespace {ns:?} (deleted at revision {}){deletion}",
            info.singular(),
            newest.revision
        );
    }
    let by_generation = info.token() != Pod::INFO.token();
    let version = starting_version(&history, by_generation).ok_or_else(|| {
        anyhow!(
            "no kept version of {}/{name} carries a trace context: its trace was sampled out (OTEL_TRACES_SAMPLER_ARG), or it was written by a client that sends none",
            info.singular()
        )
    })?;
    let traceparent = version.traceparent.as_deref().unwrap_or_default();
    trace_id_of(traceparent).ok_or_else(|| {
        anyhow!(
            "revision {} carries a malformed traceparent {traceparent:?}",
            version.revision
        )
    })
}

pub async fn run(session: &Session, args: TraceArgs) -> Result<i32> {
    let trace_id = match args.target.split_once('/') {
        Some((kind, name)) => trace_id_for_object(session, kind, &args.namespace, name).await?,
        None if args.target.len() == 32 && traceview::hex_to_bytes(&args.target).is_some() => {
            args.target.to_ascii_lowercase()
        }
        None => bail!(
            "{:?} is neither KIND/NAME (deploy/web, pod/web-abc12) nor a 32-digit trace id",
            args.target
        ),
    };
    let batches = traceview::read_trace(&session.nats, &trace_id).await?;
    match args.output.as_deref() {
        Some("json") => {
            let request = ExportTraceServiceRequest {
                resource_spans: batches,
            };
            println!(
                "{}",
                serde_json::to_string_pretty(&request).context("encoding OTLP JSON")?
            );
            Ok(0)
        }
        Some(other) => bail!("-o {other}: only json is supported (the default is the waterfall)"),
        None => {
            let rows = traceview::waterfall(&batches);
            if rows.is_empty() {
                bail!("no spans of trace {trace_id} in {} (not sampled, not exported yet, or aged out)", subjects::TRACES_STREAM);
            }
            print!(
                "{}",
                render(&trace_id, &rows, std::io::stdout().is_terminal())
            );
            Ok(0)
        }
    }
}

fn seconds(d: std::time::Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

/// The waterfall: one line per span, and per step or event under its span (marked `·`), in
/// tree order, indented by depth; failures marked (and red on a terminal).
pub fn render(trace_id: &str, rows: &[Row], color: bool) -> String {
    let total = rows
        .iter()
        .map(|r| r.start_offset + r.duration)
        .max()
        .unwrap_or_default();
    let mut out = format!(
        "trace {trace_id}: {} spans over {}\n",
        rows.iter().filter(|r| !r.event).count(),
        seconds(total)
    );
    out.push_str(&format!(
        "{:>9} {:>9}  {:<12} SPAN\n",
        "START", "DURATION", "ACTOR"
    ));
    for row in rows {
        let mut line = format!(
            "{:>9} {:>9}  {:<12} {}{}",
            seconds(row.start_offset),
            seconds(row.duration),
            row.actor,
            "  ".repeat(row.depth),
            if row.event {
                format!("· {}", row.name)
            } else {
                row.name.clone()
            }
        );
        if !row.attributes.is_empty() {
            line.push_str("  ");
            line.push_str(&row.attributes.join(" "));
        }
        if let Some(message) = &row.error {
            line.push_str(&format!("  ERROR {message}"));
            if color {
                line = format!("\x1b[31m{line}\x1b[0m");
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_bus::EventType;

    const SUBJECT: &str = "shoal.v1.objects.deployments.default.web";

    fn version(revision: u64, event: EventType, uid: &str, generation: i64) -> RawEvent {
        let object =
            serde_json::json!({"metadata": {"name": "web", "uid": uid, "generation": generation}});
        RawEvent {
            subject: SUBJECT.into(),
            revision,
            event,
            payload: codec::to_msgpack(&object).unwrap().into(),
            request_id: None,
            traceparent: Some(format!("00-{revision:032x}-{revision:016x}-01")),
            stored_at: None,
        }
    }

    #[test]
    fn a_rollout_starts_at_the_first_version_of_the_current_generation() {
        let history = [
            version(1, EventType::Modified, "a", 1),
            version(2, EventType::Modified, "a", 1),
            version(3, EventType::Modified, "a", 2),
            version(4, EventType::Modified, "a", 2),
        ];
        assert_eq!(starting_version(&history, true).unwrap().revision, 3);
    }

    #[test]
    fn an_object_created_again_under_its_old_name_is_traced_from_its_own_creation() {
        let history = [
            version(1, EventType::Modified, "old", 1),
            version(2, EventType::Modified, "old", 2),
            version(3, EventType::Deleted, "old", 2),
            version(4, EventType::Modified, "new", 1),
            version(5, EventType::Modified, "new", 1),
        ];
        assert_eq!(starting_version(&history, true).unwrap().revision, 4);
    }

    #[test]
    fn a_pod_is_traced_from_its_creation_though_its_bind_moved_its_generation() {
        let history = [
            version(1, EventType::Modified, "p", 1),
            version(2, EventType::Modified, "p", 2),
            version(3, EventType::Modified, "p", 2),
        ];
        assert_eq!(starting_version(&history, false).unwrap().revision, 1);
    }

    #[test]
    fn versions_of_another_uid_do_not_count_even_without_a_tombstone_between() {
        let history = [
            version(1, EventType::Modified, "old", 1),
            version(2, EventType::Modified, "new", 1),
        ];
        assert_eq!(starting_version(&history, true).unwrap().revision, 2);
    }
}
