//! A per-key work queue: a key is never processed twice at once, and a key changed while it
//! is processed runs exactly once more afterwards (one running + one pending per key).
//! Failures back off per key, exponentially, and the backoff resets on success.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::backoff::Backoff;

struct State<T> {
    queue: VecDeque<T>,
    queued: HashSet<T>,
    running: HashSet<T>,
    /// Keys that were added while running: requeued when their run ends.
    dirty: HashSet<T>,
    failures: HashMap<T, u32>,
    shutdown: bool,
}

pub struct WorkQueue<T> {
    state: Mutex<State<T>>,
    ready: Notify,
    backoff: Backoff,
}

impl<T: Clone + Eq + Hash + Send + 'static> WorkQueue<T> {
    pub fn new(backoff: Backoff) -> Arc<Self> {
        Arc::new(WorkQueue {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                queued: HashSet::new(),
                running: HashSet::new(),
                dirty: HashSet::new(),
                failures: HashMap::new(),
                shutdown: false,
            }),
            ready: Notify::new(),
            backoff,
        })
    }

    /// Queues `key` unless it is already waiting.
    pub fn add(&self, key: T) {
        let mut s = self.state.lock().expect("queue lock");
        if s.shutdown || s.queued.contains(&key) {
            return;
        }
        if s.running.contains(&key) {
            s.dirty.insert(key);
            return;
        }
        s.queued.insert(key.clone());
        s.queue.push_back(key);
        drop(s);
        self.ready.notify_one();
    }

    /// Queues `key` after `delay` (timers hold only the key).
    pub fn add_after(self: &Arc<Self>, key: T, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(queue) = me.upgrade() {
                queue.add(key);
            }
        });
    }

    /// Waits for the next key to process; None once shut down.
    pub async fn next(&self) -> Option<T> {
        loop {
            let notified = self.ready.notified();
            {
                let mut s = self.state.lock().expect("queue lock");
                if s.shutdown {
                    return None;
                }
                if let Some(key) = s.queue.pop_front() {
                    s.queued.remove(&key);
                    s.running.insert(key.clone());
                    if !s.queue.is_empty() {
                        self.ready.notify_one();
                    }
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Ends a run of `key`. `Ok(requeue)` resets its backoff (and requeues after the delay
    /// if given); `Err(())` requeues with the key's next backoff delay.
    pub fn done(self: &Arc<Self>, key: T, outcome: Result<Option<Duration>, ()>) {
        let mut s = self.state.lock().expect("queue lock");
        s.running.remove(&key);
        let requeue = match outcome {
            Ok(after) => {
                s.failures.remove(&key);
                after
            }
            Err(()) => {
                let n = s.failures.entry(key.clone()).or_insert(0);
                *n += 1;
                Some(self.backoff.delay(*n - 1))
            }
        };
        let dirty = s.dirty.remove(&key);
        drop(s);
        if dirty {
            self.add(key.clone());
        }
        if let Some(delay) = requeue {
            self.add_after(key, delay);
        }
    }

    pub fn failures(&self, key: &T) -> u32 {
        self.state
            .lock()
            .expect("queue lock")
            .failures
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    pub fn len(&self) -> usize {
        self.state.lock().expect("queue lock").queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn shutdown(&self) {
        self.state.lock().expect("queue lock").shutdown = true;
        self.ready.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_key_waiting_is_not_queued_twice() {
        let q = WorkQueue::new(Backoff::default());
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
    }

    #[tokio::test]
    async fn a_key_added_while_running_runs_once_more() {
        let q = WorkQueue::new(Backoff::default());
        q.add("a");
        let key = q.next().await.unwrap();
        q.add("a");
        q.add("a");
        assert_eq!(q.len(), 0, "running key is not queued beside itself");
        q.done(key, Ok(None));
        assert_eq!(q.len(), 1);
        assert_eq!(q.next().await, Some("a"));
    }

    #[tokio::test]
    async fn backoff_grows_and_resets_on_success() {
        let q = WorkQueue::new(Backoff {
            base: Duration::from_millis(1),
            max: Duration::from_millis(8),
        });
        for expected in 1..=3 {
            q.add("a");
            let k = q.next().await.unwrap();
            q.done(k, Err(()));
            assert_eq!(q.failures(&"a"), expected);
        }
        assert_eq!(q.backoff.delay(10), Duration::from_millis(8));
        let k = tokio::time::timeout(Duration::from_secs(5), q.next())
            .await
            .unwrap()
            .unwrap();
        q.done(k, Ok(None));
        assert_eq!(q.failures(&"a"), 0);
    }
}
