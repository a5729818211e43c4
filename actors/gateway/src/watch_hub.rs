//! One state-log consumer per watched filter, shared by every watch of that filter on this
//! replica (what Kubernetes' watch cache does for its API servers).
//!
//! Why: each watch used to open its own JetStream consumer. With 200 `kubectl get pods -w`
//! on one gateway, 200 consumers pushed the same events down the gateway's one NATS
//! connection and some of them stalled under load, so their watchers silently missed
//! events. Now the log is read once per filter and fanned out in memory.
//!
//! A watch starts at a revision of its own, which the shared consumer may have passed. So a
//! watch is first [caught up](EventSource) from the log privately, from its revision to the
//! hub's head at the moment it subscribed, and then rides the hub. A watch that falls so far
//! behind that the hub's buffer overwrote events it had not read catches up privately again
//! from its last revision: slow readers cost a consumer, never a missed event.
//!
//! Each event also carries what its watches derive from it ([`HubEvent`]): the object decoded
//! once and each wire line (per served version, output and event type) encoded once, by the
//! first watch that needs it, and shared by the others. With 200 Table watches of one feed,
//! encoding every row per watch was what delayed delivery by seconds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde_json::Value;

use shoal_bus::store::RawEvent;
use shoal_bus::watch::{Expired, RawWatch};
use shoal_bus::Store;
use tokio::sync::broadcast;

/// Events a watch may fall behind the hub before it catches up from the log instead.
const BUFFER: usize = 4096;

/// One event of the log as watches receive it, with what they derived from it so far.
pub struct HubEvent {
    pub raw: RawEvent,
    /// The stored object as JSON; None if it does not decode.
    object: OnceLock<Option<Value>>,
    lines: Mutex<Vec<(LineKey, Bytes)>>,
}

/// What a wire line of an event depends on besides the event itself: the same for every
/// watch of a feed that asked for the same version and output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineKey {
    /// The served `apiVersion` (a kind served in two versions shares a feed).
    pub api_version: &'static str,
    /// A Table row without column definitions, or the object itself.
    pub table: bool,
    /// `ADDED`, `MODIFIED` or `DELETED`: a selecting watch may name an event otherwise.
    pub event_type: &'static str,
}

impl HubEvent {
    pub fn new(raw: RawEvent) -> HubEvent {
        HubEvent {
            raw,
            object: OnceLock::new(),
            lines: Mutex::new(Vec::new()),
        }
    }

    /// The stored object, decoded by the first watch that asks.
    pub fn object(&self) -> Option<&Value> {
        self.object
            .get_or_init(|| rmp_serde::from_slice(&self.raw.payload).ok())
            .as_ref()
    }

    /// The line for `key`, made by `make` unless a watch of this feed made it already. Made
    /// under the lock, so that watches arriving meanwhile wait for it instead of making
    /// their own.
    pub fn line(&self, key: LineKey, make: impl FnOnce() -> Bytes) -> Bytes {
        // A panic while making a line leaves the list as it was: still usable.
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, line)) = lines.iter().find(|(k, _)| *k == key) {
            return line.clone();
        }
        let line = make();
        lines.push((key, line.clone()));
        line
    }
}

/// The shared consumers of one gateway replica; cheap to clone.
#[derive(Clone, Default)]
pub struct WatchHub {
    feeds: Arc<Mutex<HashMap<String, Arc<Feed>>>>,
}

/// One filter's consumer and its subscribers.
struct Feed {
    /// The head and the sender change together, so that a subscriber knows exactly which
    /// revisions it will receive.
    state: Mutex<FeedState>,
}

struct FeedState {
    sender: broadcast::Sender<Arc<HubEvent>>,
    /// Every event of the filter up to this revision was sent before any current
    /// subscriber joined or is in its receiver.
    head: u64,
}

/// A subscription: events after `head` arrive on `events`.
struct Subscription {
    events: broadcast::Receiver<Arc<HubEvent>>,
    head: u64,
}

impl WatchHub {
    async fn subscribe(&self, store: &Store, filter: &str) -> Subscription {
        if let Some(feed) = self.feed(filter) {
            return feed.subscribe();
        }
        // Outside the lock: asking the log for its head is a request.
        let head = store.last_revision().await.unwrap_or(0);
        let mut feeds = self.feeds.lock().expect("watch hub lock");
        if let Some(feed) = feeds.get(filter) {
            return feed.subscribe();
        }
        let (sender, events) = broadcast::channel(BUFFER);
        let feed = Arc::new(Feed {
            state: Mutex::new(FeedState { sender, head }),
        });
        feeds.insert(filter.to_string(), feed.clone());
        tokio::spawn(pump(
            self.clone(),
            store.clone(),
            filter.to_string(),
            feed,
            head,
        ));
        Subscription { events, head }
    }

    fn forget(&self, filter: &str, feed: &Arc<Feed>) {
        let mut feeds = self.feeds.lock().expect("watch hub lock");
        if feeds.get(filter).is_some_and(|f| Arc::ptr_eq(f, feed)) {
            feeds.remove(filter);
        }
    }

    fn feed(&self, filter: &str) -> Option<Arc<Feed>> {
        self.feeds
            .lock()
            .expect("watch hub lock")
            .get(filter)
            .cloned()
    }

    /// Removes the feed if nobody listens any more; true if it was removed. Under the hub's
    /// lock, so a watch cannot subscribe to a feed whose consumer is stopping.
    fn retire_if_unused(&self, filter: &str, feed: &Arc<Feed>) -> bool {
        let mut feeds = self.feeds.lock().expect("watch hub lock");
        let unused = feed
            .state
            .lock()
            .expect("feed lock")
            .sender
            .receiver_count()
            == 0;
        if unused && feeds.get(filter).is_some_and(|f| Arc::ptr_eq(f, feed)) {
            feeds.remove(filter);
        }
        unused
    }
}

impl Feed {
    fn subscribe(&self) -> Subscription {
        let state = self.state.lock().expect("feed lock");
        Subscription {
            events: state.sender.subscribe(),
            head: state.head,
        }
    }
}

/// Reads the filter's events from the log after `head` and fans them out, until the last
/// subscriber has gone.
async fn pump(hub: WatchHub, store: Store, filter: String, feed: Arc<Feed>, head: u64) {
    let mut watch = RawWatch::start(store, filter.clone(), head + 1);
    let mut idle_check = tokio::time::interval(std::time::Duration::from_secs(30));
    idle_check.tick().await;
    loop {
        tokio::select! {
            event = watch.next() => {
                // An expired feed (it fell more than the retention behind) ends like a closed
                // one: its subscribers rejoin a new feed, catching up privately, and those
                // whose revision the log no longer holds are told so there.
                let Some(Ok(event)) = event else {
                    // Dropping the last handle on the feed closes its subscribers' channels,
                    // and they join a new one.
                    hub.forget(&filter, &feed);
                    return;
                };
                let mut state = feed.state.lock().expect("feed lock");
                state.head = event.revision;
                // No receivers is not an error here: the idle check retires the feed.
                let _ = state.sender.send(Arc::new(HubEvent::new(event)));
            }
            _ = idle_check.tick() => {
                if hub.retire_if_unused(&filter, &feed) {
                    return;
                }
            }
        }
    }
}

/// The events of one watch, in revision order and without gaps, from a starting revision.
pub struct EventSource {
    hub: WatchHub,
    store: Store,
    filter: String,
    /// The newest revision handed out (or the watch's start).
    last: u64,
    /// The shared feed; None before joining it and after falling behind it.
    shared: Option<broadcast::Receiver<Arc<HubEvent>>>,
    /// While catching up: a private read of the log, up to the feed's head when joined.
    catching_up: Option<(RawWatch, u64)>,
}

impl EventSource {
    /// Events of `filter` after revision `after`.
    pub fn new(hub: &WatchHub, store: &Store, filter: String, after: u64) -> EventSource {
        EventSource {
            hub: hub.clone(),
            store: store.clone(),
            filter,
            last: after,
            shared: None,
            catching_up: None,
        }
    }

    /// The next event; None only if the log cannot be read at all any more, `Expired` if it
    /// no longer holds every event after this watch's revision (the watch then ends).
    pub async fn next(&mut self) -> Option<Result<Arc<HubEvent>, Expired>> {
        loop {
            if self.shared.is_none() {
                let Subscription { events, head } =
                    self.hub.subscribe(&self.store, &self.filter).await;
                self.shared = Some(events);
                self.catching_up = (head > self.last).then(|| {
                    let private =
                        RawWatch::start(self.store.clone(), self.filter.clone(), self.last + 1);
                    (private, head)
                });
            }
            if let Some((private, until)) = &mut self.catching_up {
                if self.last >= *until {
                    self.catching_up = None;
                    continue;
                }
                let event = match private.next().await? {
                    Ok(event) => event,
                    Err(expired) => return Some(Err(expired)),
                };
                self.last = event.revision;
                return Some(Ok(Arc::new(HubEvent::new(event))));
            }
            let shared = self.shared.as_mut()?;
            match shared.recv().await {
                Ok(event) if event.raw.revision <= self.last => continue,
                Ok(event) => {
                    self.last = event.raw.revision;
                    return Some(Ok(event));
                }
                Err(broadcast::error::RecvError::Lagged(skipped)) => {
                    tracing::debug!(
                        filter = %self.filter,
                        skipped,
                        "a watch fell behind the shared consumer; catching up from the log"
                    );
                    self.shared = None;
                }
                Err(broadcast::error::RecvError::Closed) => self.shared = None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> HubEvent {
        let payload = rmp_serde::to_vec_named(&serde_json::json!({"metadata": {"name": "p"}}));
        HubEvent::new(RawEvent {
            subject: "s".into(),
            revision: 7,
            event: shoal_bus::EventType::Added,
            payload: payload.unwrap().into(),
            request_id: None,
            traceparent: None,
            stored_at: None,
        })
    }

    #[test]
    fn a_line_is_made_once_per_key_and_shared() {
        let event = event();
        let key = LineKey {
            api_version: "v1",
            table: true,
            event_type: "ADDED",
        };
        let mut made = 0;
        let first = event.line(key, || {
            made += 1;
            Bytes::from_static(b"row")
        });
        let again = event.line(key, || unreachable!("the line was made already"));
        assert_eq!(
            (first, again, made),
            (Bytes::from("row"), Bytes::from("row"), 1)
        );
        let other = LineKey {
            table: false,
            ..key
        };
        assert_eq!(
            event.line(other, || Bytes::from_static(b"object")),
            "object"
        );
        assert_eq!(event.object().unwrap()["metadata"]["name"], "p");
    }
}
