//! `?watch=true`: newline-delimited watch events over a chunked response, read from the state
//! log from the client's resourceVersion (the log's sequence, so any gateway replica can
//! resume any client's watch), with bookmarks and 410 Expired for revisions the log no
//! longer holds.

use std::collections::BTreeMap;
use std::time::Duration;

use bus_schemas::api::ListOptions;
use bus_schemas::selector::{FieldSelector, Selector};
use bus_schemas::{subjects, Reason, Status};
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::bus::{with_type_meta, Bus};
use crate::http::{self, Request, Response};
use crate::resources::RestResource;
use crate::table;
use crate::watch_hub::{EventSource, HubEvent, LineKey};

/// How often an idle watch that asked for bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(10);

/// What one watch asked for.
struct WatchSpec {
    resource: RestResource,
    namespace: Option<String>,
    labels: Selector,
    fields: FieldSelector,
    bookmarks: bool,
    as_table: bool,
    timeout: Option<Duration>,
}

impl WatchSpec {
    fn matches(&self, obj: &Value) -> bool {
        let labels: BTreeMap<String, String> = obj
            .pointer("/metadata/labels")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default();
        if !self.labels.matches(&labels) {
            return false;
        }
        if self.fields.is_everything() {
            return true;
        }
        let lookup = |field: &str| {
            let pointer = format!("/{}", field.replace('.', "/"));
            obj.pointer(&pointer).map(|v| match v.as_str() {
                Some(s) => s.to_string(),
                None => v.to_string(),
            })
        };
        self.fields.matches(&lookup)
    }
}

pub async fn serve(
    bus: &Bus,
    req: &Request,
    resource: &RestResource,
    namespace: Option<&str>,
) -> Response {
    let labels = match Selector::parse(req.param("labelSelector").unwrap_or("")) {
        Ok(s) => s,
        Err(e) => return http::error(Reason::BadRequest, format!("labelSelector: {e}")),
    };
    let fields = match FieldSelector::parse(req.param("fieldSelector").unwrap_or("")) {
        Ok(s) => s,
        Err(e) => return http::error(Reason::BadRequest, format!("fieldSelector: {e}")),
    };
    let spec = WatchSpec {
        resource: *resource,
        namespace: namespace.map(String::from),
        labels,
        fields,
        bookmarks: req.flag("allowWatchBookmarks"),
        as_table: req.wants_table(),
        timeout: req
            .param("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .map(Duration::from_secs),
    };
    let from = match req.param("resourceVersion") {
        None | Some("0") => None,
        Some(rv) => match rv.parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => {
                return http::error(
                    Reason::BadRequest,
                    format!("resourceVersion: {rv:?} is not a resource version this server issued"),
                )
            }
        },
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let bus = bus.clone();
    tokio::spawn(async move {
        let run = pump(bus, spec, from, tx.clone());
        // A dropped receiver (the client went away) ends the pump at its next send.
        let _ = run.await;
    });
    http::streaming(rx, "application/json")
}

fn event_line(kind: &str, object: Value) -> Bytes {
    event_line_of(kind, &serde_json::to_vec(&object).unwrap_or_default())
}

/// `{"type":…,"object":…}` and a newline around an object already serialised.
fn event_line_of(kind: &str, object: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + kind.len() + 24);
    line.extend_from_slice(b"{\"type\":");
    line.extend_from_slice(&serde_json::to_vec(kind).unwrap_or_default());
    line.extend_from_slice(b",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// Why a pump stopped; never shown to the client, who sees the stream end.
struct Closed;

async fn send(tx: &mpsc::Sender<Bytes>, line: Bytes) -> Result<(), Closed> {
    tx.send(line).await.map_err(|_| Closed)
}

struct Encoder {
    first: bool,
}

impl Encoder {
    /// The object as this watch sends it: itself, or a Table of its row, with column
    /// definitions on the first only.
    fn object(&mut self, spec: &WatchSpec, obj: Value) -> Vec<u8> {
        if !spec.as_table {
            return serde_json::to_vec(&obj).unwrap_or_default();
        }
        let with_columns = std::mem::replace(&mut self.first, false);
        table_of(spec, &obj, with_columns)
    }

    /// The line of a log event. Only a Table watch's first one is its own: every other line
    /// is the same for each watch of the feed with the same version and output, so the
    /// first of them to need it encodes it and the others send the same bytes.
    fn event(
        &mut self,
        spec: &WatchSpec,
        event: &HubEvent,
        stored: &Value,
        kind: &'static str,
    ) -> Bytes {
        let revision = event.raw.revision;
        if spec.as_table && self.first {
            let object = self.object(spec, served(spec, stored, revision));
            return event_line_of(kind, &object);
        }
        let key = LineKey {
            api_version: spec.resource.api_version(),
            table: spec.as_table,
            event_type: kind,
        };
        event.line(key, || {
            let obj = served(spec, stored, revision);
            let object = if spec.as_table {
                table_of(spec, &obj, false)
            } else {
                serde_json::to_vec(&obj).unwrap_or_default()
            };
            event_line_of(kind, &object)
        })
    }
}

fn table_of(spec: &WatchSpec, obj: &Value, with_columns: bool) -> Vec<u8> {
    let rv = obj
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    table::table(
        spec.resource.kind(),
        std::slice::from_ref(obj),
        rv,
        "",
        with_columns,
    )
}

/// A stored object as the client sees it: in the served version, at the event's revision.
fn served(spec: &WatchSpec, stored: &Value, revision: u64) -> Value {
    let mut obj = stored.clone();
    with_type_meta(&mut obj, &spec.resource);
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), json!(revision.to_string()));
    }
    obj
}

async fn pump(
    bus: Bus,
    spec: WatchSpec,
    from: Option<u64>,
    tx: mpsc::Sender<Bytes>,
) -> Result<(), Closed> {
    let mut encoder = Encoder { first: true };
    let mut membership = Membership::new(&spec);
    let start = match from {
        Some(rv) => {
            if let Some(expired) = expired(&bus, rv).await {
                return send(&tx, event_line("ERROR", expired)).await;
            }
            if membership.selecting {
                // Which objects the client's list (at `rv`) held: those matching now, the
                // best this stateless gateway can know without the history of each object.
                let options = ListOptions {
                    namespace: spec.namespace.clone().unwrap_or_default(),
                    ..Default::default()
                };
                if let Ok((items, _)) = list_all(&bus, &spec.resource, options).await {
                    for item in items.iter().filter(|i| spec.matches(i)) {
                        if let Some(key) = object_key(&spec, item) {
                            membership.record(key, true);
                        }
                    }
                }
            }
            rv
        }
        None => {
            // "Get state and start at most recent": the current objects as ADDED first.
            let options = ListOptions {
                namespace: spec.namespace.clone().unwrap_or_default(),
                label_selector: String::new(),
                field_selector: String::new(),
                ..Default::default()
            };
            let list = match list_all(&bus, &spec.resource, options).await {
                Ok(l) => l,
                Err(status) => {
                    let value = serde_json::to_value(&status).unwrap_or(Value::Null);
                    return send(&tx, event_line("ERROR", value)).await;
                }
            };
            for item in list.0 {
                if spec.matches(&item) {
                    if let Some(key) = object_key(&spec, &item) {
                        membership.record(key, true);
                    }
                    let object = encoder.object(&spec, item);
                    send(&tx, event_line_of("ADDED", &object)).await?;
                }
            }
            list.1
        }
    };
    let filter = subjects::objects_of(&spec.resource.info.token(), spec.namespace.as_deref());
    let mut watch = EventSource::new(&bus.watches, &bus.store, filter, start);
    let mut last = start;
    let deadline = spec.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut bookmark = tokio::time::interval(BOOKMARK_EVERY);
    bookmark.tick().await;
    loop {
        let until_deadline = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = watch.next() => {
                let event = match event {
                    Some(Ok(event)) => event,
                    // Compacted past this watch while it ran: the client relists on 410.
                    Some(Err(expired)) => {
                        return send(&tx, event_line("ERROR", gone(expired.from.saturating_sub(1), expired.compacted))).await;
                    }
                    None => return Ok(()),
                };
                last = event.raw.revision;
                let Some(stored) = event.object() else {
                    tracing::warn!(subject = %event.raw.subject, revision = last, "undecodable object in the state log; skipped");
                    continue;
                };
                let Some(kind) = membership.event_type(&spec, stored, &event.raw.subject, event.raw.event) else {
                    continue;
                };
                let line = encoder.event(&spec, &event, stored, kind);
                send(&tx, line).await?;
            }
            _ = bookmark.tick(), if spec.bookmarks && !spec.as_table => {
                send(&tx, event_line("BOOKMARK", bookmark_object(&spec, last))).await?;
            }
            _ = until_deadline => {
                // Ending at timeoutSeconds with a bookmark lets the client resume from the
                // newest revision it is known to be complete at, not its last event.
                if spec.bookmarks && !spec.as_table {
                    send(&tx, event_line("BOOKMARK", bookmark_object(&spec, last))).await?;
                }
                return Ok(());
            }
            _ = tx.closed() => return Err(Closed),
        }
    }
}

/// Which objects a selecting watch last saw matching, so that an object that stops matching
/// is sent as DELETED and one that starts matching as ADDED, as Kubernetes does. Objects
/// this watch has not seen yet are taken as they come (a watch from a revision knows nothing
/// of the state before it). Without selectors every object matches and nothing is kept.
struct Membership {
    selecting: bool,
    matched: std::collections::HashMap<String, bool>,
}

impl Membership {
    fn new(spec: &WatchSpec) -> Membership {
        Membership {
            selecting: !spec.labels.is_everything() || !spec.fields.is_everything(),
            matched: Default::default(),
        }
    }

    fn record(&mut self, key: String, matches: bool) {
        if self.selecting {
            self.matched.insert(key, matches);
        }
    }

    /// The event type to send for a stored event, or None to send nothing.
    fn event_type(
        &mut self,
        spec: &WatchSpec,
        obj: &Value,
        key: &str,
        event: shoal_bus::EventType,
    ) -> Option<&'static str> {
        use shoal_bus::EventType;
        if !self.selecting {
            return Some(event.as_str());
        }
        let matches = spec.matches(obj);
        let before = self.matched.get(key).copied();
        if event == EventType::Deleted {
            self.matched.remove(key);
        } else {
            self.matched.insert(key.to_string(), matches);
        }
        match (matches, before, event) {
            (true, Some(false), EventType::Modified) => Some("ADDED"),
            (true, _, e) => Some(e.as_str()),
            (false, Some(true), _) => Some("DELETED"),
            (false, _, _) => None,
        }
    }
}

/// The state-log subject of a listed object: what events name it by.
fn object_key(spec: &WatchSpec, obj: &Value) -> Option<String> {
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
    let name = text("/metadata/name");
    if name.is_empty() {
        return None;
    }
    Some(subjects::object(
        &spec.resource.info.token(),
        text("/metadata/namespace"),
        name,
    ))
}

/// A bookmark: an object of the watched kind holding only a resourceVersion.
fn bookmark_object(spec: &WatchSpec, revision: u64) -> Value {
    json!({"kind": spec.resource.kind(), "apiVersion": spec.resource.api_version(),
           "metadata": {"resourceVersion": revision.to_string()}})
}

/// Every page of a list: (items, revision).
async fn list_all(
    bus: &Bus,
    resource: &RestResource,
    mut options: ListOptions,
) -> Result<(Vec<Value>, u64), Status> {
    let mut items = Vec::new();
    loop {
        let page = bus
            .list(resource, &options)
            .await
            .map_err(|e| http::status_of(&e))?;
        items.extend(page.items);
        if page.metadata.continue_token.is_empty() {
            let rv = page.metadata.resource_version.parse().unwrap_or(0);
            return Ok((items, rv));
        }
        options.continue_token = page.metadata.continue_token;
    }
}

/// The 410 Expired Status for a revision older than the oldest the log still holds: below
/// its first sequence, or at or below its compaction revision (a purged tombstone).
async fn expired(bus: &Bus, rv: u64) -> Option<Value> {
    let recorded = bus.store.compacted_revision().await.ok()?;
    let stream = bus
        .store
        .jetstream()
        .get_stream(subjects::OBJECTS_STREAM)
        .await
        .ok()?;
    let first = stream.cached_info().state.first_sequence;
    let compacted = recorded.max(first.saturating_sub(1));
    if rv >= compacted {
        return None;
    }
    Some(gone(rv, compacted))
}

fn gone(rv: u64, compacted: u64) -> Value {
    let status = Status::new(
        Reason::Gone,
        format!("too old resource version: {rv} ({compacted})"),
    );
    let mut value = serde_json::to_value(status).unwrap_or(Value::Null);
    // Kubernetes' reason for an expired watch revision; clients relist on it.
    value["reason"] = json!("Expired");
    value
}
