//! What the compactor should do, decided from the log's headers alone: no NATS here, so the
//! timing rules are tested with made-up clocks.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

/// One message of the state log, as the compactor's headers-only scan sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub subject: String,
    pub revision: u64,
    pub stored_at: SystemTime,
    pub tombstone: bool,
    /// The object is an Event: it expires on its own.
    pub event: bool,
}

/// What is due now.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Due {
    /// (subject, tombstone revision): purge the subject through that revision.
    pub purges: Vec<(String, u64)>,
    /// (subject, revision): an Event not written again for its TTL; delete that version.
    pub expiries: Vec<(String, u64)>,
}

impl Due {
    /// The compaction revision these purges need recorded before they run.
    pub fn revision(&self) -> u64 {
        self.purges.iter().map(|(_, r)| *r).max().unwrap_or(0)
    }
}

/// Tombstones waiting out the retention and live Events waiting out their TTL, in log order
/// (so in time order: the first not yet due ends the search).
pub struct Plan {
    retention: Duration,
    event_ttl: Duration,
    tombstones: VecDeque<(SystemTime, String, u64)>,
    events: VecDeque<(SystemTime, String, u64)>,
    /// Each live Event's newest revision: an older entry in `events` is stale.
    newest_event: HashMap<String, u64>,
}

impl Plan {
    pub fn new(retention: Duration, event_ttl: Duration) -> Plan {
        Plan {
            retention,
            event_ttl,
            tombstones: VecDeque::new(),
            events: VecDeque::new(),
            newest_event: HashMap::new(),
        }
    }

    pub fn observe(&mut self, seen: Seen) {
        if seen.tombstone {
            if seen.event {
                self.newest_event.remove(&seen.subject);
            }
            self.tombstones
                .push_back((seen.stored_at, seen.subject, seen.revision));
        } else if seen.event {
            self.newest_event
                .insert(seen.subject.clone(), seen.revision);
            self.events
                .push_back((seen.stored_at, seen.subject, seen.revision));
        }
    }

    /// Takes everything due at `now`.
    pub fn due(&mut self, now: SystemTime) -> Due {
        let mut due = Due::default();
        while let Some((at, _, _)) = self.tombstones.front() {
            if !expired(*at, self.retention, now) {
                break;
            }
            let (_, subject, revision) = self.tombstones.pop_front().expect("front exists");
            due.purges.push((subject, revision));
        }
        while let Some((at, _, _)) = self.events.front() {
            if !expired(*at, self.event_ttl, now) {
                break;
            }
            let (_, subject, revision) = self.events.pop_front().expect("front exists");
            if self.newest_event.get(&subject) == Some(&revision) {
                self.newest_event.remove(&subject);
                due.expiries.push((subject, revision));
            }
        }
        due
    }

    /// Tombstones and Events being waited on (for metrics and tests).
    pub fn waiting(&self) -> (usize, usize) {
        (self.tombstones.len(), self.newest_event.len())
    }
}

fn expired(at: SystemTime, ttl: Duration, now: SystemTime) -> bool {
    at + ttl <= now
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: SystemTime = SystemTime::UNIX_EPOCH;

    fn seen(subject: &str, revision: u64, secs: u64, tombstone: bool, event: bool) -> Seen {
        Seen {
            subject: subject.into(),
            revision,
            stored_at: T0 + Duration::from_secs(secs),
            tombstone,
            event,
        }
    }

    fn at(secs: u64) -> SystemTime {
        T0 + Duration::from_secs(secs)
    }

    #[test]
    fn a_tombstone_is_purged_once_its_retention_has_passed_and_not_before() {
        let mut plan = Plan::new(Duration::from_secs(10), Duration::from_secs(100));
        plan.observe(seen("pod.a", 5, 0, false, false));
        plan.observe(seen("pod.a", 6, 1, true, false));
        plan.observe(seen("pod.b", 7, 5, true, false));
        assert_eq!(plan.due(at(10)), Due::default());
        let due = plan.due(at(11));
        assert_eq!(due.purges, vec![("pod.a".to_string(), 6)]);
        assert_eq!(due.revision(), 6);
        assert_eq!(plan.due(at(14)), Due::default());
        assert_eq!(plan.due(at(15)).purges, vec![("pod.b".to_string(), 7)]);
        assert_eq!(plan.waiting(), (0, 0));
    }

    #[test]
    fn an_event_expires_a_ttl_after_its_last_write_and_a_deleted_one_never() {
        let mut plan = Plan::new(Duration::from_secs(10), Duration::from_secs(60));
        plan.observe(seen("event.x", 1, 0, false, true));
        // Updated at 30 s: the TTL counts from there (Kubernetes renews it on every write).
        plan.observe(seen("event.x", 2, 30, false, true));
        plan.observe(seen("event.y", 3, 0, false, true));
        plan.observe(seen("event.y", 4, 20, true, true));
        let due = plan.due(at(61));
        assert_eq!(due.expiries, Vec::<(String, u64)>::new());
        // y's tombstone, after the (shorter) retention of deleted objects.
        assert_eq!(due.purges, vec![("event.y".to_string(), 4)]);
        assert_eq!(plan.due(at(90)).expiries, vec![("event.x".to_string(), 2)]);
        assert_eq!(plan.waiting(), (0, 0));
    }
}
