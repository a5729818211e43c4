//! A per-key work queue: a key is never processed twice at once, and a key changed while it
//! is processed runs exactly once more afterwards (one running + one pending per key).
//! Failures back off per key, exponentially, and the backoff resets on success.
//!
//! A key is routine ([`WorkQueue::add_routine`], a periodic resync) until anything else adds
//! it: a run says whether it was routine ([`WorkQueue::is_routine_run`]), so routine runs
//! can stay out of the trace of the change their object last saw.

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
    /// Waiting (queued or dirty) keys that only routine adds asked for.
    routine: HashSet<T>,
    /// Running keys taken from a routine wait.
    running_routine: HashSet<T>,
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
                routine: HashSet::new(),
                running_routine: HashSet::new(),
                failures: HashMap::new(),
                shutdown: false,
            }),
            ready: Notify::new(),
            backoff,
        })
    }

    /// Queues `key` unless it is already waiting.
    pub fn add(&self, key: T) {
        self.enqueue(key, false);
    }

    /// Queues `key` for a routine look (a resync), unless it is already waiting; a key
    /// waiting for any other reason stays non-routine.
    pub fn add_routine(&self, key: T) {
        self.enqueue(key, true);
    }

    fn enqueue(&self, key: T, routine: bool) {
        let mut s = self.state.lock().expect("queue lock");
        if s.shutdown {
            return;
        }
        let waiting = s.queued.contains(&key) || s.dirty.contains(&key);
        if !routine {
            s.routine.remove(&key);
        } else if !waiting {
            s.routine.insert(key.clone());
        }
        if waiting {
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

    /// Whether the run of `key` (between [`Self::next`] and [`Self::done`]) was asked for
    /// only by routine adds.
    pub fn is_routine_run(&self, key: &T) -> bool {
        self.state
            .lock()
            .expect("queue lock")
            .running_routine
            .contains(key)
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
                    if s.routine.remove(&key) {
                        s.running_routine.insert(key.clone());
                    }
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
        s.running_routine.remove(&key);
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
        let routine = s.routine.contains(&key);
        drop(s);
        if dirty {
            self.enqueue(key.clone(), routine);
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
    async fn a_run_is_routine_only_when_nothing_but_routine_adds_asked_for_it() {
        let q = WorkQueue::new(Backoff::default());
        q.add_routine("resynced");
        q.add_routine("changed");
        q.add("changed");
        q.add("changed-then-resynced");
        q.add_routine("changed-then-resynced");
        let mut routine = Vec::new();
        for _ in 0..3 {
            let key = q.next().await.unwrap();
            routine.push((key, q.is_routine_run(&key)));
            q.done(key, Ok(None));
            assert!(!q.is_routine_run(&key), "the mark ends with the run");
        }
        routine.sort();
        assert_eq!(
            routine,
            [
                ("changed", false),
                ("changed-then-resynced", false),
                ("resynced", true)
            ]
        );
    }

    #[tokio::test]
    async fn a_key_changed_while_its_routine_run_runs_again_as_a_change() {
        let q = WorkQueue::new(Backoff::default());
        q.add_routine("a");
        let key = q.next().await.unwrap();
        assert!(q.is_routine_run(&key));
        q.add_routine("a");
        q.add("a");
        q.done(key, Ok(None));
        let key = q.next().await.unwrap();
        assert!(!q.is_routine_run(&key));
        q.add_routine("a");
        q.done(key, Ok(None));
        let key = q.next().await.unwrap();
        assert!(
            q.is_routine_run(&key),
            "a resync during a run is routine again"
        );
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
