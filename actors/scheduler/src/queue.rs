//! The scheduling queue, shaped like kube-scheduler's: an active queue (highest priority
//! first, then oldest), a backoff queue (per-pod exponential backoff after a failed attempt),
//! and an unschedulable set that waits for a cluster change (a node added or changed, a pod
//! gone or finished) — or, as a safety net, for a maximum time. Nothing retries in a hot loop.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use shoal_bus::ObjectKey;

#[derive(Debug, Clone)]
pub struct QueueConfig {
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// How long a pod may wait in the unschedulable set without any cluster change.
    pub max_unschedulable: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_unschedulable: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Active,
    Backoff,
    Unschedulable(Instant),
    /// Popped: being decided or bound.
    InFlight,
}

#[derive(Debug)]
struct Info {
    priority: i32,
    attempts: u32,
    backoff_until: Option<Instant>,
    /// Bumped on every move, so stale heap entries are skipped.
    gen: u64,
    place: Place,
}

pub struct SchedulingQueue {
    cfg: QueueConfig,
    seq: u64,
    active: BinaryHeap<(i32, Reverse<u64>, ObjectKey, u64)>,
    backoff: BinaryHeap<Reverse<(Instant, u64, ObjectKey)>>,
    info: HashMap<ObjectKey, Info>,
}

impl SchedulingQueue {
    pub fn new(cfg: QueueConfig) -> Self {
        SchedulingQueue {
            cfg,
            seq: 0,
            active: BinaryHeap::new(),
            backoff: BinaryHeap::new(),
            info: HashMap::new(),
        }
    }

    fn push_active(&mut self, key: ObjectKey) {
        let Some(info) = self.info.get_mut(&key) else {
            return;
        };
        info.gen += 1;
        info.place = Place::Active;
        self.seq += 1;
        self.active
            .push((info.priority, Reverse(self.seq), key, info.gen));
    }

    fn push_backoff(&mut self, key: ObjectKey, until: Instant) {
        let Some(info) = self.info.get_mut(&key) else {
            return;
        };
        info.gen += 1;
        info.place = Place::Backoff;
        self.backoff.push(Reverse((until, info.gen, key)));
    }

    /// Active unless the pod is still backing off.
    fn activate_or_backoff(&mut self, key: ObjectKey, now: Instant) {
        match self.info.get(&key).and_then(|i| i.backoff_until) {
            Some(until) if until > now => self.push_backoff(key, until),
            _ => self.push_active(key),
        }
    }

    fn backoff_for(&self, attempts: u32) -> Duration {
        let factor = 1u32 << attempts.saturating_sub(1).min(16);
        (self.cfg.initial_backoff * factor).min(self.cfg.max_backoff)
    }

    /// A pod that needs scheduling (new, or changed in a way that may change the outcome).
    pub fn add(&mut self, key: ObjectKey, priority: i32, now: Instant) {
        match self.info.get_mut(&key) {
            None => {
                self.info.insert(
                    key.clone(),
                    Info {
                        priority,
                        attempts: 0,
                        backoff_until: None,
                        gen: 0,
                        place: Place::Active,
                    },
                );
                self.push_active(key);
            }
            Some(info) => {
                info.priority = priority;
                if let Place::Unschedulable(_) = info.place {
                    self.activate_or_backoff(key, now);
                }
            }
        }
    }

    /// The next pod to decide, highest priority first.
    pub fn pop(&mut self) -> Option<ObjectKey> {
        while let Some((_, _, key, gen)) = self.active.pop() {
            if let Some(info) = self.info.get_mut(&key) {
                if info.gen == gen && info.place == Place::Active {
                    info.place = Place::InFlight;
                    return Some(key);
                }
            }
        }
        None
    }

    pub fn has_active(&self) -> bool {
        !self.active.is_empty()
    }

    /// Fits nowhere: wait for a cluster change (and at least the backoff).
    pub fn unschedulable(&mut self, key: &ObjectKey, now: Instant) {
        let attempts = match self.info.get_mut(key) {
            Some(info) => {
                info.attempts += 1;
                info.attempts
            }
            None => return,
        };
        let until = now + self.backoff_for(attempts);
        if let Some(info) = self.info.get_mut(key) {
            info.backoff_until = Some(until);
            info.gen += 1;
            info.place = Place::Unschedulable(now);
        }
    }

    /// A failed attempt (API error): retry after the pod's backoff.
    pub fn retry_later(&mut self, key: &ObjectKey, now: Instant) {
        let attempts = match self.info.get_mut(key) {
            Some(info) => {
                info.attempts += 1;
                info.attempts
            }
            None => return,
        };
        let until = now + self.backoff_for(attempts);
        if let Some(info) = self.info.get_mut(key) {
            info.backoff_until = Some(until);
        }
        self.push_backoff(key.clone(), until);
    }

    /// Retry after exactly `delay` (a lost optimistic-concurrency race, a cache catching up).
    pub fn retry_after(&mut self, key: &ObjectKey, delay: Duration, now: Instant) {
        if delay.is_zero() {
            self.push_active(key.clone());
        } else {
            self.push_backoff(key.clone(), now + delay);
        }
    }

    /// Bound or gone: nothing more to do.
    pub fn forget(&mut self, key: &ObjectKey) {
        self.info.remove(key);
    }

    pub fn contains(&self, key: &ObjectKey) -> bool {
        self.info.contains_key(key)
    }

    /// A cluster change: every unschedulable pod gets another chance (after its backoff).
    pub fn move_all_unschedulable(&mut self, now: Instant) {
        let keys: Vec<ObjectKey> = self
            .info
            .iter()
            .filter(|(_, i)| matches!(i.place, Place::Unschedulable(_)))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.activate_or_backoff(key, now);
        }
    }

    /// Moves pods whose backoff ended to the active queue, and pods unschedulable for too
    /// long to backoff-or-active.
    pub fn flush(&mut self, now: Instant) {
        while let Some(Reverse((until, gen, _))) = self.backoff.peek() {
            if *until > now {
                break;
            }
            let gen = *gen;
            let Some(Reverse((_, _, key))) = self.backoff.pop() else {
                break;
            };
            if self
                .info
                .get(&key)
                .is_some_and(|i| i.gen == gen && i.place == Place::Backoff)
            {
                self.push_active(key);
            }
        }
    }

    /// Pods unschedulable longer than the maximum get retried even without a cluster change.
    pub fn flush_unschedulable_timeouts(&mut self, now: Instant) {
        let max = self.cfg.max_unschedulable;
        let keys: Vec<ObjectKey> = self
            .info
            .iter()
            .filter(|(_, i)| matches!(i.place, Place::Unschedulable(since) if now.duration_since(since) >= max))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.activate_or_backoff(key, now);
        }
    }

    /// When the earliest backoff ends.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.backoff.peek().map(|Reverse((t, _, _))| *t)
    }

    pub fn len(&self) -> usize {
        self.info.len()
    }

    pub fn is_empty(&self) -> bool {
        self.info.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(n: &str) -> ObjectKey {
        ObjectKey::new("default", n)
    }

    #[test]
    fn priority_then_fifo_and_backoff() {
        let mut q = SchedulingQueue::new(QueueConfig::default());
        let now = Instant::now();
        q.add(k("low"), 0, now);
        q.add(k("high"), 100, now);
        q.add(k("low2"), 0, now);
        assert_eq!(q.pop(), Some(k("high")));
        assert_eq!(q.pop(), Some(k("low")));
        assert_eq!(q.pop(), Some(k("low2")));
        assert_eq!(q.pop(), None);

        // Unschedulable waits for a cluster event, then for its backoff.
        q.unschedulable(&k("low"), now);
        q.add(k("low"), 0, now); // a status-only echo must not be a hot loop...
        assert_eq!(q.pop(), None, "...it goes to backoff first");
        q.flush(now + Duration::from_millis(1100));
        assert_eq!(q.pop(), Some(k("low")));
        q.unschedulable(&k("low"), now);
        q.move_all_unschedulable(now + Duration::from_secs(5));
        assert_eq!(q.pop(), Some(k("low")), "backoff (2s) already over");

        q.retry_later(&k("low2"), now);
        assert!(q.next_deadline().is_some());
        q.flush(now);
        assert_eq!(q.pop(), None);
        q.flush(now + Duration::from_secs(2));
        assert_eq!(q.pop(), Some(k("low2")));
        q.forget(&k("low2"));
        q.retry_after(&k("low2"), Duration::ZERO, now);
        assert_eq!(q.pop(), None, "forgotten pods stay forgotten");

        q.unschedulable(&k("high"), now);
        q.flush_unschedulable_timeouts(now + Duration::from_secs(61));
        assert_eq!(q.pop(), Some(k("high")));
    }
}
